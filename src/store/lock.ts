/**
 * Exclusive lock on the embedded data folder. Two processes opening one PGlite folder
 * silently lose acknowledged writes, so the second one must fail at once, naming the
 * folder and the holder.
 *
 * The lock is a file `punctual.lock` holding a {@link LockHolder}, created whole with
 * link(2) (which fails when the file exists). Its holder touches the file every
 * {@link LOCK_REFRESH_MS}, so its modification time says when the holder was last alive.
 *
 * A lock left behind by a crash is taken over ({@link LockTakeOver} says why), never one
 * whose holder may be running:
 * - it names this process's pid, on this host, and this process does not hold it: a
 *   previous run that had the same pid (a container restarted after kill -9 or OOM runs
 *   the app as pid 1 again, under the same hostname);
 * - it was written on this host before the last boot (boot ids differ): every pid in it
 *   is gone;
 * - its pid is dead on this host, or now belongs to a process that started at another
 *   time than the holder (the pid was reused);
 * - it was written on another host (a re-created container on the same volume), where
 *   this process cannot see whether the holder lives: only when asked to
 *   (`takeOverStale`) and only once the holder has not refreshed the file for
 *   `staleAfterMs`.
 * Anything else is refused with a {@link DataDirLockedError} naming the holder.
 * Hosts are told apart by hostname: containers sharing one volume need distinct hostnames
 * (the container runtime's default).
 */
import { randomUUID } from "node:crypto";
import {
  closeSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeSync,
} from "node:fs";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { DataDirLockedError } from "../errors/index.js";

/** How often a holder touches its lock file, ms. */
export const LOCK_REFRESH_MS = 10_000;

/** Default age of an unrefreshed lock from another host before it may be taken over, ms. */
export const LOCK_STALE_AFTER_MS = 60_000;

/** The content of a lock file. Fields after `startedAt` are absent in older lock files. */
export interface LockHolder {
  pid: number;
  host: string;
  /** When the holder took the lock (ISO 8601, its clock). */
  startedAt: string;
  /** The kernel's boot id when the lock was taken (Linux), to recognise a reboot. */
  bootId?: string | null;
  /** The holder's process start time in clock ticks since boot (Linux), to recognise a reused pid. */
  procStart?: string | null;
  /** How often the holder refreshes the file, ms (present when it does). */
  refreshMs?: number;
  /** Random per lock: only its own holder refreshes or removes the file. */
  token?: string;
}

/** Why a lock was taken over. */
export type TakeOverReason =
  /** The lock names this pid on this host, and this process does not hold it. */
  | "own-pid"
  /** Written on this host before the last boot. */
  | "rebooted"
  /** Its pid is not running on this host. */
  | "dead-pid"
  /** Its pid runs a process that started at another time than the holder. */
  | "pid-reused"
  /** Another host's lock, not refreshed for `staleAfterMs`, taken over as asked. */
  | "stale-other-host"
  /** The file did not hold a readable lock. */
  | "unreadable";

/** A stale lock that was taken over, for the caller to log. */
export interface LockTakeOver {
  /** The previous holder, or null when the file was unreadable. */
  previous: LockHolder | null;
  reason: TakeOverReason;
  /** Time since the previous holder last refreshed the file, ms (null if unknown). */
  ageMs: number | null;
}

export interface DataDirLock {
  readonly path: string;
  /** Set when a stale lock was taken over. */
  readonly tookOver: LockTakeOver | null;
  /**
   * Whether this process still holds the lock: false once another process took it over
   * (this one was paused or cut off past `staleAfterMs`, and `--take-over-lock` was used
   * elsewhere). One `stat` of the lock file; its content is read only when the file changed.
   */
  held(): boolean;
  /** Who holds the lock now, when this process lost it (null when unknown or still ours). */
  holderNow(): LockHolder | null;
  release(): void;
}

/** Options of {@link lockDataDir}. */
export interface LockOptions {
  /**
   * Take over a lock written on another host once it is `staleAfterMs` old (its holder
   * stopped refreshing it). Off by default: set it where a volume moves between hosts or
   * containers (`--take-over-lock`, `PUNCTUAL_TAKE_OVER_LOCK`).
   */
  takeOverStale?: boolean;
  /** Age of an unrefreshed lock from another host that counts as stale, ms. Default 60 s. */
  staleAfterMs?: number;
}

/** Folders locked by this process (resolved paths): a second open in-process is refused. */
const heldHere = new Set<string>();

/**
 * Whether `pid` names one process: a positive safe integer. `kill(0, …)` and
 * `kill(-1, …)` address process groups (every process the user may signal), so a pid
 * that is not one is never passed to `process.kill`.
 */
function isProcessId(pid: unknown): pid is number {
  return typeof pid === "number" && Number.isSafeInteger(pid) && pid > 0;
}

function isAlive(pid: number): boolean {
  if (!isProcessId(pid)) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

/** The kernel's boot id (Linux), or null where there is none. */
function bootId(): string | null {
  return readText("/proc/sys/kernel/random/boot_id")?.trim() || null;
}

/**
 * Start time of process `pid` in clock ticks since boot (field 22 of `/proc/<pid>/stat`),
 * or null where there is no /proc. Exact and clock-free: equal means the same process.
 */
function processStart(pid: number | "self"): string | null {
  const stat = readText(`/proc/${pid}/stat`);
  if (!stat) return null;
  // The command name (field 2) is in parentheses and may hold spaces: count after it.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return fields[19] ?? null;
}

function readHolder(path: string): LockHolder | null {
  return parseHolder(readText(path));
}

function parseHolder(text: string | null): LockHolder | null {
  if (text === null) return null;
  try {
    const value = JSON.parse(text) as Partial<LockHolder> | null;
    // A pid of 0, -1 or a fraction is no holder's: the file is unreadable as a lock.
    if (!value || !isProcessId(value.pid) || typeof value.host !== "string") return null;
    return { startedAt: "unknown", ...value } as LockHolder;
  } catch {
    return null;
  }
}

function describe(holder: LockHolder): string {
  return `process ${holder.pid} on ${holder.host} (since ${holder.startedAt})`;
}

/** Whether the lock at `path` may be taken over; throws when it may not. */
function judge(
  dataDir: string,
  path: string,
  holder: LockHolder | null,
  me: LockHolder,
  options: LockOptions,
): LockTakeOver {
  let ageMs: number | null = null;
  try {
    ageMs = Math.max(0, Date.now() - statSync(path).mtimeMs);
  } catch {
    // gone meanwhile: the retry decides
  }
  const takeOver = (reason: TakeOverReason): LockTakeOver => ({ previous: holder, reason, ageMs });
  if (!holder) return takeOver("unreadable");
  const inUse = (more: string) =>
    new DataDirLockedError(
      `The data folder ${dataDir} is in use by ${describe(holder)}${more}. ` +
        `Embedded mode allows one process per folder: stop that process, use another --data-dir, ` +
        `or run several processes against PostgreSQL (DATABASE_URL).`,
    );
  if (holder.host === me.host) {
    if (holder.bootId && me.bootId && holder.bootId !== me.bootId) return takeOver("rebooted");
    if (holder.pid === me.pid) {
      if (heldHere.has(resolve(dataDir))) throw inUse(", this very process");
      return takeOver("own-pid");
    }
    if (!isAlive(holder.pid)) return takeOver("dead-pid");
    const now = holder.procStart ? processStart(holder.pid) : null;
    if (now !== null && now !== holder.procStart) return takeOver("pid-reused");
    throw inUse("");
  }
  const staleAfterMs = options.staleAfterMs ?? LOCK_STALE_AFTER_MS;
  const age = ageMs === null ? "" : `, last refreshed ${Math.round(ageMs / 1000)} s ago`;
  if (!options.takeOverStale) {
    throw inUse(
      `${age}; this host (${me.host}) cannot see whether it still runs. If it does not ` +
        `(a re-created container on the same volume), start with --take-over-lock ` +
        `(PUNCTUAL_TAKE_OVER_LOCK=true): the lock is then taken over once its holder has not ` +
        `refreshed it for ${Math.round(staleAfterMs / 1000)} s`,
    );
  }
  if (!holder.refreshMs) {
    throw inUse(
      `; its lock file is never refreshed (an older release), so its age says nothing: ` +
        `make sure that process is gone, then delete ${path}`,
    );
  }
  if (ageMs === null || ageMs < staleAfterMs) {
    throw inUse(
      `${age}, so it may still run; it is taken over once not refreshed for ` +
        `${Math.round(staleAfterMs / 1000)} s`,
    );
  }
  return takeOver("stale-other-host");
}

/**
 * Takes the lock of `dataDir` (creating the folder), taking over a stale one (see the
 * module comment; the result's `tookOver` says whose and why, for the caller to log at
 * WARN). The lock is refreshed every {@link LOCK_REFRESH_MS} until `release()`.
 * @throws DataDirLockedError when a live process holds it, or one on another host that is
 * not (or not yet) stale, naming the holder's pid, host and start.
 */
export function lockDataDir(dataDir: string, options: LockOptions = {}): DataDirLock {
  mkdirSync(dataDir, { recursive: true });
  const key = resolve(dataDir);
  const path = join(dataDir, "punctual.lock");
  const me: LockHolder = {
    pid: process.pid,
    host: hostname(),
    startedAt: new Date().toISOString(),
    bootId: bootId(),
    procStart: processStart("self"),
    refreshMs: LOCK_REFRESH_MS,
    token: randomUUID(),
  };
  let tookOver: LockTakeOver | null = null;
  for (let tries = 0; tries < 3; tries++) {
    try {
      // Write the holder to a private file first, then link it into place: the lock file
      // appears with its content in one step (link fails if it exists), so no other
      // process can ever read a half-written lock and take it for stale.
      const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
      const fd = openSync(tmp, "wx");
      try {
        writeSync(fd, JSON.stringify(me));
      } finally {
        closeSync(fd);
      }
      try {
        linkSync(tmp, path);
      } finally {
        unlinkSync(tmp);
      }
      heldHere.add(key);
      const ours = () => readHolder(path)?.token === me.token;
      // The lock file's identity (inode and change time): a take-over replaces the file.
      const identity = (): string | null => {
        try {
          const st = statSync(path);
          return `${st.ino}:${st.ctimeMs}`;
        } catch {
          return null;
        }
      };
      let known = identity();
      let lost = false;
      const refresh = setInterval(() => {
        try {
          if (ours()) {
            const now = new Date();
            utimesSync(path, now, now);
          } else {
            clearInterval(refresh);
          }
        } catch {
          // the folder went away; the database reports that
        }
      }, LOCK_REFRESH_MS);
      refresh.unref();
      let released = false;
      return {
        path,
        tookOver,
        held() {
          if (lost || released) return false;
          const now = identity();
          if (now !== null && now === known) return true;
          // Touched by our own refresh (the change time moves) or replaced: read it.
          if (ours()) {
            known = identity();
            return true;
          }
          lost = true;
          clearInterval(refresh);
          return false;
        },
        holderNow() {
          return lost ? readHolder(path) : null;
        },
        release() {
          if (released) return;
          released = true;
          clearInterval(refresh);
          heldHere.delete(key);
          if (ours()) {
            try {
              unlinkSync(path);
            } catch {
              // already gone
            }
          }
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const judged = readText(path);
    tookOver = judge(dataDir, path, parseHolder(judged), me, options);
    // Stale: move it aside atomically and retry. When what was moved is not the lock that
    // was judged (another process took it over in between), put it back: the retry then
    // finds that live holder.
    const aside = `${path}.stale-${process.pid}`;
    try {
      renameSync(path, aside);
    } catch {
      continue; // gone meanwhile: the retry decides
    }
    try {
      if (readText(aside) !== judged) linkSync(aside, path);
    } catch {
      // a third process holds it now; the retry decides
    } finally {
      unlinkSync(aside);
    }
  }
  throw new DataDirLockedError(`Could not take the lock of data folder ${dataDir}.`);
}
