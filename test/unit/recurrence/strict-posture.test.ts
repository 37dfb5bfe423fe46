/**
 * REC-3: the strict posture's remaining gaps — a floating UNTIL with a zoned DTSTART, UTC
 * offsets given as zones, numbers beyond a part's range — and what the lenient reader does
 * with the same input.
 */
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../../src/errors/index.js";
import { parseRule, validateRule, type RecurrenceInput } from "../../../src/recurrence/index.js";

function strictIssue(input: RecurrenceInput): { field: string; message: string } {
  try {
    validateRule(input);
  } catch (err) {
    if (err instanceof ValidationError) return err.issues[0]!;
    throw err;
  }
  throw new Error("expected a ValidationError");
}

const berlin = { dtstart: "2027-01-04T09:00:00", tzid: "Europe/Berlin" };

describe("REC-3: UNTIL of a zoned series must be UTC (RFC 5545 §3.3.10)", () => {
  it("REC-3: strict refuses a floating UNTIL with a zoned DTSTART, naming UNTIL", () => {
    const issue = strictIssue({ ...berlin, rrule: "FREQ=DAILY;UNTIL=20270110T090000" });
    expect(issue.field).toBe("rrule.UNTIL");
    expect(issue.message).toMatch(/UTC date-time/);
    // An instant DTSTART is UTC: its UNTIL must be UTC too.
    expect(
      strictIssue({ dtstart: "2027-01-04T08:00:00Z", rrule: "FREQ=DAILY;UNTIL=20270110T090000" })
        .field,
    ).toBe("rrule.UNTIL");
  });

  it("REC-3: strict accepts a UTC UNTIL, and a local one where the zone is UTC (no ambiguity)", () => {
    expect(
      validateRule({ ...berlin, rrule: "FREQ=DAILY;UNTIL=20270110T080000Z" }).between(
        -8.64e15,
        8.64e15,
      ),
    ).toHaveLength(7);
    expect(
      validateRule({
        dtstart: "2027-01-04T09:00:00",
        tzid: "UTC",
        rrule: "FREQ=DAILY;UNTIL=20270110T090000",
      }).between(-8.64e15, 8.64e15),
    ).toHaveLength(7);
  });

  it("REC-3: lenient keeps reading a floating UNTIL in the series' zone, with a warning", () => {
    const parsed = parseRule({ ...berlin, rrule: "FREQ=DAILY;UNTIL=20270110T090000" });
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.warnings.some((w) => /rrule\.UNTIL: .*read it in Europe\/Berlin/.test(w))).toBe(
      true,
    );
    // 09:00 Berlin on the 10th is included.
    expect(parsed.recurrence.between(-8.64e15, 8.64e15)).toHaveLength(7);
  });
});

describe("REC-3: a zone is an IANA name, not a UTC offset", () => {
  it.each(["+05:00", "-0800", "+05"])(
    "REC-3: strict refuses tzid %s and says to use an IANA name",
    (tzid) => {
      const issue = strictIssue({ dtstart: "2027-01-04T09:00:00", tzid });
      expect(issue.field).toBe("tzid");
      expect(issue.message).toMatch(/UTC offset.*IANA name/);
    },
  );

  it("REC-3: lenient still reads a stored offset zone (old rows keep planning)", () => {
    const parsed = parseRule({ dtstart: "2027-01-04T09:00:00", tzid: "+05:00" });
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.recurrence.first.instant).toBe(Date.parse("2027-01-04T04:00:00Z"));
    expect(parsed.warnings).toEqual([expect.stringMatching(/^tzid: is a UTC offset/)]);
  });
});

describe("REC-3: numbers out of range name the allowed range", () => {
  const cases: [string, string, RegExp][] = [
    ["FREQ=DAILY;COUNT=1000000000", "rrule.COUNT", /between 1 and 100000000/],
    ["FREQ=DAILY;COUNT=99999999999999999999", "rrule.COUNT", /between 1 and 100000000/],
    ["FREQ=DAILY;INTERVAL=10000000000", "rrule.INTERVAL", /between 1 and 1000000/],
    ["FREQ=MONTHLY;BYMONTHDAY=-1000000000", "rrule.BYMONTHDAY", /between -31 and 31 and not 0/],
    ["FREQ=YEARLY;BYYEARDAY=4000000000", "rrule.BYYEARDAY", /between -366 and 366 and not 0/],
    ["FREQ=DAILY;BYHOUR=1000000000", "rrule.BYHOUR", /between 0 and 23/],
    ["FREQ=MONTHLY;BYDAY=100MO", "rrule.BYDAY", /between -53 and 53 and not 0/],
  ];
  it.each(cases)("REC-3: %s is refused on %s with its range", (rrule, field, message) => {
    const issue = strictIssue({ ...berlin, rrule });
    expect(issue.field).toBe(field);
    expect(issue.message).toMatch(message);
    expect(issue.message).not.toMatch(/^must be an integer$/);
  });

  it("REC-3: a value that is not a number at all still says integer, with the range", () => {
    const issue = strictIssue({ ...berlin, rrule: "FREQ=DAILY;COUNT=ten" });
    expect(issue).toMatchObject({
      field: "rrule.COUNT",
      message: "must be an integer between 1 and 100000000",
    });
  });
});
