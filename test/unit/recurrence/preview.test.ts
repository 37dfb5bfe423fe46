/**
 * REC-7: preview uses validateRule and between, the scheduler's code.
 */
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../../src/errors/index.js";
import { preview, validateRule } from "../../../src/recurrence/index.js";

describe("REC-7: preview", () => {
  it("REC-7: the next N occurrences with instant and local time", () => {
    expect(
      preview({
        dtstart: "2027-01-04T09:00:00",
        tzid: "Europe/Berlin",
        rrule: "FREQ=WEEKLY;BYDAY=MO,WE",
        count: 3,
      }),
    ).toEqual([
      { instant: "2027-01-04T08:00:00.000Z", local: "2027-01-04T09:00:00" },
      { instant: "2027-01-06T08:00:00.000Z", local: "2027-01-06T09:00:00" },
      { instant: "2027-01-11T08:00:00.000Z", local: "2027-01-11T09:00:00" },
    ]);
  });

  it("REC-7: default count is 10; [after, before) bounds; date-only locals", () => {
    expect(preview({ dtstart: "2027-01-04", tzid: "UTC", rrule: "FREQ=DAILY" })).toHaveLength(10);
    expect(
      preview({
        dtstart: "2027-01-04",
        tzid: "America/New_York",
        rrule: "FREQ=DAILY",
        after: "2027-01-06T05:00:00Z",
        before: "2027-01-08T05:00:00Z",
      }),
    ).toEqual([
      { instant: "2027-01-06T05:00:00.000Z", local: "2027-01-06" },
      { instant: "2027-01-07T05:00:00.000Z", local: "2027-01-07" },
    ]);
  });

  it("REC-7: RDATE and EXDATE are applied", () => {
    expect(
      preview({
        dtstart: "2027-01-04T09:00:00",
        tzid: "UTC",
        rrule: "FREQ=DAILY;COUNT=3",
        rdate: ["2027-01-10T10:00:00"],
        exdate: ["2027-01-05T09:00:00"],
      }).map((p) => p.local),
    ).toEqual(["2027-01-04T09:00:00", "2027-01-06T09:00:00", "2027-01-10T10:00:00"]);
  });

  it("REC-7: errors are the strict validation errors", () => {
    expect(() =>
      preview({ dtstart: "2027-01-04T09:00:00", tzid: "UTC", rrule: "FREQ=DAILY;INTERVAL=0" }),
    ).toThrow(ValidationError);
    expect(() => preview({ dtstart: "2027-01-04T09:00:00", count: 0 })).toThrow(/count/);
    expect(() => preview({ dtstart: "2027-01-04T09:00:00", after: "yesterday" })).toThrow(/after/);
  });
});

describe("sub-second DTSTART", () => {
  it("REC-1: an instant DTSTART with milliseconds keeps them on every occurrence", () => {
    const rec = validateRule({
      dtstart: "2027-01-04T08:00:03.267Z",
      rrule: "FREQ=MINUTELY;COUNT=2",
    });
    expect(rec.between(0, 8.64e15).map((o) => new Date(o.instant).toISOString())).toEqual([
      "2027-01-04T08:00:03.267Z",
      "2027-01-04T08:01:03.267Z",
    ]);
    expect(rec.next(Date.parse("2027-01-04T08:00:03.267Z"))?.instant).toBe(
      Date.parse("2027-01-04T08:01:03.267Z"),
    );
  });
  it("REC-3: fractional seconds on RDATE stay refused by the strict posture", () => {
    expect(() =>
      validateRule({ dtstart: "2027-01-04T08:00:00Z", rdate: ["2027-01-05T08:00:00.5Z"] }),
    ).toThrow(/rdate\.0: must not have fractional seconds/);
  });
});
