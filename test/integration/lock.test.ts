/**
 * The embedded data folder is exclusive: two processes on one PGlite folder would silently
 * lose acknowledged writes (DEL-1: the database is the record of what was sent), so a
 * second opener fails at once, naming the folder and the holder's pid. A lock left by a
 * dead process is taken over. PGlite only: a PostgreSQL server has no data folder of ours.
 */
import { execFile, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type * as PgliteModule from "@electric-sql/pglite";
import { DataDirLockedError } from "../../src/errors/index.js";
import type { Database } from "../../src/store/database.js";
import { openPglite } from "../../src/store/pglite.js";
import { engineName, pgliteTemplate } from "../support/db.js";

/** Counts PGlite engine starts in this process: a refused open must not start one. */
const pgliteStarts = vi.hoisted(() => ({ count: 0 }));
vi.mock("@electric-sql/pglite", async (importOriginal) => {
  const mod = await importOriginal<typeof PgliteModule>();
  const PGlite = new Proxy(mod.PGlite, {
    get(target, prop, receiver) {
      if (prop !== "create") return Reflect.get(target, prop, receiver) as unknown;
      return (...args: Parameters<typeof mod.PGlite.create>) => {
        pgliteStarts.count++;
        return target.create(...args);
      };
    },
  });
  return { ...mod, PGlite };
});

const root = fileURLToPath(new URL("../../", import.meta.url));
const pgliteModule = pathToFileURL(join(root, "src/store/pglite.ts")).href;
const onPglite = engineName() === "pglite";
const title = (text: string) =>
  onPglite
    ? text
    : `${text} (skipped: embedded engine only, runs with PUNCTUAL_TEST_ENGINE=pglite)`;

/** Runs `openPglite` on `dataDir` in a separate Node process. */
function openInChild(
  dataDir: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = `
    const { openPglite } = await import(${JSON.stringify(pgliteModule)});
    try {
      const db = await openPglite({ dataDir: process.env.PUNCTUAL_TEST_DIR });
      console.log("opened");
      await db.close();
    } catch (err) {
      console.error(err.code + ": " + err.message);
      process.exit(3);
    }`;
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      { cwd: root, env: { ...process.env, PUNCTUAL_TEST_DIR: dataDir } },
      (_error, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }),
    );
  });
}

describe.skipIf(!onPglite)(title("PGlite data folder lock"), () => {
  const dirs: string[] = [];
  let dataDir: string;
  let holder: Database;

  function tempDir(): string {
    const dir = mkdtempSync(join(tmpdir(), "punctual-lock-test-"));
    dirs.push(dir);
    return dir;
  }

  beforeAll(async () => {
    dataDir = tempDir();
    holder = await openPglite({ dataDir, loadDataDir: await pgliteTemplate() });
  });

  afterAll(async () => {
    await holder?.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("DEL-1: a second openPglite on a held folder fails at once, naming the folder and the holder's pid", async () => {
    const startsBefore = pgliteStarts.count;
    expect(startsBefore).toBeGreaterThan(0); // the holder's start was counted
    const err = await openPglite({ dataDir }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirLockedError);
    expect((err as DataDirLockedError).code).toBe("DATA_DIR_LOCKED");
    expect((err as Error).message).toContain(dataDir);
    expect((err as Error).message).toContain(`process ${process.pid}`);
    // Refused before any PGlite engine starts on the folder.
    expect(pgliteStarts.count).toBe(startsBefore);
    // The holder is untouched.
    const { rows } = await holder.query<{ one: number }>("select 1 as one");
    expect(rows[0]?.one).toBe(1);
  });

  it("DEL-1: a second process on a held folder exits non-zero with the folder and the holder's pid", async () => {
    const result = await openInChild(dataDir);
    expect(result.stdout).not.toContain("opened");
    expect(result.code).toBe(3);
    expect(result.stderr).toContain("DATA_DIR_LOCKED");
    expect(result.stderr).toContain(dataDir);
    expect(result.stderr).toContain(`process ${process.pid}`);
    // The lock still names this process.
    const lock = JSON.parse(readFileSync(join(dataDir, "punctual.lock"), "utf8")) as {
      pid: number;
    };
    expect(lock.pid).toBe(process.pid);
  });

  it("DEL-1: a stale lock of a dead process is taken over, and released on close", async () => {
    const dir = tempDir();
    // A process that has exited (and been reaped): its pid is free.
    const dead = spawnSync(process.execPath, ["-e", ""]);
    expect(dead.status).toBe(0);
    const lockPath = join(dir, "punctual.lock");
    writeFileSync(
      lockPath,
      JSON.stringify({ pid: dead.pid, host: hostname(), startedAt: new Date(0).toISOString() }),
    );
    const db = await openPglite({ dataDir: dir, loadDataDir: await pgliteTemplate() });
    try {
      const lock = JSON.parse(readFileSync(lockPath, "utf8")) as { pid: number };
      expect(lock.pid).toBe(process.pid);
      const { rows } = await db.query<{ n: number }>(
        "select count(*) as n from punctual_schedules",
      );
      expect(rows[0]?.n).toBe(0);
    } finally {
      await db.close();
    }
    expect(existsSync(lockPath)).toBe(false);
  });
});
