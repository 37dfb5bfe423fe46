/**
 * The narrow database port. Two engines implement it with the same SQL: PGlite
 * (embedded, one process) and PostgreSQL through a `pg` pool. Result types are made
 * identical: int8 as JS number, timestamptz as `Date`, jsonb parsed.
 */

/** Rows, the number of rows a statement touched, and the names of its result columns. */
export interface QueryResult<T> {
  rows: T[];
  rowCount: number;
  /**
   * Names of the result columns, in order, as the engine reports them (empty for a
   * statement that returns no rows). Read by the test that checks each statement's
   * columns against its declared row type.
   */
  fields: string[];
}

/** Options of one {@link Queryable.query}. */
export interface QueryOptions {
  /**
   * Called once, right before the statement is handed to its connection: after a pooled
   * connection was acquired (and set up), so the wait for one is not counted. DEL-16: lease
   * arithmetic reads the process clock here, so a lease this worker believes never starts
   * before the database could have started it, and a slow connection does not eat it. A
   * runner that cannot tell may ignore it; callers then keep the time read before the call.
   */
  onSent?: () => void;
}

/** Options of one {@link Database.transaction}. */
export interface TransactionOptions {
  /**
   * Longest any statement of the transaction waits for a lock another transaction holds,
   * ms (PostgreSQL's `lock_timeout`, set local to the transaction, in the same round trip as
   * its BEGIN); past it the statement fails with SQLSTATE 55P03 (`lock_not_available`) and
   * the transaction rolls back. Unset or 0: wait as long as the lock is held. The request
   * path sets it (see ./lock-timeout.ts); on PGlite, one connection, no statement ever waits
   * for another session's lock, and the setting is harmless. A database that ignores the
   * option waits as before.
   */
  lockTimeoutMs?: number;
}

/** Something that runs parameterized SQL: the database itself or an open transaction. */
export interface Queryable {
  /** Runs one statement with `$1…$n` parameters. Never interpolate values into `sql`. */
  query<T = Record<string, unknown>>(
    sql: string,
    params?: readonly unknown[],
    options?: QueryOptions,
  ): Promise<QueryResult<T>>;
}

/** Which engine is behind a {@link Database}. */
export type Engine = "pglite" | "postgres";

/**
 * A database punctual runs on: embedded PGlite or a PostgreSQL pool, behind one narrow
 * port. Pass your own as `createScheduler({ database })` to share it.
 */
export interface Database extends Queryable {
  readonly engine: Engine;
  /** A human description without secrets: the data folder, or host/port/database. */
  readonly description: string;
  /**
   * Runs `fn` in a transaction (BEGIN … COMMIT; ROLLBACK and rethrow on error).
   * On PostgreSQL it holds one pooled connection for the duration.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /**
   * LISTEN on `channel`; `onNotify` gets each payload. Resolves to an unlisten function.
   * `onLost` is called if the listening connection is lost (PostgreSQL restart): the
   * caller listens again when it can.
   * Both engines support it; on PGlite it only sees notifications of the same process.
   */
  listen(
    channel: string,
    onNotify: (payload: string) => void,
    onLost?: () => void,
  ): Promise<() => Promise<void>>;
  /**
   * Runs the statements of the claim path (the claim, settle-and-claim, the settle, the
   * wake-up query) with sequential and bitmap heap scans disabled (`enable_seqscan`,
   * `enable_bitmapscan` off), so each walks the index it was written for whatever the
   * statistics say: on a table made mostly of due rows (a first burst, history not yet
   * grown), estimates taken before the rows arrived made the claim's admission a full scan
   * and a sort of every due row per claim (docs/architecture.md, "One admission predicate").
   * On PostgreSQL a second small pool whose connections set them when they open; on
   * PGlite each statement in a transaction with `SET LOCAL`. Optional: a database without
   * it runs them through {@link Queryable.query} as written.
   */
  readonly pinned?: Queryable;
  /** Closes connections (and releases the embedded data folder). Idempotent. */
  close(): Promise<void>;
}

/**
 * Planner settings of {@link Database.pinned}: the claim path's statements are written
 * for index scans (an ordered walk of the claim index, rows by primary key), and with
 * these off no estimate can turn them into a scan of the table.
 */
export const PINNED_SETTINGS = { enable_seqscan: "off", enable_bitmapscan: "off" } as const;

/**
 * The `SET LOCAL` of a {@link TransactionOptions.lockTimeoutMs}, or "" when there is none.
 * A whole number of ms, so the text carries no value from outside.
 */
export function lockTimeoutSql(options?: TransactionOptions): string {
  const ms = options?.lockTimeoutMs;
  if (ms === undefined || ms <= 0) return "";
  return `set local lock_timeout = ${Math.max(1, Math.round(ms))}`;
}

/** The pinned runner of `q` when it has one ({@link Database.pinned}), else `q` itself. */
export function pinnedOf(q: Queryable): Queryable {
  return (q as Partial<Pick<Database, "pinned">>).pinned ?? q;
}
