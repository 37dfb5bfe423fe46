/**
 * The lock that serialises imports of one calendar source (API-5, DEL-10): two imports of
 * the same (tenant, source) at once — two API processes, the API and the periodic calendar
 * task, or the CLI's server and another — would both see an event as new and both create
 * it, or one would cancel what the other just created.
 *
 * On PostgreSQL a transaction-scoped advisory lock, `pg_advisory_xact_lock(k1, k2)` with
 * k1 = hashtext('punctual.import') and k2 = hashtext(tenant, newline, source), held on one
 * pooled connection for the whole import and released by its COMMIT (or by the server when
 * the connection dies, so a killed importer never leaves it held). The two-key form lives
 * in another key space than the migrator's one-key lock. Two sources whose hashes collide
 * only wait for each other.
 *
 * On PGlite one process owns the data folder (see lock.ts), so an in-process queue per
 * key is the whole lock; the PostgreSQL path takes it too, so imports in one process
 * queue here instead of each holding a pooled connection while it waits.
 */
import type { Database } from "./database.js";

/** Tail of the in-process queue per (tenant, source) key. */
const queues = new Map<string, Promise<unknown>>();

/** Runs `fn` after every earlier call with the same key in this process has settled. */
async function queued<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const before = queues.get(key) ?? Promise.resolve();
  const run = before.then(fn, fn);
  const tail = run.catch(() => undefined);
  queues.set(key, tail);
  try {
    return await run;
  } finally {
    if (queues.get(key) === tail) queues.delete(key);
  }
}

/**
 * Runs `fn` holding the import lock of (`tenant`, `source`), across processes on
 * PostgreSQL (see the module comment). `fn` does its own writes through `db` as usual;
 * the lock holds one extra pooled connection (idle in a transaction) while it runs, so a
 * pool needs at least two connections.
 * @throws whatever `fn` throws, after the lock is released.
 */
export async function withImportLock<T>(
  db: Database,
  tenant: string,
  source: string,
  fn: () => Promise<T>,
): Promise<T> {
  const key = `${tenant}\n${source}`;
  return queued(key, async () => {
    if (db.engine !== "postgres") return fn();
    return db.transaction(async (tx) => {
      // This transaction idles by design while the import writes on other connections
      // (minutes for a large calendar): it is exempt from the idle limit every other
      // transaction has (IDLE_IN_TRANSACTION_TIMEOUT_MS). A killed importer's session
      // still ends with its connection, releasing the lock.
      await tx.query("set local idle_in_transaction_session_timeout = 0");
      // The lock itself waits as long as the other import of this source runs, by design
      // (imports of one source queue, API-5): exempt from the request path's lock timeout
      // (./lock-timeout.ts), which `db` may carry. Only imports of the same source wait here.
      await tx.query("set local lock_timeout = 0");
      await tx.query(
        "select pg_advisory_xact_lock(hashtext('punctual.import'), hashtext($1::text))",
        [key],
      );
      return fn();
    });
  });
}
