/**
 * The process-wide caches of rule work are bounded (OPS-12): every scheduler, importer and
 * request of a process shares them, so however many distinct rules are validated, they
 * hold at most MAX_KEPT_WALKS COUNT walks (MAX_KEPT_WALK_INSTANTS instants) and
 * MAX_KEPT_SEARCHES feasibility searches, and lent work is gone once released.
 */
import { describe, expect, it } from "vitest";
import {
  lendRuleWork,
  MAX_KEPT_SEARCHES,
  MAX_KEPT_WALK_INSTANTS,
  MAX_KEPT_WALKS,
  recordRuleWork,
  ruleCacheSizes,
  validateRule,
} from "../../../src/recurrence/recurrence.js";

describe("OPS-12 bounded rule caches", () => {
  it("OPS-12: more distinct COUNT rules than the bound keep at most MAX_KEPT_WALKS walks", () => {
    for (let i = 0; i < MAX_KEPT_WALKS + 40; i++) {
      validateRule({
        dtstart: "2027-01-04T09:00:00Z",
        tzid: "UTC",
        rrule: `FREQ=DAILY;COUNT=${i + 2}`,
      });
    }
    const sizes = ruleCacheSizes();
    expect(sizes.walks).toBe(MAX_KEPT_WALKS);
    expect(sizes.walkInstants).toBeLessThanOrEqual(MAX_KEPT_WALK_INSTANTS);
  });

  it("OPS-12: long COUNT walks are dropped by their instants before the series bound", () => {
    // Each 20,000 instants: more than 50 of them exceed the instants bound.
    for (let i = 0; i < 60; i++) {
      validateRule({
        dtstart: "2027-01-04T09:00:00Z",
        tzid: "UTC",
        rrule: `FREQ=MINUTELY;INTERVAL=${i + 1};COUNT=20000`,
      });
    }
    const sizes = ruleCacheSizes();
    expect(sizes.walkInstants).toBeLessThanOrEqual(MAX_KEPT_WALK_INSTANTS);
    expect(sizes.walkInstants).toBeGreaterThan(MAX_KEPT_WALK_INSTANTS - 20_000);
  });

  it("OPS-12: more distinct rules than the bound keep at most MAX_KEPT_SEARCHES feasibility searches", () => {
    for (let i = 0; i < MAX_KEPT_SEARCHES + 50; i++) {
      validateRule({
        dtstart: "2027-01-04T09:00:00Z",
        tzid: "UTC",
        rrule: `FREQ=WEEKLY;INTERVAL=${i + 1}`,
      });
    }
    expect(ruleCacheSizes().searches).toBe(MAX_KEPT_SEARCHES);
  });

  it("OPS-12: lent work, rule readings included, lives until its borrower releases it", () => {
    const input = { dtstart: "2027-01-04T09:00:00Z", tzid: "UTC", rrule: "FREQ=DAILY;COUNT=3" };
    const { work } = recordRuleWork(() => validateRule(input));
    expect(work.rules?.map(([, p]) => p.spec.count)).toEqual([3]);
    const release = lendRuleWork(work);
    expect(ruleCacheSizes().lent).toBe(1);
    release();
    expect(ruleCacheSizes().lent).toBe(0);
  });
});
