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
import { PGlite } from "@electric-sql/pglite";
import type { Database, Queryable, QueryResult } from "./database.js";
import { lockDataDir, type DataDirLock, type LockOptions, type LockTakeOver } from "./lock.js";

/** int8 → number, so both engines return the same types. */
const PARSERS = { 20: (value: string) => Number(value) };

export interface PgliteOptions {
  /** Data folder; `null` keeps the database in memory (tests). */
  dataDir: string | null;
  /** A dumped data folder (tar) to start from: tests load a migrated template. */
  loadDataDir?: Blob;
  /** How a lock left by another host is treated ({@link lockDataDir}). */
  lock?: LockOptions;
  /** Called when a stale lock was taken over, before the engine starts (log it at WARN). */
  onTakeOver?: (takeOver: LockTakeOver, lockPath: string) => void;
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

/**
 * Opens (creating if needed) an embedded database.
 * @throws DataDirLockedError when another process holds the folder (one that may be alive).
 */
export async function openPglite(options: PgliteOptions): Promise<Database & { pglite: PGlite }> {
  let lock: DataDirLock | null = null;
  if (options.dataDir) {
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
  } catch (err) {
    lock?.release();
    throw err;
  }
  let closed = false;
  const db: Database & { pglite: PGlite } = {
    engine: "pglite",
    description: options.dataDir ? `PGlite data folder ${options.dataDir}` : "PGlite in memory",
    pglite: pg,
    async query<T>(sql: string, params: readonly unknown[] = []) {
      return adapt<T>(await pg.query(sql, params as unknown[]));
    },
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      return pg.transaction(async (tx) =>
        fn({
          async query<R>(sql: string, params: readonly unknown[] = []) {
            return adapt<R>(await tx.query(sql, params as unknown[]));
          },
        }),
      );
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
      } finally {
        lock?.release();
      }
    },
  };
  return db;
}
