/**
 * Server engine: PostgreSQL through a `pg` pool. Any number of processes on any number
 * of hosts may share one database (DEL-8).
 */
import pg from "pg";
import {
  PINNED_SETTINGS,
  lockTimeoutSql,
  type Database,
  type Queryable,
  type QueryOptions,
  type QueryResult,
  type TransactionOptions,
} from "./database.js";
import { timestamptzParser } from "./timestamps.js";

/** pg's own typing of getTypeParser is overloaded; the cast keeps its default parsers. */
const stockParser = pg.types.getTypeParser as (
  oid: number,
  format?: string,
) => (value: string) => unknown;

/** OIDs of int8 and timestamptz. */
const INT8 = 20;
const TIMESTAMPTZ = 1184;

/**
 * timestamptz → Date through a fast path for the ISO text the server sends, the stock
 * parser for anything else (`infinity`, BC years: src/store/timestamps.ts).
 */
const parseTimestamptz = timestamptzParser(stockParser(TIMESTAMPTZ, "text"));

/**
 * int8 → number (as on PGlite); timestamptz → Date as pg's default parser makes it, read
 * faster ({@link parseTimestamptz}); everything else keeps pg's defaults.
 */
const types = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === INT8) return (value: string) => Number(value);
    if (oid === TIMESTAMPTZ && format !== "binary") return parseTimestamptz;
    return stockParser(oid, format);
  },
};

export interface PostgresOptions {
  /** `postgres://user:pass@host:port/db` */
  url: string;
  /** Pool size; default 10. */
  maxConnections?: number;
  /** Called for errors of idle clients (a server restart): logged, never thrown. */
  onError?: (err: Error) => void;
  /**
   * How long a transaction of this pool may sit idle between its statements before the
   * server ends its session, ms; default {@link IDLE_IN_TRANSACTION_TIMEOUT_MS}.
   */
  idleInTransactionTimeoutMs?: number;
}

/**
 * OPS-8: the longest a transaction may sit idle between two of its statements, ms (set per
 * transaction as PostgreSQL's `idle_in_transaction_session_timeout`). A process stopped in the
 * middle of a transaction (SIGSTOP, a frozen VM, a partition the TCP stack has not noticed)
 * would otherwise keep its locks, row locks and advisory locks alike, for as long as its
 * session lives (hours with default keepalives), and every other process needing them
 * would wait: the server ends such a session after this long, its transaction rolls back and
 * its locks are free. No transaction of punctual waits on anything but its own statements
 * and a little computation between them (sends never run inside one), so a minute is far
 * beyond any legitimate pause, even on a loaded machine.
 */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000;

/** Host, port and database of a URL, without credentials, for logs. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `PostgreSQL ${u.hostname || u.searchParams.get("host") || "localhost"}:${u.port || 5432}${u.pathname}`;
  } catch {
    return "PostgreSQL (unparseable URL)";
  }
}

/** Opens a pool. Connections are made lazily; the first query proves reachability. */
export function openPostgres(options: PostgresOptions): Database & { pool: pg.Pool } {
  const idleInTransactionMs = Math.max(
    1,
    Math.round(options.idleInTransactionTimeoutMs ?? IDLE_IN_TRANSACTION_TIMEOUT_MS),
  );
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.maxConnections ?? 10,
    types,
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    application_name: "punctual",
  });
  pool.on("error", (err) => options.onError?.(err));
  // Database.pinned: the claim path on connections that carry its planner settings. Few
  // connections suffice (a producer keeps one or two statements in flight); none is opened
  // until a claim runs. The settings are SET on each new connection rather than passed as
  // startup `options`, which connection poolers (PgBouncer) refuse outright.
  const pinnedPool = new pg.Pool({
    connectionString: options.url,
    max: Math.min(4, options.maxConnections ?? 10),
    types,
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    application_name: "punctual",
  });
  const pinnedSet = Object.entries(PINNED_SETTINGS)
    .map(([name, value]) => `set ${name} = ${value}`)
    .join("; ");
  pinnedPool.on("error", (err) => options.onError?.(err));
  /** Connections of the pinned pool that have run {@link pinnedSet}. */
  const pinnedReady = new WeakSet<pg.PoolClient>();
  /**
   * Runs `fn` on a connection checked out of `from`, released after; a connection whose
   * statement failed is not reused (a reset may have left it unusable).
   */
  const checkedOut = async <R>(
    from: pg.Pool,
    fn: (client: pg.PoolClient) => Promise<R>,
  ): Promise<R> => {
    const client = await from.connect();
    // A checked-out client has no pool error listener (see transaction below).
    const onClientError = (err: Error) => options.onError?.(err);
    client.on("error", onClientError);
    try {
      const result = await fn(client);
      client.off("error", onClientError);
      client.release();
      return result;
    } catch (err) {
      client.off("error", onClientError);
      client.release(err as Error);
      throw err;
    }
  };
  const runPinned = <T>(sql: string, params?: readonly unknown[], queryOptions?: QueryOptions) =>
    checkedOut(pinnedPool, async (client) => {
      if (!pinnedReady.has(client)) {
        await client.query(pinnedSet);
        pinnedReady.add(client);
      }
      queryOptions?.onSent?.();
      return run<T>(client, sql, params);
    });
  let closed = false;
  const run = async <T>(
    client: pg.Pool | pg.PoolClient,
    sql: string,
    params: readonly unknown[] = [],
  ) => {
    const result = await client.query(sql, params as unknown[]);
    return {
      rows: result.rows as T[],
      rowCount: result.rowCount ?? result.rows.length,
      fields: (result.fields ?? []).map((f) => f.name),
    } satisfies QueryResult<T>;
  };
  return {
    engine: "postgres",
    description: describeUrl(options.url),
    pool,
    query: (sql, params, queryOptions) => {
      const onSent = queryOptions?.onSent;
      if (!onSent) return run(pool, sql, params);
      // DEL-16: the caller wants the moment the statement leaves, not the wait for a connection.
      return checkedOut(pool, (client) => {
        onSent();
        return run(client, sql, params);
      });
    },
    pinned: { query: (sql, params, queryOptions) => runPinned(sql, params, queryOptions) },
    async transaction<T>(
      fn: (tx: Queryable) => Promise<T>,
      transactionOptions?: TransactionOptions,
    ): Promise<T> {
      const lockTimeout = lockTimeoutSql(transactionOptions);
      const client = await pool.connect();
      // A checked-out client has no pool error listener: without this one a connection
      // lost mid-transaction (server restart, pg_terminate_backend) would be an unhandled
      // 'error' event and end the process (OPS-8). The failed query rejects on its own.
      const onClientError = (err: Error) => options.onError?.(err);
      client.on("error", onClientError);
      try {
        // Local to this transaction: the session keeps no setting (poolers such as
        // PgBouncer hand sessions around), and autocommit statements are not concerned.
        // The lock timeout, when asked for, rides in the same round trip.
        await client.query(
          `begin; set local idle_in_transaction_session_timeout = ${idleInTransactionMs}` +
            (lockTimeout ? `; ${lockTimeout}` : ""),
        );
        const result = await fn({ query: (sql, params) => run(client, sql, params) });
        await client.query("commit");
        client.off("error", onClientError);
        client.release();
        return result;
      } catch (err) {
        try {
          await client.query("rollback");
          client.off("error", onClientError);
          client.release();
        } catch (rollbackErr) {
          client.off("error", onClientError);
          client.release(rollbackErr as Error);
        }
        throw err;
      }
    },
    async listen(channel, onNotify, onLost) {
      if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`bad channel name ${channel}`);
      const client = await pool.connect();
      const handler = (msg: pg.Notification) => {
        if (msg.channel === channel) onNotify(msg.payload ?? "");
      };
      client.on("notification", handler);
      let dropped = false;
      client.on("error", (err) => {
        if (dropped) return;
        dropped = true;
        options.onError?.(err);
        client.off("notification", handler);
        client.release(true);
        onLost?.();
      });
      await client.query(`listen ${channel}`);
      return async () => {
        if (dropped) return;
        client.off("notification", handler);
        if (closed) {
          dropped = true;
          client.release(true);
          return;
        }
        dropped = true;
        try {
          await client.query(`unlisten ${channel}`);
          client.release();
        } catch (err) {
          client.release(err as Error);
        }
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([pool.end(), pinnedPool.end()]);
    },
  };
}
