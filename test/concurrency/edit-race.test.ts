/**
 * DEL-9 under DEL-8: edits that remove and restore occurrences race with real worker
 * processes claiming them. A row a worker has claimed is never deleted or re-created by
 * an edit, so no delivery key reaches the receiver twice.
 */
import { afterEach, describe, expect, it } from "vitest";
import { hasPostgres } from "../support/db.js";
import { exited, raceSetup, startWorker, until } from "../support/processes.js";

const needs = hasPostgres()
  ? ""
  : " (skipped: needs PostgreSQL — DATABASE_URL or PostgreSQL binaries)";
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("edits racing claims", () => {
  it.skipIf(!hasPostgres())(
    `DEL-9: toggling a schedule's RDATEs while three workers claim never sends a delivery twice${needs}`,
    async () => {
      const { lib, url, receiver, workers } = await raceSetup(cleanups);
      const start = Math.ceil(Date.now() / 1000) * 1000 + 2_000;
      const rdates = Array.from({ length: 8 }, (_, i) =>
        new Date(start + (i + 1) * 1_000).toISOString().replace(".000", ""),
      );
      const reminders = Array.from({ length: 40 }, (_, i) => ({
        key: `r${i}`,
        offset: "PT0S",
        channel: "webhook",
        target: { url: receiver.url },
        delivery: "at-most-once" as const,
      }));
      const created = await lib.createSchedule({
        dtstart: new Date(start).toISOString().replace(".000", ""),
        rdate: rdates,
        reminders,
      });
      for (let i = 0; i < 3; i++) workers.push(startWorker(url, { PUNCTUAL_POLL_MS: "100" }));
      // Toggle the RDATEs off and on until every occurrence is due, then leave them on.
      let version = created.schedule.version;
      let on = true;
      while (Date.now() < start + 10_000) {
        on = !on;
        const res = await lib.updateSchedule(
          created.schedule.id,
          { rdate: on ? rdates : [] },
          { version },
        );
        version = res.schedule.version;
      }
      if (!on) await lib.updateSchedule(created.schedule.id, { rdate: rdates }, { version });
      // Every occurrence is due by now: wait until each of the 9 × 40 deliveries has its
      // row again and none is waiting or in flight.
      await until(async () => {
        const { rows } = await lib.db.query<{ keys: number; waiting: number }>(
          `select count(distinct delivery_key) as keys,
                  count(*) filter (where state in ('pending', 'retry', 'claimed')) as waiting
           from punctual_deliveries`,
        );
        return rows[0]!.keys === 9 * 40 && rows[0]!.waiting === 0;
      }, "all 360 deliveries settled");
      for (const w of workers) w.kill("SIGTERM");
      await Promise.all(workers.map(exited));
      const twice = [...receiver.counts.entries()].filter(([, n]) => n > 1);
      expect(twice).toEqual([]);
      // Every delivery ended sent or, where a removal cancelled a tried row, recorded.
      const { rows } = await lib.db.query<{ sent: number; attempts: number }>(
        `select count(*) filter (where state = 'sent') as sent,
                (select count(*) from punctual_delivery_attempts where outcome = 'sent' and settled) as attempts
         from punctual_deliveries`,
      );
      expect(rows[0]!.sent).toBe(receiver.counts.size);
      expect(rows[0]!.attempts).toBe(receiver.counts.size);
    },
  );
});
