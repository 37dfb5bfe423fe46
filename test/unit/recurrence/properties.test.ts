/**
 * Property tests (fast-check) for the parser and the expansion (REC-1, REC-3).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../../src/errors/index.js";
import { measureWork } from "../../../src/recurrence/expand.js";
import {
  MAX_COUNT_STEPS,
  MAX_STEPS_PER_CALL,
  parseRule,
  validateRule,
  type RecurrenceInput,
} from "../../../src/recurrence/index.js";
import { NO_OCCURRENCE_SEARCH_STEPS } from "../../../src/recurrence/recurrence.js";
import { ONE_PERIOD } from "./helpers.js";

const ZONES = [
  "UTC",
  "Europe/Berlin",
  "America/New_York",
  "Australia/Lord_Howe",
  "Pacific/Chatham",
  "America/Sao_Paulo",
  "Asia/Kolkata",
];
const FREQS = ["SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"];
const DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"];

const intList = (min: number, max: number) =>
  fc
    .uniqueArray(fc.integer({ min, max }), { minLength: 1, maxLength: 4 })
    .map((xs) => xs.join(","));
const signedList = (max: number) =>
  fc
    .uniqueArray(
      fc.integer({ min: -max, max }).filter((n) => n !== 0),
      { minLength: 1, maxLength: 3 },
    )
    .map((xs) => xs.join(","));

/** RRULE text made of plausible parts, valid or not (forbidden combinations included). */
const ruleText = fc
  .record(
    {
      FREQ: fc.constantFrom(...FREQS),
      INTERVAL: fc.integer({ min: 1, max: 5 }).map(String),
      COUNT: fc.integer({ min: 1, max: 40 }).map(String),
      UNTIL: fc
        .date({
          min: new Date("2026-06-01T00:00:00Z"),
          max: new Date("2031-01-01T00:00:00Z"),
          noInvalidDate: true,
        })
        .map((d) =>
          d
            .toISOString()
            .replace(/[-:]/g, "")
            .replace(/\.\d{3}/, ""),
        ),
      BYSECOND: intList(0, 59),
      BYMINUTE: intList(0, 59),
      BYHOUR: intList(0, 23),
      BYDAY: fc
        .uniqueArray(
          fc.tuple(
            fc.constantFrom("", "", "1", "-1", "2", "3", "53", "-2"),
            fc.constantFrom(...DAYS),
          ),
          { minLength: 1, maxLength: 3 },
        )
        .map((xs) => xs.map(([n, d]) => `${n}${d}`).join(",")),
      BYMONTHDAY: signedList(31),
      BYYEARDAY: signedList(366),
      BYWEEKNO: signedList(53),
      BYMONTH: intList(1, 12),
      BYSETPOS: signedList(10),
      WKST: fc.constantFrom(...DAYS),
    },
    { requiredKeys: ["FREQ"] },
  )
  .map((parts) =>
    Object.entries(parts)
      .map(([k, v]) => `${k}=${v}`)
      .join(";"),
  );

const inputArb: fc.Arbitrary<RecurrenceInput> = fc.record({
  dtstart: fc.constantFrom(
    "2027-01-04T09:00:00",
    "2027-03-28T02:30:00",
    "2027-10-31T01:45:00",
    "2027-02-28",
    "2026-12-31T23:59:59Z",
    "2028-02-29T12:00:00",
  ),
  tzid: fc.constantFrom(...ZONES),
  rrule: ruleText,
  dst: fc.record({
    gap: fc.constantFrom("shift" as const, "skip" as const),
    overlap: fc.constantFrom("earlier" as const, "later" as const),
  }),
});

/**
 * Most expansion work one parse may spend, in the steps the loops charge to their budgets:
 * the first-occurrence search, the walk of a COUNT series to its end, then (with EXDATE)
 * one `scan` call, which for a COUNT above the cached size walks the series again; each
 * allowed one period past its cap (OPS-12).
 */
const PARSE_STEPS =
  NO_OCCURRENCE_SEARCH_STEPS + 2 * MAX_COUNT_STEPS + MAX_STEPS_PER_CALL + 4 * ONE_PERIOD;

/** Parses under a step meter and checks the work stayed inside the caps. */
function parseBounded(input: RecurrenceInput): ReturnType<typeof parseRule> {
  const work = measureWork(() => parseRule(input));
  expect(work.budgets).toBeLessThanOrEqual(4);
  expect(work.maxStepsPerBudget).toBeLessThanOrEqual(MAX_STEPS_PER_CALL + ONE_PERIOD);
  expect(work.steps).toBeLessThanOrEqual(PARSE_STEPS);
  return work.result;
}

describe("REC-3: parseRule never throws", () => {
  it("REC-3: parseRule never throws and spends bounded work for any string up to 1 KB", () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 1024 }),
        fc.string({ maxLength: 64 }),
        fc.string({ maxLength: 40 }),
        (rrule, dtstart, tzid) => {
          for (const input of [
            { dtstart: "2027-01-04T09:00:00", rrule },
            { dtstart, tzid, rrule: "FREQ=DAILY" },
            { dtstart, tzid, rrule },
          ]) {
            const r = parseBounded(input);
            expect(typeof r.ok).toBe("boolean");
            if (!r.ok) expect(r.error).toBeInstanceOf(ValidationError);
          }
        },
      ),
      { numRuns: 400 },
    );
  });

  it("REC-3: parseRule never throws and spends bounded work for rule-shaped input (valid or not)", () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        const r = parseBounded(input);
        expect(typeof r.ok).toBe("boolean");
      }),
      { numRuns: 500 },
    );
  });
});

describe("REC-1: expansion properties", () => {
  it("REC-1: expansions are strictly increasing, inside [from, to) and within the limit", () => {
    fc.assert(
      fc.property(
        inputArb,
        fc.integer({ min: 0, max: 3 * 365 * 86_400 }),
        fc.integer({ min: 1, max: 200 }),
        (input, offsetS, limit) => {
          const r = parseRule(input);
          if (!r.ok) return;
          const from = Date.UTC(2026, 11, 1) + offsetS * 1000;
          const to = from + 90 * 86_400_000;
          const got = r.recurrence.between(from, to, limit);
          expect(got.length).toBeLessThanOrEqual(limit);
          for (let i = 0; i < got.length; i++) {
            const o = got[i]!;
            expect(o.instant).toBeGreaterThanOrEqual(from);
            expect(o.instant).toBeLessThan(to);
            if (i > 0) expect(o.instant).toBeGreaterThan(got[i - 1]!.instant);
          }
          // A window is a slice of the whole: same instants as filtering a larger expansion.
          const next = r.recurrence.next(from - 1);
          if (got.length > 0) expect(next?.instant).toBe(got[0]!.instant);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("REC-1: the window result equals the same window cut from an expansion from the start", () => {
    fc.assert(
      fc.property(inputArb, fc.integer({ min: 1, max: 400 }), (input, skipDays) => {
        const r = parseRule(input);
        if (!r.ok) return;
        const all = r.recurrence.between(-Infinity, Infinity, 2000).map((o) => o.instant);
        const last = all[all.length - 1];
        if (last === undefined) return;
        const from = r.recurrence.first.instant + skipDays * 3_600_000 * 6;
        const to = Math.min(last, from + 30 * 86_400_000);
        const window = r.recurrence.between(from, to).map((o) => o.instant);
        expect(window).toEqual(all.filter((ms) => ms >= from && ms < to));
      }),
      { numRuns: 300 },
    );
  });

  it("REC-3: strict and lenient agree on every valid rule", () => {
    fc.assert(
      fc.property(inputArb, (input) => {
        let strict: ReturnType<typeof validateRule> | null = null;
        try {
          strict = validateRule(input);
        } catch (err) {
          expect(err).toBeInstanceOf(ValidationError);
        }
        const lenient = parseRule(input);
        if (strict === null) return;
        expect(lenient.ok).toBe(true);
        if (!lenient.ok) return;
        const from = Date.UTC(2026, 0, 1);
        const to = Date.UTC(2029, 0, 1);
        expect(lenient.recurrence.between(from, to, 300)).toEqual(strict.between(from, to, 300));
      }),
      { numRuns: 400 },
    );
  });
});
