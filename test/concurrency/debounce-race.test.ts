/**
 * DEL-18 under DEL-8: a burst of debounced upserts of one record, sent concurrently to two
 * server processes (each also running the scheduler) on one PostgreSQL, sends exactly one
 * webhook: concurrent first upserts make one schedule, each later one moves the one
 * waiting delivery, and nothing is sent while the burst goes on.
 */
import { afterEach, describe, expect, it } from "vitest";
import { hasPostgres } from "../support/db.js";
import { raceSetup, startServer, until } from "../support/processes.js";

const needs = hasPostgres()
  ? ""
  : " (skipped: needs PostgreSQL — DATABASE_URL or PostgreSQL binaries)";
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("debounced upserts racing", () => {
  it.skipIf(!hasPostgres())(
    `DEL-18: a burst of concurrent upserts on two servers sends one webhook, once${needs}`,
    async () => {
      const { lib, url, receiver, workers } = await raceSetup(cleanups);
      const servers = await Promise.all([startServer(url, workers), startServer(url, workers)]);
      // A window far longer than one round of requests on a loaded machine, so the burst
      // never pauses long enough to end; the cap far beyond the burst.
      const body = (round: number) =>
        JSON.stringify({
          payload: { round },
          debounce: { windowMs: 5_000, maxDelayMs: 60_000 },
          reminders: [
            {
              key: "r",
              offset: "PT0S",
              channel: "webhook",
              target: { url: receiver.url },
              delivery: "at-most-once",
            },
          ],
        });
      const rounds = 6;
      for (let r = 0; r < rounds; r++) {
        const replies = await Promise.all(
          servers.flatMap((server, i) =>
            [0, 1].map((k) =>
              fetch(`${server}/v1/schedules/by-external-id/helpdesk/ticket-7`, {
                method: "PUT",
                headers: { "content-type": "application/json" },
                body: body(r * 4 + i * 2 + k),
              }).then((res) => res.status),
            ),
          ),
        );
        expect(replies.filter((s) => s !== 200 && s !== 201)).toEqual([]);
        expect(receiver.counts.size).toBe(0);
      }
      const { items } = await lib.listSchedules({ source: "helpdesk" });
      expect(items).toHaveLength(1);
      await receiver.waitFor(() => receiver.counts.size >= 1, "the burst's one send");
      // Every waiting row settled: nothing more will be sent.
      const settled = async () => {
        const { rows } = await lib.db.query<{ waiting: number }>(
          `select count(*)::int as waiting from punctual_deliveries
           where state in ('pending', 'retry', 'claimed')`,
        );
        return rows[0]!.waiting === 0;
      };
      await until(settled, "every delivery settled");
      expect([...receiver.counts.values()]).toEqual([1]);
      const { rows } = await lib.db.query<{ state: string; n: number }>(
        `select state, count(*)::int as n from punctual_deliveries group by state order by state`,
      );
      // One sent; the others were moved (realigned) before they were due.
      expect(rows.find((x) => x.state === "sent")?.n).toBe(1);
      expect(rows.filter((x) => x.state !== "sent" && x.state !== "cancelled")).toEqual([]);
    },
  );
});
