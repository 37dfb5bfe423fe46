/**
 * Schedules for recipients (API-11, API-12, API-13) on a real engine (PGlite or
 * PostgreSQL, per PUNCTUAL_TEST_ENGINE), driven by the test clock: floating time in each
 * recipient's zone across DST changes, targets and templates from the registry, NO_TARGET,
 * opt-outs judged at send, the critical bypass, per-recipient quiet hours, realign on a
 * zone change, paged membership changes and removal from the registry.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { TransientError, ValidationError } from "../../src/errors/index.js";
import { deferred } from "../support/channels.js";
import { deliveries, testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

const DAY = 86_400_000;

/** Due instants of one recipient's deliveries, in order. */
async function dueOf(t: TestPunctual, recipientId: string, state?: string): Promise<string[]> {
  return (await deliveries(t.punctual))
    .filter((d) => d.recipientId === recipientId && (state === undefined || d.state === state))
    .map((d) => d.dueAt)
    .sort();
}

/** The validation error `run` throws (fails the test when it does not throw one). */
async function issuesOf(run: () => Promise<unknown>) {
  try {
    await run();
  } catch (err) {
    if (err instanceof ValidationError) return err.issues;
    throw err;
  }
  throw new Error("expected a ValidationError");
}

describe("API-11: schedules for recipients", () => {
  it("API-11 OPS-16: explain lists a recipient schedule's rows each with its recipient, and says it is not complete", async () => {
    t = await testPunctual({ start: "2027-03-09T00:00:00Z", scheduler: { planAheadMs: 5 * DAY } });
    const { punctual } = t;
    await punctual.putRecipient("tokyo", { tzid: "Asia/Tokyo", targets: { test: { to: "t" } } });
    await punctual.putRecipient("paris", { tzid: "Europe/Paris", targets: { test: { to: "p" } } });
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-03-10T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=2",
      recipients: ["tokyo", "paris"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    expect((await deliveries(punctual)).length).toBe(4);
    const explained = await punctual.explainSchedule(schedule.id, {
      from: "2027-03-09T00:00:00Z",
      to: "2027-03-13T00:00:00Z",
    });
    expect(explained.complete).toBe(false);
    // Four rows (two days × two recipients), no not_planned pair from the schedule's zone.
    expect(
      explained.entries.map((e) => [e.dueAt, e.recipientId, e.verdict === "not_planned"]).sort(),
    ).toEqual([
      ["2027-03-10T00:00:00.000Z", "tokyo", false],
      ["2027-03-10T08:00:00.000Z", "paris", false],
      ["2027-03-11T00:00:00.000Z", "tokyo", false],
      ["2027-03-11T08:00:00.000Z", "paris", false],
    ]);
  });

  it("API-11: a floating daily 09:00 is 09:00 in each recipient's own zone, across each zone's DST change (Berlin, New York, Sydney, Lord Howe)", async () => {
    t = await testPunctual({
      start: "2027-03-09T00:00:00Z",
      scheduler: { planAheadMs: 35 * DAY },
    });
    const { punctual } = t;
    for (const [id, tzid] of [
      ["berlin", "Europe/Berlin"],
      ["new-york", "America/New_York"],
      ["sydney", "Australia/Sydney"],
      ["lord-howe", "Australia/Lord_Howe"],
    ]) {
      await punctual.putRecipient(id!, { tzid, targets: { test: { to: id } } });
    }
    await punctual.createSchedule({
      dtstart: "2027-03-10T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=30",
      recipients: ["berlin", "new-york", "sydney", "lord-howe"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    const berlin = await dueOf(t, "berlin");
    const newYork = await dueOf(t, "new-york");
    const sydney = await dueOf(t, "sydney");
    const lordHowe = await dueOf(t, "lord-howe");
    for (const list of [berlin, newYork, sydney, lordHowe]) expect(list).toHaveLength(30);
    // Berlin: CET (+01:00) until 2027-03-28, then CEST (+02:00).
    expect(berlin).toContain("2027-03-27T08:00:00.000Z");
    expect(berlin).toContain("2027-03-28T07:00:00.000Z");
    // New York: EST (−05:00) until 2027-03-14, then EDT (−04:00).
    expect(newYork).toContain("2027-03-13T14:00:00.000Z");
    expect(newYork).toContain("2027-03-14T13:00:00.000Z");
    // Sydney: AEDT (+11:00) until 2027-04-04 03:00, then AEST (+10:00).
    expect(sydney).toContain("2027-04-02T22:00:00.000Z");
    expect(sydney).toContain("2027-04-03T23:00:00.000Z");
    // Lord Howe: +11:00 until 2027-04-04 02:00, then +10:30 (a half-hour change).
    expect(lordHowe).toContain("2027-04-02T22:00:00.000Z");
    expect(lordHowe).toContain("2027-04-03T22:30:00.000Z");
    // Each person gets each occurrence once: the delivery key includes the recipient.
    const keys = (await deliveries(punctual)).map((d) => d.deliveryKey);
    expect(new Set(keys).size).toBe(120);
  });

  it("API-11: a reminder without a target uses the recipient's target; templates see the recipient; no target is skipped NO_TARGET", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const { punctual, channel, clock } = t;
    await punctual.putRecipient("ann", {
      tzid: "Asia/Tokyo",
      targets: { test: { to: "ann@example.com" } },
      attributes: { name: "Ann" },
    });
    await punctual.putRecipient("bob", { tzid: "UTC" });
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00Z",
      recipients: ["ann", "bob"],
      reminders: [{ key: "r", channel: "test" }],
    });
    clock.set("2027-01-04T09:00:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    const sent = channel.sends[0]!.delivery;
    expect(sent.target).toEqual({ to: "ann@example.com" });
    expect(sent.recipient).toEqual({ id: "ann", tzid: "Asia/Tokyo", attributes: { name: "Ann" } });
    const { templateContext } = await import("../../src/channels/template.js");
    expect(templateContext(sent).recipient).toEqual({
      id: "ann",
      tzid: "Asia/Tokyo",
      attributes: { name: "Ann" },
    });
    const rows = await deliveries(punctual);
    expect(rows.find((d) => d.recipientId === "ann")).toMatchObject({ state: "sent" });
    expect(rows.find((d) => d.recipientId === "bob")).toMatchObject({
      state: "skipped",
      reason: "NO_TARGET",
    });
  });

  it("API-11: bad input is a 400 naming the field and value, and nothing is stored", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const { punctual } = t;
    await punctual.putRecipient("ann", { tzid: "UTC", targets: { test: {} } });
    await punctual.putRecipient("other", { tzid: "UTC" }, { tenant: "acme" });
    const base = { dtstart: "2027-01-05T09:00:00", reminders: [{ channel: "test" }] };
    expect(
      await issuesOf(() =>
        punctual.createSchedule({
          ...base,
          floating: true,
          tzid: "Europe/Berlin",
          recipients: ["ann"],
        }),
      ),
    ).toContainEqual(expect.objectContaining({ field: "tzid", value: "Europe/Berlin" }));
    expect(
      await issuesOf(() =>
        punctual.createSchedule({
          ...base,
          dtstart: "2027-01-05T09:00:00Z",
          floating: true,
          recipients: ["ann"],
        }),
      ),
    ).toContainEqual(expect.objectContaining({ field: "dtstart" }));
    expect(
      await issuesOf(() => punctual.createSchedule({ ...base, recipients: ["ann", "nobody"] })),
    ).toEqual([{ field: "recipients.1", message: "no such recipient", value: "nobody" }]);
    // Another tenant's recipient is "not found".
    expect(
      await issuesOf(() => punctual.createSchedule({ ...base, recipients: ["other"] })),
    ).toEqual([{ field: "recipients.0", message: "no such recipient", value: "other" }]);
    const many = Array.from({ length: 10_001 }, (_, i) => `r-${i}`);
    expect(
      await issuesOf(() => punctual.createSchedule({ ...base, recipients: many })),
    ).toContainEqual(expect.objectContaining({ field: "recipients" }));
    expect((await punctual.listSchedules()).items).toEqual([]);
    expect(await deliveries(punctual)).toEqual([]);
  });
});

describe("REC-6: missed occurrences per recipient", () => {
  it("REC-6, API-11: misfire `latest` after downtime sends each recipient their own most recent missed occurrence, not one for the whole audience", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z", scheduler: { planAheadMs: 5 * DAY } });
    const { punctual, channel, clock } = t;
    for (const id of ["ann", "bob"])
      await punctual.putRecipient(id, { tzid: "UTC", targets: { test: {} } });
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00Z",
      rrule: "FREQ=DAILY;COUNT=5",
      misfire: "latest",
      recipients: ["ann", "bob"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    // Down from before the first occurrence until 2027-01-06 12:00: three missed each.
    clock.set("2027-01-06T12:00:00Z");
    await tickAndDrain(punctual);
    expect(
      channel.sends.map((s) => [s.delivery.recipient?.id, s.delivery.dueAt.toISOString()]).sort(),
    ).toEqual([
      ["ann", "2027-01-06T09:00:00.000Z"],
      ["bob", "2027-01-06T09:00:00.000Z"],
    ]);
    const missed = (await deliveries(punctual)).filter((d) => d.state === "skipped");
    expect(missed.map((d) => [d.recipientId, d.dueAt, d.reason]).sort()).toEqual([
      ["ann", "2027-01-04T09:00:00.000Z", "stale"],
      ["ann", "2027-01-05T09:00:00.000Z", "stale"],
      ["bob", "2027-01-04T09:00:00.000Z", "stale"],
      ["bob", "2027-01-05T09:00:00.000Z", "stale"],
    ]);
  });
});

describe("API-13: preferences at send", () => {
  it("API-13: an opt-out of the category made a second before the send skips it OPTED_OUT; a critical reminder goes past it and says so", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const { punctual, channel, clock } = t;
    await punctual.putRecipient("ann", { tzid: "UTC", targets: { test: { to: "ann" } } });
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00Z",
      recipients: ["ann"],
      reminders: [
        { key: "digest", channel: "test", category: "digest" },
        { key: "alarm", channel: "test", category: "digest", priority: "critical" },
      ],
    });
    clock.set("2027-01-04T08:30:00Z");
    await tickAndDrain(punctual);
    expect(await deliveries(punctual)).toHaveLength(2);
    clock.set("2027-01-04T08:59:59Z");
    await punctual.putRecipient("ann", {
      tzid: "UTC",
      targets: { test: { to: "ann" } },
      preferences: { optOut: { categories: ["digest"] } },
    });
    clock.set("2027-01-04T09:00:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends.map((s) => s.delivery.reminderKey)).toEqual(["alarm"]);
    const rows = await deliveries(punctual);
    expect(rows.find((d) => d.reminderKey === "digest")).toMatchObject({
      state: "skipped",
      reason: "OPTED_OUT",
    });
    expect(rows.find((d) => d.reminderKey === "alarm")).toMatchObject({
      state: "sent",
      bypassed: ["OPTED_OUT"],
    });
  });

  it("API-13: an opt-out made while the delivery is already claimed and queued for its send still skips it OPTED_OUT", async () => {
    // One send at a time: the 08:59 reminder holds the slot while the 09:00 one waits,
    // claimed, in the queue; the opt-out lands then, before its send.
    t = await testPunctual({ start: "2027-01-04T08:00:00Z", scheduler: { concurrency: 1 } });
    const { punctual, channel, clock } = t;
    await punctual.putRecipient("ann", { tzid: "UTC", targets: { test: { to: "ann" } } });
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00Z",
      recipients: ["ann"],
      reminders: [
        { key: "early", channel: "test", offset: "-PT1M" },
        { key: "digest", channel: "test", category: "digest" },
      ],
    });
    const release = deferred<{ messageId: null }>();
    channel.behaviour = () => release.promise;
    clock.set("2027-01-04T09:00:00Z");
    await punctual.scheduler.tick();
    await vi.waitFor(() => expect(channel.sends).toHaveLength(1));
    expect((await deliveries(punctual)).map((d) => [d.reminderKey, d.state]).sort()).toEqual([
      ["digest", "claimed"],
      ["early", "claimed"],
    ]);
    await punctual.putRecipient("ann", {
      tzid: "UTC",
      targets: { test: { to: "ann" } },
      preferences: { optOut: { categories: ["digest"] } },
    });
    release.resolve({ messageId: null });
    await punctual.scheduler.drain();
    expect(channel.sends.map((s) => s.delivery.reminderKey)).toEqual(["early"]);
    expect((await deliveries(punctual)).find((d) => d.reminderKey === "digest")).toMatchObject({
      state: "skipped",
      reason: "OPTED_OUT",
    });
  });

  it("API-13: an opt-out of the channel skips it; taking the opt-out back before the send sends it", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const { punctual, channel, clock } = t;
    const ann = { tzid: "UTC", targets: { test: { to: "ann" } } };
    await punctual.putRecipient("ann", { ...ann, preferences: { optOut: { channels: ["test"] } } });
    await punctual.putRecipient("bob", { ...ann, preferences: { optOut: { channels: ["test"] } } });
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00Z",
      recipients: ["ann", "bob"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    clock.set("2027-01-04T08:59:59Z");
    await punctual.putRecipient("bob", ann);
    clock.set("2027-01-04T09:00:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends.map((s) => s.delivery.recipient?.id)).toEqual(["bob"]);
    expect((await deliveries(punctual)).find((d) => d.recipientId === "ann")).toMatchObject({
      state: "skipped",
      reason: "OPTED_OUT",
    });
  });

  it("API-13: a recipient's quiet hours are read in the recipient's zone; a critical reminder is not deferred and records it", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const { punctual, clock } = t;
    // 09:00Z is 18:00 in Tokyo: inside Tokyo's 17:00–08:00 window, which ends 23:00Z.
    await punctual.putRecipient("ann", {
      tzid: "Asia/Tokyo",
      targets: { test: { to: "ann" } },
      preferences: { quietHours: { start: "17:00", end: "08:00" } },
    });
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00Z",
      recipients: ["ann"],
      reminders: [
        { key: "normal", channel: "test" },
        { key: "critical", channel: "test", priority: "critical" },
      ],
    });
    clock.set("2027-01-04T08:30:00Z");
    await tickAndDrain(punctual);
    const rows = await deliveries(punctual);
    expect(rows.find((d) => d.reminderKey === "normal")).toMatchObject({
      dueAt: "2027-01-04T09:00:00.000Z",
      runAt: "2027-01-04T23:00:00.000Z",
      deferredReason: "QUIET_HOURS",
    });
    expect(rows.find((d) => d.reminderKey === "critical")).toMatchObject({
      runAt: "2027-01-04T09:00:00.000Z",
      deferredUntil: null,
      bypassed: ["QUIET_HOURS"],
    });
  });
});

describe("API-12: changes realign", () => {
  it("API-12, DEL-9: a recipient's zone change moves their future deliveries; sent ones stay", async () => {
    t = await testPunctual({ start: "2027-01-04T00:00:00Z", scheduler: { planAheadMs: 3 * DAY } });
    const { punctual, channel, clock } = t;
    await punctual.putRecipient("ann", { tzid: "Europe/Berlin", targets: { test: {} } });
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=5",
      recipients: ["ann"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    clock.set("2027-01-04T08:00:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    expect(await dueOf(t, "ann", "pending")).toEqual([
      "2027-01-05T08:00:00.000Z",
      "2027-01-06T08:00:00.000Z",
    ]);
    clock.set("2027-01-04T12:00:00Z");
    await punctual.putRecipient("ann", { tzid: "America/New_York", targets: { test: {} } });
    await tickAndDrain(punctual);
    expect(await dueOf(t, "ann", "sent")).toEqual(["2027-01-04T08:00:00.000Z"]);
    // 09:00 in New York (EST, −05:00) from now on; today's was sent in Berlin already.
    expect(await dueOf(t, "ann", "pending")).toEqual([
      "2027-01-05T14:00:00.000Z",
      "2027-01-06T14:00:00.000Z",
    ]);
  });

  it("DEL-9: sent at 09:00 in Tokyo, moved to New York the same day: nothing more for that day, on any tick", async () => {
    t = await testPunctual({ start: "2027-01-03T12:00:00Z", scheduler: { planAheadMs: 2 * DAY } });
    const { punctual, channel, clock } = t;
    await punctual.putRecipient("kei", { tzid: "Asia/Tokyo", targets: { test: {} } });
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=2",
      recipients: ["kei"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    // 2027-01-04 09:00 in Tokyo (+09:00) is 00:00Z: sent.
    clock.set("2027-01-04T00:00:00Z");
    await tickAndDrain(punctual);
    expect(await dueOf(t, "kei", "sent")).toEqual(["2027-01-04T00:00:00.000Z"]);
    // The same day, 01:00Z: 09:00 of 2027-01-04 in New York (14:00Z) is still ahead.
    clock.set("2027-01-04T01:00:00Z");
    await punctual.putRecipient("kei", { tzid: "America/New_York", targets: { test: {} } });
    for (const at of ["2027-01-04T01:00:00Z", "2027-01-04T14:00:00Z", "2027-01-04T20:00:00Z"]) {
      clock.set(at);
      await tickAndDrain(punctual);
    }
    // One send for 2027-01-04 (in Tokyo); 2027-01-05 is at 09:00 in New York.
    expect(channel.sends).toHaveLength(1);
    const rows = (await deliveries(punctual)).filter((d) => d.recipientId === "kei");
    expect(rows.map((d) => [d.dueAt, d.state]).sort()).toEqual([
      ["2027-01-04T00:00:00.000Z", "sent"],
      ["2027-01-05T14:00:00.000Z", "pending"],
    ]);
  });

  it("DEL-9: moved to New York before Tokyo's 09:00 was sent: that day's delivery moves (same key), still one", async () => {
    t = await testPunctual({ start: "2027-01-03T12:00:00Z", scheduler: { planAheadMs: 2 * DAY } });
    const { punctual, channel, clock } = t;
    await punctual.putRecipient("kei", { tzid: "Asia/Tokyo", targets: { test: {} } });
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=1",
      recipients: ["kei"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    const [before] = (await deliveries(punctual)).filter((d) => d.recipientId === "kei");
    expect(before).toMatchObject({ dueAt: "2027-01-04T00:00:00.000Z", state: "pending" });
    clock.set("2027-01-03T20:00:00Z");
    await punctual.putRecipient("kei", { tzid: "America/New_York", targets: { test: {} } });
    await tickAndDrain(punctual);
    const moved = (await deliveries(punctual)).filter((d) => d.recipientId === "kei");
    expect(moved.map((d) => [d.deliveryKey, d.dueAt, d.state])).toEqual([
      [before!.deliveryKey, "2027-01-04T14:00:00.000Z", "pending"],
    ]);
    for (const at of ["2027-01-04T00:00:00Z", "2027-01-04T14:00:00Z"]) {
      clock.set(at);
      await tickAndDrain(punctual);
    }
    expect(channel.sends).toHaveLength(1);
    expect(await dueOf(t, "kei", "sent")).toEqual(["2027-01-04T14:00:00.000Z"]);
  });

  it("DEL-9, REC-6: moved east after today's time has passed in the new zone: today's delivery keeps its key, moves into the past and is skipped as stale, never vanished", async () => {
    // Daily 09:00 floating; at 08:00 in New York (13:00Z) the recipient moves to Tokyo,
    // where today's 09:00 (00:00Z) is already 13 hours past.
    t = await testPunctual({ start: "2027-01-03T12:00:00Z", scheduler: { planAheadMs: 2 * DAY } });
    const { punctual, channel, clock } = t;
    await punctual.putRecipient("kei", { tzid: "America/New_York", targets: { test: {} } });
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=3",
      recipients: ["kei"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    const before = (await deliveries(punctual)).filter((d) => d.recipientId === "kei");
    const today = before.find((d) => d.dueAt === "2027-01-04T14:00:00.000Z")!;
    expect(today).toMatchObject({ state: "pending" });
    clock.set("2027-01-04T13:00:00Z");
    await punctual.putRecipient("kei", { tzid: "Asia/Tokyo", targets: { test: {} } });
    // Moved in the same transaction: same key, today's 09:00 in Tokyo.
    const moved = (await deliveries(punctual)).find((d) => d.deliveryKey === today.deliveryKey);
    expect(moved).toMatchObject({
      occurrenceAt: "2027-01-04T00:00:00.000Z",
      dueAt: "2027-01-04T00:00:00.000Z",
      runAt: "2027-01-04T00:00:00.000Z",
      state: "pending",
    });
    await tickAndDrain(punctual);
    // REC-6, misfire `skip` (the default for series): past its grace, recorded as stale.
    expect(channel.sends).toHaveLength(0);
    const rows = (await deliveries(punctual)).filter((d) => d.recipientId === "kei");
    expect(
      rows.map((d) => [d.deliveryKey === today.deliveryKey, d.dueAt, d.state, d.reason]),
    ).toEqual([
      [true, "2027-01-04T00:00:00.000Z", "skipped", "stale"],
      [false, "2027-01-05T00:00:00.000Z", "pending", null],
      [false, "2027-01-06T00:00:00.000Z", "pending", null],
    ]);
  });

  it("DEL-9, REC-6: moved east past today's time under misfire `latest`: today's delivery is sent late, once", async () => {
    t = await testPunctual({ start: "2027-01-03T12:00:00Z", scheduler: { planAheadMs: 2 * DAY } });
    const { punctual, channel, clock } = t;
    await punctual.putRecipient("kei", { tzid: "America/New_York", targets: { test: {} } });
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=2",
      misfire: "latest",
      recipients: ["kei"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    const [today] = (await deliveries(punctual)).filter(
      (d) => d.dueAt === "2027-01-04T14:00:00.000Z",
    );
    clock.set("2027-01-04T13:00:00Z");
    await punctual.putRecipient("kei", { tzid: "Asia/Tokyo", targets: { test: {} } });
    for (const at of ["2027-01-04T13:00:00Z", "2027-01-04T14:00:00Z"]) {
      clock.set(at);
      await tickAndDrain(punctual);
    }
    expect(channel.keys()).toEqual([today!.deliveryKey]);
    expect(
      (await deliveries(punctual)).find((d) => d.deliveryKey === today!.deliveryKey),
    ).toMatchObject({
      dueAt: "2027-01-04T00:00:00.000Z",
      state: "sent",
      late: true,
    });
  });

  it("DEL-9: moves across a DST change keep each day's key: east into the past (New York to Berlin the day before Berlin's change), west later (Berlin to New York across New York's)", async () => {
    // 08:30 in New York, which is on EDT (−04:00) since 2027-03-14: 09:00 is 13:00Z.
    t = await testPunctual({
      start: "2027-03-27T12:30:00Z",
      scheduler: { planAheadMs: 2.5 * DAY },
    });
    const { punctual } = t;
    await punctual.putRecipient("ann", { tzid: "America/New_York", targets: { test: {} } });
    await punctual.putRecipient("bob", { tzid: "Europe/Berlin", targets: { test: {} } });
    await punctual.createSchedule({
      dtstart: "2027-03-12T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=30",
      recipients: ["ann", "bob"],
      reminders: [{ key: "r", channel: "test" }],
    });
    const byDay = async (id: string) =>
      new Map(
        (await deliveries(punctual))
          .filter((d) => d.recipientId === id)
          .map((d) => [d.deliveryKey, [d.dueAt, d.state, d.reason] as const]),
      );
    await tickAndDrain(punctual);
    const ann = await byDay("ann");
    const bob = await byDay("bob");
    expect([...ann.values()].map((v) => v[0])).toEqual([
      "2027-03-27T13:00:00.000Z",
      "2027-03-28T13:00:00.000Z",
      "2027-03-29T13:00:00.000Z",
    ]);
    // ann moves to Berlin: 2027-03-27 09:00 CET (08:00Z) is past;
    // from 2027-03-28 Berlin is on CEST (+02:00): 07:00Z.
    await punctual.putRecipient("ann", { tzid: "Europe/Berlin", targets: { test: {} } });
    await tickAndDrain(punctual);
    const annMoved = await byDay("ann");
    expect([...annMoved.keys()].sort()).toEqual([...ann.keys()].sort());
    expect([...annMoved.values()].sort()).toEqual([
      ["2027-03-27T08:00:00.000Z", "skipped", "stale"],
      ["2027-03-28T07:00:00.000Z", "pending", null],
      ["2027-03-29T07:00:00.000Z", "pending", null],
    ]);
    // bob, in Berlin (created after its 2027-03-27 09:00), moves west to New York (EDT):
    // each day later, one each, and 2027-03-27 09:00 in New York is still ahead.
    await punctual.putRecipient("bob", { tzid: "America/New_York", targets: { test: {} } });
    await tickAndDrain(punctual);
    const bobMoved = await byDay("bob");
    expect([...bob.values()].map((v) => v[0])).toEqual([
      "2027-03-28T07:00:00.000Z",
      "2027-03-29T07:00:00.000Z",
    ]);
    expect([...bobMoved.keys()].slice(0, 2)).toEqual([...bob.keys()]);
    expect([...bobMoved.values()].sort()).toEqual([
      ["2027-03-27T13:00:00.000Z", "pending", null],
      ["2027-03-28T13:00:00.000Z", "pending", null],
      ["2027-03-29T13:00:00.000Z", "pending", null],
    ]);
  });

  it("DEL-9: a delivery claimed (being sent) when its recipient moves is untouched: sent at its old time, and the new zone's same day is not sent again", async () => {
    t = await testPunctual({ start: "2027-01-03T12:00:00Z", scheduler: { planAheadMs: 2 * DAY } });
    const { punctual, channel, clock } = t;
    await punctual.putRecipient("kei", { tzid: "Asia/Tokyo", targets: { test: {} } });
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=2",
      recipients: ["kei"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    const release = deferred<{ messageId: null }>();
    channel.behaviour = () => release.promise;
    clock.set("2027-01-04T00:00:00Z");
    await punctual.scheduler.tick();
    await vi.waitFor(() => expect(channel.sends).toHaveLength(1));
    const [claimed] = (await deliveries(punctual)).filter((d) => d.state === "claimed");
    expect(claimed).toMatchObject({ dueAt: "2027-01-04T00:00:00.000Z" });
    await punctual.putRecipient("kei", { tzid: "America/New_York", targets: { test: {} } });
    expect((await deliveries(punctual)).find((d) => d.id === claimed!.id)).toMatchObject({
      state: "claimed",
      dueAt: "2027-01-04T00:00:00.000Z",
      occurrenceAt: "2027-01-04T00:00:00.000Z",
    });
    release.resolve({ messageId: null });
    await punctual.scheduler.drain();
    channel.behaviour = () => ({ messageId: null });
    for (const at of ["2027-01-04T14:00:00Z", "2027-01-05T14:00:00Z"]) {
      clock.set(at);
      await tickAndDrain(punctual);
    }
    const rows = (await deliveries(punctual)).filter((d) => d.recipientId === "kei");
    expect(rows.map((d) => [d.dueAt, d.state]).sort()).toEqual([
      ["2027-01-04T00:00:00.000Z", "sent"],
      ["2027-01-05T14:00:00.000Z", "sent"],
    ]);
    expect(channel.sends).toHaveLength(2);
  });

  it("API-12: an edit of a schedule for recipients replans their future; recipients in the patch replace the list", async () => {
    t = await testPunctual({ start: "2027-01-04T00:00:00Z", scheduler: { planAheadMs: 3 * DAY } });
    const { punctual } = t;
    for (const id of ["ann", "bob"])
      await punctual.putRecipient(id, { tzid: "Asia/Tokyo", targets: { test: {} } });
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-05T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=2",
      recipients: ["ann"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    expect(await dueOf(t, "ann", "pending")).toEqual([
      "2027-01-05T00:00:00.000Z",
      "2027-01-06T00:00:00.000Z",
    ]);
    await punctual.updateSchedule(schedule.id, {
      dtstart: "2027-01-05T10:00:00",
      recipients: ["bob"],
    });
    await tickAndDrain(punctual);
    // 10:00 in Tokyo now, and for bob only: ann left with her rows.
    expect(await dueOf(t, "ann", "pending")).toEqual([]);
    expect(await dueOf(t, "bob", "pending")).toEqual([
      "2027-01-05T01:00:00.000Z",
      "2027-01-06T01:00:00.000Z",
    ]);
    // A floating schedule keeps refusing a zone of its own on edit.
    expect(
      await issuesOf(() => punctual.updateSchedule(schedule.id, { tzid: "Europe/Berlin" })),
    ).toContainEqual(expect.objectContaining({ field: "tzid", value: "Europe/Berlin" }));
  });

  it("API-12: a recipient added in a page is planned from now, never backfilled; a removed one's waiting deliveries are cancelled; a deleted one's everywhere", async () => {
    t = await testPunctual({ start: "2027-01-04T00:00:00Z", scheduler: { planAheadMs: 2 * DAY } });
    const { punctual, clock } = t;
    for (const id of ["ann", "bob", "cy"])
      await punctual.putRecipient(id, { tzid: "UTC", targets: { test: {} } });
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-01T09:00:00Z",
      rrule: "FREQ=DAILY;COUNT=10",
      misfire: "all",
      graceMs: 7 * DAY,
      recipients: ["ann"],
      reminders: [{ key: "r", channel: "test" }],
    });
    const other = await punctual.createSchedule({
      dtstart: "2027-01-05T10:00:00Z",
      recipients: ["bob"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    clock.set("2027-01-04T12:00:00Z");
    expect(
      await punctual.putScheduleRecipients(schedule.id, { add: ["bob", "cy"], remove: ["ann"] }),
    ).toEqual({ added: 2, removed: 1, cancelled: expect.any(Number), recipients: 2 });
    // The same page again changes nothing.
    expect(
      await punctual.putScheduleRecipients(schedule.id, { add: ["bob", "cy"], remove: ["ann"] }),
    ).toMatchObject({ added: 0, removed: 0, recipients: 2 });
    await tickAndDrain(punctual);
    const rows = await deliveries(punctual);
    const ofSchedule = rows.filter((d) => d.scheduleId === schedule.id);
    expect(ofSchedule.filter((d) => d.recipientId === "ann").map((d) => d.state)).not.toContain(
      "pending",
    );
    expect(
      ofSchedule.filter((d) => d.recipientId === "ann" && d.state === "cancelled").length,
    ).toBeGreaterThan(0);
    // Added at 12:00Z: the first occurrence planned for them is the next day's.
    expect(await dueOf(t, "cy")).toEqual(["2027-01-05T09:00:00.000Z", "2027-01-06T09:00:00.000Z"]);
    // A page with an unknown id stores nothing.
    expect(
      await issuesOf(() =>
        punctual.putScheduleRecipients(schedule.id, { add: ["dee"], remove: ["cy"] }),
      ),
    ).toEqual([{ field: "add.0", message: "no such recipient", value: "dee" }]);
    expect(await dueOf(t, "cy", "pending")).toHaveLength(2);
    // bob leaves the registry: cancelled on both schedules.
    await punctual.removeRecipient("bob");
    const bob = (await deliveries(punctual)).filter((d) => d.recipientId === "bob");
    expect(new Set(bob.map((d) => d.scheduleId))).toEqual(
      new Set([schedule.id, other.schedule.id]),
    );
    expect(bob.every((d) => d.state === "cancelled" && d.reason === "recipient_removed")).toBe(
      true,
    );
  });
});

describe("DEL-9: an edit of a schedule for recipients realigns as any schedule's edit does", () => {
  /**
   * One ordinary schedule and two for the recipient "ann" in Berlin (zoned, floating), each
   * 09:00 daily three times with a reminder 15 minutes before, planned at once; at `editAt`
   * each gets the same edit `patch`. @returns per kind, each row after a tick, by due time:
   * whether it kept the key its day's row had before, its due time, state, reason and late
   * flag.
   */
  async function editedSeries(editAt: string, patch: Record<string, unknown>) {
    t = await testPunctual({ start: "2027-01-03T12:00:00Z", scheduler: { planAheadMs: 3 * DAY } });
    const { punctual, clock } = t;
    await punctual.putRecipient("ann", { tzid: "Europe/Berlin", targets: { test: {} } });
    const series = {
      dtstart: "2027-01-04T09:00:00",
      rrule: "FREQ=DAILY;COUNT=3",
      reminders: [{ key: "r", offset: "-PT15M", channel: "test" }],
    };
    const kinds = {
      ordinary: { ...series, tzid: "Europe/Berlin" },
      zoned: { ...series, tzid: "Europe/Berlin", recipients: ["ann"] },
      floating: { ...series, floating: true, recipients: ["ann"] },
    };
    const ids = new Map<string, string>();
    for (const [kind, body] of Object.entries(kinds)) {
      ids.set(kind, (await punctual.createSchedule(body)).schedule.id);
    }
    const rowsOf = async (id: string) =>
      (await deliveries(punctual))
        .filter((d) => d.scheduleId === id)
        .sort((a, b) => a.dueAt.localeCompare(b.dueAt));
    await tickAndDrain(punctual);
    const before = new Map<string, string[]>();
    for (const [kind, id] of ids)
      before.set(
        kind,
        (await rowsOf(id)).map((d) => d.deliveryKey),
      );
    // Every kind planned 08:45 in Berlin (07:45Z) for each of the three days.
    expect([...before.values()].map((keys) => keys.length)).toEqual([3, 3, 3]);
    clock.set(editAt);
    for (const id of ids.values()) await punctual.updateSchedule(id, patch);
    await tickAndDrain(punctual);
    const after: Record<string, unknown[]> = {};
    for (const [kind, id] of ids) {
      after[kind] = (await rowsOf(id)).map((d) => [
        before.get(kind)!.includes(d.deliveryKey),
        d.dueAt,
        d.state,
        d.reason,
        d.late,
      ]);
    }
    return after;
  }

  it("DEL-9, REC-6: at 08:40 the reminder moved from 08:45 to 08:30 keeps its key and is sent late, as an ordinary schedule's is; the day no longer in the series goes", async () => {
    const expected = [
      [true, "2027-01-04T07:30:00.000Z", "sent", null, true],
      [true, "2027-01-05T07:30:00.000Z", "pending", null, false],
    ];
    const edit = {
      rrule: "FREQ=DAILY;COUNT=2",
      reminders: [{ key: "r", offset: "-PT30M", channel: "test" }],
    };
    expect(await editedSeries("2027-01-04T07:40:00Z", edit)).toEqual({
      ordinary: expected,
      zoned: expected,
      floating: expected,
    });
    expect(t!.channel.sends).toHaveLength(3);
  });

  it("DEL-9, REC-6: at 08:40 the reminder moved from 08:45 to 08:00, past the grace: it keeps its key and is recorded skipped `stale`, never vanished, on every kind of schedule", async () => {
    const expected = [
      [true, "2027-01-04T07:00:00.000Z", "skipped", "stale", false],
      [true, "2027-01-05T07:00:00.000Z", "pending", null, false],
    ];
    expect(
      await editedSeries("2027-01-04T07:40:00Z", {
        rrule: "FREQ=DAILY;COUNT=2",
        reminders: [{ key: "r", offset: "-PT1H", channel: "test" }],
      }),
    ).toEqual({ ordinary: expected, zoned: expected, floating: expected });
    expect(t!.channel.sends).toHaveLength(0);
  });

  it("DEL-9: at 08:50, the 08:45 reminder not yet sent, an edit that starts the series a day later deletes today's row, as an ordinary schedule's edit does; the other days keep their keys", async () => {
    const expected = [
      [true, "2027-01-05T07:45:00.000Z", "pending", null, false],
      [true, "2027-01-06T07:45:00.000Z", "pending", null, false],
    ];
    expect(
      await editedSeries("2027-01-04T07:50:00Z", {
        dtstart: "2027-01-05T09:00:00",
        rrule: "FREQ=DAILY;COUNT=2",
      }),
    ).toEqual({ ordinary: expected, zoned: expected, floating: expected });
    expect(t!.channel.sends).toHaveLength(0);
  });
});

describe("DEL-9, DEL-4: an edit realigns the deliveries waiting to retry, on every kind of schedule", () => {
  /**
   * One ordinary schedule and two for the recipient "ann" in Berlin (zoned, floating), each
   * 09:00 daily three times with a reminder 15 minutes before (07:45Z); today's send fails
   * once (transient), so each has a row waiting to retry. At 07:46Z each gets `patch`.
   * @returns per kind, today's row after the edit (same id): key kept, state, reason, due
   * time, whether its run time is its retry time, and the run time.
   */
  async function editedRetry(patch: Record<string, unknown>) {
    t = await testPunctual({ start: "2027-01-03T12:00:00Z", scheduler: { planAheadMs: 3 * DAY } });
    const { punctual, clock, channel } = t;
    await punctual.putRecipient("ann", { tzid: "Europe/Berlin", targets: { test: {} } });
    const series = {
      dtstart: "2027-01-04T09:00:00",
      rrule: "FREQ=DAILY;COUNT=3",
      reminders: [{ key: "r", offset: "-PT15M", channel: "test" }],
    };
    const kinds = {
      ordinary: { ...series, tzid: "Europe/Berlin" },
      zoned: { ...series, tzid: "Europe/Berlin", recipients: ["ann"] },
      floating: { ...series, floating: true, recipients: ["ann"] },
    };
    const ids = new Map<string, string>();
    for (const [kind, body] of Object.entries(kinds)) {
      ids.set(kind, (await punctual.createSchedule(body)).schedule.id);
    }
    await tickAndDrain(punctual);
    channel.behaviour = () => {
      throw new TransientError("503");
    };
    clock.set("2027-01-04T07:45:00Z");
    await tickAndDrain(punctual);
    const tried = (await deliveries(punctual)).filter((d) => d.state === "retry");
    expect(tried).toHaveLength(3);
    clock.set("2027-01-04T07:46:00Z");
    for (const id of ids.values()) await punctual.updateSchedule(id, patch);
    const after: Record<string, unknown[]> = {};
    for (const [kind, id] of ids) {
      const before = tried.find((d) => d.scheduleId === id)!;
      const row = await punctual.getDelivery(before.id);
      after[kind] = [
        row.deliveryKey === before.deliveryKey,
        row.state,
        row.reason,
        row.dueAt,
        row.runAt === before.runAt,
        row.attempts.length,
      ];
    }
    return after;
  }

  it("DEL-9, DEL-4: a reminder made an hour earlier moves the retrying row in place (before now − grace); its backoff stands", async () => {
    const expected = [true, "retry", null, "2027-01-04T07:00:00.000Z", true, 1];
    expect(
      await editedRetry({ reminders: [{ key: "r", offset: "-PT1H", channel: "test" }] }),
    ).toEqual({ ordinary: expected, zoned: expected, floating: expected });
  });

  it("DEL-9, DEL-4: a reminder made later than the backoff moves the next try to the new due time", async () => {
    const expected = [true, "retry", null, "2027-01-04T09:00:00.000Z", false, 1];
    const after = await editedRetry({
      reminders: [{ key: "r", offset: "PT1H", channel: "test" }],
    });
    expect(after).toEqual({ ordinary: expected, zoned: expected, floating: expected });
    const runAts = (await deliveries(t!.punctual))
      .filter((d) => d.state === "retry")
      .map((d) => d.runAt);
    expect(runAts).toEqual(Array(3).fill("2027-01-04T09:00:00.000Z"));
  });

  it("DEL-9, DEL-14: an occurrence removed by EXDATE cancels its retrying row with reason `realigned`, attempts kept", async () => {
    const expected = [true, "cancelled", "realigned", "2027-01-04T07:45:00.000Z", true, 1];
    expect(await editedRetry({ exdate: ["2027-01-04T09:00:00"] })).toEqual({
      ordinary: expected,
      zoned: expected,
      floating: expected,
    });
    await tickAndDrain(t!.punctual);
    expect(t!.channel.sends).toHaveLength(3); // the first tries only
  });
});
