/**
 * Real worker processes racing on one PostgreSQL (DEL-8), and a worker killed with
 * SIGKILL in the middle of a send (DEL-6). A local HTTP receiver counts `webhook-id`s.
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

describe("worker processes on PostgreSQL", () => {
  it.skipIf(!hasPostgres())(
    `DEL-8: three worker processes racing over 1,000 due deliveries send each exactly once${needs}`,
    async () => {
      const { lib, url, receiver, workers } = await raceSetup(cleanups);
      const due = new Date(Date.now() - 1_000).toISOString();
      // 1,000 deliveries: 250 schedules × 4 reminders, all due now.
      for (let i = 0; i < 250; i++) {
        await lib.createSchedule({
          dtstart: due,
          tzid: "UTC",
          payload: { i },
          reminders: ["a", "b", "c", "d"].map((key) => ({
            key,
            offset: "PT0S",
            channel: "webhook",
            target: { url: receiver.url },
          })),
        });
      }
      for (let i = 0; i < 3; i++) workers.push(startWorker(url, { PUNCTUAL_CONCURRENCY: "25" }));
      await receiver.waitFor(() => receiver.counts.size >= 1_000, "1,000 distinct webhook-ids");
      // Let any straggler that would be a duplicate arrive, then stop the workers cleanly.
      for (const w of workers) w.kill("SIGTERM");
      expect(await Promise.all(workers.map(exited))).toEqual([0, 0, 0]);
      const duplicates = [...receiver.counts.entries()].filter(([, n]) => n !== 1);
      expect(duplicates).toEqual([]);
      expect(receiver.counts.size).toBe(1_000);
      // One attempt per delivery, all sent. (Which worker sent what is up to the race.)
      const { rows } = await lib.db.query<{ state: string; n: number }>(
        `select d.state, count(*) as n
         from punctual_deliveries d join punctual_delivery_attempts a on a.delivery_id = d.id group by d.state`,
      );
      expect(rows).toEqual([expect.objectContaining({ state: "sent", n: 1_000 })]);
    },
  );

  it.skipIf(!hasPostgres())(
    `DEL-6: kill -9 of a worker mid-send leads to a retry with the same key (webhook, idempotent) after the lease, never a silent resend${needs}`,
    async () => {
      const { lib, url, receiver, workers } = await raceSetup(cleanups);
      const { schedule } = await lib.createSchedule({
        dtstart: new Date(Date.now() - 1_000).toISOString(),
        tzid: "UTC",
        reminders: [
          { key: "idem", offset: "PT0S", channel: "webhook", target: { url: receiver.url } },
          {
            key: "once",
            offset: "PT0S",
            channel: "webhook",
            target: { url: receiver.url },
            delivery: "at-most-once",
          },
        ],
      });
      receiver.onRequest = () => false; // hold every request: the worker is mid-send
      // The lease is long next to a worker's start-up, so the rescuer below is running
      // well before the victim's lease ends: a recovery that did not wait for the lease
      // would show as a lost try shorter than the lease. The victim's send timeout is
      // long too: it is killed mid-send, never timed out.
      const leaseEnv = {
        PUNCTUAL_LEASE_MS: "20000",
        PUNCTUAL_SEND_TIMEOUT_MS: "2000",
        PUNCTUAL_POLL_MS: "200",
      };
      const victim = startWorker(url, { ...leaseEnv, PUNCTUAL_SEND_TIMEOUT_MS: "18000" });
      workers.push(victim);
      await receiver.waitFor(() => receiver.held.length >= 2, "both sends held open");
      victim.kill("SIGKILL");
      await exited(victim);
      for (const res of receiver.held.splice(0)) res.destroy();
      receiver.onRequest = () => true;
      workers.push(startWorker(url, leaseEnv));
      const settled = async () => {
        const { rows } = await lib.db.query<{ reminder_key: string; state: string }>(
          "select reminder_key, state from punctual_deliveries where schedule_id = $1 order by reminder_key",
          [schedule.id],
        );
        return rows;
      };
      let rows = await settled();
      await until(async () => {
        rows = await settled();
        return rows[0]?.state === "sent" && rows[1]?.state === "in_doubt";
      }, "idem sent again and once in doubt");
      expect(rows).toEqual([
        { reminder_key: "idem", state: "sent" },
        { reminder_key: "once", state: "in_doubt" },
      ]);
      const deliveriesBySchedule = (await lib.listDeliveries({ scheduleId: schedule.id })).items;
      const idem = deliveriesBySchedule.find((d) => d.reminderKey === "idem")!;
      const once = deliveriesBySchedule.find((d) => d.reminderKey === "once")!;
      // The idempotent one was sent again with the same webhook-id; the other never again.
      expect(receiver.counts.get(idem.deliveryKey)).toBe(2);
      expect(receiver.counts.get(once.deliveryKey)).toBe(1);
      const idemAttempts = (await lib.getDelivery(idem.id)).attempts;
      expect(idemAttempts.map((a) => a.outcome)).toEqual(["lease_expired", "sent"]);
      // Recovered only once the lease had run out: the lost try spans at least the lease
      // (claim → recovery, both stamped by the store). How soon after is a benchmark.
      const lost = idemAttempts[0]!;
      expect(Date.parse(lost.endedAt) - Date.parse(lost.startedAt)).toBeGreaterThanOrEqual(
        Number(leaseEnv.PUNCTUAL_LEASE_MS),
      );
      expect(Date.parse(idemAttempts[1]!.startedAt)).toBeGreaterThanOrEqual(
        Date.parse(lost.endedAt),
      );
    },
  );
});
