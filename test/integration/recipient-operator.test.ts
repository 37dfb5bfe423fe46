/**
 * API-9 with API-11 on a real engine (PGlite or PostgreSQL, per PUNCTUAL_TEST_ENGINE):
 * a trigger and a backfill of a schedule for recipients plan one delivery per recipient,
 * as planning does — the recipient's target at send, `NO_TARGET` without one, opt-outs
 * judged at send, the recipient's quiet hours — and a backfill keys a floating occurrence
 * as planning does, so what was sent is never sent again.
 */
import { afterEach, describe, expect, it } from "vitest";
import { deliveries, testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

/** ann: a target; bob: none; cy: opted out of the category; dee: quiet 08:00–12:00 UTC. */
async function audience(t: TestPunctual): Promise<void> {
  const { punctual } = t;
  await punctual.putRecipient("ann", { tzid: "Asia/Tokyo", targets: { test: { to: "ann" } } });
  await punctual.putRecipient("bob", { tzid: "UTC" });
  await punctual.putRecipient("cy", {
    tzid: "UTC",
    targets: { test: { to: "cy" } },
    preferences: { optOut: { categories: ["digest"] } },
  });
  await punctual.putRecipient("dee", {
    tzid: "UTC",
    targets: { test: { to: "dee" } },
    preferences: { quietHours: { start: "08:00", end: "12:00" } },
  });
}

describe("API-9 / API-11: trigger and backfill per recipient", () => {
  it("API-9, API-11: a trigger makes one delivery per recipient: target of each, NO_TARGET, OPTED_OUT, quiet hours; a replay makes nothing", async () => {
    t = await testPunctual({ start: "2027-01-04T09:00:00Z" });
    const { punctual, channel } = t;
    await audience(t);
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-02-01T09:00:00",
      floating: true,
      recipients: ["ann", "bob", "cy", "dee"],
      reminders: [{ key: "r", channel: "test", category: "digest" }],
    });
    const first = await punctual.triggerSchedule(schedule.id, {}, { triggerId: "t-1" });
    expect(first.created).toBe(true);
    expect(first.total).toBe(4);
    expect(first.deliveries.map((d) => d.recipientId).sort()).toEqual(["ann", "bob", "cy", "dee"]);
    expect(new Set(first.deliveries.map((d) => d.deliveryKey)).size).toBe(4);
    const again = await punctual.triggerSchedule(schedule.id, {}, { triggerId: "t-1" });
    expect(again).toMatchObject({ created: false, total: 4 });
    expect(again.deliveries.map((d) => d.id)).toEqual(first.deliveries.map((d) => d.id));
    await tickAndDrain(punctual);
    expect(channel.sends.map((s) => s.delivery.target)).toEqual([{ to: "ann" }]);
    const rows = await deliveries(punctual);
    const of = (id: string) => rows.find((d) => d.recipientId === id);
    expect(of("ann")).toMatchObject({ state: "sent" });
    expect(of("bob")).toMatchObject({ state: "skipped", reason: "NO_TARGET" });
    expect(of("cy")).toMatchObject({ state: "skipped", reason: "OPTED_OUT" });
    // dee's own quiet window (08:00–12:00 in her zone) defers the triggered send to 12:00.
    expect(of("dee")).toMatchObject({ state: "pending", runAt: "2027-01-04T12:00:00.000Z" });
    t.clock.set("2027-01-04T12:00:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends.map((s) => s.delivery.target)).toEqual([{ to: "ann" }, { to: "dee" }]);
    expect(await deliveries(punctual)).toHaveLength(4);
  });

  it("API-9, API-11: a trigger of a paused schedule for recipients is a conflict and makes nothing", async () => {
    t = await testPunctual({ start: "2027-01-04T09:00:00Z" });
    const { punctual } = t;
    await audience(t);
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-02-01T09:00:00Z",
      recipients: ["ann"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await punctual.pauseSchedule(schedule.id);
    await expect(punctual.triggerSchedule(schedule.id, {})).rejects.toThrow(/paused/);
    expect(await deliveries(punctual)).toHaveLength(0);
  });

  it("API-9, API-11: a backfill plans each recipient's past occurrences in their zone, keyed as planned ones: sent ones are kept, never sent twice", async () => {
    t = await testPunctual({
      start: "2027-01-03T12:00:00Z",
      scheduler: { planAheadMs: 86_400_000 },
    });
    const { punctual, channel, clock } = t;
    await audience(t);
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=3",
      recipients: ["ann", "bob"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    // 2027-01-04 09:00 in Tokyo is 00:00Z: ann's first is sent; bob's (09:00Z) skipped NO_TARGET.
    clock.set("2027-01-04T00:00:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    // The process was down until 2027-01-06 12:00: 2027-01-05 and 2027-01-06 were never
    // planned. The operator backfills the range before the planner runs again.
    clock.set("2027-01-06T12:00:00Z");
    const dry = await punctual.backfillSchedule(schedule.id, {
      from: "2027-01-03T00:00:00Z",
      to: "2027-01-06T12:00:00Z",
      dryRun: true,
    });
    const items = dry.items.map((i) => [i.recipientId, i.occurrenceAt]);
    expect(items).toEqual([
      ["ann", "2027-01-04T00:00:00.000Z"],
      ["bob", "2027-01-04T09:00:00.000Z"],
      ["ann", "2027-01-05T00:00:00.000Z"],
      ["bob", "2027-01-05T09:00:00.000Z"],
      ["ann", "2027-01-06T00:00:00.000Z"],
      ["bob", "2027-01-06T09:00:00.000Z"],
    ]);
    // What planning made is found by its key: ann's sent 2027-01-04 is kept.
    expect(dry.items[0]).toMatchObject({ existing: "sent" });
    const done = await punctual.backfillSchedule(schedule.id, {
      from: "2027-01-03T00:00:00Z",
      to: "2027-01-06T12:00:00Z",
    });
    expect(done.created).toBe(dry.created);
    expect(done.existing).toBe(dry.existing);
    await tickAndDrain(punctual);
    const rows = await deliveries(punctual);
    expect(new Set(rows.map((d) => d.deliveryKey)).size).toBe(rows.length);
    expect(rows).toHaveLength(6);
    // ann's 2027-01-04 was sent once; bob (no target) is skipped: his 2027-01-04, planned
    // and missed while down, by the misfire policy (kept by the backfill), the others NO_TARGET.
    const annSent = rows.filter((d) => d.recipientId === "ann" && d.state === "sent");
    expect(annSent.map((d) => d.occurrenceAt).sort()).toEqual([
      "2027-01-04T00:00:00.000Z",
      "2027-01-05T00:00:00.000Z",
      "2027-01-06T00:00:00.000Z",
    ]);
    expect(channel.sends).toHaveLength(3);
    expect(rows.filter((d) => d.recipientId === "bob").map((d) => d.reason)).toEqual([
      "stale",
      "NO_TARGET",
      "NO_TARGET",
    ]);
  });
});
