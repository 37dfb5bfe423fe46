/**
 * DEL-9 under DEL-8: edits that remove and restore occurrences race with real worker
 * processes claiming them. A row a worker has claimed is never deleted or re-created by
 * an edit, so no delivery key reaches the receiver twice. And edits race each other:
 * concurrent PATCHes without If-Match, sent to two server processes, each apply to the
 * version current under the row lock, so none reverts another.
 */
import { afterEach, describe, expect, it } from "vitest";
import { hasPostgres } from "../support/db.js";
import { exited, raceSetup, startServer, startWorker, until } from "../support/processes.js";

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
      // Every occurrence is due by now. An edit takes effect from its own time (DEL-9): an
      // RDATE restored after it was due is not created again, so which RDATE deliveries
      // exist depends on the race; DTSTART's 40 are never removed. Wait until none is
      // waiting or in flight.
      await until(async () => {
        const { rows } = await lib.db.query<{ sent: number; waiting: number }>(
          `select count(*) filter (where state = 'sent') as sent,
                  count(*) filter (where state in ('pending', 'retry', 'claimed')) as waiting
           from punctual_deliveries`,
        );
        return Number(rows[0]!.sent) >= 40 && Number(rows[0]!.waiting) === 0;
      }, "every delivery settled");
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

  it.skipIf(!hasPostgres())(
    `DEL-9: concurrent PATCHes without If-Match on two servers each change one field, and none is lost${needs}`,
    async () => {
      const { lib, url, workers } = await raceSetup(cleanups);
      const servers = await Promise.all([startServer(url, workers), startServer(url, workers)]);
      const day = (n: number) => new Date(Date.UTC(2030, 0, 1 + n, 9)).toISOString();
      const created = await lib.createSchedule({
        dtstart: "2030-01-01T09:00:00",
        rrule: "FREQ=DAILY",
        reminders: [{ channel: "log" }],
      });
      const id = created.schedule.id;
      // One field per PATCH; each round's value differs from the round before, so an
      // edit reverted by another shows as a field still at its previous value.
      const edits = (r: number): Array<Record<string, unknown>> => [
        { graceMs: 60_000 + r },
        { misfire: r % 2 === 0 ? "latest" : "all" },
        { payload: { round: r } },
        { exdate: [day(1 + r).slice(0, 19)] },
        { rdate: [day(1 + r).slice(0, 11) + "21:00:00"] },
        { endsAt: day(300 + r) },
        { expiresAt: day(400 + r) },
        {
          dst:
            r % 2 === 0 ? { gap: "skip", overlap: "later" } : { gap: "shift", overlap: "earlier" },
        },
      ];
      const rounds = 3;
      for (let r = 0; r < rounds; r++) {
        const replies = await Promise.all(
          edits(r).map((body, i) =>
            fetch(`${servers[i % 2]}/v1/schedules/${id}`, {
              method: "PATCH",
              headers: { "content-type": "application/json" },
              body: JSON.stringify(body),
            }).then(async (res) => ({ status: res.status, body: (await res.json()) as unknown })),
          ),
        );
        expect(replies.filter((x) => x.status !== 200)).toEqual([]);
        const now = await lib.getSchedule(id);
        // Every edit of the round is there, and the version counts every edit.
        expect(now).toMatchObject(Object.assign({}, ...edits(r)) as Record<string, unknown>);
        expect(now.version).toBe(created.schedule.version + edits(r).length * (r + 1));
      }
      // If-Match still refuses a version that is not the current one.
      const stale = await fetch(`${servers[0]}/v1/schedules/${id}`, {
        method: "PATCH",
        headers: {
          "content-type": "application/json",
          "if-match": `"${created.schedule.version}"`,
        },
        body: JSON.stringify({ graceMs: 1 }),
      });
      expect(stale.status).toBe(412);
    },
  );
});
