/**
 * Exclusive lock on the embedded data folder. Two processes opening one PGlite folder
 * silently lose acknowledged writes, so the second one must fail at once, naming the
 * folder and the holder's pid.
 *
 * The lock is a file `punctual.lock` holding `{ pid, host, startedAt }`, created whole
 * with link(2) (which fails when the file exists).
 * A lock left by a dead process on this host is taken over (logged by the caller).
 */
import {
  closeSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { DataDirLockedError } from "../errors/index.js";

export interface LockHolder {
  pid: number;
  host: string;
  startedAt: string;
}

export interface DataDirLock {
  readonly path: string;
  /** Set when a stale lock of a dead process was taken over. */
  readonly tookOverFrom: LockHolder | null;
  release(): void;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function readHolder(path: string): LockHolder | null {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as LockHolder;
  } catch {
    return null;
  }
}

/**
 * Takes the lock of `dataDir` (creating the folder).
 * @throws DataDirLockedError when a live process holds it (or one on another host).
 */
export function lockDataDir(dataDir: string): DataDirLock {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, "punctual.lock");
  const me: LockHolder = {
    pid: process.pid,
    host: hostname(),
    startedAt: new Date().toISOString(),
  };
  let tookOverFrom: LockHolder | null = null;
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
      let released = false;
      return {
        path,
        tookOverFrom,
        release() {
          if (released) return;
          released = true;
          const holder = readHolder(path);
          if (holder && holder.pid === me.pid && holder.host === me.host) {
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
    const holder = readHolder(path);
    if (holder && (holder.host !== me.host || isAlive(holder.pid))) {
      throw new DataDirLockedError(
        `The data folder ${dataDir} is in use by process ${holder.pid} on ${holder.host} (since ${holder.startedAt}). ` +
          `Embedded mode allows one process per folder: stop that process, use another --data-dir, ` +
          `or run several processes against PostgreSQL (DATABASE_URL).`,
      );
    }
    // Stale (dead holder, or unreadable half-written file): move it aside atomically and retry.
    tookOverFrom = holder;
    try {
      renameSync(path, `${path}.stale-${process.pid}`);
      unlinkSync(`${path}.stale-${process.pid}`);
    } catch {
      // another process took it over first; retry decides
    }
  }
  throw new DataDirLockedError(`Could not take the lock of data folder ${dataDir}.`);
}
