/**
 * Small truths of the library and API a new user runs into: a stopped scheduler refuses
 * tick(), a sent delivery carries no stale error, a redriven delivery counts its attempts
 * per round, a refused create names every failing field.
 */
import { afterEach, describe, expect, it } from "vitest";
import { PunctualError, TransientError, ValidationError } from "../../src/errors/index.js";
import { deliveries, testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

describe("scheduler lifecycle", () => {
  it("API-4 OPS-6: tick() after stop() throws a clear error; after start() again it runs", async () => {
    t = await testPunctual();
    const { scheduler } = t.punctual;
    await scheduler.tick();
    await scheduler.stop();
    const refused = await scheduler.tick().then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(PunctualError);
    expect(refused).toMatchObject({
      code: "SCHEDULER_STOPPED",
      message: expect.stringMatching(/tick\(\) was called after stop\(\)/),
    });
    await scheduler.start();
    await tickAndDrain(t.punctual);
    await scheduler.stop();
  });
});

describe("delivery views", () => {
  it("DEL-14 API-1: a delivery sent after a failed attempt shows no stale error; its attempts keep it", async () => {
    t = await testPunctual({ scheduler: { maxAttempts: 3, backoffBaseMs: 1_000 } });
    const { punctual, channel, clock } = t;
    await punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      tzid: "UTC",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    let calls = 0;
    channel.behaviour = () => {
      calls++;
      if (calls === 1) throw new TransientError("503 from receiver");
      return { messageId: "m-2", status: 200 };
    };
    await tickAndDrain(punctual);
    let [row] = await deliveries(punctual);
    expect(row).toMatchObject({ state: "retry", lastError: "503 from receiver" });
    clock.set(row!.runAt);
    await tickAndDrain(punctual);
    [row] = await deliveries(punctual);
    expect(row).toMatchObject({ state: "sent", reason: null, lastError: null });
    const detail = await punctual.getDelivery(row!.id);
    expect(detail.lastError).toBeNull();
    expect(detail.attempts.map((a) => [a.outcome, a.error])).toEqual([
      ["transient", "503 from receiver"],
      ["sent", null],
    ]);
  });
});

describe("redriven deliveries", () => {
  it("DEL-12 DEL-14: a redriven delivery counts its attempts per round: attempt 1 of 3, round 2, not 4 of 3", async () => {
    t = await testPunctual({ scheduler: { maxAttempts: 3, backoffBaseMs: 1_000 } });
    const { punctual, channel, clock } = t;
    await punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      tzid: "UTC",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    channel.behaviour = () => {
      throw new TransientError("503 from receiver");
    };
    for (let i = 0; i < 3; i++) {
      const [waiting] = await deliveries(punctual);
      clock.set(waiting!.runAt);
      await tickAndDrain(punctual);
    }
    const [dead] = await deliveries(punctual);
    expect(dead).toMatchObject({ state: "dead", attempt: 3, maxAttempts: 3, round: 1 });
    await punctual.redriveDelivery(dead!.id);
    const [redriven] = await deliveries(punctual);
    expect(redriven).toMatchObject({ state: "pending", attempt: 0, round: 2, failures: 0 });
    await tickAndDrain(punctual);
    const [again] = await deliveries(punctual);
    expect(again).toMatchObject({ state: "retry", attempt: 1, maxAttempts: 3, round: 2 });
    channel.behaviour = () => ({ messageId: "m", status: 200 });
    clock.set(again!.runAt);
    await tickAndDrain(punctual);
    const detail = await punctual.getDelivery(again!.id);
    expect(detail).toMatchObject({ state: "sent", attempt: 2, round: 2 });
    // The history keeps every attempt's own number (the fencing token counts on).
    expect(detail.attempts.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5]);
  });
});

describe("deliveries list", () => {
  it("API-1 API-3: deliveries list filters by source and reads newest first, paging in that order", async () => {
    t = await testPunctual();
    const { punctual } = t;
    const make = (source: string, externalId: string) =>
      punctual.createSchedule({
        dtstart: "2027-01-04T08:00:00Z",
        rrule: "FREQ=MINUTELY;COUNT=3",
        source,
        externalId,
        reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
      });
    const cal = await make("team-calendar", "a");
    const other = await make("crm", "b");
    await tickAndDrain(punctual);
    const all = (await punctual.listDeliveries({})).items;
    expect(all).toHaveLength(6);
    const ofCal = all.filter((d) => d.scheduleId === cal.schedule.id).map((d) => d.id);
    const bySource = await punctual.listDeliveries({ source: "team-calendar" });
    expect(bySource.items.map((d) => d.id)).toEqual(ofCal);
    const newest = await punctual.listDeliveries({
      source: "team-calendar",
      order: "newest",
      limit: 2,
    });
    expect(newest.items.map((d) => d.id)).toEqual([...ofCal].reverse().slice(0, 2));
    const rest = await punctual.listDeliveries({
      source: "team-calendar",
      order: "newest",
      limit: 2,
      after: newest.nextAfter ?? undefined,
    });
    expect(rest.items.map((d) => d.id)).toEqual([ofCal[0]]);
    expect(
      (await punctual.listDeliveries({ source: "crm" })).items.every(
        (d) => d.scheduleId === other.schedule.id,
      ),
    ).toBe(true);
    await expect(punctual.listDeliveries({ order: "sideways" })).rejects.toMatchObject({
      issues: [expect.objectContaining({ field: "order" })],
    });
  });
});

describe("validation", () => {
  it("API-1 REC-3: a create with a malformed field still names the bad rule, zone, channel and duplicate key", async () => {
    t = await testPunctual();
    const refusal = async (body: unknown) => {
      const error = await t!.punctual.createSchedule(body).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ValidationError);
      return (error as ValidationError).issues.map((i) => i.field).sort();
    };
    expect(
      await refusal({
        dtstart: "2027-01-04T08:00:00Z",
        rrule: "FREQ=DAILY;BYFOO=1",
        misfire: "nope",
        reminders: [{ key: "r", offset: "PT0S", channel: "nochan" }],
      }),
    ).toEqual(["misfire", "reminders.0.channel", "rrule.BYFOO"]);
    expect(
      await refusal({
        dtstart: "2027-01-04T08:00:00Z",
        rrule: "FREQ=DAILY;COUNT=0",
        graceMs: -5,
        reminders: [
          { key: "r", offset: "PT0S", channel: "test" },
          { key: "r", offset: "PT0S", channel: "test" },
          { key: "s", offset: "PT0S", channel: "test", target: 5 },
          { key: "u", offset: "PT0S", channel: "nochan" },
        ],
      }),
    ).toEqual([
      "graceMs",
      "reminders.1.key",
      "reminders.2.target",
      "reminders.3.channel",
      "rrule.COUNT",
    ]);
    expect(
      await refusal({
        dtstart: "garbage",
        tzid: "Nope/Zone",
        reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
      }),
    ).toEqual(["dtstart", "tzid"]);
    expect((await t.punctual.listSchedules({})).items).toEqual([]);
  });
});
