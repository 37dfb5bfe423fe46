/**
 * OPS-8: a process stopped inside a transaction (SIGSTOP, a frozen VM) must not keep its
 * locks for as long as its session lives. Every transaction of the PostgreSQL pool carries
 * an idle limit (`idle_in_transaction_session_timeout`, set local), so the server ends a
 * session that sits idle in one and its locks are free for the other processes; the
 * import lock, whose transaction idles by design, is exempt.
 */
import { describe, expect } from "vitest";
import { withImportLock } from "../../src/store/import-lock.js";
import { openPostgres } from "../../src/store/postgres.js";
import { itIfPostgres, openTestDatabase } from "../support/db.js";

/** Polls `probe` on the server (50 ms apart, server-side) until it is true; false after `tries`. */
async function eventually(
  db: ReturnType<typeof openPostgres>,
  probe: string,
  tries = 200,
): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    const { rows } = await db.query<{ ok: boolean }>(`select (${probe}) as ok`);
    if (rows[0]?.ok) return true;
    await db.query("select pg_sleep(0.05)");
  }
  return false;
}

const LOCK = "pg_try_advisory_lock(hashtext('punctual.test.idle'))";
const FREE = `(select ${LOCK}) and pg_advisory_unlock(hashtext('punctual.test.idle'))`;

describe("transactions idle past their limit (OPS-8)", () => {
  itIfPostgres(
    "OPS-8: a transaction left idle past the limit has its session ended by the server, and its advisory lock is free for another process",
    async () => {
      const handle = await openTestDatabase();
      const stalled = openPostgres({ url: handle.url!, idleInTransactionTimeoutMs: 300 });
      const other = openPostgres({ url: handle.url! });
      try {
        let resume!: () => void;
        const paused = new Promise<void>((resolve) => (resume = resolve));
        let holding!: () => void;
        const held = new Promise<void>((resolve) => (holding = resolve));
        // The "stalled process": takes a transaction-scoped lock, then stops between
        // statements (it waits on a promise only the test resolves).
        const tx = stalled.transaction(async (q) => {
          await q.query("select pg_advisory_xact_lock(hashtext('punctual.test.idle'))");
          holding();
          await paused;
          await q.query("select 1");
        });
        const outcome = tx.then(
          () => "committed",
          (err: Error) => err.message,
        );
        await held;
        // While it holds the lock, another process cannot take it...
        const { rows } = await other.query<{ got: boolean }>(`select ${LOCK} as got`);
        expect(rows[0]?.got).toBe(false);
        // ...until the server ends the idle session: then the lock is free.
        expect(await eventually(other, FREE)).toBe(true);
        resume();
        // The stalled transaction learns it was ended; nothing of it committed.
        expect(await outcome).not.toBe("committed");
      } finally {
        await Promise.all([stalled.close(), other.close()]);
      }
    },
    60_000,
  );

  itIfPostgres(
    "OPS-8: the import lock's transaction, idle by design while the import writes elsewhere, is not ended by the limit",
    async () => {
      const handle = await openTestDatabase();
      const db = openPostgres({ url: handle.url!, idleInTransactionTimeoutMs: 200 });
      try {
        const result = await withImportLock(db, "default", "idle-limit-test", async () => {
          // The import's own work, on other connections, for several times the limit.
          await db.query("select pg_sleep(1)");
          return "imported";
        });
        expect(result).toBe("imported");
      } finally {
        await db.close();
      }
    },
    60_000,
  );
});
