/**
 * DEL-9: realign on edit, with optimistic concurrency; DEL-10 interplay.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ConflictError, TransientError } from "../../src/errors/index.js";
import { ScriptedChannel, deferred } from "../support/channels.js";
import { deliveries, testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;
afterEach(async () => {
  await t?.close();
  t = null;
});

const weekly = {
  dtstart: "2027-01-04T09:00:00",
  tzid: "Europe/Berlin",
  rrule: "FREQ=DAILY;COUNT=10",
  reminders: [{ key: "r", offset: "-PT15M", channel: "test" }],
};

async function waiting(tp: TestPunctual) {
  return (await deliveries(tp.punctual))
    .filter((d) => d.state === "pending" || d.state === "retry")
    .map((d) => d.dueAt)
    .sort();
}

describe("realign on edit", () => {
  it("DEL-9: a changed time moves every waiting delivery; sent ones stay", async () => {
    t = await testPunctual({
      start: "2027-01-04T07:50:00Z",
      scheduler: { planAheadMs: 3 * 86_400_000 },
    });
    const { punctual, clock } = t;
    const { schedule } = await punctual.createSchedule(weekly);
    await tickAndDrain(punctual); // 08:45 local reminders planned for 3 days; first one due 07:45Z (sent, within grace)
    expect((await deliveries(punctual)).filter((d) => d.state === "sent")).toHaveLength(1);
    clock.set("2027-01-04T09:00:00Z");
    const edited = await punctual.updateSchedule(
      schedule.id,
      { dtstart: "2027-01-04T10:30:00" },
      { version: schedule.version },
    );
    expect(edited.schedule.version).toBe(schedule.version + 1);
    // Today's 10:30 occurrence (reminder 10:15 local = 09:15Z) is still ahead: planned,
    // and the old 08:45-local rows are gone (the window reaches 3 days from now).
    expect(await waiting(t)).toEqual([
      "2027-01-04T09:15:00.000Z",
      "2027-01-05T09:15:00.000Z",
      "2027-01-06T09:15:00.000Z",
    ]);
    const rows = await deliveries(punctual);
    expect(rows.filter((d) => d.state === "sent").map((d) => d.dueAt)).toEqual([
      "2027-01-04T07:45:00.000Z",
    ]);
  });

  it("DEL-9: a new EXDATE and a shortened COUNT delete the waiting rows no longer in the set", async () => {
    t = await testPunctual({
      start: "2027-01-04T06:00:00Z",
      scheduler: { planAheadMs: 10 * 86_400_000 },
    });
    const { punctual } = t;
    const { schedule } = await punctual.createSchedule(weekly);
    await punctual.scheduler.tick();
    expect(await waiting(t)).toHaveLength(10);
    const { realigned } = await punctual.updateSchedule(schedule.id, {
      rrule: "FREQ=DAILY;COUNT=5",
      exdate: ["2027-01-06T09:00:00"],
    });
    expect(realigned).toMatchObject({ deleted: 6, created: 0 });
    expect(await waiting(t)).toEqual([
      "2027-01-04T07:45:00.000Z",
      "2027-01-05T07:45:00.000Z",
      "2027-01-07T07:45:00.000Z",
      "2027-01-08T07:45:00.000Z",
    ]);
  });

  it("DEL-9: a moved weekday and a changed offset; an in-flight (claimed) delivery is untouched", async () => {
    t = await testPunctual({
      start: "2027-01-04T07:45:00Z",
      scheduler: { planAheadMs: 14 * 86_400_000 },
    });
    const { punctual, channel } = t;
    const { schedule } = await punctual.createSchedule({
      ...weekly,
      rrule: "FREQ=WEEKLY;BYDAY=MO;COUNT=3",
    });
    const gate = deferred<{ messageId: string }>();
    channel.behaviour = () => gate.promise;
    await punctual.scheduler.tick(); // Monday 4th's reminder is claimed and in flight
    await punctual.updateSchedule(schedule.id, {
      rrule: "FREQ=WEEKLY;BYDAY=WE;COUNT=3",
      reminders: [{ key: "r", offset: "-PT30M", channel: "test" }],
    });
    const rows = await deliveries(punctual);
    expect(rows.filter((d) => d.state === "claimed").map((d) => d.dueAt)).toEqual([
      "2027-01-04T07:45:00.000Z",
    ]);
    // DTSTART (Monday) still counts as the first occurrence (RFC 5545 §3.3.10); then Wednesdays.
    expect(await waiting(t)).toEqual(["2027-01-06T07:30:00.000Z", "2027-01-13T07:30:00.000Z"]);
    gate.resolve({ messageId: "done" });
    await punctual.scheduler.drain();
    expect((await deliveries(punctual)).filter((d) => d.state === "sent")).toHaveLength(1);
  });

  it("DEL-9: an edit at a stale version is refused (STALE_VERSION) and changes nothing", async () => {
    t = await testPunctual();
    const { punctual } = t;
    const { schedule } = await punctual.createSchedule(weekly);
    await punctual.updateSchedule(
      schedule.id,
      { payload: { v: 2 } },
      { version: schedule.version },
    );
    const stale = punctual.updateSchedule(
      schedule.id,
      { payload: { v: 3 } },
      { version: schedule.version },
    );
    await expect(stale).rejects.toBeInstanceOf(ConflictError);
    await expect(stale).rejects.toMatchObject({ code: "STALE_VERSION" });
    const now = await punctual.getSchedule(schedule.id);
    expect(now.payload).toEqual({ v: 2 });
    expect(now.version).toBe(schedule.version + 1);
  });

  it("DEL-10: a cancelled schedule cannot be edited back to life", async () => {
    t = await testPunctual();
    const { punctual } = t;
    const { schedule } = await punctual.createSchedule(weekly);
    await punctual.cancelSchedule(schedule.id);
    await expect(punctual.updateSchedule(schedule.id, { payload: 1 })).rejects.toMatchObject({
      code: "CONFLICT",
    });
    await tickAndDrain(punctual);
    expect(t.channel.sends).toHaveLength(0);
  });

  it("DEL-9: a reminder removed while its delivery is in flight: the failed send ends cancelled, never a stuck row that blocks others", async () => {
    t = await testPunctual();
    const { punctual, channel, clock } = t;
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      reminders: [{ key: "r0", offset: "PT0S", channel: "test" }],
    });
    const gate = deferred<never>();
    channel.behaviour = () => gate.promise;
    await punctual.scheduler.tick(); // r0 is claimed and in flight
    await punctual.updateSchedule(schedule.id, {
      reminders: [{ key: "r1", offset: "PT0S", channel: "test" }],
    });
    gate.reject(new TransientError("503"));
    await punctual.scheduler.drain();
    const r0 = (await deliveries(punctual)).find((d) => d.reminderKey === "r0")!;
    expect(r0).toMatchObject({ state: "cancelled", reason: "reminder_removed" });
    // Nothing is left that the claim cannot take: a new reminder due now goes out.
    channel.behaviour = () => ({ messageId: "ok" });
    await punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      reminders: [{ key: "x", offset: "PT0S", channel: "test" }],
    });
    clock.advance(1_000);
    await tickAndDrain(punctual);
    expect(
      (await deliveries(punctual))
        .filter((d) => d.state === "sent")
        .map((d) => d.reminderKey)
        .sort(),
    ).toEqual(["r1", "x"]);
  });

  it("DEL-9, DEL-14: a retrying row that leaves the set keeps its attempt history (cancelled, not deleted)", async () => {
    t = await testPunctual({
      start: "2027-01-04T05:00:00Z",
      scheduler: { planAheadMs: 5 * 86_400_000 },
    });
    const { punctual, channel, clock } = t;
    const { schedule } = await punctual.createSchedule({
      ...weekly,
      dtstart: "2027-01-04T07:00:00",
      rrule: "FREQ=DAILY;COUNT=3",
    });
    channel.behaviour = () => {
      throw new TransientError("503");
    };
    clock.set("2027-01-04T05:45:00Z");
    await tickAndDrain(punctual);
    const first = (await deliveries(punctual)).find((d) => d.state === "retry")!;
    expect(first).toBeDefined();
    const { realigned } = await punctual.updateSchedule(schedule.id, {
      exdate: ["2027-01-04T07:00:00"],
    });
    expect(realigned.deleted).toBe(1);
    const kept = await punctual.getDelivery(first.id);
    expect(kept).toMatchObject({ state: "cancelled", reason: "realigned" });
    expect(kept.attempts).toHaveLength(1);
  });

  it("DEL-9: a retried occurrence removed by one edit and restored by the next reopens with its history", async () => {
    t = await testPunctual();
    const { punctual, channel, clock } = t;
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      reminders: [{ key: "a", offset: "PT0S", channel: "test" }],
    });
    channel.behaviour = () => {
      throw new TransientError("500");
    };
    await tickAndDrain(punctual);
    await punctual.updateSchedule(schedule.id, {
      reminders: [{ key: "b", offset: "PT0S", channel: "test" }],
    });
    const gone = (await deliveries(punctual)).find((d) => d.reminderKey === "a")!;
    expect(gone).toMatchObject({ state: "cancelled", reason: "realigned" });
    channel.behaviour = () => ({ messageId: "ok" });
    await punctual.updateSchedule(schedule.id, {
      reminders: [{ key: "a", offset: "PT0S", channel: "test" }],
    });
    const back = await punctual.getDelivery(gone.id);
    expect(back).toMatchObject({ state: "retry", failures: 1 });
    clock.advance(3_600_000);
    await tickAndDrain(punctual);
    const done = await punctual.getDelivery(gone.id);
    expect(done.state).toBe("sent");
    expect(done.attempts.map((a) => a.outcome)).toEqual(["transient", "sent"]);
  });

  it("DEL-9: a reminder moved to another channel, or to at-most-once, carries its waiting rows along", async () => {
    t = await testPunctual({ channels: [new ScriptedChannel("other", false)] });
    const { punctual } = t;
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-04T08:30:00Z",
      reminders: [{ key: "a", offset: "PT0S", channel: "test" }],
    });
    await punctual.updateSchedule(schedule.id, {
      reminders: [{ key: "a", offset: "PT0S", channel: "other", maxAttempts: 2 }],
    });
    const [row] = await deliveries(punctual);
    expect(row).toMatchObject({ channel: "other", maxAttempts: 2 });
    const { rows } = await punctual.db.query<{ on_lost_lease: string }>(
      "select on_lost_lease from punctual_deliveries where id = $1",
      [row!.id],
    );
    expect(rows[0]!.on_lost_lease).toBe("in_doubt");
  });
});

describe("realign on edit: a new rule starts at the edit", () => {
  it("DEL-9: occurrences of the new rule before the edit are not created; rows that already existed keep the misfire grace", async () => {
    t = await testPunctual({
      start: "2027-01-04T07:00:00Z",
      scheduler: { planAheadMs: 2 * 86_400_000 },
    });
    const { punctual, clock, channel } = t;
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=DAILY;COUNT=3",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    await punctual.scheduler.tick(); // plans 08:00Z today and tomorrow; nothing due yet
    // No worker ran meanwhile: today's 08:00Z row is 10 minutes late (within the 15 min grace).
    clock.set("2027-01-04T08:10:00Z");
    const { realigned } = await punctual.updateSchedule(schedule.id, {
      reminders: [
        { key: "r", offset: "PT0S", channel: "test" },
        // New: due 08:05Z today (5 minutes before the edit) and 08:05Z tomorrow.
        { key: "s", offset: "PT5M", channel: "test" },
      ],
    });
    expect(realigned).toMatchObject({ deleted: 0 });
    const byKey = (key: string) =>
      deliveries(punctual).then((rows) =>
        rows
          .filter((d) => d.reminderKey === key)
          .map((d) => d.dueAt)
          .sort(),
      );
    expect(await byKey("s")).toEqual(["2027-01-05T08:05:00.000Z", "2027-01-06T08:05:00.000Z"]);
    await tickAndDrain(punctual);
    // The row that existed before the edit is sent late; nothing of the new rule is.
    const sent = (await deliveries(punctual)).filter((d) => d.state === "sent");
    expect(sent.map((d) => [d.reminderKey, d.dueAt, d.late])).toEqual([
      ["r", "2027-01-04T08:00:00.000Z", true],
    ]);
    expect(channel.sends).toHaveLength(1);
  });
});

describe("realign on edit: a waiting occurrence that stays keeps its day", () => {
  // Daily at 09:00 Berlin (08:00Z), reminded 15 minutes before (07:45Z). At 07:30Z the
  // reminder is made an hour before: its new due time, 07:00Z, is before now − grace
  // (07:15Z), outside the window a realign plans from.
  const daily = {
    dtstart: "2027-01-04T09:00:00",
    tzid: "Europe/Berlin",
    rrule: "FREQ=DAILY;COUNT=5",
    reminders: [{ key: "r", offset: "-PT15M", channel: "test" }],
  };
  const hourBefore = { reminders: [{ key: "r", offset: "-PT1H", channel: "test" }] };
  const today = "2027-01-04T08:00:00.000Z";

  async function setUp(extra: Record<string, unknown> = {}) {
    t = await testPunctual({
      start: "2027-01-04T07:00:00Z",
      scheduler: { planAheadMs: 2 * 86_400_000 },
    });
    const { schedule } = await t.punctual.createSchedule({ ...daily, ...extra });
    await t.punctual.scheduler.tick(); // today's and tomorrow's rows; nothing due yet
    const before = (await deliveries(t.punctual)).find((d) => d.occurrenceAt === today)!;
    expect(before).toMatchObject({ state: "pending", dueAt: "2027-01-04T07:45:00.000Z" });
    return { tp: t, schedule, before };
  }

  async function entryOf(tp: TestPunctual, scheduleId: string, occurrenceAt: string) {
    const page = await tp.punctual.explainSchedule(scheduleId, {
      from: "2027-01-04T00:00:00Z",
      to: "2027-01-06T00:00:00Z",
    });
    return page.entries.filter((e) => e.occurrenceAt === occurrenceAt);
  }

  it("DEL-9, REC-6: a reminder moved before now − grace keeps its key and is judged by the misfire policy (skip: recorded stale), never dropped", async () => {
    const { tp, schedule, before } = await setUp();
    tp.clock.set("2027-01-04T07:30:00Z");
    const { realigned } = await tp.punctual.updateSchedule(schedule.id, hourBefore);
    expect(realigned.deleted).toBe(0);
    const moved = await tp.punctual.getDelivery(before.id);
    expect(moved).toMatchObject({
      state: "pending",
      deliveryKey: before.deliveryKey,
      dueAt: "2027-01-04T07:00:00.000Z",
    });
    await tickAndDrain(tp.punctual);
    expect(await tp.punctual.getDelivery(before.id)).toMatchObject({
      state: "skipped",
      reason: "stale",
    });
    expect(tp.channel.sends).toHaveLength(0);
    // OPS-16: one entry for the occurrence, the moved row's, with its verdict.
    const entries = await entryOf(tp, schedule.id, today);
    expect(entries.map((e) => [e.deliveryId, e.dueAt, e.verdict, e.reason])).toEqual([
      [before.id, "2027-01-04T07:00:00.000Z", "skipped", "stale"],
    ]);
    // The next days' rows moved with it, still ahead.
    expect(await waiting(tp)).toEqual(["2027-01-05T07:00:00.000Z", "2027-01-06T07:00:00.000Z"]);
  });

  it("DEL-9, REC-6: under misfire latest the moved reminder is sent late, once, under its key", async () => {
    const { tp, schedule, before } = await setUp({ misfire: "latest" });
    tp.clock.set("2027-01-04T07:30:00Z");
    await tp.punctual.updateSchedule(schedule.id, hourBefore);
    await tickAndDrain(tp.punctual);
    expect(await tp.punctual.getDelivery(before.id)).toMatchObject({
      state: "sent",
      late: true,
      dueAt: "2027-01-04T07:00:00.000Z",
    });
    expect(tp.channel.keys()).toEqual([before.deliveryKey]);
    const entries = await entryOf(tp, schedule.id, today);
    expect(entries.map((e) => [e.deliveryId, e.verdict])).toEqual([[before.id, "sent"]]);
  });

  it("DEL-9, DEL-10, REC-6: an edit while paused moves the held row; resume judges it by the misfire policy", async () => {
    const { tp, schedule, before } = await setUp();
    await tp.punctual.pauseSchedule(schedule.id);
    tp.clock.set("2027-01-04T07:30:00Z");
    await tp.punctual.updateSchedule(schedule.id, hourBefore);
    expect(await tp.punctual.getDelivery(before.id)).toMatchObject({
      state: "paused",
      dueAt: "2027-01-04T07:00:00.000Z",
    });
    await tp.punctual.resumeSchedule(schedule.id);
    await tickAndDrain(tp.punctual);
    expect(await tp.punctual.getDelivery(before.id)).toMatchObject({
      state: "skipped",
      reason: "stale",
    });
    expect(tp.channel.sends).toHaveLength(0);
  });

  it("DEL-9, REC-6: a DTSTART edit that keeps the occurrence's instant keeps its row too", async () => {
    const { tp, schedule, before } = await setUp();
    tp.clock.set("2027-01-04T07:30:00Z");
    // The series now starts a day earlier (one more occurrence): today's 09:00 stays.
    await tp.punctual.updateSchedule(schedule.id, {
      dtstart: "2027-01-03T09:00:00",
      rrule: "FREQ=DAILY;COUNT=6",
      ...hourBefore,
    });
    expect(await tp.punctual.getDelivery(before.id)).toMatchObject({
      state: "pending",
      deliveryKey: before.deliveryKey,
      dueAt: "2027-01-04T07:00:00.000Z",
    });
  });

  it("DEL-9: an occurrence the edit removes (EXDATE) still goes, whatever its new due time", async () => {
    const { tp, schedule, before } = await setUp();
    tp.clock.set("2027-01-04T07:30:00Z");
    const { realigned } = await tp.punctual.updateSchedule(schedule.id, {
      exdate: ["2027-01-04T09:00:00"],
      ...hourBefore,
    });
    expect(realigned.deleted).toBe(1);
    expect((await deliveries(tp.punctual)).map((d) => d.id)).not.toContain(before.id);
    expect(await waiting(tp)).toEqual(["2027-01-05T07:00:00.000Z", "2027-01-06T07:00:00.000Z"]);
  });

  it("REC-6: a one-off whose reminder is moved into the past is sent late", async () => {
    t = await testPunctual({ start: "2027-01-04T07:30:00Z" });
    const { punctual } = t;
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      reminders: [{ key: "r", offset: "-PT15M", channel: "test" }],
    });
    const [row] = await deliveries(punctual);
    await punctual.updateSchedule(schedule.id, hourBefore);
    await tickAndDrain(punctual);
    expect(await punctual.getDelivery(row!.id)).toMatchObject({
      state: "sent",
      late: true,
      dueAt: "2027-01-04T07:00:00.000Z",
    });
  });

  it("DEL-9, DEL-4: a retrying row whose due time moves before now − grace keeps its retry and its backoff", async () => {
    const { tp, schedule, before } = await setUp();
    tp.channel.behaviour = () => {
      throw new TransientError("503");
    };
    tp.clock.set("2027-01-04T07:45:00Z");
    await tickAndDrain(tp.punctual);
    const tried = await tp.punctual.getDelivery(before.id);
    expect(tried).toMatchObject({ state: "retry", failures: 1 });
    tp.clock.set("2027-01-04T07:45:00.500Z");
    const { realigned } = await tp.punctual.updateSchedule(schedule.id, hourBefore);
    expect(realigned.deleted).toBe(0);
    const moved = await tp.punctual.getDelivery(before.id);
    // Its next try stays where the backoff put it (later than the new due time).
    expect(moved).toMatchObject({
      state: "retry",
      dueAt: "2027-01-04T07:00:00.000Z",
      runAt: tried.runAt,
    });
    const [entry] = await entryOf(tp, schedule.id, today);
    expect(entry).toMatchObject({
      deliveryId: before.id,
      verdict: "deferred",
      reason: "RETRY",
      dueAt: "2027-01-04T07:00:00.000Z",
    });
    tp.channel.behaviour = () => ({ messageId: "ok" });
    tp.clock.set(tried.runAt);
    await tickAndDrain(tp.punctual);
    const done = await tp.punctual.getDelivery(before.id);
    expect(done.state).toBe("sent");
    expect(done.attempts.map((a) => a.outcome)).toEqual(["transient", "sent"]);
  });

  it("DEL-9, DEL-4: a retrying row whose due time moves past the planning window keeps waiting there, never cancelled", async () => {
    const { tp, schedule, before } = await setUp();
    tp.channel.behaviour = () => {
      throw new TransientError("503");
    };
    tp.clock.set("2027-01-04T07:45:00Z");
    await tickAndDrain(tp.punctual);
    // Three days after the occurrence: beyond the two days the realign plans ahead.
    const { realigned } = await tp.punctual.updateSchedule(schedule.id, {
      reminders: [{ key: "r", offset: "P3D", channel: "test" }],
    });
    expect(realigned.deleted).toBe(0);
    expect(await tp.punctual.getDelivery(before.id)).toMatchObject({
      state: "retry",
      deliveryKey: before.deliveryKey,
      dueAt: "2027-01-07T08:00:00.000Z",
      runAt: "2027-01-07T08:00:00.000Z",
    });
  });

  it("DEL-9, DEL-4: a retrying row whose due time moves later than its backoff waits for the new due time", async () => {
    const { tp, schedule, before } = await setUp();
    tp.channel.behaviour = () => {
      throw new TransientError("503");
    };
    tp.clock.set("2027-01-04T07:45:00Z");
    await tickAndDrain(tp.punctual);
    await tp.punctual.updateSchedule(schedule.id, {
      reminders: [{ key: "r", offset: "PT1H", channel: "test" }],
    });
    expect(await tp.punctual.getDelivery(before.id)).toMatchObject({
      state: "retry",
      dueAt: "2027-01-04T09:00:00.000Z",
      runAt: "2027-01-04T09:00:00.000Z",
    });
    tp.channel.behaviour = () => ({ messageId: "ok" });
    tp.clock.set("2027-01-04T08:59:59Z");
    await tickAndDrain(tp.punctual);
    expect(tp.channel.keys()).toEqual([before.deliveryKey]); // the first try only
    tp.clock.set("2027-01-04T09:00:00Z");
    await tickAndDrain(tp.punctual);
    expect(await tp.punctual.getDelivery(before.id)).toMatchObject({ state: "sent" });
  });
});
