/**
 * The embedded data folder is exclusive: two processes on one PGlite folder would silently
 * lose acknowledged writes (DEL-1: the database is the record of what was sent), so a
 * second opener fails at once, naming the folder and the holder's pid. At start (OPS-5) a
 * lock left by a crash is taken over and logged: our own pid after a container restart, a
 * dead pid, a lock from before a reboot, and (when asked) another host's lock its holder
 * stopped refreshing; a holder that may be alive is refused by name. Lock files are written
 * by hand to stage each case. PGlite only: a PostgreSQL server has no data folder of ours.
 */
import { execFile, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type * as PgliteModule from "@electric-sql/pglite";
import { warnLockTakeOver } from "../../src/app/punctual.js";
import { DataDirLockedError } from "../../src/errors/index.js";
import { memoryLogger } from "../../src/observability/logger.js";
import type { Database } from "../../src/store/database.js";
import { LOCK_REFRESH_MS, lockDataDir, type LockHolder } from "../../src/store/lock.js";
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
    const onTakeOver = vi.fn();
    const db = await openPglite({
      dataDir: dir,
      loadDataDir: await pgliteTemplate(),
      onTakeOver,
    });
    try {
      // OPS-5: the caller hears of it (to log it) with the previous holder.
      expect(onTakeOver).toHaveBeenCalledOnce();
      expect(onTakeOver).toHaveBeenCalledWith(
        expect.objectContaining({
          reason: "dead-pid",
          previous: expect.objectContaining({ pid: dead.pid }),
        }),
        lockPath,
      );
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

  it("DEL-1: a process whose lock another process took over refuses every statement from then on, and says so once", async () => {
    const dir = tempDir();
    const lockPath = join(dir, "punctual.lock");
    const onLockLost = vi.fn();
    const db = await openPglite({ dataDir: dir, loadDataDir: await pgliteTemplate(), onLockLost });
    try {
      await db.query("select 1");
      // Another process took the folder over (this one was paused past the stale age and
      // another started with --take-over-lock): the lock file is replaced by its own.
      const elsewhere = {
        pid: 4242,
        host: "elsewhere",
        startedAt: "2027-01-04T08:00:00Z",
        token: "t",
      };
      writeFileSync(`${lockPath}.new`, JSON.stringify(elsewhere));
      renameSync(`${lockPath}.new`, lockPath);
      for (const run of [
        () => db.query("insert into punctual_settings (key, value) values ('k', '1')"),
        () => db.transaction((tx) => tx.query("select 1")),
        () => db.pinned!.query("select 1"),
      ]) {
        const err = await run().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(DataDirLockedError);
        expect((err as Error).message).toContain("process 4242 on elsewhere");
      }
      expect(onLockLost).toHaveBeenCalledOnce();
      expect(onLockLost).toHaveBeenCalledWith(expect.objectContaining({ pid: 4242 }), lockPath);
    } finally {
      await db.close();
    }
    // Its lock is left to its holder.
    expect(lockOf(lockPath).host).toBe("elsewhere");
  });

  // ── recovery at start (OPS-5) ─────────────────────────────────────────────────────

  /** A folder holding the lock file `holder` (its modification time `ageMs` ago). */
  function staged(holder: Partial<LockHolder>, ageMs = 0): { dir: string; lockPath: string } {
    const dir = tempDir();
    const lockPath = join(dir, "punctual.lock");
    writeFileSync(
      lockPath,
      JSON.stringify({ host: hostname(), startedAt: "2027-01-04T08:00:00.000Z", ...holder }),
    );
    if (ageMs > 0) {
      const then = new Date(Date.now() - ageMs);
      utimesSync(lockPath, then, then);
    }
    return { dir, lockPath };
  }
  const lockOf = (lockPath: string) => JSON.parse(readFileSync(lockPath, "utf8")) as LockHolder;
  const refusal = (fn: () => unknown): DataDirLockedError => {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(DataDirLockedError);
      return err as DataDirLockedError;
    }
    throw new Error("the lock was taken");
  };
  const ourBootId = (() => {
    try {
      return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    } catch {
      return null;
    }
  })();
  const onLinux = (text: string) =>
    ourBootId ? text : `${text} (skipped: needs /proc, Linux only)`;
  /** A live process other than this one. */
  const otherLivePid = process.ppid;

  it("OPS-5: a lock naming our own pid on this host (a restarted container's pid 1) is taken over", () => {
    const { dir, lockPath } = staged({ pid: process.pid });
    const lock = lockDataDir(dir);
    try {
      expect(lock.tookOver).toMatchObject({
        reason: "own-pid",
        previous: { pid: process.pid, host: hostname(), startedAt: "2027-01-04T08:00:00.000Z" },
      });
      const now = lockOf(lockPath);
      expect(now.pid).toBe(process.pid);
      expect(now.token).toEqual(expect.any(String));
      // The same process opening the folder again is still refused (it holds it now).
      expect(refusal(() => lockDataDir(dir)).message).toContain(`process ${process.pid}`);
    } finally {
      lock.release();
    }
    expect(existsSync(lockPath)).toBe(false);
  });

  it("OPS-5: a lock naming a dead pid on this host is taken over", () => {
    const dead = spawnSync(process.execPath, ["-e", ""]);
    const { dir } = staged({ pid: dead.pid });
    const lock = lockDataDir(dir);
    lock.release();
    expect(lock.tookOver).toMatchObject({ reason: "dead-pid", previous: { pid: dead.pid } });
  });

  it("OPS-5: a lock naming pid 0, -1 or a fraction is unreadable and taken over, and no pid of it is signalled", () => {
    const kill = vi.spyOn(process, "kill");
    try {
      for (const pid of [0, -1, 1.5]) {
        const { dir } = staged({ pid });
        const lock = lockDataDir(dir);
        lock.release();
        expect(lock.tookOver, String(pid)).toMatchObject({ reason: "unreadable" });
      }
      expect(kill.mock.calls.filter(([p]) => typeof p !== "number" || p <= 0)).toEqual([]);
    } finally {
      kill.mockRestore();
    }
  });

  it("OPS-5: a live process of this host is refused, by pid, host and start", () => {
    const { dir, lockPath } = staged({ pid: otherLivePid });
    const err = refusal(() => lockDataDir(dir));
    expect(err.message).toContain(`process ${otherLivePid} on ${hostname()}`);
    expect(err.message).toContain("2027-01-04T08:00:00.000Z");
    expect(lockOf(lockPath).pid).toBe(otherLivePid); // untouched
  });

  it.skipIf(!ourBootId)(
    onLinux("OPS-5: a lock of this host from before the last boot is taken over"),
    () => {
      const { dir } = staged({ pid: otherLivePid, bootId: "00000000-0000-0000-0000-000000000000" });
      const lock = lockDataDir(dir);
      lock.release();
      expect(lock.tookOver?.reason).toBe("rebooted");
    },
  );

  it.skipIf(!ourBootId)(
    onLinux(
      "OPS-5: a live pid that started at another time than the holder (reused) is taken over",
    ),
    () => {
      const { dir } = staged({ pid: otherLivePid, bootId: ourBootId, procStart: "1" });
      const lock = lockDataDir(dir);
      lock.release();
      expect(lock.tookOver?.reason).toBe("pid-reused");
    },
  );

  it("OPS-5: another host's lock is refused without --take-over-lock, naming its holder and the flag", () => {
    const { dir } = staged(
      { pid: 1, host: "old-container", refreshMs: LOCK_REFRESH_MS },
      3_600_000,
    );
    const err = refusal(() => lockDataDir(dir));
    expect(err.message).toContain("process 1 on old-container (since 2027-01-04T08:00:00.000Z)");
    expect(err.message).toContain("--take-over-lock");
    expect(err.message).toContain("PUNCTUAL_TAKE_OVER_LOCK");
  });

  it("OPS-5: with the flag, another host's lock refreshed recently is still refused", () => {
    const { dir } = staged({ pid: 1, host: "old-container", refreshMs: LOCK_REFRESH_MS }, 5_000);
    const err = refusal(() => lockDataDir(dir, { takeOverStale: true }));
    expect(err.message).toContain("process 1 on old-container");
    expect(err.message).toContain("may still run");
  });

  it("OPS-5: with the flag, another host's lock unrefreshed for 60 s is taken over", () => {
    const { dir, lockPath } = staged(
      { pid: 1, host: "old-container", refreshMs: LOCK_REFRESH_MS },
      61_000,
    );
    const lock = lockDataDir(dir, { takeOverStale: true });
    try {
      expect(lock.tookOver).toMatchObject({
        reason: "stale-other-host",
        previous: { pid: 1, host: "old-container" },
      });
      expect(lock.tookOver?.ageMs).toBeGreaterThanOrEqual(61_000);
      expect(lockOf(lockPath).host).toBe(hostname());
    } finally {
      lock.release();
    }
  });

  it("OPS-5: with the flag, another host's lock that is never refreshed (older release) is refused", () => {
    const { dir, lockPath } = staged({ pid: 1, host: "old-container" }, 3_600_000);
    const err = refusal(() => lockDataDir(dir, { takeOverStale: true }));
    expect(err.message).toContain("never refreshed");
    expect(err.message).toContain(lockPath);
  });

  it("OPS-5: a holder refreshes its lock file, and leaves one it no longer owns in place", () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "Date"] });
    const dir = tempDir();
    const lockPath = join(dir, "punctual.lock");
    try {
      const lock = lockDataDir(dir);
      const old = new Date(Date.now() - 3_600_000);
      utimesSync(lockPath, old, old);
      vi.advanceTimersByTime(LOCK_REFRESH_MS);
      // The refresh moved the file's time off the hour-old stamp (fake timers: no real wait).
      expect(statSync(lockPath).mtimeMs).toBeGreaterThan(old.getTime() + LOCK_REFRESH_MS);
      // Another process took the folder over: release must not delete its lock.
      writeFileSync(
        lockPath,
        JSON.stringify({ pid: 1, host: "elsewhere", startedAt: "x", token: "t" }),
      );
      lock.release();
      expect(lockOf(lockPath).host).toBe("elsewhere");
    } finally {
      vi.useRealTimers();
    }
  });

  it("OPS-5: a lock taken over at start is logged at WARN with the previous holder", () => {
    const { dir, lockPath } = staged({ pid: process.pid, startedAt: "2027-01-04T07:59:00.000Z" });
    const { logger, lines } = memoryLogger("info");
    const lock = lockDataDir(dir);
    lock.release();
    warnLockTakeOver(logger)(lock.tookOver!, lock.path);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: "warn",
      reason: "own-pid",
      lock: lockPath,
      previousHolder: { pid: process.pid, host: hostname(), startedAt: "2027-01-04T07:59:00.000Z" },
    });
    expect(lines[0]?.msg).toContain(
      `process ${process.pid} on ${hostname()} (since 2027-01-04T07:59:00.000Z)`,
    );
  });
});
