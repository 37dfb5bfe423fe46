/**
 * The embedded data folder holds the webhook signing secret and every target's URL and
 * tokens (tables and WAL): only the user running punctual may read it. A new folder is
 * made 0700 and the files in it 0600 whatever the inherited umask; an existing folder that
 * group or others may read is refused at start (OPS-5) unless the operator accepts it with
 * `--allow-shared-data-dir` / `PUNCTUAL_ALLOW_SHARED_DATA_DIR`. PGlite only.
 */
import { execFile } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { configFromFlags } from "../../src/cli/run.js";
import { resolveConfig } from "../../src/config/index.js";
import { ConfigError } from "../../src/errors/index.js";
import { openPglite } from "../../src/store/pglite.js";
import { engineName, pgliteTemplate } from "../support/db.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const pgliteModule = pathToFileURL(join(root, "src/store/pglite.ts")).href;
const onPglite = engineName() === "pglite";
const title = (text: string) =>
  onPglite
    ? text
    : `${text} (skipped: embedded engine only, runs with PUNCTUAL_TEST_ENGINE=pglite)`;

/** Opens and closes a database on `dataDir` in a child process started with umask 0. */
function openInChild(dataDir: string): Promise<{ code: number | null; stderr: string }> {
  const script = `
    process.umask(0);
    const { openPglite } = await import(${JSON.stringify(pgliteModule)});
    const db = await openPglite({ dataDir: process.env.PUNCTUAL_TEST_DIR });
    await db.query("create table t (secret text)");
    await db.query("insert into t values ('whsec_x')");
    await db.close();`;
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      { cwd: root, env: { ...process.env, PUNCTUAL_TEST_DIR: dataDir } },
      (_error, _stdout, stderr) => resolve({ code: child.exitCode, stderr }),
    );
  });
}

/** Every path under `dir` (itself included) with its permission bits. */
function modes(dir: string): Array<{ path: string; mode: number; folder: boolean }> {
  const out = [{ path: dir, mode: statSync(dir).mode & 0o777, folder: true }];
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    const stat = statSync(path);
    out.push({ path, mode: stat.mode & 0o777, folder: stat.isDirectory() });
  }
  return out;
}

describe.skipIf(!onPglite)(title("PGlite data folder permissions"), () => {
  const dirs: string[] = [];
  const tempDir = (): string => {
    const dir = mkdtempSync(join(tmpdir(), "punctual-mode-test-"));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("OPS-5: a new data folder is 0700 and every file in it 0600, even under umask 0", async () => {
    const dataDir = join(tempDir(), "nested", "data");
    const result = await openInChild(dataDir);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const found = modes(dataDir);
    expect(found.length).toBeGreaterThan(10);
    const open = found.filter((f) => (f.mode & 0o077) !== 0);
    expect(open).toEqual([]);
    expect(found[0]!.mode).toBe(0o700);
    expect(statSync(join(dataDir, "..")).mode & 0o777).toBe(0o700);
  });

  it("OPS-5: a data folder that others may read is refused, naming the folder, its mode and the option", async () => {
    const dataDir = join(tempDir(), "shared");
    mkdirSync(dataDir);
    chmodSync(dataDir, 0o755);
    const err = await openPglite({ dataDir }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as Error).message;
    expect(message).toContain(dataDir);
    expect(message).toContain("0755");
    expect(message).toContain("--allow-shared-data-dir");
    expect(message).toContain("PUNCTUAL_ALLOW_SHARED_DATA_DIR");
    // Nothing was written into it: refused before the lock and the engine.
    expect(readdirSync(dataDir)).toEqual([]);
    chmodSync(dataDir, 0o750);
    await expect(openPglite({ dataDir })).rejects.toThrow(/mode 0750/);
  });

  it("OPS-5: --allow-shared-data-dir / PUNCTUAL_ALLOW_SHARED_DATA_DIR accept such a folder", async () => {
    const dataDir = join(tempDir(), "accepted");
    mkdirSync(dataDir);
    chmodSync(dataDir, 0o755);
    const db = await openPglite({
      dataDir,
      loadDataDir: await pgliteTemplate(),
      allowSharedDataDir: true,
    });
    try {
      expect((await db.query<{ one: number }>("select 1 as one")).rows[0]?.one).toBe(1);
    } finally {
      await db.close();
    }
    const flag = resolveConfig(configFromFlags({ dataDir, allowSharedDataDir: true }, {}));
    expect(flag.allowSharedDataDir).toBe(true);
    const env = resolveConfig(
      configFromFlags({ dataDir }, { PUNCTUAL_ALLOW_SHARED_DATA_DIR: "true" }),
    );
    expect(env.allowSharedDataDir).toBe(true);
    expect(resolveConfig(configFromFlags({ dataDir }, {})).allowSharedDataDir).toBe(false);
  });
});
