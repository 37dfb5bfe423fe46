/**
 * OPS-8: losing the database connection in the middle of a transaction is an error for
 * that transaction, never the end of the process; the next transaction works.
 */
import { describe, expect, it } from "vitest";
import { openPostgres } from "../../src/store/postgres.js";
import { hasPostgres, openTestDatabase } from "../support/db.js";

const why = hasPostgres() ? "" : " (skipped: needs PostgreSQL — DATABASE_URL)";

describe("connection loss", () => {
  it.skipIf(!hasPostgres())(
    `OPS-8: a connection terminated mid-transaction rejects that transaction and the pool goes on${why}`,
    async () => {
      const handle = await openTestDatabase();
      const errors: Error[] = [];
      const db = openPostgres({ url: handle.url!, onError: (err) => errors.push(err) });
      try {
        const running = db.transaction(async (tx) => {
          await tx.query("select pg_sleep(30)");
        });
        // Kill that backend from another connection once it is sleeping.
        let killed = 0;
        for (let i = 0; i < 200 && killed === 0; i++) {
          const { rows } = await handle.db.query<{ n: number }>(
            `select count(pg_terminate_backend(pid)) as n from pg_stat_activity
             where query like 'select pg_sleep(30)%' and pid <> pg_backend_pid()`,
          );
          killed = rows[0]!.n;
          if (killed === 0) await new Promise((r) => setTimeout(r, 25)); // polls for the backend, bounded
        }
        expect(killed).toBe(1);
        await expect(running).rejects.toThrow();
        const { rows } = await db.query<{ ok: number }>("select 1 as ok");
        expect(rows[0]!.ok).toBe(1);
      } finally {
        await db.close();
        await handle.close();
      }
    },
  );
});
