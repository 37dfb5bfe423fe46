/**
 * A create is validated once (REC-3, API-1): the rule its validation read is the one
 * planning expands, so a create reads its RRULE text once; planning a stored schedule
 * later (a sweep, an edit's realign) reads it from its row.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type * as RuleModule from "../../src/recurrence/rule.js";
import { testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

const parses = vi.hoisted(() => ({ count: 0 }));
vi.mock("../../src/recurrence/rule.js", async (original) => {
  const actual = await original<typeof RuleModule>();
  return {
    ...actual,
    parseRuleText: (...args: Parameters<typeof actual.parseRuleText>) => {
      parses.count++;
      return actual.parseRuleText(...args);
    },
  };
});

let t: TestPunctual | null = null;
afterEach(async () => {
  await t?.close();
  t = null;
});

describe("validated once", () => {
  it("REC-3 API-1: a create reads its rule once and plans its first deliveries from it", async () => {
    t = await testPunctual();
    const { punctual } = t;
    parses.count = 0;
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      rrule: "FREQ=MINUTELY;COUNT=3",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    expect(parses.count).toBe(1);
    const planned = await punctual.listDeliveries({ scheduleId: schedule.id });
    expect(planned.items).toHaveLength(3);
    // An edit of the rule reads the new rule to check it, and its realign reads the row.
    parses.count = 0;
    await punctual.updateSchedule(schedule.id, { rrule: "FREQ=MINUTELY;COUNT=2" });
    expect(parses.count).toBeGreaterThan(0);
    await tickAndDrain(punctual);
    expect((await punctual.listDeliveries({ scheduleId: schedule.id })).items).toHaveLength(2);
  });
});
