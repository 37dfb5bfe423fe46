/**
 * The delivery state machine on a real engine (PGlite or PostgreSQL, per
 * PUNCTUAL_TEST_ENGINE): claim before send, fenced settle, retries, terminal failures,
 * crash recovery, the self-healing window, cancel/pause, quarantine.
 */
import { createHmac } from "node:crypto";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { PermanentError, RateLimitedError, TransientError } from "../../src/errors/index.js";
import { deferred } from "../support/channels.js";
import {
  deliveries,
  peer,
  testPunctual,
  tickAndDrain,
  type TestPunctual,
} from "../support/punctual.js";

const T0 = "2027-01-04T08:00:00Z";
let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

function oneOff(dtstart: string, extra: Record<string, unknown> = {}) {
  return {
    dtstart,
    tzid: "UTC",
    payload: { note: "hello" },
    reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    ...extra,
  };
}

describe("delivery state machine", () => {
  it("DEL-1/DEL-2: a due delivery is claimed (lease owner, expiry, attempt 1) before its send, then sent once", async () => {
    t = await testPunctual();
    const { punctual, channel } = t;
    await punctual.createSchedule(oneOff("2027-01-04T08:00:00Z"));
    let seenDuringSend: unknown = null;
    channel.behaviour = async () => {
      seenDuringSend = (await deliveries(punctual))[0];
      return { messageId: "m-1", status: 200 };
    };
    await tickAndDrain(punctual);
    expect(seenDuringSend).toMatchObject({
      state: "claimed",
      attempt: 1,
      leaseOwner: punctual.scheduler.owner,
      leaseExpiresAt: "2027-01-04T08:01:00.000Z",
    });
    const [row] = await deliveries(punctual);
    expect(row).toMatchObject({ state: "sent", attempt: 1, failures: 0, leaseOwner: null });
    expect(channel.sends).toHaveLength(1);
    expect(channel.sends[0]!.ctx.idempotencyKey).toBe(row!.deliveryKey);
    expect(channel.sends[0]!.delivery.payload).toEqual({ note: "hello" });
    const detail = await punctual.getDelivery(row!.id);
    expect(detail.attempts).toEqual([
      expect.objectContaining({
        attempt: 1,
        outcome: "sent",
        settled: true,
        messageId: "m-1",
        status: 200,
      }),
    ]);
    // Nothing is sent twice on later ticks.
    t.clock.advance(3_600_000);
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
  });

  it("DEL-14: the attempt that sent is kept on the delivery row, the failed ones in punctual_attempts; the history shows every attempt once, in order", async () => {
    t = await testPunctual();
    const { punctual, channel, clock } = t;
    await punctual.createSchedule(oneOff(T0));
    let calls = 0;
    channel.behaviour = () => {
      calls += 1;
      if (calls === 1) throw new TransientError("503 from receiver");
      return { messageId: "m-2", status: 202 };
    };
    await tickAndDrain(punctual);
    let [row] = await deliveries(punctual);
    clock.set(row!.runAt);
    await tickAndDrain(punctual);
    [row] = await deliveries(punctual);
    expect(row).toMatchObject({ state: "sent", attempt: 2 });
    const db = punctual.db;
    const stored = await db.query<{ attempt: number; outcome: string }>(
      "select attempt, outcome from punctual_attempts where delivery_id = $1 order by id",
      [row!.id],
    );
    // Only the failure is a row of its own; the sending attempt lives on the delivery.
    expect(stored.rows).toEqual([{ attempt: 1, outcome: "transient" }]);
    const onRow = await db.query<{ sent_by: string | null; send_status: number | null }>(
      "select sent_by, send_status from punctual_deliveries where id = $1",
      [row!.id],
    );
    expect(onRow.rows[0]).toEqual({ sent_by: punctual.scheduler.owner, send_status: 202 });
    const history = (await punctual.getDelivery(row!.id)).attempts;
    expect(history.map((a) => [a.attempt, a.outcome, a.settled])).toEqual([
      [1, "transient", true],
      [2, "sent", true],
    ]);
    expect(history[1]).toMatchObject({
      worker: punctual.scheduler.owner,
      messageId: "m-2",
      status: 202,
      error: null,
      endedAt: row!.sentAt,
    });
  });

  it("DEL-14: a delivery sent by a release that records every attempt as a row shows that attempt once", async () => {
    t = await testPunctual();
    const { punctual } = t;
    await punctual.createSchedule(oneOff(T0));
    await tickAndDrain(punctual);
    const [row] = await deliveries(punctual);
    // What the previous release's settle leaves: an attempt row and none on the delivery.
    await punctual.db.query(
      `with moved as (
         update punctual_deliveries set sent_by = null, send_started_at = null, send_status = null,
                send_message_id = null where id = $1
         returning id, attempt, sent_at)
       insert into punctual_attempts (delivery_id, attempt, worker, started_at, ended_at, outcome)
       select id, attempt, 'old#1#x', sent_at, sent_at, 'sent' from moved`,
      [row!.id],
    );
    const history = (await punctual.getDelivery(row!.id)).attempts;
    expect(history.map((a) => [a.attempt, a.outcome, a.worker])).toEqual([[1, "sent", "old#1#x"]]);
  });

  it("DEL-3: nothing is claimed before its due time, for a paused schedule, or before its retry time", async () => {
    t = await testPunctual();
    const { punctual, channel, clock } = t;
    const future = await punctual.createSchedule(oneOff("2027-01-04T08:10:00Z"));
    const paused = await punctual.createSchedule(oneOff("2027-01-04T08:00:00Z"));
    await punctual.pauseSchedule(paused.schedule.id);
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(0);
    clock.set("2027-01-04T08:10:00Z");
    await tickAndDrain(punctual);
    expect(channel.keys()).toHaveLength(1);
    expect(channel.sends[0]!.delivery.scheduleId).toBe(future.schedule.id);
    // Resumed: its one-off (now 10 minutes late, within grace) goes out.
    await punctual.resumeSchedule(paused.schedule.id);
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(2);
  });

  it("DEL-2: a settle after a lost lease changes nothing and is logged", async () => {
    t = await testPunctual({ scheduler: { leaseMs: 10_000, sendTimeoutMs: 5_000 } });
    const { punctual, channel } = t;
    await punctual.createSchedule(oneOff(T0));
    const gate = deferred<{ messageId: string }>();
    channel.behaviour = () => gate.promise;
    await punctual.scheduler.tick();
    expect(channel.sends).toHaveLength(1);
    // This worker stalls (its clock stands still); another one, 11 s later, recovers the row.
    const other = await peer(t, {
      start: "2027-01-04T08:00:11Z",
      scheduler: { leaseMs: 10_000, sendTimeoutMs: 5_000 },
    });
    try {
      expect(await other.punctual.scheduler.recover()).toBe(1);
      const [recovered] = await deliveries(punctual);
      expect(recovered).toMatchObject({ state: "retry", failures: 1 });
      // The stalled send completes now: its settle is fenced out.
      gate.resolve({ messageId: "late" });
      await punctual.scheduler.drain();
      const [after] = await deliveries(punctual);
      expect(after).toMatchObject({ state: "retry", attempt: 1, failures: 1 });
      expect((await punctual.metrics.leaseLost.get()).values[0]?.value).toBe(1);
      const attempts = (await punctual.getDelivery(after!.id)).attempts;
      expect(attempts.map((a) => [a.outcome, a.settled])).toEqual(
        expect.arrayContaining([
          ["lease_expired", true],
          ["sent", false],
        ]),
      );
      expect(t.logs.some((l) => String(l.msg).includes("lease lost"))).toBe(true);
    } finally {
      await other.close();
    }
  });

  it("DEL-4: transient failures retry with backoff, one attempt per failure, then dead SEND_FAILED", async () => {
    t = await testPunctual({ scheduler: { maxAttempts: 3, backoffBaseMs: 1_000 } });
    const { punctual, channel, clock } = t;
    await punctual.createSchedule(oneOff(T0));
    channel.behaviour = () => {
      throw new TransientError("503 from receiver");
    };
    await tickAndDrain(punctual);
    let [row] = await deliveries(punctual);
    expect(row).toMatchObject({
      state: "retry",
      attempt: 1,
      failures: 1,
      lastError: "503 from receiver",
    });
    const firstRetry = Date.parse(row!.runAt) - clock.now();
    expect(firstRetry).toBeGreaterThanOrEqual(500);
    expect(firstRetry).toBeLessThanOrEqual(1_000);
    // Not before its retry time.
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    clock.set(row!.runAt);
    await tickAndDrain(punctual);
    [row] = await deliveries(punctual);
    expect(row).toMatchObject({ state: "retry", attempt: 2, failures: 2 });
    const secondRetry = Date.parse(row!.runAt) - clock.now();
    expect(secondRetry).toBeGreaterThanOrEqual(1_000);
    expect(secondRetry).toBeLessThanOrEqual(2_000);
    clock.set(row!.runAt);
    await tickAndDrain(punctual);
    [row] = await deliveries(punctual);
    expect(row).toMatchObject({ state: "dead", reason: "SEND_FAILED", attempt: 3, failures: 3 });
    expect(channel.sends).toHaveLength(3);
    const attempts = (await punctual.getDelivery(row!.id)).attempts;
    expect(attempts.map((a) => a.outcome)).toEqual(["transient", "transient", "transient"]);
    expect(t.logs.some((l) => l.level === "error" && String(l.msg).includes("SEND_FAILED"))).toBe(
      true,
    );
  });

  it("DEL-5: a permanent failure is dead at once, never retried", async () => {
    t = await testPunctual();
    const { punctual, channel, clock } = t;
    await punctual.createSchedule(oneOff(T0));
    channel.behaviour = () => {
      throw new PermanentError("404 from receiver");
    };
    await tickAndDrain(punctual);
    clock.advance(7_200_000);
    await tickAndDrain(punctual);
    const [row] = await deliveries(punctual);
    expect(row).toMatchObject({ state: "dead", reason: "PERMANENT", failures: 1 });
    expect(channel.sends).toHaveLength(1);
  });

  it("DEL-13: a rate-limited reply waits Retry-After and spends no attempt", async () => {
    t = await testPunctual({ scheduler: { maxAttempts: 2 } });
    const { punctual, channel, clock } = t;
    await punctual.createSchedule(oneOff(T0));
    channel.behaviour = (_d, _c, n) => {
      if (n <= 3) throw new RateLimitedError("429", 7_000);
      return { messageId: "ok" };
    };
    for (let i = 0; i < 3; i++) {
      await tickAndDrain(punctual);
      const [row] = await deliveries(punctual);
      expect(row).toMatchObject({ state: "retry", failures: 0 });
      expect(Date.parse(row!.runAt) - clock.now()).toBe(7_000);
      clock.set(row!.runAt);
    }
    await tickAndDrain(punctual);
    const [row] = await deliveries(punctual);
    // Four tries, three of them deferrals: one attempt spent (DEL-13).
    expect(row).toMatchObject({ state: "sent", failures: 0, attempt: 1, deferrals: 3 });
  });

  it("DEL-6: a claim whose worker died is retried with the same key on an idempotent channel", async () => {
    t = await testPunctual({ scheduler: { leaseMs: 10_000, sendTimeoutMs: 5_000 } });
    const { punctual, channel } = t;
    await punctual.createSchedule(oneOff(T0));
    channel.behaviour = () => deferred<never>().promise; // the send never returns: the worker died
    await punctual.scheduler.tick();
    const key = channel.keys()[0];
    // Lease (10 s) later, the next tick of a surviving worker recovers and resends.
    const survivor = await peer(t, {
      start: "2027-01-04T08:00:10Z",
      scheduler: { leaseMs: 10_000, sendTimeoutMs: 5_000 },
    });
    try {
      await tickAndDrain(survivor.punctual);
      const [row] = await deliveries(punctual);
      expect(row).toMatchObject({ state: "sent", attempt: 2 });
      expect(survivor.channel.keys()).toEqual([key]);
    } finally {
      await survivor.close();
    }
  });

  it("DEL-6: on a channel without idempotency the lost claim becomes in_doubt, never a silent resend", async () => {
    t = await testPunctual({
      idempotent: false,
      scheduler: { leaseMs: 10_000, sendTimeoutMs: 5_000 },
    });
    const { punctual, channel } = t;
    await punctual.createSchedule(oneOff(T0));
    channel.behaviour = () => deferred<never>().promise;
    await punctual.scheduler.tick();
    const survivor = await peer(t, {
      start: "2027-01-04T08:00:10Z",
      idempotent: false,
      scheduler: { leaseMs: 10_000, sendTimeoutMs: 5_000 },
    });
    try {
      await tickAndDrain(survivor.punctual);
      const [row] = await deliveries(punctual);
      expect(row).toMatchObject({ state: "in_doubt", reason: "LEASE_EXPIRED" });
      expect(survivor.channel.sends).toHaveLength(0);
      // An operator redrives it: same key.
      await survivor.punctual.redriveDelivery(row!.id);
      await tickAndDrain(survivor.punctual);
      const [again] = await deliveries(punctual);
      expect(again).toMatchObject({ state: "sent", deliveryKey: row!.deliveryKey });
      expect(survivor.channel.keys()).toEqual([row!.deliveryKey]);
    } finally {
      await survivor.close();
    }
  });

  it("DEL-7: a scheduler paused for six hours delivers the whole gap on resume", async () => {
    t = await testPunctual();
    const { punctual, channel, clock } = t;
    // Twelve one-off reminders due every 30 minutes over the next six hours.
    for (let i = 1; i <= 12; i++) {
      await punctual.createSchedule(oneOff(new Date(Date.parse(T0) + i * 1_800_000).toISOString()));
    }
    // The process is down: no tick runs for six hours (test clock; no timers fire).
    clock.set("2027-01-04T14:00:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(12);
    const rows = await deliveries(punctual);
    expect(rows.every((r) => r.state === "sent")).toBe(true);
    // Sent late and marked late, except the one due within the grace period.
    expect(rows.filter((r) => r.late)).toHaveLength(11);
  });

  it("REC-6: a recurring series after downtime skips stale occurrences (recorded) and sends the current one", async () => {
    t = await testPunctual();
    const { punctual, channel, clock } = t;
    await punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      tzid: "UTC",
      rrule: "FREQ=HOURLY;COUNT=24",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    clock.set("2027-01-04T14:05:00Z");
    await tickAndDrain(punctual);
    const rows = await deliveries(punctual);
    const skipped = rows.filter((r) => r.state === "skipped");
    expect(skipped.map((r) => r.reason)).toEqual(["stale", "stale", "stale", "stale", "stale"]);
    expect(rows.filter((r) => r.state === "sent").map((r) => r.occurrenceAt)).toEqual([
      "2027-01-04T08:00:00.000Z",
      "2027-01-04T14:00:00.000Z",
    ]);
  });

  it("DEL-10: cancel stops every pending delivery; an in-flight send finishes and is recorded", async () => {
    t = await testPunctual();
    const { punctual, channel, clock } = t;
    const { schedule } = await punctual.createSchedule({
      dtstart: T0,
      tzid: "UTC",
      rrule: "FREQ=MINUTELY;COUNT=30",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    const gate = deferred<{ messageId: string }>();
    channel.behaviour = () => gate.promise;
    await punctual.scheduler.tick();
    const cancelled = await punctual.cancelSchedule(schedule.id);
    expect(cancelled.state).toBe("cancelled");
    expect(cancelled.cancelledDeliveries).toBeGreaterThan(0);
    gate.resolve({ messageId: "in-flight" });
    await punctual.scheduler.drain();
    clock.advance(3_600_000);
    await tickAndDrain(punctual);
    const rows = await deliveries(punctual);
    expect(rows.filter((r) => r.state === "sent")).toHaveLength(1);
    expect(
      rows.filter((r) => r.state === "cancelled").every((r) => r.reason === "schedule_cancelled"),
    ).toBe(true);
    expect(rows.filter((r) => r.state === "pending" || r.state === "retry")).toHaveLength(0);
    expect(channel.sends).toHaveLength(1);
  });

  it("REC-3: a stored rule that no longer parses quarantines its own schedule; the others run", async () => {
    t = await testPunctual();
    const { punctual, channel } = t;
    const bad = await punctual.createSchedule({ ...oneOff(T0), rrule: "FREQ=DAILY;COUNT=3" });
    await punctual.createSchedule(oneOff(T0));
    // Corrupt the stored rule behind the API's back (as an old release or a hand edit might),
    // and reset its watermark so the next planning pass reads it again.
    await punctual.db.query(
      "update punctual_schedules set rrule = 'FREQ=FORTNIGHTLY', planned_until = null where id = $1",
      [bad.schedule.id],
    );
    await tickAndDrain(punctual);
    const quarantined = await punctual.getSchedule(bad.schedule.id);
    expect(quarantined.state).toBe("invalid");
    expect(quarantined.invalidReason).toMatch(/FREQ/);
    expect(channel.sends).toHaveLength(1);
    expect(await punctual.metrics.quarantined.get()).toMatchObject({ values: [{ value: 1 }] });
  });

  it("DEL-7: planning is idempotent: many passes never create a second row per occurrence", async () => {
    t = await testPunctual();
    const { punctual, clock } = t;
    await punctual.createSchedule({
      dtstart: T0,
      tzid: "Europe/Berlin",
      rrule: "FREQ=MINUTELY;INTERVAL=10",
      perpetual: true,
      reminders: [
        { key: "a", offset: "PT0S", channel: "test" },
        { key: "b", offset: "-PT5M", channel: "test" },
      ],
    });
    for (let i = 0; i < 5; i++) {
      await punctual.scheduler.tick();
      clock.advance(600_000);
    }
    await punctual.scheduler.drain();
    const rows = await deliveries(punctual);
    const keys = rows.map((r) => r.deliveryKey);
    expect(new Set(keys).size).toBe(keys.length);
    const perReminder = new Set(rows.map((r) => `${r.reminderKey}|${r.occurrenceAt}`));
    expect(perReminder.size).toBe(rows.length);
  });

  it("CH-1: the webhook contract end to end: signed POST with the delivery key as webhook-id", async () => {
    t = await testPunctual();
    const { punctual } = t;
    const received: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        received.push({ headers: req.headers, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      const { schedule } = await punctual.createSchedule({
        dtstart: "2027-01-04T09:15:00",
        tzid: "Europe/Berlin",
        payload: { meeting: "standup" },
        reminders: [{ key: "before", offset: "-PT15M", channel: "webhook", target: { url } }],
      });
      await tickAndDrain(punctual);
      expect(received).toHaveLength(1);
      const [row] = await deliveries(punctual);
      const { headers, body } = received[0]!;
      expect(headers["webhook-id"]).toBe(row!.deliveryKey);
      const signed = `${headers["webhook-id"]}.${headers["webhook-timestamp"]}.${body}`;
      const key = Buffer.from("dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs", "base64");
      expect(headers["webhook-signature"]).toBe(
        `v1,${createHmac("sha256", key).update(signed).digest("base64")}`,
      );
      expect(JSON.parse(body)).toMatchObject({
        type: "reminder.due",
        deliveryKey: row!.deliveryKey,
        scheduleId: schedule.id,
        reminderKey: "before",
        occurrenceAt: "2027-01-04T08:15:00.000Z",
        dueAt: "2027-01-04T08:00:00.000Z",
        attempt: 1,
        payload: { meeting: "standup" },
      });
      expect(row).toMatchObject({ state: "sent" });
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("REC-5: an unbounded series without perpetual is capped; the truncation is logged at ERROR once and counted", async () => {
    t = await testPunctual({ scheduler: { maxExpansionDays: 1, planAheadMs: 2 * 86_400_000 } });
    const { punctual, clock } = t;
    const created = await punctual.createSchedule({
      dtstart: T0,
      tzid: "UTC",
      rrule: "FREQ=HOURLY",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    expect(created.warnings.join(" ")).toMatch(/perpetual/);
    await punctual.scheduler.tick();
    clock.advance(86_400_000);
    await punctual.scheduler.tick();
    await punctual.scheduler.drain();
    const rows = await deliveries(punctual);
    // Planned up to creation + 1 day, never beyond.
    expect(rows.every((r) => Date.parse(r.occurrenceAt) < Date.parse(T0) + 86_400_000)).toBe(true);
    expect(rows).toHaveLength(24);
    const errors = t.logs.filter(
      (l) => l.level === "error" && String(l.msg).includes("expansion cap"),
    );
    expect(errors).toHaveLength(1);
    expect((await punctual.metrics.seriesTruncated.get()).values[0]?.value).toBe(1);
    // A perpetual series is not capped.
    await punctual.createSchedule({
      dtstart: T0,
      tzid: "UTC",
      rrule: "FREQ=DAILY",
      perpetual: true,
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    clock.advance(86_400_000);
    await punctual.scheduler.tick();
    expect((await punctual.metrics.seriesTruncated.get()).values[0]?.value).toBe(1);
  });

  it("OPS-6: stop lets an in-flight send finish and records it; past the deadline the send is aborted and settled as unknown", async () => {
    t = await testPunctual({ idempotent: false });
    const { punctual, channel, clock } = t;
    await punctual.createSchedule(
      oneOff(T0, {
        reminders: [
          { key: "a", offset: "PT0S", channel: "test" },
          { key: "b", offset: "PT0S", channel: "test" },
        ],
      }),
    );
    const fast = deferred<{ messageId: string }>();
    const bothStarted = deferred();
    channel.behaviour = (d, ctx) => {
      if (channel.sends.length === 2) bothStarted.resolve();
      return d.reminderKey === "a"
        ? fast.promise
        : new Promise((_, reject) =>
            ctx.signal.addEventListener("abort", () => reject(new Error("aborted"))),
          );
    };
    await punctual.scheduler.start();
    // The loop runs on its own once started: wait until it has claimed and started both.
    await bothStarted.promise;
    expect(channel.sends).toHaveLength(2);
    const stopping = punctual.scheduler.stop(5_000);
    fast.resolve({ messageId: "ok" });
    // Wait until "a" has settled, then let the shutdown deadline pass.
    for (let i = 0; i < 2_000; i++) {
      const a = (await deliveries(punctual)).find((r) => r.reminderKey === "a");
      if (a?.state === "sent") break;
      await new Promise((r) => setTimeout(r, 5)); // polls an event (the settle), bounded
    }
    clock.advance(5_000); // the shutdown deadline passes: "b" is aborted
    await stopping;
    const rows = await deliveries(punctual);
    const byKey = Object.fromEntries(rows.map((r) => [r.reminderKey, r]));
    expect(byKey.a).toMatchObject({ state: "sent" });
    // Not idempotent: an aborted send may have arrived, so it is in doubt, not resent.
    expect(byKey.b).toMatchObject({ state: "in_doubt", reason: "OUTCOME_UNKNOWN" });
    expect(punctual.scheduler.running).toBe(false);
  });

  it("DEL-5: a send that may have been delivered (timeout, broken connection) is in doubt on an at-most-once reminder, retried with the same key otherwise", async () => {
    t = await testPunctual();
    const { punctual, channel } = t;
    await punctual.createSchedule(
      oneOff(T0, {
        reminders: [
          { key: "once", offset: "PT0S", channel: "test", delivery: "at-most-once" },
          { key: "idem", offset: "PT0S", channel: "test" },
          { key: "refused", offset: "PT0S", channel: "test", delivery: "at-most-once" },
        ],
      }),
    );
    channel.behaviour = (d) => {
      if (d.reminderKey === "refused") {
        throw new TransientError("connection refused", {
          code: "NETWORK_ERROR",
          maybeDelivered: false,
        });
      }
      throw new TransientError("timed out", { code: "SEND_TIMEOUT", maybeDelivered: true });
    };
    await tickAndDrain(punctual);
    const byKey = Object.fromEntries((await deliveries(punctual)).map((r) => [r.reminderKey, r]));
    expect(byKey.once).toMatchObject({ state: "in_doubt", reason: "OUTCOME_UNKNOWN" });
    expect(byKey.idem).toMatchObject({ state: "retry", failures: 1 });
    // Nothing left this host: safe to retry even at most once.
    expect(byKey.refused).toMatchObject({ state: "retry", failures: 1 });
  });

  it("REC-6: late means sent more than 1 s after its due time, whatever the grace", async () => {
    t = await testPunctual({ start: "2027-01-04T08:05:00Z" });
    const { punctual } = t;
    await punctual.createSchedule(oneOff("2027-01-04T08:00:00Z")); // five minutes in the past
    await punctual.createSchedule({ ...oneOff("2027-01-04T08:05:00Z"), graceMs: 0 }); // due now
    await tickAndDrain(punctual);
    const rows = await deliveries(punctual);
    expect(rows.map((r) => [r.dueAt, r.state, r.late])).toEqual([
      ["2027-01-04T08:00:00.000Z", "sent", true],
      ["2027-01-04T08:05:00.000Z", "sent", false],
    ]);
  });

  it("REC-6: misfire latest sends nothing missed when an occurrence inside the grace period is already due", async () => {
    t = await testPunctual();
    const { punctual, clock, channel } = t;
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      rrule: "FREQ=SECONDLY;INTERVAL=10;COUNT=30",
      misfire: "latest",
      graceMs: 5_000,
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    await tickAndDrain(punctual);
    await punctual.pauseSchedule(schedule.id);
    clock.set("2027-01-04T08:01:02Z");
    await punctual.resumeSchedule(schedule.id);
    await tickAndDrain(punctual);
    // 08:01:00 is due inside the grace period: the missed 08:00:10 … 08:00:50 are all stale.
    expect(channel.sends.map((x) => x.delivery.occurrenceAt.toISOString())).toEqual([
      "2027-01-04T08:00:00.000Z",
      "2027-01-04T08:01:00.000Z",
    ]);
  });

  it("REC-6: rows the misfire policy has not judged yet are never claimed, even past one sweep's batch", async () => {
    t = await testPunctual({ scheduler: { misfireBatch: 3 } });
    const { punctual, channel } = t;
    // Ten past one-offs that expired an hour ago (as an imported calendar's old events).
    for (let i = 0; i < 10; i++) {
      await punctual.createSchedule(
        oneOff(`2027-01-04T06:0${i}:00Z`, { expiresAt: "2027-01-04T07:00:00Z" }),
      );
    }
    // And a series whose last two hours were missed.
    await punctual.createSchedule({
      dtstart: "2027-01-04T06:00:00Z",
      rrule: "FREQ=MINUTELY;INTERVAL=10;COUNT=20",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    await punctual.db.query(
      "update punctual_schedules set planned_until = null, created_at = '2027-01-04T06:00:00Z' where recurring",
    );
    await tickAndDrain(punctual);
    const rows = await deliveries(punctual);
    const sentAt = channel.sends.map((x) => x.delivery.occurrenceAt.toISOString());
    // Only what the policy allows: occurrences inside the 15-minute grace.
    expect(sentAt).toEqual(["2027-01-04T07:50:00.000Z", "2027-01-04T08:00:00.000Z"]);
    expect(rows.filter((r) => r.state === "skipped" && r.reason === "expired")).toHaveLength(10);
    expect(rows.filter((r) => r.state === "skipped" && r.reason === "stale")).toHaveLength(11);
  });
});
