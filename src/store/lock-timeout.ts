/**
 * The request path's database: statements that give up waiting for a lock.
 *
 * A worker stopped inside a transaction (SIGSTOP, a frozen VM) keeps the row locks it took
 * on a schedule or its deliveries until the server ends its session (the idle limit,
 * IDLE_IN_TRANSACTION_TIMEOUT_MS in ./postgres.ts, a minute). An API edit of that schedule
 * would wait on the lock all that time, holding a pooled connection; a few such requests
 * take the whole pool and every other request fails. Through {@link withLockTimeout}
 * every statement of an operation (API, CLI, library call) runs with PostgreSQL's
 * `lock_timeout`, set local to its transaction: past it the statement fails with SQLSTATE
 * 55P03, the transaction rolls back, its connection returns to the pool, and the caller
 * gets a {@link ResourceBusyError} (HTTP 503 with Retry-After) naming what was locked.
 *
 * Not on this path, by design (each waits as long as the lock is held):
 * - the scheduler's own statements (plan, claim, settle, lease renewals, recovery). They
 *   are few at a time, not one per request, so a wait stalls one sweep and takes no pool;
 *   a settle or a renewal that gave up would cost a delivery its recorded outcome (in
 *   doubt) or its lease, while waiting costs only time. A frozen holder is ended by the
 *   idle limit and the sweep goes on where it stopped (DEL-7).
 * - the migrator's advisory lock (./migrator.ts): a second migrator waits for the first.
 * - the import lock (./import-lock.ts): imports of one source queue; that transaction
 *   turns the timeout off for itself.
 */
import { isLockTimeout, ResourceBusyError } from "../errors/index.js";
import type {
  Database,
  Queryable,
  QueryOptions,
  QueryResult,
  TransactionOptions,
} from "./database.js";

/** Options of {@link withLockTimeout}. */
export interface LockTimeoutOptions {
  /** Longest a statement waits for a lock, ms; 0 turns the limit off (waits as before). */
  lockTimeoutMs: number;
  /** Called once per operation that gave up (after its rollback): log and count it here. */
  onTimeout?: (busy: ResourceBusyError) => void;
}

/**
 * The table a lock wait was on, from the server's context line (`while updating tuple
 * (0,1) in relation "punctual_schedules"`, `while locking tuple …`); null when it has none
 * (a statement queued behind another waiter for the same row, a lock on a whole table, an
 * advisory lock).
 */
export function lockedRelation(err: unknown): string | null {
  const where = (err as { where?: unknown } | null)?.where;
  const match = typeof where === "string" ? /relation "([^"]+)"/.exec(where) : null;
  return match?.[1] ?? null;
}

/**
 * Whether `sql` is a plain read: a `SELECT` (or `WITH … SELECT`, `VALUES`) that writes
 * nothing, locks no row (no `FOR UPDATE`/`FOR SHARE`) and takes no advisory lock. Under
 * MVCC such a statement never waits for a row lock, so it needs no lock timeout. Read
 * conservatively: a statement that merely names a write keyword anywhere (even in a string)
 * is not plain, and gets the timeout.
 */
export function isPlainRead(sql: string): boolean {
  const text = sql.replace(/--[^\n]*/g, " ").replace(/\/\*[\s\S]*?\*\//g, " ");
  if (!/^\s*\(?\s*(select|with|values)\b/i.test(text)) return false;
  return !/\b(insert|update|delete|merge|share|lock|pg_advisory\w*)\b/i.test(text);
}

/**
 * A view of `db` whose statements wait at most `lockTimeoutMs` for a lock another
 * transaction holds (see the module comment). Transactions carry the limit
 * ({@link TransactionOptions.lockTimeoutMs}, in the round trip of their BEGIN); on
 * PostgreSQL a statement outside a transaction that may wait for a row lock (a write, a
 * locking read: not {@link isPlainRead}) runs in a transaction of its own to carry it (two
 * more round trips); plain reads run as they are. On PGlite, one connection, nothing can
 * wait for another session's lock: its statements run as they are and its transactions
 * set the same (harmless) limit. The claim path ({@link Database.pinned}), LISTEN and `close` are `db`'s own.
 * @returns `db` itself when `lockTimeoutMs` is 0.
 * @throws ResourceBusyError (from its statements) when a lock was not granted in time; the
 *   operation's transaction has rolled back.
 */
export function withLockTimeout(db: Database, options: LockTimeoutOptions): Database {
  const lockTimeoutMs = options.lockTimeoutMs;
  if (lockTimeoutMs <= 0) return db;
  /** Rethrows a lock timeout as a ResourceBusyError (reported once), anything else as it is. */
  const busy = (err: unknown): never => {
    if (err instanceof ResourceBusyError) throw err;
    if (!isLockTimeout(err)) throw err;
    const error = new ResourceBusyError(lockedRelation(err), lockTimeoutMs, { cause: err });
    options.onTimeout?.(error);
    throw error;
  };
  const transaction = <T>(
    fn: (tx: Queryable) => Promise<T>,
    transactionOptions?: TransactionOptions,
  ): Promise<T> => db.transaction(fn, { lockTimeoutMs, ...transactionOptions }).catch(busy);
  const view: Database = {
    engine: db.engine,
    description: db.description,
    query<T>(sql: string, params?: readonly unknown[], queryOptions?: QueryOptions) {
      if (db.engine !== "postgres" || isPlainRead(sql)) {
        return db.query<T>(sql, params, queryOptions);
      }
      return transaction<QueryResult<T>>((tx) => {
        queryOptions?.onSent?.();
        return tx.query<T>(sql, params);
      });
    },
    transaction,
    listen: (channel, onNotify, onLost) => db.listen(channel, onNotify, onLost),
    close: () => db.close(),
  };
  return db.pinned ? { ...view, pinned: db.pinned } : view;
}
