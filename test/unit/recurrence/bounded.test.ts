/**
 * OPS-12: bounded work. A rule that can never (or only too rarely) produce an occurrence is
 * decided at validation; every later call is bounded in steps and in time, and says how far
 * its answer is complete. Work is counted in expansion steps, never in elapsed time.
 */
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../../src/errors/index.js";
import { budget, compileRule, expandWalls, measureWork } from "../../../src/recurrence/expand.js";
import {
  MAX_COUNT_STEPS,
  MAX_STEPS_PER_CALL,
  NO_OCCURRENCE_SEARCH_STEPS,
  parseRule,
  validateRule,
  type RecurrenceInput,
} from "../../../src/recurrence/index.js";
import { parseRuleText } from "../../../src/recurrence/rule.js";
import { planSchedule } from "../../../src/scheduler/plan.js";
import { ONE_PERIOD } from "./helpers.js";

function refusal(input: RecurrenceInput): ValidationError {
  try {
    validateRule(input);
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error(`expected ${input.rrule} to be refused`);
}

const monday = "2027-01-04T09:00:00";

/** A stored perpetual UTC series as the planner reads it, with the fields a test sets. */
function planRow(fields: {
  id: string;
  dtstart: string;
  rrule: string;
  created_at: Date;
  planned_until: Date;
  db_now: Date;
}): Parameters<typeof planSchedule>[0] {
  return {
    version: 1,
    tzid: "UTC",
    rdate: [],
    exdate: [],
    recurring: true,
    ends_at: null,
    expires_at: null,
    dst_gap: "shift",
    dst_overlap: "earlier",
    grace_ms: 0,
    perpetual: true,
    cap_logged_at: null,
    ...fields,
  } as unknown as Parameters<typeof planSchedule>[0];
}

describe("OPS-12: rules that never match are decided at validation", () => {
  const never: Array<[string, string, string]> = [
    // [rule, parts the message names, what kind of end]
    ["FREQ=YEARLY;BYWEEKNO=1;BYMONTH=6", "BYWEEKNO=1;BYMONTH=6", "no occurrence at all"],
    ["FREQ=MONTHLY;BYDAY=MO;BYSETPOS=6", "BYDAY=MO;BYSETPOS=6", "within the search bound"],
    ["FREQ=DAILY;INTERVAL=7;BYDAY=TU", "INTERVAL=7;BYDAY=TU", "within the search bound"],
    ["FREQ=MONTHLY;BYMONTHDAY=31;BYDAY=MO;BYMONTH=4,6,9,11", "BYMONTH=4,6,9,11", "never occurs"],
    ["FREQ=HOURLY;INTERVAL=2;BYHOUR=2,4", "INTERVAL=2;BYHOUR=2,4", "within the search bound"],
    [
      "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=1MO;BYSETPOS=1",
      "BYMONTH=2;BYMONTHDAY=29;BYDAY=1MO;BYSETPOS=1",
      "no occurrence at all",
    ],
  ];
  for (const [rrule, parts, end] of never) {
    it(`OPS-12: ${rrule} is refused (strict) naming ${parts}, within the search's steps`, () => {
      const input = { dtstart: monday, tzid: "Europe/Berlin", rrule };
      const work = measureWork(() => refusal(input));
      const issue = work.result.issues[0];
      expect(issue?.field.startsWith("rrule")).toBe(true);
      expect(work.result.message).toContain(end);
      expect(work.result.message).toContain(parts);
      expect(work.steps).toBeLessThanOrEqual(NO_OCCURRENCE_SEARCH_STEPS + ONE_PERIOD);
    });
    it(`OPS-12: ${rrule} fails lenient parsing too (the planner quarantines it with the reason)`, () => {
      const parsed = parseRule({ dtstart: monday, tzid: "Europe/Berlin", rrule });
      expect(parsed.ok).toBe(false);
      if (parsed.ok) return;
      expect(parsed.error.message).toContain(parts);
    });
  }

  it("OPS-12: a rare rule whose first occurrence is within the search is kept", () => {
    // 29 February on a Monday: 2044, then 2072.
    const rec = validateRule({
      dtstart: "2027-01-01T00:00:00",
      rrule: "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
    });
    const next = measureWork(() => rec.next(Date.UTC(2027, 0, 2))).result;
    expect(next?.local).toBe("2044-02-29T00:00:00");
  });

  it("OPS-12: a COUNT series that its work bound cannot reach the end of is refused, naming COUNT", () => {
    const work = measureWork(() =>
      refusal({ dtstart: "2027-01-01T00:00:00", rrule: "FREQ=DAILY;COUNT=50000" }),
    );
    expect(work.result.issues[0]?.field).toBe("rrule.COUNT");
    expect(work.result.message).toContain("COUNT=50000");
    expect(work.result.message).toContain("UNTIL");
    expect(work.steps).toBeLessThanOrEqual(
      NO_OCCURRENCE_SEARCH_STEPS + MAX_COUNT_STEPS + 2 * ONE_PERIOD,
    );
    // The same series ended by UNTIL is fine: it is expanded by windows, not counted.
    expect(() =>
      validateRule({ dtstart: "2027-01-01T00:00:00", rrule: "FREQ=DAILY;UNTIL=21630101T000000" }),
    ).not.toThrow();
    // And a COUNT the bound does reach keeps its whole set.
    const small = validateRule({ dtstart: "2027-01-01T00:00:00", rrule: "FREQ=DAILY;COUNT=5000" });
    const all = measureWork(() => small.between(-Infinity, Infinity, 10_000));
    expect(all.result).toHaveLength(5000);
  });

  it("OPS-12: a COUNT series is walked once per validation, and once for all validations of the same series", () => {
    // An import reads each event's rule up to three times and the planner once more; a
    // calendar may repeat one event under many UIDs (fuzz seed 420761373: 30 of them).
    const input = {
      dtstart: "2031-03-05T07:45:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=DAILY;COUNT=15000",
    };
    const first = measureWork(() => validateRule(input));
    // The walk of the COUNT set answers the feasibility search too (no second search).
    expect(first.steps).toBeLessThanOrEqual(MAX_COUNT_STEPS);
    expect(first.steps).toBeGreaterThan(15_000);
    const again = measureWork(() => validateRule({ ...input, exdate: ["2031-03-06T07:45:00"] }));
    expect(again.steps).toBeLessThan(1_000);
    expect(again.result.between(-Infinity, Infinity, 20_000)).toHaveLength(14_999);
    const lenient = measureWork(() => parseRule(input));
    expect(lenient.steps).toBeLessThan(1_000);
  });
});

describe("OPS-12: every call is bounded in steps and in time, and says how far it is complete", () => {
  it("OPS-12: the expansion stops at its deadline, read on the budget's clock", () => {
    const spec = parseRuleText("FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYSECOND=9", {
      lenient: false,
      dateOnly: false,
      warnings: [],
    });
    let reads = 0;
    // A clock that advances 1 ms per reading: the deadline of 5 ms passes on the 6th.
    const b = budget(MAX_STEPS_PER_CALL, Infinity, { maxMs: 5, now: () => reads++ });
    const rule = compileRule(spec, 0);
    let found = 0;
    for (const wall of expandWalls(rule, 0, b)) {
      void wall;
      found++;
    }
    expect(b.timedOut).toBe(true);
    expect(b.exhausted).toBe(true);
    expect(reads).toBeLessThanOrEqual(8);
    expect(b.steps).toBeLessThanOrEqual(0);
    // Stopped long before the step cap, at a known wall second.
    expect(MAX_STEPS_PER_CALL - b.granted + b.steps).toBeLessThanOrEqual(0);
    expect(Number.isFinite(b.reachedWall)).toBe(true);
    expect(found).toBeGreaterThanOrEqual(0);
  });

  it("OPS-12: a scan stopped by its step cap is complete up to throughMs, and resumes there", () => {
    const rec = validateRule({
      dtstart: "2027-01-01T00:00:00",
      rrule: "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=3;BYMINUTE=7;BYSECOND=9",
    });
    const end = Date.UTC(9000, 0, 1);
    const first = measureWork(() => rec.scan(0, end, 10_000));
    expect(first.result.truncated).toBe(true);
    expect(first.steps).toBeLessThanOrEqual(MAX_STEPS_PER_CALL + ONE_PERIOD);
    const through = first.result.throughMs;
    expect(through).toBeLessThan(end);
    const second = measureWork(() => rec.scan(through, end, 10_000)).result;
    expect(second.throughMs).toBeGreaterThan(through);
    const firstPart = first.result.occurrences.filter((o) => o.instant < through);
    const all = [...firstPart, ...second.occurrences.filter((o) => o.instant < second.throughMs)];
    // Ascending, distinct, nothing skipped at the seam: every 29 February that is a Monday.
    for (let i = 1; i < all.length; i++) {
      expect(all[i]!.instant).toBeGreaterThan(all[i - 1]!.instant);
    }
    const years = all.slice(1).map((o) => Number(o.local.slice(0, 4)));
    const expected: number[] = [];
    for (let y = 2028; y <= years.at(-1)!; y++) {
      const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
      if (leap && new Date(Date.UTC(y, 1, 29)).getUTCDay() === 1) expected.push(y);
    }
    expect(years).toEqual(expected);
    expect(years.length).toBeGreaterThan(first.result.occurrences.length - 1);
  });

  it("OPS-12: the planner's watermark stops where a truncated scan stopped, so nothing is skipped", () => {
    // One occurrence an hour, found one minute slot at a time: a year of it is more
    // than one call's step cap.
    const rec = validateRule({
      dtstart: "2026-01-01T00:00:00Z",
      rrule: "FREQ=SECONDLY;BYMINUTE=7;BYSECOND=7",
    });
    const created = new Date("2026-01-01T00:00:00Z");
    const row = planRow({
      id: "s1",
      dtstart: "2026-01-01T00:00:00Z",
      rrule: "FREQ=SECONDLY;BYMINUTE=7;BYSECOND=7",
      created_at: created,
      planned_until: created,
      db_now: new Date("2027-01-01T00:00:00Z"),
    });
    const reminder = {
      schedule_id: "s1",
      key: "r",
      offset_duration: "PT0S",
      channel: "log",
      on_lost_lease: null,
      max_attempts: 3,
    };
    const options = { planAheadMs: 3_600_000, maxExpansionDays: 366 };
    const plan = measureWork(() => planSchedule(row, rec, [reminder], new Map(), options)).result;
    expect(plan.complete).toBe(false);
    expect(plan.plannedUntil).toBeLessThan(row.db_now.getTime());
    // DTSTART, then every hour up to the watermark is planned: none skipped.
    const hours = (plan.plannedUntil - created.getTime() - 7 * 60_000 - 7_000) / 3_600_000;
    const before = plan.deliveries.filter((d) => d.dueAt.getTime() < plan.plannedUntil);
    expect(before.length).toBe(1 + Math.ceil(hours));
    // The next pass continues from the watermark.
    const again = measureWork(() =>
      planSchedule(
        { ...row, planned_until: new Date(plan.plannedUntil) },
        rec,
        [reminder],
        new Map(),
        options,
      ),
    ).result;
    expect(again.deliveries[0]!.dueAt.getTime()).toBeGreaterThanOrEqual(plan.plannedUntil);
    expect(again.deliveries[0]!.dueAt.getTime() - before.at(-1)!.dueAt.getTime()).toBe(3_600_000);
  });
});

describe("OPS-12: the upper bound of a window's occurrences holds", () => {
  it("OPS-12: with UNTIL before DTSTART (lenient: only DTSTART remains), maxOccurrences counts DTSTART", () => {
    const parsed = parseRule({
      dtstart: "2026-10-05T04:53:38",
      tzid: "America/New_York",
      rrule: "FREQ=YEARLY;BYMONTHDAY=30;UNTIL=20010311T095615Z",
    });
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    const rec = parsed.recurrence;
    const from = rec.first.instant - 86_400_000;
    const to = rec.first.instant + 86_400_000;
    expect(rec.scan(from, to, 100).occurrences).toHaveLength(1);
    expect(rec.maxOccurrences(from, to)).toBeGreaterThanOrEqual(1);
    expect(rec.maxOccurrences(rec.first.instant + 1, to)).toBe(0);
  });
});

describe("DEL-7 OPS-12: planning a dense series always moves forward and shares its cap", () => {
  const created = new Date("2027-01-01T00:00:00Z");
  const row = planRow({
    id: "s2",
    dtstart: "1970-01-01T00:00:00Z",
    rrule: "FREQ=SECONDLY",
    created_at: created,
    planned_until: created,
    db_now: created,
  });
  const reminder = (key: string, offset: string) => ({
    schedule_id: "s2",
    key,
    offset_duration: offset,
    channel: "log",
    on_lost_lease: null,
    max_attempts: 3,
  });
  const options = { planAheadMs: 3_600_000, maxExpansionDays: 366 };
  const rec = validateRule({
    dtstart: "1970-01-01T00:00:00Z",
    tzid: "UTC",
    rrule: "FREQ=SECONDLY",
  });

  it("DEL-7: a FREQ=SECONDLY schedule with a -P1D reminder plans deliveries from its watermark on, and the next pass goes on after them", () => {
    const first = planSchedule(row, rec, [reminder("d", "-P1D")], new Map(), options);
    expect(first.deliveries.length).toBeGreaterThan(0);
    expect(first.deliveries[0]!.dueAt.getTime()).toBe(created.getTime());
    expect(first.plannedUntil).toBeGreaterThan(created.getTime() + 60_000);
    const second = planSchedule(
      { ...row, planned_until: new Date(first.plannedUntil) },
      rec,
      [reminder("d", "-P1D")],
      new Map(),
      options,
    );
    expect(second.deliveries[0]!.dueAt.getTime()).toBeGreaterThanOrEqual(first.plannedUntil);
    expect(second.plannedUntil).toBeGreaterThan(first.plannedUntil);
  });

  it("DEL-7: fifty -P1D reminders of a FREQ=SECONDLY schedule (a share of 50 each) still read past the 3 h margin and plan forward", () => {
    const reminders = Array.from({ length: 50 }, (_, i) => reminder(`d${i}`, "-P1D"));
    const plan = planSchedule(row, rec, reminders, new Map(), options);
    expect(plan.deliveries.length).toBeGreaterThan(0);
    expect(plan.deliveries.length).toBeLessThanOrEqual(2_500);
    expect(Math.min(...plan.deliveries.map((d) => d.dueAt.getTime()))).toBe(created.getTime());
    expect(plan.plannedUntil).toBeGreaterThan(created.getTime());
  });

  it("OPS-12: fifty reminders of a FREQ=SECONDLY schedule share one pass's cap of occurrences", () => {
    const reminders = Array.from({ length: 50 }, (_, i) => reminder(`r${i}`, `-PT${i}S`));
    const plan = planSchedule(row, rec, reminders, new Map(), options);
    expect(plan.deliveries.length).toBeGreaterThan(0);
    expect(plan.deliveries.length).toBeLessThanOrEqual(2_500);
    expect(plan.complete).toBe(false);
  });
});
