/**
 * REC-3: a stored rule the planner can read only by repairing it (lenient `parseRule`) is
 * planned as repaired, and the repair is logged at WARN with the schedule id, once per
 * schedule and rule, and counted.
 */
import { afterEach, describe, expect, it } from "vitest";
import { testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

describe("REC-3: repaired stored rules are logged", () => {
  it("REC-3: the planner logs parseRule's repairs once per schedule and rule (WARN, schedule id) and counts them", async () => {
    t = await testPunctual({ start: "2027-01-04T06:00:00Z" });
    const { punctual, logs } = t;
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=DAILY;UNTIL=20270106T080000Z",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    const repairLogs = () =>
      logs.filter(
        (l) => l.level === "warn" && l.scheduleId === schedule.id && /repairs/.test(l.msg ?? ""),
      );
    expect(repairLogs()).toHaveLength(0);

    // A rule strict validation now refuses (local UNTIL with a zoned DTSTART), as an older
    // release or a hand edit may have stored it; replanned from scratch on every pass.
    const replan = async (rrule: string) => {
      await punctual.db.query(
        "update punctual_schedules set rrule = $2, planned_until = null where id = $1",
        [schedule.id, rrule],
      );
      await tickAndDrain(punctual);
    };
    await replan("FREQ=DAILY;UNTIL=20270107T090000");
    await replan("FREQ=DAILY;UNTIL=20270107T090000");
    await replan("FREQ=DAILY;UNTIL=20270107T090000");
    expect(repairLogs()).toHaveLength(1);
    expect(repairLogs()[0]).toMatchObject({
      rrule: "FREQ=DAILY;UNTIL=20270107T090000",
      repairs: [expect.stringMatching(/rrule\.UNTIL: .*read it in Europe\/Berlin/)],
    });
    // Planned as repaired, not quarantined.
    expect((await punctual.getSchedule(schedule.id)).state).toBe("active");

    // Another repaired rule for the same schedule is logged again.
    await replan("FREQ=DAILY;UNTIL=20270108T090000");
    expect(repairLogs()).toHaveLength(2);
    expect(await punctual.metrics.ruleRepairs.get()).toMatchObject({ values: [{ value: 2 }] });
  });
});
