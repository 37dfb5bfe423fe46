/**
 * RFC 5545 §3.8.5.3 examples, transcribed from the RFC text. Unless stated otherwise the
 * RFC uses DTSTART;TZID=America/New_York:19970902T090000. Expected values are the lists
 * printed in the RFC (local New York time).
 */
import { describe, expect, it } from "vitest";
import { validateRule } from "../../../src/recurrence/index.js";
import { instants, locals, on, range } from "./helpers.js";

const NY = "America/New_York";
const ny = (rrule: string, dtstart = "1997-09-02T09:00:00", extra: object = {}) => ({
  dtstart,
  tzid: NY,
  rrule,
  ...extra,
});

describe("REC-1: RFC 5545 §3.8.5.3 examples", () => {
  it("REC-1: RFC 5545 §3.8.5.3 daily for 10 occurrences", () => {
    expect(locals(ny("FREQ=DAILY;COUNT=10"))).toEqual(on("1997-09", range(2, 11)));
  });

  it("REC-1: RFC 5545 §3.8.5.3 daily until December 24, 1997 (EDT then EST)", () => {
    const got = locals(ny("FREQ=DAILY;UNTIL=19971224T000000Z"));
    expect(got).toEqual([
      ...on("1997-09", range(2, 30)),
      ...on("1997-10", range(1, 31)),
      ...on("1997-11", range(1, 30)),
      ...on("1997-12", range(1, 23)),
    ]);
    const inst = instants(ny("FREQ=DAILY;UNTIL=19971224T000000Z"));
    expect(inst[0]).toBe("1997-09-02T13:00:00.000Z"); // 09:00 EDT
    expect(inst[54]).toBe("1997-10-26T14:00:00.000Z"); // 09:00 EST
  });

  it("REC-1: RFC 5545 §3.8.5.3 every other day, forever", () => {
    expect(locals(ny("FREQ=DAILY;INTERVAL=2"), 30)).toEqual([
      ...on("1997-09", range(2, 30, 2)),
      ...on("1997-10", range(2, 30, 2)),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every 10 days, 5 occurrences", () => {
    expect(locals(ny("FREQ=DAILY;INTERVAL=10;COUNT=5"))).toEqual([
      ...on("1997-09", [2, 12, 22]),
      ...on("1997-10", [2, 12]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every day in January, for 3 years (YEARLY and DAILY forms)", () => {
    const expected = [
      ...on("1998-01", range(1, 31)),
      ...on("1999-01", range(1, 31)),
      ...on("2000-01", range(1, 31)),
    ];
    const start = "1998-01-01T09:00:00";
    expect(
      locals(ny("FREQ=YEARLY;UNTIL=20000131T140000Z;BYMONTH=1;BYDAY=SU,MO,TU,WE,TH,FR,SA", start)),
    ).toEqual(expected);
    expect(locals(ny("FREQ=DAILY;UNTIL=20000131T140000Z;BYMONTH=1", start))).toEqual(expected);
  });

  it("REC-1: RFC 5545 §3.8.5.3 weekly for 10 occurrences", () => {
    expect(locals(ny("FREQ=WEEKLY;COUNT=10"))).toEqual([
      ...on("1997-09", [2, 9, 16, 23, 30]),
      ...on("1997-10", [7, 14, 21, 28]),
      ...on("1997-11", [4]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 weekly until December 24, 1997", () => {
    expect(locals(ny("FREQ=WEEKLY;UNTIL=19971224T000000Z"))).toEqual([
      ...on("1997-09", [2, 9, 16, 23, 30]),
      ...on("1997-10", [7, 14, 21, 28]),
      ...on("1997-11", [4, 11, 18, 25]),
      ...on("1997-12", [2, 9, 16, 23]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every other week, forever", () => {
    expect(locals(ny("FREQ=WEEKLY;INTERVAL=2;WKST=SU"), 13)).toEqual([
      ...on("1997-09", [2, 16, 30]),
      ...on("1997-10", [14, 28]),
      ...on("1997-11", [11, 25]),
      ...on("1997-12", [9, 23]),
      ...on("1998-01", [6, 20]),
      ...on("1998-02", [3, 17]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 weekly on Tuesday and Thursday for five weeks (UNTIL and COUNT forms)", () => {
    const expected = [...on("1997-09", [2, 4, 9, 11, 16, 18, 23, 25, 30]), ...on("1997-10", [2])];
    expect(locals(ny("FREQ=WEEKLY;UNTIL=19971007T000000Z;WKST=SU;BYDAY=TU,TH"))).toEqual(expected);
    expect(locals(ny("FREQ=WEEKLY;COUNT=10;WKST=SU;BYDAY=TU,TH"))).toEqual(expected);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every other week on Monday, Wednesday and Friday until December 24, 1997", () => {
    const got = locals(
      ny(
        "FREQ=WEEKLY;INTERVAL=2;UNTIL=19971224T000000Z;WKST=SU;BYDAY=MO,WE,FR",
        "1997-09-01T09:00:00",
      ),
    );
    expect(got).toEqual([
      ...on("1997-09", [1, 3, 5, 15, 17, 19, 29]),
      ...on("1997-10", [1, 3, 13, 15, 17, 27, 29, 31]),
      ...on("1997-11", [10, 12, 14, 24, 26, 28]),
      ...on("1997-12", [8, 10, 12, 22]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every other week on Tuesday and Thursday, for 8 occurrences", () => {
    expect(locals(ny("FREQ=WEEKLY;INTERVAL=2;COUNT=8;WKST=SU;BYDAY=TU,TH"))).toEqual([
      ...on("1997-09", [2, 4, 16, 18, 30]),
      ...on("1997-10", [2, 14, 16]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 monthly on the first Friday for 10 occurrences", () => {
    expect(locals(ny("FREQ=MONTHLY;COUNT=10;BYDAY=1FR", "1997-09-05T09:00:00"))).toEqual([
      "1997-09-05T09:00:00",
      "1997-10-03T09:00:00",
      "1997-11-07T09:00:00",
      "1997-12-05T09:00:00",
      "1998-01-02T09:00:00",
      "1998-02-06T09:00:00",
      "1998-03-06T09:00:00",
      "1998-04-03T09:00:00",
      "1998-05-01T09:00:00",
      "1998-06-05T09:00:00",
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 monthly on the first Friday until December 24, 1997", () => {
    expect(
      locals(ny("FREQ=MONTHLY;UNTIL=19971224T000000Z;BYDAY=1FR", "1997-09-05T09:00:00")),
    ).toEqual([
      "1997-09-05T09:00:00",
      "1997-10-03T09:00:00",
      "1997-11-07T09:00:00",
      "1997-12-05T09:00:00",
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every other month on the first and last Sunday, 10 occurrences", () => {
    expect(
      locals(ny("FREQ=MONTHLY;INTERVAL=2;COUNT=10;BYDAY=1SU,-1SU", "1997-09-07T09:00:00")),
    ).toEqual([
      ...on("1997-09", [7, 28]),
      ...on("1997-11", [2, 30]),
      ...on("1998-01", [4, 25]),
      ...on("1998-03", [1, 29]),
      ...on("1998-05", [3, 31]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 monthly on the second-to-last Monday for 6 months", () => {
    expect(locals(ny("FREQ=MONTHLY;COUNT=6;BYDAY=-2MO", "1997-09-22T09:00:00"))).toEqual([
      "1997-09-22T09:00:00",
      "1997-10-20T09:00:00",
      "1997-11-17T09:00:00",
      "1997-12-22T09:00:00",
      "1998-01-19T09:00:00",
      "1998-02-16T09:00:00",
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 monthly on the third-to-the-last day of the month, forever", () => {
    expect(locals(ny("FREQ=MONTHLY;BYMONTHDAY=-3", "1997-09-28T09:00:00"), 6)).toEqual([
      "1997-09-28T09:00:00",
      "1997-10-29T09:00:00",
      "1997-11-28T09:00:00",
      "1997-12-29T09:00:00",
      "1998-01-29T09:00:00",
      "1998-02-26T09:00:00",
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 monthly on the 2nd and 15th for 10 occurrences", () => {
    expect(locals(ny("FREQ=MONTHLY;COUNT=10;BYMONTHDAY=2,15"))).toEqual([
      ...on("1997-09", [2, 15]),
      ...on("1997-10", [2, 15]),
      ...on("1997-11", [2, 15]),
      ...on("1997-12", [2, 15]),
      ...on("1998-01", [2, 15]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 monthly on the first and last day of the month for 10 occurrences", () => {
    expect(locals(ny("FREQ=MONTHLY;COUNT=10;BYMONTHDAY=1,-1", "1997-09-30T09:00:00"))).toEqual([
      ...on("1997-09", [30]),
      ...on("1997-10", [1, 31]),
      ...on("1997-11", [1, 30]),
      ...on("1997-12", [1, 31]),
      ...on("1998-01", [1, 31]),
      ...on("1998-02", [1]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every 18 months on the 10th thru 15th for 10 occurrences", () => {
    expect(
      locals(
        ny("FREQ=MONTHLY;INTERVAL=18;COUNT=10;BYMONTHDAY=10,11,12,13,14,15", "1997-09-10T09:00:00"),
      ),
    ).toEqual([...on("1997-09", [10, 11, 12, 13, 14, 15]), ...on("1999-03", [10, 11, 12, 13])]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every Tuesday, every other month", () => {
    expect(locals(ny("FREQ=MONTHLY;INTERVAL=2;BYDAY=TU"), 18)).toEqual([
      ...on("1997-09", [2, 9, 16, 23, 30]),
      ...on("1997-11", [4, 11, 18, 25]),
      ...on("1998-01", [6, 13, 20, 27]),
      ...on("1998-03", [3, 10, 17, 24, 31]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 yearly in June and July for 10 occurrences", () => {
    const expected = [1997, 1998, 1999, 2000, 2001].flatMap((y) => [
      `${y}-06-10T09:00:00`,
      `${y}-07-10T09:00:00`,
    ]);
    expect(locals(ny("FREQ=YEARLY;COUNT=10;BYMONTH=6,7", "1997-06-10T09:00:00"))).toEqual(expected);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every other year on January, February, and March for 10 occurrences", () => {
    expect(
      locals(ny("FREQ=YEARLY;INTERVAL=2;COUNT=10;BYMONTH=1,2,3", "1997-03-10T09:00:00")),
    ).toEqual([
      "1997-03-10T09:00:00",
      ...[1999, 2001, 2003].flatMap((y) => [
        `${y}-01-10T09:00:00`,
        `${y}-02-10T09:00:00`,
        `${y}-03-10T09:00:00`,
      ]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every third year on the 1st, 100th, and 200th day for 10 occurrences", () => {
    expect(
      locals(ny("FREQ=YEARLY;INTERVAL=3;COUNT=10;BYYEARDAY=1,100,200", "1997-01-01T09:00:00")),
    ).toEqual([
      "1997-01-01T09:00:00",
      "1997-04-10T09:00:00",
      "1997-07-19T09:00:00",
      "2000-01-01T09:00:00",
      "2000-04-09T09:00:00",
      "2000-07-18T09:00:00",
      "2003-01-01T09:00:00",
      "2003-04-10T09:00:00",
      "2003-07-19T09:00:00",
      "2006-01-01T09:00:00",
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every 20th Monday of the year, forever", () => {
    expect(locals(ny("FREQ=YEARLY;BYDAY=20MO", "1997-05-19T09:00:00"), 3)).toEqual([
      "1997-05-19T09:00:00",
      "1998-05-18T09:00:00",
      "1999-05-17T09:00:00",
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 Monday of week number 20 (week starts Monday), forever", () => {
    expect(locals(ny("FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO", "1997-05-12T09:00:00"), 3)).toEqual([
      "1997-05-12T09:00:00",
      "1998-05-11T09:00:00",
      "1999-05-17T09:00:00",
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every Thursday in March, forever", () => {
    expect(locals(ny("FREQ=YEARLY;BYMONTH=3;BYDAY=TH", "1997-03-13T09:00:00"), 11)).toEqual([
      ...on("1997-03", [13, 20, 27]),
      ...on("1998-03", [5, 12, 19, 26]),
      ...on("1999-03", [4, 11, 18, 25]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every Thursday, but only during June, July, and August, forever", () => {
    expect(locals(ny("FREQ=YEARLY;BYDAY=TH;BYMONTH=6,7,8", "1997-06-05T09:00:00"), 39)).toEqual([
      ...on("1997-06", [5, 12, 19, 26]),
      ...on("1997-07", [3, 10, 17, 24, 31]),
      ...on("1997-08", [7, 14, 21, 28]),
      ...on("1998-06", [4, 11, 18, 25]),
      ...on("1998-07", [2, 9, 16, 23, 30]),
      ...on("1998-08", [6, 13, 20, 27]),
      ...on("1999-06", [3, 10, 17, 24]),
      ...on("1999-07", [1, 8, 15, 22, 29]),
      ...on("1999-08", [5, 12, 19, 26]),
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every Friday the 13th, forever (DTSTART excluded by EXDATE)", () => {
    const input = ny("FREQ=MONTHLY;BYDAY=FR;BYMONTHDAY=13", "1997-09-02T09:00:00", {
      exdate: ["1997-09-02T09:00:00"],
    });
    expect(locals(input, 5)).toEqual([
      "1998-02-13T09:00:00",
      "1998-03-13T09:00:00",
      "1998-11-13T09:00:00",
      "1999-08-13T09:00:00",
      "2000-10-13T09:00:00",
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 the first Saturday that follows the first Sunday of the month, forever", () => {
    expect(
      locals(ny("FREQ=MONTHLY;BYDAY=SA;BYMONTHDAY=7,8,9,10,11,12,13", "1997-09-13T09:00:00"), 10),
    ).toEqual([
      "1997-09-13T09:00:00",
      "1997-10-11T09:00:00",
      "1997-11-08T09:00:00",
      "1997-12-13T09:00:00",
      "1998-01-10T09:00:00",
      "1998-02-07T09:00:00",
      "1998-03-07T09:00:00",
      "1998-04-11T09:00:00",
      "1998-05-09T09:00:00",
      "1998-06-13T09:00:00",
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every 4 years, the first Tuesday after a Monday in November (U.S. Presidential Election day)", () => {
    const rule = "FREQ=YEARLY;INTERVAL=4;BYMONTH=11;BYDAY=TU;BYMONTHDAY=2,3,4,5,6,7,8";
    expect(locals(ny(rule, "1996-11-05T09:00:00"), 3)).toEqual([
      "1996-11-05T09:00:00",
      "2000-11-07T09:00:00",
      "2004-11-02T09:00:00",
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 the third instance into the month of one of Tuesday, Wednesday, or Thursday, for the next 3 months", () => {
    expect(
      locals(ny("FREQ=MONTHLY;COUNT=3;BYDAY=TU,WE,TH;BYSETPOS=3", "1997-09-04T09:00:00")),
    ).toEqual(["1997-09-04T09:00:00", "1997-10-07T09:00:00", "1997-11-06T09:00:00"]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 the second-to-last weekday of the month", () => {
    expect(
      locals(ny("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-2", "1997-09-29T09:00:00"), 7),
    ).toEqual([
      "1997-09-29T09:00:00",
      "1997-10-30T09:00:00",
      "1997-11-27T09:00:00",
      "1997-12-30T09:00:00",
      "1998-01-29T09:00:00",
      "1998-02-26T09:00:00",
      "1998-03-30T09:00:00",
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every 3 hours from 9:00 AM to 5:00 PM on a specific day", () => {
    // The RFC prints 09:00, 12:00, 15:00 with UNTIL=19970902T170000Z, which is 13:00 EDT
    // (RFC 5545 erratum). Both readings: the intended 5:00 PM EDT bound, and the literal one.
    expect(locals(ny("FREQ=HOURLY;INTERVAL=3;UNTIL=19970902T210000Z"))).toEqual(
      on("1997-09", [2, 2, 2]).map((s, i) =>
        s.replace("09:00", ["09:00", "12:00", "15:00"][i] as string),
      ),
    );
    expect(locals(ny("FREQ=HOURLY;INTERVAL=3;UNTIL=19970902T170000Z"))).toEqual([
      "1997-09-02T09:00:00",
      "1997-09-02T12:00:00",
    ]);
  });

  it("REC-1: RFC 5545 §3.8.5.3 every 15 minutes for 6 occurrences", () => {
    expect(locals(ny("FREQ=MINUTELY;INTERVAL=15;COUNT=6"))).toEqual(
      ["09:00", "09:15", "09:30", "09:45", "10:00", "10:15"].map((t) => `1997-09-02T${t}:00`),
    );
  });

  it("REC-1: RFC 5545 §3.8.5.3 every hour and a half for 4 occurrences", () => {
    expect(locals(ny("FREQ=MINUTELY;INTERVAL=90;COUNT=4"))).toEqual(
      ["09:00", "10:30", "12:00", "13:30"].map((t) => `1997-09-02T${t}:00`),
    );
  });

  it("REC-1: RFC 5545 §3.8.5.3 every 20 minutes from 9:00 AM to 4:40 PM every day (DAILY and MINUTELY forms)", () => {
    const day = (d: string) =>
      ["09", "10", "11", "12", "13", "14", "15", "16"].flatMap((h) =>
        ["00", "20", "40"].map((m) => `${d}T${h}:${m}:00`),
      );
    const expected = [...day("1997-09-02"), ...day("1997-09-03"), "1997-09-04T09:00:00"];
    expect(locals(ny("FREQ=DAILY;BYHOUR=9,10,11,12,13,14,15,16;BYMINUTE=0,20,40"), 49)).toEqual(
      expected,
    );
    expect(locals(ny("FREQ=MINUTELY;INTERVAL=20;BYHOUR=9,10,11,12,13,14,15,16"), 49)).toEqual(
      expected,
    );
  });

  it("REC-1: RFC 5545 §3.8.5.3 changing only WKST from MO to SU yields different results", () => {
    expect(
      locals(ny("FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=MO", "1997-08-05T09:00:00")),
    ).toEqual(on("1997-08", [5, 10, 19, 24]));
    expect(
      locals(ny("FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=SU", "1997-08-05T09:00:00")),
    ).toEqual(on("1997-08", [5, 17, 19, 31]));
  });

  it("REC-1: RFC 5545 §3.8.5.3 an invalid date (February 30) is ignored", () => {
    expect(
      locals({
        dtstart: "2007-01-15T09:00:00",
        tzid: NY,
        rrule: "FREQ=MONTHLY;BYMONTHDAY=15,30;COUNT=5",
      }),
    ).toEqual([
      "2007-01-15T09:00:00",
      "2007-01-30T09:00:00",
      "2007-02-15T09:00:00",
      "2007-03-15T09:00:00",
      "2007-03-30T09:00:00",
    ]);
  });
});

describe("REC-1: cases beyond the RFC examples", () => {
  it("REC-1: BYYEARDAY combined with BYDAY: the first Monday of each year", () => {
    // 2027-01-01 is a Friday, 2028-01-01 a Saturday, 2029-01-01 a Monday.
    expect(
      locals(
        { dtstart: "2027-01-04T08:00:00", rrule: "FREQ=YEARLY;BYYEARDAY=1,2,3,4,5,6,7;BYDAY=MO" },
        3,
      ),
    ).toEqual(["2027-01-04T08:00:00", "2028-01-03T08:00:00", "2029-01-01T08:00:00"]);
  });

  it("REC-1: BYYEARDAY=-1 combined with BYMONTHDAY=31 is New Year's Eve", () => {
    expect(
      locals({ dtstart: "2027-12-31", rrule: "FREQ=YEARLY;BYYEARDAY=-1;BYMONTHDAY=31;COUNT=3" }),
    ).toEqual(["2027-12-31", "2028-12-31", "2029-12-31"]);
  });

  it("REC-1: YEARLY BYDAY=53MO occurs only in years with 53 Mondays", () => {
    // 2029 starts on a Monday; 2035 too; 2040 is a leap year starting on a Sunday.
    expect(locals({ dtstart: "2027-01-04T09:00:00", rrule: "FREQ=YEARLY;BYDAY=53MO" }, 4)).toEqual([
      "2027-01-04T09:00:00",
      "2029-12-31T09:00:00",
      "2035-12-31T09:00:00",
      "2040-12-31T09:00:00",
    ]);
    expect(locals({ dtstart: "2027-01-04T09:00:00", rrule: "FREQ=YEARLY;BYDAY=-53MO" }, 4)).toEqual(
      ["2027-01-04T09:00:00", "2029-01-01T09:00:00", "2035-01-01T09:00:00", "2040-01-02T09:00:00"],
    );
  });

  it("REC-1: BYWEEKNO=1 can fall in the previous calendar year and BYWEEKNO=-1 is the last ISO week", () => {
    // ISO week 1 of 2026 starts Monday 2025-12-29; week 53 of 2026 starts Monday 2026-12-28.
    expect(
      locals({ dtstart: "2025-01-01T10:00:00", rrule: "FREQ=YEARLY;BYWEEKNO=1;BYDAY=MO" }, 3),
    ).toEqual(["2025-01-01T10:00:00", "2025-12-29T10:00:00", "2027-01-04T10:00:00"]);
    expect(
      locals({ dtstart: "2026-01-01T10:00:00", rrule: "FREQ=YEARLY;BYWEEKNO=-1;BYDAY=MO;COUNT=3" }),
    ).toEqual(["2026-01-01T10:00:00", "2026-12-28T10:00:00", "2027-12-27T10:00:00"]);
  });

  it("REC-1: DTSTART counts as the first occurrence even when it does not match the rule", () => {
    // 2027-01-05 is a Tuesday; the rule wants Mondays.
    expect(
      locals({ dtstart: "2027-01-05T09:00:00", rrule: "FREQ=WEEKLY;BYDAY=MO;COUNT=3" }),
    ).toEqual(["2027-01-05T09:00:00", "2027-01-11T09:00:00", "2027-01-18T09:00:00"]);
  });

  it("REC-1: RDATE adds and EXDATE removes occurrences; the set stays sorted and distinct", () => {
    const rec = validateRule({
      dtstart: "2027-01-04T09:00:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=DAILY;COUNT=3",
      rdate: ["2027-01-10T12:00:00", "2027-01-05T09:00:00", "2027-01-03T07:00:00Z"],
      exdate: ["2027-01-05T08:00:00Z"],
    });
    expect(rec.between(-Infinity, Infinity).map((o) => o.local)).toEqual([
      "2027-01-03T08:00:00",
      "2027-01-04T09:00:00",
      "2027-01-06T09:00:00",
      "2027-01-10T12:00:00",
    ]);
  });

  it("REC-1: a date-only EXDATE removes every occurrence on that local date", () => {
    expect(
      locals({
        dtstart: "2027-01-03T22:00:00",
        rrule: "FREQ=HOURLY;COUNT=4",
        exdate: ["2027-01-04"],
      }),
    ).toEqual(["2027-01-03T22:00:00", "2027-01-03T23:00:00"]);
  });

  it("REC-1: date-only DTSTART gives dates at local midnight", () => {
    const rec = validateRule({
      dtstart: "2027-01-30",
      tzid: "Asia/Tokyo",
      rrule: "FREQ=MONTHLY;COUNT=3",
    });
    const got = rec.between(-Infinity, Infinity);
    expect(got.map((o) => o.local)).toEqual(["2027-01-30", "2027-03-30", "2027-04-30"]);
    expect(new Date(got[0]?.instant ?? 0).toISOString()).toBe("2027-01-29T15:00:00.000Z");
  });

  it("REC-1: UTC DTSTART (Z) and between() bounds are half-open [from, to)", () => {
    const rec = validateRule({ dtstart: "2027-01-04T08:00:00Z", rrule: "FREQ=DAILY" });
    const from = Date.UTC(2027, 0, 5, 8);
    const got = rec.between(from, Date.UTC(2027, 0, 7, 8));
    expect(got.map((o) => o.local)).toEqual(["2027-01-05T08:00:00", "2027-01-06T08:00:00"]);
    expect(rec.next(from)?.local).toBe("2027-01-06T08:00:00");
  });

  it("REC-1: BYSECOND, BYMINUTE and BYHOUR expand within a day; SECONDLY limits by them", () => {
    expect(
      locals({
        dtstart: "2027-01-04T09:00:00",
        rrule: "FREQ=DAILY;BYHOUR=9;BYMINUTE=0,30;BYSECOND=0,15;COUNT=5",
      }),
    ).toEqual([
      "2027-01-04T09:00:00",
      "2027-01-04T09:00:15",
      "2027-01-04T09:30:00",
      "2027-01-04T09:30:15",
      "2027-01-05T09:00:00",
    ]);
    expect(
      locals({
        dtstart: "2027-01-04T09:00:00",
        rrule: "FREQ=SECONDLY;INTERVAL=20;BYMINUTE=0;COUNT=5",
      }),
    ).toEqual([
      "2027-01-04T09:00:00",
      "2027-01-04T09:00:20",
      "2027-01-04T09:00:40",
      "2027-01-04T10:00:00",
      "2027-01-04T10:00:20",
    ]);
  });

  it("REC-1: a rule far in the past is fast-forwarded to the requested window", () => {
    const rec = validateRule({
      dtstart: "2000-01-01T00:00:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=MINUTELY;INTERVAL=7",
    });
    // 2000-01-01 → 2027-01-04 is 27 × 365 + 7 leap days + 3 = 9,865 days = 14,205,600 minutes;
    // 14,205,600 / 7 = 2,029,371.43…, so the next aligned minute is 2,029,372 × 7 = +4 minutes.
    const got = rec.between(Date.UTC(2027, 0, 3, 23, 0), Date.UTC(2027, 0, 4), 2);
    expect(got.map((o) => o.local)).toEqual(["2027-01-04T00:04:00", "2027-01-04T00:11:00"]);
  });
});

describe("REC-1: sub-daily series read far from DTSTART", () => {
  const WINDOW_FROM = Date.parse("2027-01-04T08:00:00Z");
  const HOUR = 3_600_000;

  it("REC-1: a FREQ=SECONDLY series started years ago has its next occurrence one second later, and a window lists every second", () => {
    const rec = validateRule({
      dtstart: "2002-11-02T01:32:48",
      tzid: "UTC",
      rrule: "FREQ=SECONDLY",
    });
    expect(new Date(rec.next(WINDOW_FROM)!.instant).toISOString()).toBe("2027-01-04T08:00:01.000Z");
    const page = rec.scan(WINDOW_FROM, WINDOW_FROM + 60_000, 10_000);
    expect(page.truncated).toBe(false);
    expect(page.occurrences).toHaveLength(60);
  });

  it("REC-1: FREQ=SECONDLY;BYSECOND=41,31 in Asia/Kolkata, started in 2002, lists two seconds of every minute of a day at once", () => {
    const rec = validateRule({
      dtstart: "2002-11-02T01:32:48",
      tzid: "Asia/Kolkata",
      rrule: "UNTIL=20770805T020930Z;FREQ=SECONDLY;BYSECOND=41,31",
    });
    const page = rec.scan(WINDOW_FROM, WINDOW_FROM + 24 * HOUR, 10_000);
    expect(page.truncated).toBe(false);
    expect(page.occurrences).toHaveLength(2 * 24 * 60);
    expect(page.occurrences.slice(0, 2).map((o) => o.local)).toEqual([
      "2027-01-04T13:30:31",
      "2027-01-04T13:30:41",
    ]);
  });

  it("REC-2: a SECONDLY series just after the day Samoa skipped (Pacific/Apia, 2011-12-30) lists every second of a window at once", () => {
    const rec = validateRule({
      dtstart: "2011-12-01T00:00:00",
      tzid: "Pacific/Apia",
      rrule: "FREQ=SECONDLY",
    });
    // 2011-12-30T10:00Z: local time jumped from Dec 29 24:00 (-10:00) to Dec 31 00:00 (+14:00).
    const from = Date.parse("2011-12-30T11:00:00Z");
    const page = rec.scan(from, from + 10 * 60_000, 10_000);
    expect(page.truncated).toBe(false);
    expect(page.occurrences).toHaveLength(600);
    expect(page.occurrences[0]!.local).toBe("2011-12-31T01:00:00");
  });

  it("REC-2: a SECONDLY series scanned in pieces across a DST gap and an overlap lists what one scan lists", () => {
    for (const [tzid, day] of [
      ["Europe/Berlin", "2027-03-28"],
      ["Europe/Berlin", "2027-10-31"],
      ["America/New_York", "2027-03-14"],
    ] as const) {
      const rec = validateRule({
        dtstart: "2020-01-01T00:00:00",
        tzid,
        rrule: "FREQ=SECONDLY;BYSECOND=0,30",
      });
      const from = Date.parse(`${day}T00:00:00Z`) - 3 * HOUR;
      const to = from + 10 * HOUR;
      const whole = rec.scan(from, to, 100_000);
      expect(whole.truncated).toBe(false);
      const pieces: number[] = [];
      for (let at = from; at < to; at += 37 * 60_000 + 13_000) {
        const end = Math.min(to, at + 37 * 60_000 + 13_000);
        const page = rec.scan(at, end, 100_000);
        expect(page.truncated).toBe(false);
        pieces.push(...page.occurrences.map((o) => o.instant));
      }
      expect(pieces).toEqual(whole.occurrences.map((o) => o.instant));
      expect(pieces.length).toBeGreaterThan(1000);
    }
  });
});
