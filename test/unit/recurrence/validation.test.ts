/**
 * REC-3 (strict and lenient postures) and REC-4/REC-5 (bounds).
 */
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../../src/errors/index.js";
import {
  parseRule,
  planningWindow,
  validateRule,
  type RecurrenceInput,
} from "../../../src/recurrence/index.js";
import { MAX_STEPS_PER_CALL } from "../../../src/recurrence/index.js";
import { measureWork } from "../../../src/recurrence/expand.js";
import { NO_OCCURRENCE_SEARCH_STEPS } from "../../../src/recurrence/recurrence.js";
import { locals, ONE_PERIOD } from "./helpers.js";

function strictError(input: RecurrenceInput): ValidationError {
  try {
    validateRule(input);
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error("expected a ValidationError");
}

const base = { dtstart: "2027-01-04T09:00:00", tzid: "Europe/Berlin" };

describe("REC-3: validateRule is strict and names the offending part", () => {
  const cases: [string, RecurrenceInput, string, string][] = [
    ["unknown part", { ...base, rrule: "FREQ=DAILY;BYFOO=1" }, "rrule.BYFOO", "BYFOO=1"],
    ["missing FREQ", { ...base, rrule: "COUNT=3" }, "rrule.FREQ", "COUNT=3"],
    ["bad FREQ", { ...base, rrule: "FREQ=FORTNIGHTLY" }, "rrule.FREQ", "FORTNIGHTLY"],
    ["bad BYDAY value", { ...base, rrule: "FREQ=WEEKLY;BYDAY=XX" }, "rrule.BYDAY", "XX"],
    ["duplicate part", { ...base, rrule: "FREQ=DAILY;COUNT=2;COUNT=3" }, "rrule.COUNT", "3"],
    [
      "duplicate UNTIL",
      { ...base, rrule: "FREQ=DAILY;UNTIL=20270201T000000Z;UNTIL=20270301T000000Z" },
      "rrule.UNTIL",
      "20270301T000000Z",
    ],
    [
      "UNTIL with COUNT",
      { ...base, rrule: "FREQ=DAILY;COUNT=2;UNTIL=20270201T000000Z" },
      "rrule.UNTIL",
      "20270201T000000Z",
    ],
    ["INTERVAL=0", { ...base, rrule: "FREQ=DAILY;INTERVAL=0" }, "rrule.INTERVAL", "0"],
    ["INTERVAL=-1", { ...base, rrule: "FREQ=DAILY;INTERVAL=-1" }, "rrule.INTERVAL", "-1"],
    ["COUNT=0", { ...base, rrule: "FREQ=DAILY;COUNT=0" }, "rrule.COUNT", "0"],
    ["BYSETPOS alone", { ...base, rrule: "FREQ=MONTHLY;BYSETPOS=1" }, "rrule.BYSETPOS", "1"],
    ["BYSETPOS=0", { ...base, rrule: "FREQ=MONTHLY;BYDAY=MO;BYSETPOS=0" }, "rrule.BYSETPOS", "0"],
    ["BYMONTHDAY=32", { ...base, rrule: "FREQ=MONTHLY;BYMONTHDAY=32" }, "rrule.BYMONTHDAY", "32"],
    ["BYMONTHDAY=0", { ...base, rrule: "FREQ=MONTHLY;BYMONTHDAY=0" }, "rrule.BYMONTHDAY", "0"],
    [
      "BYMONTHDAY=-32",
      { ...base, rrule: "FREQ=MONTHLY;BYMONTHDAY=-32" },
      "rrule.BYMONTHDAY",
      "-32",
    ],
    ["BYHOUR=24", { ...base, rrule: "FREQ=DAILY;BYHOUR=24" }, "rrule.BYHOUR", "24"],
    ["BYMINUTE=60", { ...base, rrule: "FREQ=DAILY;BYMINUTE=60" }, "rrule.BYMINUTE", "60"],
    ["BYSECOND=61", { ...base, rrule: "FREQ=DAILY;BYSECOND=61" }, "rrule.BYSECOND", "61"],
    ["BYYEARDAY=367", { ...base, rrule: "FREQ=YEARLY;BYYEARDAY=367" }, "rrule.BYYEARDAY", "367"],
    ["BYWEEKNO=54", { ...base, rrule: "FREQ=YEARLY;BYWEEKNO=54" }, "rrule.BYWEEKNO", "54"],
    ["BYMONTH=13", { ...base, rrule: "FREQ=YEARLY;BYMONTH=13" }, "rrule.BYMONTH", "13"],
    ["BYDAY ordinal 54", { ...base, rrule: "FREQ=YEARLY;BYDAY=54MO" }, "rrule.BYDAY", "54MO"],
    [
      "BYDAY ordinal with WEEKLY",
      { ...base, rrule: "FREQ=WEEKLY;BYDAY=1MO" },
      "rrule.BYDAY",
      "1MO",
    ],
    [
      "BYDAY ordinal with YEARLY+BYWEEKNO",
      { ...base, rrule: "FREQ=YEARLY;BYWEEKNO=1;BYDAY=1MO" },
      "rrule.BYDAY",
      "1MO",
    ],
    [
      "BYDAY ordinal 6 in a month",
      { ...base, rrule: "FREQ=MONTHLY;BYDAY=6MO" },
      "rrule.BYDAY",
      "6MO",
    ],
    ["BYWEEKNO with MONTHLY", { ...base, rrule: "FREQ=MONTHLY;BYWEEKNO=3" }, "rrule.BYWEEKNO", "3"],
    ["BYYEARDAY with DAILY", { ...base, rrule: "FREQ=DAILY;BYYEARDAY=3" }, "rrule.BYYEARDAY", "3"],
    [
      "BYMONTHDAY with WEEKLY",
      { ...base, rrule: "FREQ=WEEKLY;BYMONTHDAY=3" },
      "rrule.BYMONTHDAY",
      "3",
    ],
    ["bad WKST", { ...base, rrule: "FREQ=WEEKLY;WKST=XY" }, "rrule.WKST", "XY"],
    ["non-integer COUNT", { ...base, rrule: "FREQ=DAILY;COUNT=1.5" }, "rrule.COUNT", "1.5"],
    ["empty list item", { ...base, rrule: "FREQ=DAILY;BYHOUR=1,,2" }, "rrule.BYHOUR", "1,,2"],
    ["stray semicolon", { ...base, rrule: "FREQ=DAILY;" }, "rrule", "FREQ=DAILY;"],
    ["bad UNTIL", { ...base, rrule: "FREQ=DAILY;UNTIL=tomorrow" }, "rrule.UNTIL", "tomorrow"],
    [
      "UNTIL date with date-time DTSTART",
      { ...base, rrule: "FREQ=DAILY;UNTIL=20270201" },
      "rrule.UNTIL",
      "FREQ=DAILY;UNTIL=20270201",
    ],
    [
      "UNTIL before DTSTART",
      { ...base, rrule: "FREQ=DAILY;UNTIL=20260101T000000Z" },
      "rrule.UNTIL",
      "FREQ=DAILY;UNTIL=20260101T000000Z",
    ],
    [
      "BYHOUR with a date DTSTART",
      { dtstart: "2027-01-04", rrule: "FREQ=DAILY;BYHOUR=9" },
      "rrule.BYHOUR",
      "9",
    ],
    [
      "HOURLY with a date DTSTART",
      { dtstart: "2027-01-04", rrule: "FREQ=HOURLY" },
      "rrule.FREQ",
      "HOURLY",
    ],
    [
      "impossible BYMONTH/BYMONTHDAY",
      { ...base, rrule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=31" },
      "rrule.BYMONTHDAY",
      "31",
    ],
    [
      "impossible April 31",
      { ...base, rrule: "FREQ=MONTHLY;BYMONTH=4,6;BYMONTHDAY=31" },
      "rrule.BYMONTHDAY",
      "31",
    ],
    [
      "impossible day 366 in January",
      { ...base, rrule: "FREQ=YEARLY;BYYEARDAY=366;BYMONTH=1" },
      "rrule.BYYEARDAY",
      "366",
    ],
    [
      "no occurrence: ISO week 1 in June",
      { ...base, rrule: "FREQ=YEARLY;BYWEEKNO=1;BYMONTH=6" },
      "rrule",
      "FREQ=YEARLY;BYWEEKNO=1;BYMONTH=6",
    ],
    [
      "BYSETPOS beyond a MINUTELY period",
      { ...base, rrule: "FREQ=MINUTELY;BYSECOND=0,30;BYSETPOS=3" },
      "rrule.BYSETPOS",
      "3",
    ],
    [
      "no occurrence: 5th Monday of a 4-Monday February that is also the 1st",
      { ...base, rrule: "FREQ=MONTHLY;BYMONTH=2;BYDAY=5MO;BYMONTHDAY=1" },
      "rrule",
      "FREQ=MONTHLY;BYMONTH=2;BYDAY=5MO;BYMONTHDAY=1",
    ],
    [
      "unknown TZID",
      { ...base, tzid: "Mars/Olympus_Mons", rrule: "FREQ=DAILY" },
      "tzid",
      "Mars/Olympus_Mons",
    ],
    [
      "bad DTSTART",
      { dtstart: "2027-02-30T09:00:00", rrule: "FREQ=DAILY" },
      "dtstart",
      "2027-02-30T09:00:00",
    ],
    [
      "garbage DTSTART",
      { dtstart: "next tuesday", rrule: "FREQ=DAILY" },
      "dtstart",
      "next tuesday",
    ],
    [
      "bad RDATE",
      { ...base, rdate: ["2027-01-05T09:00:00", "2027-13-01"] },
      "rdate.1",
      "2027-13-01",
    ],
    ["bad EXDATE", { ...base, exdate: ["soon"] }, "exdate.0", "soon"],
    [
      "every occurrence excluded",
      { ...base, exdate: ["2027-01-04T09:00:00"] },
      "exdate",
      undefined as unknown as string,
    ],
    ["bad DST policy", { ...base, dst: { gap: "drop" as "skip" } }, "dst.gap", "drop"],
  ];
  for (const [title, input, field, value] of cases) {
    it(`REC-3: strict rejects ${title} (${field})`, () => {
      const err = strictError(input);
      expect(err.code).toBe("VALIDATION_FAILED");
      expect(err.issues[0]?.field).toBe(field);
      if (value !== undefined)
        expect(err.issues[0]?.value).toEqual(field === "exdate" ? input.exdate : value);
      expect(err.message).toContain(field);
    });
  }

  it("REC-3: strict rejects values of the wrong type with a ValidationError", () => {
    const err = strictError({ dtstart: "2027-01-04", rrule: 7 as unknown as string });
    expect(err.issues[0]?.field).toBe("rrule");
    expect(
      strictError({ dtstart: "2027-01-04", rdate: "2027-01-05" as unknown as string[] }).issues[0]
        ?.field,
    ).toBe("rdate");
  });

  it("REC-3: part names and values are case-insensitive and the RRULE: prefix is tolerated", () => {
    expect(locals({ ...base, rrule: "RRULE:freq=daily;count=2;byday=mo,tu" })).toEqual([
      "2027-01-04T09:00:00",
      "2027-01-05T09:00:00",
    ]);
  });
});

describe("REC-3: parseRule is lenient and never throws", () => {
  it("REC-3: duplicate UNTIL keeps the earliest, with a warning", () => {
    const r = parseRule({
      ...base,
      rrule: "FREQ=DAILY;UNTIL=20270107T000000Z;UNTIL=20270105T235959Z",
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.warnings.some((w) => w.includes("UNTIL"))).toBe(true);
    expect(r.recurrence.between(-Infinity, Infinity).map((o) => o.local)).toEqual([
      "2027-01-04T09:00:00",
      "2027-01-05T09:00:00",
    ]);
  });

  it("REC-4: UNTIL with COUNT keeps the tighter bound, whichever it is", () => {
    const a = parseRule({ ...base, rrule: "FREQ=DAILY;COUNT=2;UNTIL=20270110T000000Z" });
    const b = parseRule({ ...base, rrule: "FREQ=DAILY;COUNT=10;UNTIL=20270105T235959Z" });
    const c = parseRule({ ...base, rrule: "FREQ=DAILY;UNTIL=20270106T235959Z;COUNT=2;COUNT=5" });
    for (const r of [a, b, c]) {
      expect(r.ok).toBe(true);
      if (r.ok) expect(r.recurrence.between(-Infinity, Infinity)).toHaveLength(2);
    }
  });

  it("REC-3: returns a failure naming the part for what it cannot repair", () => {
    const cases: [RecurrenceInput, string][] = [
      [{ ...base, rrule: "FREQ=DAILY;INTERVAL=-1" }, "rrule.INTERVAL"],
      [{ ...base, rrule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=31" }, "rrule.BYMONTHDAY"],
      [{ ...base, tzid: "Nowhere/Special" }, "tzid"],
      [{ ...base, rrule: "FREQ=DAILY;BYFOO=1" }, "rrule.BYFOO"],
    ];
    for (const [input, field] of cases) {
      const r = parseRule(input);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.issues[0]?.field).toBe(field);
    }
  });

  it("REC-3: survives inputs of the wrong type", () => {
    const weird = [
      null,
      undefined,
      42,
      "FREQ=DAILY",
      {},
      { dtstart: 5 },
      { dtstart: "2027-01-04", rrule: 7 },
      { dtstart: "2027-01-04", rdate: "x" },
    ];
    for (const w of weird) {
      const r = parseRule(w as unknown as RecurrenceInput);
      expect(r.ok).toBe(false);
    }
  });

  it("REC-3: repairs empty and X- parts, mismatched UNTIL types, fractional seconds — with warnings", () => {
    const r = parseRule({
      dtstart: "2027-01-04T09:00:00.500",
      rrule: "FREQ=DAILY;;X-NAME=1;UNTIL=20270105",
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.warnings.length).toBeGreaterThanOrEqual(3);
    expect(r.recurrence.between(-Infinity, Infinity).map((o) => o.local)).toEqual([
      "2027-01-04T09:00:00",
      "2027-01-05T09:00:00",
    ]);
  });

  it("REC-3: impossible, huge and sub-second rules finish with bounded work (counted in steps)", () => {
    const secondly = parseRule({ dtstart: "2027-01-01T00:00:00", rrule: "FREQ=SECONDLY" });
    expect(secondly.ok).toBe(true);
    if (!secondly.ok) return;
    // Ten years of seconds, capped by the limit: the work follows the limit, not the range.
    const capped = measureWork(() =>
      secondly.recurrence.between(-Infinity, Date.UTC(2037, 0, 1), 50_000),
    );
    expect(capped.result).toHaveLength(50_000);
    expect(capped.steps).toBeLessThanOrEqual(50_000 + ONE_PERIOD);

    const rare = parseRule({
      dtstart: "2027-01-01T00:00:00",
      rrule: "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=3;BYMINUTE=7;BYSECOND=9",
    });
    expect(rare.ok).toBe(true);
    if (!rare.ok) return;
    // 29 February is a Monday in 2044 and 2072 (counted in steps: no time cap while measuring).
    const three = measureWork(() => rare.recurrence.between(-Infinity, Infinity, 3)).result;
    expect(three.map((o) => o.local)).toEqual([
      "2027-01-01T00:00:00",
      "2044-02-29T03:07:09",
      "2072-02-29T03:07:09",
    ]);
    // Very rare matches over a range reaching year 9999 (about 2.9 million days to walk):
    // the call stops at its step cap and returns what it found by then.
    const walk = measureWork(() => rare.recurrence.between(0, Number.MAX_SAFE_INTEGER, 1_000_000));
    expect(walk.budgets).toBe(1);
    expect(walk.steps).toBeGreaterThanOrEqual(MAX_STEPS_PER_CALL);
    expect(walk.steps).toBeLessThanOrEqual(MAX_STEPS_PER_CALL + ONE_PERIOD);
    expect(walk.result.length).toBeGreaterThan(2);
    expect(walk.result.at(-1)!.local < "9999").toBe(true);
  });

  it("REC-3, OPS-12: looking for a first occurrence when parsing spends at most its search budget, then refuses", () => {
    // Every other hour from 01:00 never reaches an even hour: no occurrence after
    // DTSTART, and a sub-daily walk has no calendar cycle to stop at, so only the search
    // budget ends it. The rule is refused (the planner quarantines it), naming the parts.
    const parsed = measureWork(() =>
      parseRule({ dtstart: "2027-01-01T01:00:00", rrule: "FREQ=HOURLY;INTERVAL=2;BYHOUR=2" }),
    );
    expect(parsed.result.ok).toBe(false);
    if (parsed.result.ok) return;
    expect(parsed.result.error.issues[0]?.field).toBe("rrule");
    expect(parsed.result.error.issues[0]?.message).toContain("INTERVAL=2;BYHOUR=2");
    expect(parsed.result.error.issues[0]?.message).toContain("within the search bound");
    expect(parsed.budgets).toBe(1);
    expect(parsed.steps).toBeGreaterThanOrEqual(NO_OCCURRENCE_SEARCH_STEPS);
    expect(parsed.steps).toBeLessThanOrEqual(NO_OCCURRENCE_SEARCH_STEPS + ONE_PERIOD);
  });
});

describe("REC-4 / REC-5: bounds", () => {
  it("REC-4: the rule's COUNT is authoritative; endsAt is ignored", () => {
    const rec = validateRule({
      ...base,
      rrule: "FREQ=DAILY;COUNT=3",
      endsAt: "2027-01-04T12:00:00Z",
    });
    expect(rec.between(-Infinity, Infinity)).toHaveLength(3);
    expect(rec.bounded).toBe(true);
    expect(rec.ruleBounded).toBe(true);
  });

  it("REC-4: the rule's UNTIL is authoritative; a later endsAt does not extend it, an earlier one does not cut it", () => {
    const early = validateRule({
      ...base,
      rrule: "FREQ=DAILY;UNTIL=20270106T235959Z",
      endsAt: "2027-01-04T12:00:00Z",
    });
    const late = validateRule({
      ...base,
      rrule: "FREQ=DAILY;UNTIL=20270106T235959Z",
      endsAt: "2028-01-01T00:00:00Z",
    });
    expect(early.between(-Infinity, Infinity)).toHaveLength(3);
    expect(late.between(-Infinity, Infinity)).toHaveLength(3);
    expect(early.rrule).toBe("FREQ=DAILY;UNTIL=20270106T235959Z");
  });

  it("REC-4: endsAt bounds an unbounded rule (inclusive) and nothing appends UNTIL", () => {
    const rec = validateRule({ ...base, rrule: "FREQ=DAILY", endsAt: "2027-01-06T08:00:00Z" });
    expect(rec.between(-Infinity, Infinity).map((o) => o.local)).toEqual([
      "2027-01-04T09:00:00",
      "2027-01-05T09:00:00",
      "2027-01-06T09:00:00",
    ]);
    expect(rec.bounded).toBe(true);
    expect(rec.ruleBounded).toBe(false);
    expect(rec.rrule).toBe("FREQ=DAILY");
  });

  it("REC-5: unbounded series are capped at 366 days unless perpetual", () => {
    const open = validateRule({ ...base, rrule: "FREQ=DAILY" });
    expect(open.bounded).toBe(false);
    const anchor = Date.UTC(2027, 0, 4);
    expect(planningWindow({ recurrence: open, anchorMs: anchor, perpetual: false })).toEqual({
      untilMs: anchor + 366 * 86_400_000,
      truncated: true,
    });
    expect(planningWindow({ recurrence: open, anchorMs: anchor, perpetual: true })).toEqual({
      untilMs: Infinity,
      truncated: false,
    });
    const counted = validateRule({ ...base, rrule: "FREQ=DAILY;COUNT=400" });
    expect(
      planningWindow({ recurrence: counted, anchorMs: anchor, perpetual: false }).truncated,
    ).toBe(false);
  });

  it("REC-4: a schedule without RRULE is DTSTART plus RDATEs, bounded", () => {
    const rec = validateRule({ ...base, rdate: ["2027-02-01T09:00:00"] });
    expect(rec.bounded).toBe(true);
    expect(rec.between(-Infinity, Infinity).map((o) => o.local)).toEqual([
      "2027-01-04T09:00:00",
      "2027-02-01T09:00:00",
    ]);
    expect(rec.next(rec.first.instant)?.local).toBe("2027-02-01T09:00:00");
    expect(rec.next(Date.UTC(2027, 1, 2))).toBeNull();
  });
});
