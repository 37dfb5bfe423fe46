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

/** Something that runs parameterized SQL: the database itself or an open transaction. */
export interface Queryable {
  /** Runs one statement with `$1…$n` parameters. Never interpolate values into `sql`. */
  query<T = Record<string, unknown>>(
    sql: string,
    params?: readonly unknown[],
  ): Promise<QueryResult<T>>;
}

/** Which engine is behind a {@link Database}. */
export type Engine = "pglite" | "postgres";

export interface Database extends Queryable {
  readonly engine: Engine;
  /** A human description without secrets: the data folder, or host/port/database. */
  readonly description: string;
  /**
   * Runs `fn` in a transaction (BEGIN … COMMIT; ROLLBACK and rethrow on error).
   * On PostgreSQL it holds one pooled connection for the duration.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
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
  /** Closes connections (and releases the embedded data folder). Idempotent. */
  close(): Promise<void>;
}
