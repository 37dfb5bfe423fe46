/**
 * DEL-13: a rate limit's concurrency cap holds across processes. Two claimers on two
 * connections of one PostgreSQL server: while one holds the bucket's lock and claims, the
 * other waits for the lock; once it has it, it must count the claim just committed.
 */
import { describe, expect } from "vitest";
import { createPunctual } from "../../src/app/punctual.js";
import { openPostgres } from "../../src/store/postgres.js";
import { CLAIM_LIMITED_SQL, claimLimited, upsertRateLimit } from "../../src/store/rate-limits.js";
import { itIfPostgres, openTestDatabase } from "../support/db.js";

describe("concurrency cap across connections (DEL-13)", () => {
  itIfPostgres(
    "DEL-13: a claimer that waited for the bucket's lock counts the rows its holder claimed meanwhile: the cap is shared, not per process",
    async () => {
      const handle = await openTestDatabase();
      const punctual = await createPunctual({ databaseUrl: handle.url!, logLevel: "silent" });
      const a = openPostgres({ url: handle.url! });
      const b = openPostgres({ url: handle.url! });
      try {
        await upsertRateLimit(punctual.db, null, {
          tenant: "default",
          key: "k",
          ratePerSecond: 1_000,
          burst: 1_000,
          concurrency: 1,
        });
        await punctual.createSchedule({
          dtstart: new Date(Date.now() - 1_000).toISOString(),
          tzid: "UTC",
          reminders: [
            { key: "one", offset: "PT0S", channel: "log", rateLimitKey: "k" },
            { key: "two", offset: "PT0S", channel: "log", rateLimitKey: "k" },
          ],
        });
        let release!: () => void;
        const held = new Promise<void>((resolve) => (release = resolve));
        let waiting: Promise<Awaited<ReturnType<typeof claimLimited>>> | null = null;
        // Holder: locks the bucket and claims one row (the cap), then commits once the
        // other claimer is waiting for the lock.
        const holder = a.transaction(async (tx) => {
          await tx.query(
            "select 1 from punctual_rate_limits where tenant = 'default' and key = 'k' for update",
          );
          const claimed = await tx.query(CLAIM_LIMITED_SQL, [
            null,
            "holder",
            60_000,
            1,
            ["log"],
            "default",
            "k",
            "default/k",
          ]);
          expect(claimed.rows).toHaveLength(1);
          waiting = claimLimited(b, {
            now: null,
            owner: "waiter",
            leaseMs: 60_000,
            limit: 10,
            channels: ["log"],
            tenant: "default",
            key: "k",
          });
          await held;
        });
        // Bounded poll until the second claimer's statement waits on the lock.
        let blocked = 0;
        for (let i = 0; i < 400 && blocked === 0; i++) {
          const { rows } = await punctual.db.query<{ n: number }>(
            `select count(*)::int as n from pg_stat_activity
             where wait_event_type = 'Lock' and datname = current_database()`,
          );
          blocked = rows[0]!.n;
          if (blocked === 0) await new Promise((r) => setTimeout(r, 10)); // bounded poll, not a timing assertion
        }
        expect(blocked).toBe(1);
        release();
        await holder;
        const second = await waiting!;
        // Without the separate count it saw busy = 0 and claimed the second row.
        expect(second.bucket?.busy).toBe(1);
        expect(second.rows).toHaveLength(0);
      } finally {
        await a.close();
        await b.close();
        await punctual.close();
        await handle.close();
      }
    },
  );
});
