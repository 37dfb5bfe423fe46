/**
 * DEL-13: two real worker processes on one PostgreSQL share one token bucket. The bucket
 * barely refills (0.001 token/s) and holds 6 tokens, so however the two race, 6 deliveries
 * are sent in all, not 6 each; the other 24 wait, unsent and unclaimed. The wait is on
 * both workers having finished passes after the sends (their heartbeats in the database),
 * never on elapsed time.
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

describe("shared rate limits across worker processes", () => {
  it.skipIf(!hasPostgres())(
    `DEL-13: two worker processes on PostgreSQL spend one shared bucket: 6 tokens, 6 sends in all${needs}`,
    async () => {
      const { lib, url, receiver, workers } = await raceSetup(cleanups);
      await lib.setRateLimit("webhook", { ratePerSecond: 0.001, burst: 6 });
      const due = new Date(Date.now() - 1_000).toISOString();
      await lib.createSchedule({
        dtstart: due,
        tzid: "UTC",
        reminders: Array.from({ length: 30 }, (_, i) => ({
          key: `r${i}`,
          offset: "PT0S",
          channel: "webhook",
          target: { url: receiver.url },
        })),
      });
      for (let i = 0; i < 2; i++) {
        workers.push(startWorker(url, { PUNCTUAL_CONCURRENCY: "10", PUNCTUAL_POLL_MS: "100" }));
      }
      await receiver.waitFor(() => receiver.counts.size >= 6, "6 sends");
      // Both workers finish three more passes after the sixth send: each had its chance to
      // claim (the limit was loaded by their first pass), so a per-process bucket shows here.
      const passes = async () =>
        (
          await lib.db.query<{ id: string; last_pass_at: Date | null }>(
            "select id, last_pass_at from punctual_instances where stopped_at is null",
          )
        ).rows;
      const mark = new Map((await passes()).map((r) => [r.id, r.last_pass_at?.getTime() ?? 0]));
      let seen = 0;
      await until(async () => {
        const now = await passes();
        if (now.length < 2) return false;
        const moved = now.every((r) => (r.last_pass_at?.getTime() ?? 0) > (mark.get(r.id) ?? 0));
        if (moved) {
          seen++;
          for (const r of now) mark.set(r.id, r.last_pass_at?.getTime() ?? 0);
        }
        return seen >= 3;
      }, "three passes of both workers");
      for (const w of workers) w.kill("SIGTERM");
      expect(await Promise.all(workers.map(exited))).toEqual([0, 0]);
      expect(receiver.counts.size).toBe(6);
      const { rows } = await lib.db.query<{ state: string; n: number }>(
        "select state, count(*)::int as n from punctual_deliveries group by state order by state",
      );
      expect(rows).toEqual([
        { state: "pending", n: 24 },
        { state: "sent", n: 6 },
      ]);
    },
  );
});
