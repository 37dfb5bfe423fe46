/**
 * DEL-15 quiet hours and DEL-17 bounded, paced catch-up on a real engine (PGlite or
 * PostgreSQL, per PUNCTUAL_TEST_ENGINE), driven by the test clock.
 */
import { afterEach, describe, expect, it } from "vitest";
import { TransientError, ValidationError } from "../../src/errors/index.js";
import { deliveries, testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

const quiet = (tzid: string) => ({ tzid, start: "22:00", end: "07:00" });

describe("DEL-15: quiet hours", () => {
  it.each([
    // Berlin moves to summer time on the night of 2027-03-27: 23:00 CET (22:00Z) waits
    // until 07:00 CEST (+02:00) = 05:00Z, not 07:00 CET.
    {
      tzid: "Europe/Berlin",
      start: "2027-03-27T21:30:00Z",
      dtstart: "2027-03-27T23:00:00",
      due: "2027-03-27T22:00:00.000Z",
      end: "2027-03-28T05:00:00.000Z",
    },
    // New York falls back on the night of 2027-11-06: 23:00 EDT (03:00Z) waits until
    // 07:00 EST (−05:00) = 12:00Z, not 07:00 EDT.
    {
      tzid: "America/New_York",
      start: "2027-11-07T02:30:00Z",
      dtstart: "2027-11-06T23:00:00",
      due: "2027-11-07T03:00:00.000Z",
      end: "2027-11-07T12:00:00.000Z",
    },
  ])(
    "DEL-15: in $tzid, across a DST change, a delivery due in the window waits for its end; recorded, then sent",
    async ({ tzid, start, dtstart, due, end }) => {
      t = await testPunctual({ start });
      const { punctual, channel, clock } = t;
      await punctual.createSchedule({
        dtstart,
        tzid,
        reminders: [{ key: "r", channel: "test", quietHours: quiet(tzid) }],
      });
      await tickAndDrain(punctual);
      expect(await deliveries(punctual)).toMatchObject([
        {
          dueAt: due,
          state: "pending",
          runAt: end,
          deferredUntil: end,
          deferredReason: "QUIET_HOURS",
        },
      ]);
      // Past its due time and until one second before the window's end nothing is sent.
      clock.set(Date.parse(due) + 60_000);
      await tickAndDrain(punctual);
      clock.set(Date.parse(end) - 1_000);
      await tickAndDrain(punctual);
      expect(channel.sends).toHaveLength(0);
      clock.set(end);
      await tickAndDrain(punctual);
      expect(channel.sends).toHaveLength(1);
      expect(await deliveries(punctual)).toMatchObject([
        { state: "sent", late: false, deferredUntil: end, deferredReason: "QUIET_HOURS" },
      ]);
    },
  );

  it("DEL-15: the misfire grace counts from the deferred instant, so a deferred series row is not skipped as stale", async () => {
    t = await testPunctual({ start: "2027-01-04T20:00:00Z" });
    const { punctual, channel, clock } = t;
    await punctual.createSchedule({
      dtstart: "2027-01-04T23:00:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=DAILY;COUNT=2",
      misfire: "skip",
      graceMs: 900_000,
      reminders: [{ key: "r", channel: "test", quietHours: quiet("Europe/Berlin") }],
    });
    await tickAndDrain(punctual);
    // Eight hours after its due time, five minutes after the window's end (07:00 CET).
    clock.set("2027-01-05T06:05:00Z");
    await tickAndDrain(punctual);
    const [row] = await deliveries(punctual);
    expect(row).toMatchObject({
      dueAt: "2027-01-04T22:00:00.000Z",
      state: "sent",
      deferredUntil: "2027-01-05T06:00:00.000Z",
    });
    expect(channel.sends).toHaveLength(1);
  });

  it.each([
    // A send at 21:59:30 CET fails; its retry (60–120 s later) lands after 22:00, so it waits
    // until 07:00 CEST = 05:00Z on the night Berlin moves to summer time.
    {
      tzid: "Europe/Berlin",
      due: "2027-03-27T20:59:30Z",
      dtstart: "2027-03-27T21:59:30",
      end: "2027-03-28T05:00:00.000Z",
    },
    // New York falls back that night: 07:00 EST = 12:00Z.
    {
      tzid: "America/New_York",
      due: "2027-11-07T01:59:30Z",
      dtstart: "2027-11-06T21:59:30",
      end: "2027-11-07T12:00:00.000Z",
    },
  ])(
    "DEL-15: in $tzid, a retry whose next attempt falls in the window is deferred to its end across the DST change, recorded like a first attempt",
    async ({ tzid, due, dtstart, end }) => {
      t = await testPunctual({ start: due, scheduler: { backoffBaseMs: 120_000 } });
      const { punctual, channel, clock } = t;
      channel.behaviour = (_d, _ctx, n) => {
        if (n === 1) throw new TransientError("receiver down");
        return { messageId: null };
      };
      await punctual.createSchedule({
        dtstart,
        tzid,
        reminders: [{ key: "r", channel: "test", quietHours: quiet(tzid) }],
      });
      await tickAndDrain(punctual);
      expect(channel.sends).toHaveLength(1);
      expect(await deliveries(punctual)).toMatchObject([
        {
          state: "retry",
          failures: 1,
          runAt: end,
          deferredUntil: end,
          deferredReason: "QUIET_HOURS",
        },
      ]);
      // Where the backoff alone would have sent it, and until just before the end: nothing.
      clock.set(Date.parse(due) + 121_000);
      await tickAndDrain(punctual);
      clock.set(Date.parse(end) - 1_000);
      await tickAndDrain(punctual);
      expect(channel.sends).toHaveLength(1);
      clock.set(end);
      await tickAndDrain(punctual);
      expect(channel.sends).toHaveLength(2);
      expect(await deliveries(punctual)).toMatchObject([
        { state: "sent", deferredUntil: end, deferredReason: "QUIET_HOURS" },
      ]);
    },
  );

  it("DEL-15: a critical reminder's retry is not deferred by its window", async () => {
    const due = "2027-01-04T20:59:30Z";
    t = await testPunctual({ start: due, scheduler: { backoffBaseMs: 120_000 } });
    const { punctual, channel } = t;
    channel.behaviour = (_d, _ctx, n) => {
      if (n === 1) throw new TransientError("receiver down");
      return { messageId: null };
    };
    await punctual.createSchedule({
      dtstart: due,
      reminders: [
        { key: "r", channel: "test", quietHours: quiet("Europe/Berlin"), priority: "critical" },
      ],
    });
    await tickAndDrain(punctual);
    const [row] = await deliveries(punctual);
    expect(row).toMatchObject({ state: "retry", deferredUntil: null, deferredReason: null });
    expect(Date.parse(row!.runAt) - Date.parse(due)).toBeLessThanOrEqual(120_000);
  });

  it("DEL-15: a critical reminder bypasses quiet hours", async () => {
    t = await testPunctual({ start: "2027-01-04T22:30:00Z" });
    const { punctual, channel } = t;
    await punctual.createSchedule({
      dtstart: "2027-01-04T22:30:00Z",
      reminders: [
        { key: "normal", channel: "test", quietHours: quiet("Europe/Berlin") },
        {
          key: "critical",
          channel: "test",
          quietHours: quiet("Europe/Berlin"),
          priority: "critical",
        },
      ],
    });
    await tickAndDrain(punctual);
    expect(channel.sends.map((s) => s.delivery.reminderKey)).toEqual(["critical"]);
    const rows = await deliveries(punctual);
    expect(rows.find((r) => r.reminderKey === "critical")).toMatchObject({
      state: "sent",
      deferredUntil: null,
      deferredReason: null,
    });
    expect(rows.find((r) => r.reminderKey === "normal")).toMatchObject({
      state: "pending",
      deferredUntil: "2027-01-05T06:00:00.000Z",
    });
  });

  it("DEL-15: an edit that removes the window moves the waiting row back to its due time", async () => {
    t = await testPunctual({ start: "2027-01-04T21:30:00Z" });
    const { punctual } = t;
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-04T23:00:00",
      tzid: "Europe/Berlin",
      reminders: [{ key: "r", channel: "test", quietHours: quiet("Europe/Berlin") }],
    });
    await tickAndDrain(punctual);
    expect((await deliveries(punctual))[0]).toMatchObject({ deferredReason: "QUIET_HOURS" });
    await punctual.updateSchedule(schedule.id, { reminders: [{ key: "r", channel: "test" }] });
    expect((await deliveries(punctual))[0]).toMatchObject({
      runAt: "2027-01-04T22:00:00.000Z",
      deferredUntil: null,
      deferredReason: null,
    });
  });

  it("DEL-15: a bad window is refused at create, naming the field and the value", async () => {
    t = await testPunctual();
    const bad = (quietHours: unknown) =>
      t!.punctual.createSchedule({
        dtstart: "2027-01-05T08:00:00Z",
        reminders: [{ key: "r", channel: "test", quietHours }],
      });
    const issues = async (quietHours: unknown) => {
      const err = await bad(quietHours).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationError);
      return (err as ValidationError).issues.map((i) => [i.field, i.value]);
    };
    expect(await issues({ tzid: "Europe/Berlin", start: "25:00", end: "07:00" })).toEqual([
      ["reminders.0.quietHours.start", "25:00"],
    ]);
    expect(await issues({ tzid: "Mars/Olympus", start: "22:00", end: "07:00" })).toEqual([
      ["reminders.0.quietHours.tzid", "Mars/Olympus"],
    ]);
    expect(await issues({ tzid: "UTC", start: "22:00", end: "22:00" })).toEqual([
      ["reminders.0.quietHours.end", "22:00"],
    ]);
    expect(await issues({ tzid: "UTC", start: "22:00", end: "07:00", days: ["MO", "XX"] })).toEqual(
      [["reminders.0.quietHours.days.1", "XX"]],
    );
  });
});

describe("DEL-17: catch-up is bounded and paced", () => {
  it("DEL-17: after 3 days down, an hourly series with misfire all sends only its window, oldest first, one per pace step", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const { punctual, channel, clock } = t;
    await punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      rrule: "FREQ=HOURLY;COUNT=200",
      misfire: "all",
      catchUp: { windowMs: 6 * 3_600_000, paceMs: 60_000 },
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    // Down for three days: 72 hourly occurrences missed (09:00 on the 4th … 08:00 on the 7th).
    clock.set("2027-01-07T08:30:00Z");
    await tickAndDrain(punctual);
    let rows = await deliveries(punctual);
    const missed = rows.filter(
      (r) => r.dueAt > "2027-01-04T08:00:00.000Z" && r.dueAt <= "2027-01-07T08:30:00.000Z",
    );
    expect(missed).toHaveLength(72);
    // Older than six hours: recorded as skipped, reason stale, never silently dropped.
    const stale = missed.filter((r) => r.state === "skipped");
    expect(stale).toHaveLength(66);
    expect(stale.every((r) => r.reason === "stale")).toBe(true);
    // The rest go out one per minute, oldest first: only the first one now.
    expect(channel.sends).toHaveLength(2);
    expect(channel.sends[1]!.delivery.dueAt.toISOString()).toBe("2027-01-07T03:00:00.000Z");
    for (let minute = 1; minute <= 5; minute++) {
      clock.advance(60_000);
      await tickAndDrain(punctual);
      expect(channel.sends).toHaveLength(2 + minute);
    }
    expect(channel.sends.slice(1).map((s) => s.delivery.dueAt.toISOString())).toEqual([
      "2027-01-07T03:00:00.000Z",
      "2027-01-07T04:00:00.000Z",
      "2027-01-07T05:00:00.000Z",
      "2027-01-07T06:00:00.000Z",
      "2027-01-07T07:00:00.000Z",
      "2027-01-07T08:00:00.000Z",
    ]);
    rows = await deliveries(punctual);
    expect(rows.filter((r) => r.state === "sent" && r.late)).toHaveLength(6);
  });

  it("DEL-17: catchUp is refused with any misfire policy but all, naming the field", async () => {
    t = await testPunctual();
    const err = await t.punctual
      .createSchedule({
        dtstart: "2027-01-05T08:00:00Z",
        rrule: "FREQ=HOURLY;COUNT=5",
        misfire: "skip",
        catchUp: { windowMs: 3_600_000 },
        reminders: [{ key: "r", channel: "test" }],
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues.map((i) => i.field)).toEqual(["catchUp"]);
  });
});
