/**
 * Embedded engine: PGlite (PostgreSQL compiled to WebAssembly) in a data folder.
 *
 * Facts that shape this adapter:
 * - one process per folder: a second opener silently loses the first one's writes, so
 *   the folder is locked first ({@link lockDataDir});
 * - every query of a process is serialized (SKIP LOCKED never skips inside one process);
 * - it never fsyncs: a process crash is safe, a power loss is not (docs/operations.md);
 * - it has no autovacuum: the retention sweep vacuums the hot tables.
 */
import { chmodSync, lstatSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { isMainThread } from "node:worker_threads";
import { PGlite } from "@electric-sql/pglite";
import {
  PINNED_SETTINGS,
  lockTimeoutSql,
  type Database,
  type Queryable,
  type QueryOptions,
  type QueryResult,
  type TransactionOptions,
} from "./database.js";
import { ConfigError, DataDirLockedError } from "../errors/index.js";
import {
  lockDataDir,
  type DataDirLock,
  type LockHolder,
  type LockOptions,
  type LockTakeOver,
} from "./lock.js";

/** int8 → number, so both engines return the same types. */
const PARSERS = { 20: (value: string) => Number(value) };

export interface PgliteOptions {
  /** Data folder; `null` keeps the database in memory (tests). */
  dataDir: string | null;
  /** A dumped data folder (tar) to start from: tests load a migrated template. */
  loadDataDir?: Blob;
  /** How a lock left by another host is treated ({@link lockDataDir}). */
  lock?: LockOptions;
  /**
   * Open a data folder that other users (group or others) may read or enter
   * (`PUNCTUAL_ALLOW_SHARED_DATA_DIR`); default false: {@link secureDataDir} refuses it.
   */
  allowSharedDataDir?: boolean;
  /** Called when a stale lock was taken over, before the engine starts (log it at WARN). */
  onTakeOver?: (takeOver: LockTakeOver, lockPath: string) => void;
  /**
   * Called once when another process took this one's folder lock over (DEL-1): every
   * statement from then on fails with a DataDirLockedError.
   */
  onLockLost?: (holder: LockHolder | null, lockPath: string) => void;
  /**
   * How long (ms) statements may follow one another without a turn of the event loop;
   * default {@link PGLITE_SLICE_MS}. 0 gives a turn after every statement (tests).
   */
  sliceMs?: number;
}

function adapt<T>(result: {
  rows: unknown[];
  affectedRows?: number;
  fields: ReadonlyArray<{ name: string }>;
}): QueryResult<T> {
  return {
    rows: result.rows as T[],
    rowCount: result.affectedRows ?? result.rows.length,
    fields: result.fields.map((f) => f.name),
  };
}

/** `SET LOCAL` of {@link PINNED_SETTINGS}, run before each statement of Database.pinned. */
const PINNED_SET_LOCAL = Object.entries(PINNED_SETTINGS)
  .map(([name, value]) => `set local ${name} = ${value}`)
  .join("; ");

/**
 * Session settings of the embedded engine (OPS-12), whose statements run on the event
 * loop's thread:
 * - `plan_cache_mode = force_custom_plan`: plans of statements the engine keeps for
 *   itself (the foreign-key checks of an insert, trigger functions) are made for each
 *   execution from the tables as they are then. Kept plans are otherwise replaced by one
 *   generic plan after five executions and remade only when a table's definition or
 *   statistics change, which here happens only when the retention sweep analyzes: a plan
 *   made while `punctual_schedules` held a few rows (a sequential scan is then the cheaper
 *   read) went on scanning the whole table for every reminder inserted, so each batch of
 *   a 50,000-event import cost more than the one before (31 ms per batch of 20 at the
 *   start, over 60 ms later on). PostgreSQL's autovacuum analyzes growing tables instead.
 * - `wal_init_zero = off`: a new 16 MB WAL segment is created by writing its last byte,
 *   not by writing 16 MB of zeros in 8 kB writes (40–100 ms inside whichever statement
 *   or commit crossed into it). PGlite never fsyncs, so zero-filling bought nothing.
 */
export const PGLITE_SESSION_SQL = [
  "set plan_cache_mode = force_custom_plan",
  "set wal_init_zero = off",
];

/** How long (ms) statements may follow one another without a turn of the event loop (OPS-12). */
export const PGLITE_SLICE_MS = 10;

/**
 * Turns of the event loop between embedded statements (OPS-12). PGlite runs each statement
 * on this thread and answers through promises, so a tick or a request that awaits a dozen
 * statements in a row would hold the loop for all of them: timers, health checks and
 * other requests would wait. After each statement, when the loop has not turned for
 * {@link PGLITE_SLICE_MS}, the caller waits for one `setImmediate` first (a bulk create of
 * an import, five statements and its planning, held the loop over 100 ms in one piece). A turn seen by a
 * `setImmediate` marker resets the slice, so an idle process never waits.
 */
export class LoopSlicer {
  private sliceStart = performance.now();
  constructor(private readonly sliceMs: number = PGLITE_SLICE_MS) {}
  private marked = false;
  /** Turns taken (for tests and benchmarks). */
  turns = 0;

  private mark(): void {
    if (this.marked) return;
    this.marked = true;
    setImmediate(() => {
      this.marked = false;
      this.sliceStart = performance.now();
    });
  }

  /** Called after each statement; resolves at once unless the slice is used up. */
  async after(): Promise<void> {
    this.mark();
    if (performance.now() - this.sliceStart < this.sliceMs) return;
    this.turns++;
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.sliceStart = performance.now();
  }
}

/**
 * The data folder holds the webhook signing secret and every target (URLs with their
 * tokens) in its tables and WAL: only this user may read it. Creates `dataDir` (and any
 * missing parent) with mode 0700 when absent, and sets the process umask to drop every
 * group and other permission (`umask | 0o077`), so the files the engine creates are 0600
 * and folders 0700 whatever the inherited umask was ({@link tightenDataDirModes} covers
 * the modes the engine sets itself).
 * @throws ConfigError naming the folder, its mode and `--allow-shared-data-dir` /
 *   `PUNCTUAL_ALLOW_SHARED_DATA_DIR` when the folder exists with any group or other
 *   permission and `allowShared` is false, or when it is not a folder.
 */
export function secureDataDir(dataDir: string, allowShared = false): void {
  // A worker thread may not change the umask (the main thread's applies to it).
  if (isMainThread) {
    const previous = process.umask(0o077);
    process.umask(previous | 0o077);
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const stat = statSync(dataDir);
  if (!stat.isDirectory()) {
    throw new ConfigError(`The data folder ${dataDir} is not a folder.`);
  }
  const mode = stat.mode & 0o777;
  if ((mode & 0o077) !== 0 && !allowShared) {
    throw new ConfigError(
      `The data folder ${dataDir} has mode 0${mode.toString(8)}: other users on this machine can read ` +
        `it (it holds the webhook signing secret and every target's URL and tokens). Run ` +
        `\`chmod 700 ${dataDir}\`, or start with --allow-shared-data-dir ` +
        `(PUNCTUAL_ALLOW_SHARED_DATA_DIR=true) to accept it.`,
    );
  }
}

/**
 * Removes every group and other permission from the files and folders under `dir` (not
 * following links). The engine unpacks a new cluster with the modes its archive holds
 * (0644, 0666) and sets some modes itself, which the umask does not cover: this runs once
 * the engine has started, and again when it closes. Returns how many entries it changed.
 */
export function tightenDataDirModes(dir: string): number {
  let changed = 0;
  const visit = (path: string): void => {
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) return;
    if ((stat.mode & 0o077) !== 0) {
      chmodSync(path, stat.mode & 0o700);
      changed++;
    }
    if (stat.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
  };
  visit(dir);
  return changed;
}

/**
 * Opens (creating if needed) an embedded database.
 * @throws DataDirLockedError when another process holds the folder (one that may be alive).
 * @throws ConfigError when the folder is readable by other users ({@link secureDataDir}).
 */
export async function openPglite(options: PgliteOptions): Promise<Database & { pglite: PGlite }> {
  let lock: DataDirLock | null = null;
  if (options.dataDir) {
    secureDataDir(options.dataDir, options.allowSharedDataDir);
    lock = lockDataDir(options.dataDir, options.lock);
    if (lock.tookOver) options.onTakeOver?.(lock.tookOver, lock.path);
  }
  let pg: PGlite;
  try {
    pg = await PGlite.create({
      ...(options.dataDir ? { dataDir: options.dataDir } : {}),
      ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
      parsers: PARSERS,
    });
    for (const sql of PGLITE_SESSION_SQL) await pg.exec(sql);
    if (options.dataDir && !options.allowSharedDataDir) tightenDataDirModes(options.dataDir);
  } catch (err) {
    lock?.release();
    throw err;
  }
  let closed = false;
  const slicer = new LoopSlicer(options.sliceMs);
  // DEL-1: a process whose folder lock was taken over (it was paused past the stale age
  // and another started with --take-over-lock) must not write on: its writes would be
  // lost. Checked before every statement (one stat of the lock file).
  let lostReported = false;
  const checkLock = (): void => {
    if (lock === null || lock.held()) return;
    const holder = lock.holderNow();
    const by = holder
      ? `process ${holder.pid} on ${holder.host} (since ${holder.startedAt})`
      : "another process";
    if (!lostReported) {
      lostReported = true;
      options.onLockLost?.(holder, lock.path);
    }
    throw new DataDirLockedError(
      `The data folder ${options.dataDir} was taken over by ${by}: this process no longer writes to it. Stop it.`,
    );
  };
  const db: Database & { pglite: PGlite } = {
    engine: "pglite",
    description: options.dataDir ? `PGlite data folder ${options.dataDir}` : "PGlite in memory",
    pglite: pg,
    async query<T>(sql: string, params: readonly unknown[] = [], queryOptions?: QueryOptions) {
      checkLock();
      // One process, one engine: the statement is handed over now (queued behind others).
      queryOptions?.onSent?.();
      const result = adapt<T>(await pg.query(sql, params as unknown[]));
      await slicer.after();
      return result;
    },
    pinned: {
      async query<T>(sql: string, params: readonly unknown[] = [], queryOptions?: QueryOptions) {
        checkLock();
        // Before the transaction: its `now()` is its BEGIN's, which may be before our turn.
        queryOptions?.onSent?.();
        const result = await pg.transaction(async (tx) => {
          await tx.exec(PINNED_SET_LOCAL);
          return adapt<T>(await tx.query(sql, params as unknown[]));
        });
        await slicer.after();
        return result;
      },
    },
    async transaction<T>(
      fn: (tx: Queryable) => Promise<T>,
      transactionOptions?: TransactionOptions,
    ): Promise<T> {
      checkLock();
      // The same SET LOCAL as on PostgreSQL, so both engines run the same SQL. Harmless
      // here: one connection, so no statement ever waits for another session's lock.
      const lockTimeout = lockTimeoutSql(transactionOptions);
      const result = await pg.transaction(async (tx) => {
        if (lockTimeout) await tx.exec(lockTimeout);
        return fn({
          async query<R>(sql: string, params: readonly unknown[] = []) {
            checkLock();
            const rows = adapt<R>(await tx.query(sql, params as unknown[]));
            await slicer.after();
            return rows;
          },
        });
      });
      await slicer.after();
      return result;
    },
    async listen(channel, onNotify) {
      const unlisten = await pg.listen(channel, onNotify);
      return async () => {
        if (!closed) await unlisten();
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      try {
        await pg.close();
        if (options.dataDir && !options.allowSharedDataDir) tightenDataDirModes(options.dataDir);
      } finally {
        lock?.release();
      }
    },
  };
  return db;
}
