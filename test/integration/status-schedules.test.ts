/**
 * OPS-3 / API-3: `GET /v1/status` counts schedules by the state views and lists show: an
 * active one-off whose deliveries are all final is `finished`, as
 * `GET /v1/schedules?state=finished` says, not `active`.
 */
import { afterEach, describe, expect, it } from "vitest";
import { readStatus } from "../../src/api/status.js";
import { testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

describe("schedule counts of the status (OPS-3)", () => {
  it("OPS-3: a sent one-off counts as finished, a running series and a paused one as themselves; the counts match the lists", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const p = t.punctual;
    const reminders = [{ key: "r", offset: "PT0S", channel: "test" }];
    await p.createSchedule({ dtstart: "2027-01-04T08:00:30Z", tzid: "UTC", reminders });
    await p.createSchedule({
      dtstart: "2027-01-05T09:00:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=DAILY",
      reminders,
    });
    const paused = await p.createSchedule({
      dtstart: "2027-01-05T09:00:00Z",
      tzid: "UTC",
      reminders,
    });
    await p.pauseSchedule(paused.schedule.id);
    // Before the one-off is sent it is active.
    expect((await readStatus(p)).schedules).toEqual({ active: 2, paused: 1 });
    t.clock.advance(60_000);
    await tickAndDrain(p);
    expect(t.channel.keys()).toHaveLength(1);
    const counts = (await readStatus(p)).schedules;
    expect(counts).toEqual({ active: 1, finished: 1, paused: 1 });
    for (const state of ["active", "finished", "paused"] as const) {
      const listed = await p.listSchedules({ state, limit: 100 });
      expect(listed.items.length, state).toBe(counts[state]);
    }
  });
});
