/**
 * A create is validated once (REC-3, API-1): the rule its validation read is the one
 * planning expands, so a create reads its RRULE text once; planning a stored schedule
 * later (a sweep, an edit's realign) reads it from its row.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { createApi } from "../../src/api/server.js";
import { ruleCacheSizes } from "../../src/recurrence/recurrence.js";
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

  it("REC-3 API-1: a create through the HTTP API reads its rule on the worker thread only; this thread builds it from that reading", async () => {
    t = await testPunctual();
    const api = createApi(t.punctual);
    parses.count = 0;
    const res = await api.request("/v1/schedules", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        dtstart: "2027-01-04T08:00:00Z",
        rrule: "FREQ=MINUTELY;COUNT=3;BYSECOND=0",
        reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
      }),
    });
    expect(res.status).toBe(201);
    const { id } = (await res.json()) as { id: string };
    // The worker thread read the text (its own module instance, not counted here); the
    // validation, the stored definition and the planning on this thread took its reading.
    expect(parses.count).toBe(0);
    expect((await t.punctual.listDeliveries({ scheduleId: id })).items).toHaveLength(3);
    // The reading was lent for the request only.
    expect(ruleCacheSizes().lent).toBe(0);
    // A bad rule is still refused by name, and read here again only to say why.
    const bad = await api.request("/v1/schedules", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        dtstart: "2027-01-04T08:00:00Z",
        rrule: "FREQ=MINUTELY;BYSECOND=99",
        reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
      }),
    });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(await bad.json())).toContain("rrule.BYSECOND");
  });
});
