/**
 * REC-2: DST gaps and overlaps. Expected instants are written out from each zone's rules:
 * - Europe/Berlin 2027: CET (+01) → CEST (+02) on Sun 28 Mar at 02:00; back on Sun 31 Oct at 03:00.
 * - America/New_York 2027: EST (−05) → EDT (−04) on Sun 14 Mar at 02:00; back on Sun 7 Nov at 02:00.
 * - Australia/Lord_Howe 2027: +11 → +10:30 on Sun 4 Apr at 02:00; +10:30 → +11 on Sun 3 Oct at 02:00 (30-minute DST).
 * - Pacific/Chatham 2027: +13:45 → +12:45 on Sun 4 Apr at 03:45; +12:45 → +13:45 on Sun 26 Sep at 02:45.
 * - America/Sao_Paulo: −03 → −02 on Sun 4 Nov 2018 at 00:00; back on Sun 17 Feb 2019 at 00:00; no DST since 2019.
 * - Asia/Kolkata: +05:30 all year, no DST.
 */
import { describe, expect, it } from "vitest";
import {
  validateRule,
  type DstPolicy,
  type RecurrenceInput,
} from "../../../src/recurrence/index.js";
import { instants, locals } from "./helpers.js";

const skip: Partial<DstPolicy> = { gap: "skip" };
const later: Partial<DstPolicy> = { overlap: "later" };
const daily = (
  tzid: string,
  dtstart: string,
  count: number,
  dst?: Partial<DstPolicy>,
): RecurrenceInput => ({
  dtstart,
  tzid,
  rrule: `FREQ=DAILY;COUNT=${count}`,
  ...(dst ? { dst } : {}),
});

describe("REC-2: Europe/Berlin", () => {
  it("REC-2: a 09:00 Berlin meeting stays at 09:00 local in winter and summer", () => {
    expect(instants(daily("Europe/Berlin", "2027-03-27T09:00:00", 2))).toEqual([
      "2027-03-27T08:00:00.000Z",
      "2027-03-28T07:00:00.000Z",
    ]);
    expect(instants(daily("Europe/Berlin", "2027-10-30T09:00:00", 2))).toEqual([
      "2027-10-30T07:00:00.000Z",
      "2027-10-31T08:00:00.000Z",
    ]);
  });

  it("REC-2: gap 02:30 on 2027-03-28 is shifted forward by the gap (shift, default)", () => {
    const rec = validateRule(daily("Europe/Berlin", "2027-03-27T02:30:00", 3));
    const got = rec.between(-Infinity, Infinity);
    expect(got.map((o) => new Date(o.instant).toISOString())).toEqual([
      "2027-03-27T01:30:00.000Z",
      "2027-03-28T01:30:00.000Z",
      "2027-03-29T00:30:00.000Z",
    ]);
    expect(got[1]?.local).toBe("2027-03-28T03:30:00");
  });

  it("REC-2: gap 02:30 on 2027-03-28 is dropped under skip and not counted (RFC 5545 §3.3.10)", () => {
    expect(instants(daily("Europe/Berlin", "2027-03-27T02:30:00", 3, skip))).toEqual([
      "2027-03-27T01:30:00.000Z",
      "2027-03-29T00:30:00.000Z",
      "2027-03-30T00:30:00.000Z",
    ]);
  });

  it("REC-2: overlap 02:30 on 2027-10-31 takes the earlier instant by default and the later one under later", () => {
    expect(instants(daily("Europe/Berlin", "2027-10-30T02:30:00", 2))).toEqual([
      "2027-10-30T00:30:00.000Z",
      "2027-10-31T00:30:00.000Z",
    ]);
    expect(instants(daily("Europe/Berlin", "2027-10-30T02:30:00", 2, later))).toEqual([
      "2027-10-30T00:30:00.000Z",
      "2027-10-31T01:30:00.000Z",
    ]);
  });

  it("REC-2: HOURLY fires once in the repeated hour and once around the gap (wall-clock hours)", () => {
    expect(
      instants({
        dtstart: "2027-10-31T00:00:00",
        tzid: "Europe/Berlin",
        rrule: "FREQ=HOURLY;COUNT=4",
      }),
    ).toEqual([
      "2027-10-30T22:00:00.000Z",
      "2027-10-30T23:00:00.000Z",
      "2027-10-31T00:00:00.000Z",
      "2027-10-31T02:00:00.000Z",
    ]);
    // 02:00 does not exist and is shifted onto 03:00, which is also generated: one instant,
    // counted once.
    expect(
      instants({
        dtstart: "2027-03-28T01:00:00",
        tzid: "Europe/Berlin",
        rrule: "FREQ=HOURLY;COUNT=4",
      }),
    ).toEqual([
      "2027-03-28T00:00:00.000Z",
      "2027-03-28T01:00:00.000Z",
      "2027-03-28T02:00:00.000Z",
      "2027-03-28T03:00:00.000Z",
    ]);
  });

  it("REC-2: a weekly Sunday 02:30 series never fires twice the week DST ends", () => {
    const rec = validateRule({
      dtstart: "2027-10-24T02:30:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=WEEKLY;COUNT=3",
    });
    expect(rec.between(-Infinity, Infinity).map((o) => new Date(o.instant).toISOString())).toEqual([
      "2027-10-24T00:30:00.000Z",
      "2027-10-31T00:30:00.000Z",
      "2027-11-07T01:30:00.000Z",
    ]);
  });

  it("REC-2: MINUTELY across the gap keeps instants strictly increasing (shifted times reordered, merged)", () => {
    const got = instants({
      dtstart: "2027-03-28T01:30:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=MINUTELY;INTERVAL=45;COUNT=4",
    });
    // Walls 01:30, 02:15 (gap → 03:15 CEST = 01:15Z), 03:00 (= 01:00Z), 03:45 (= 01:45Z).
    expect(got).toEqual([
      "2027-03-28T00:30:00.000Z",
      "2027-03-28T01:00:00.000Z",
      "2027-03-28T01:15:00.000Z",
      "2027-03-28T01:45:00.000Z",
    ]);
  });

  it("REC-2: a DTSTART inside the gap is shifted and later occurrences keep their wall time", () => {
    expect(instants(daily("Europe/Berlin", "2027-03-28T02:30:00", 2, skip))).toEqual([
      "2027-03-28T01:30:00.000Z",
      "2027-03-29T00:30:00.000Z",
    ]);
  });
});

describe("REC-2: America/New_York", () => {
  it("REC-2: gap 02:30 on 2027-03-14 shifts to 03:30 EDT; skip drops it", () => {
    expect(instants(daily("America/New_York", "2027-03-13T02:30:00", 3))).toEqual([
      "2027-03-13T07:30:00.000Z",
      "2027-03-14T07:30:00.000Z",
      "2027-03-15T06:30:00.000Z",
    ]);
    expect(instants(daily("America/New_York", "2027-03-13T02:30:00", 3, skip))).toEqual([
      "2027-03-13T07:30:00.000Z",
      "2027-03-15T06:30:00.000Z",
      "2027-03-16T06:30:00.000Z",
    ]);
  });

  it("REC-2: overlap 01:30 on 2027-11-07: EDT instant by default, EST under later", () => {
    expect(instants(daily("America/New_York", "2027-11-06T01:30:00", 2))).toEqual([
      "2027-11-06T05:30:00.000Z",
      "2027-11-07T05:30:00.000Z",
    ]);
    expect(instants(daily("America/New_York", "2027-11-06T01:30:00", 2, later))).toEqual([
      "2027-11-06T05:30:00.000Z",
      "2027-11-07T06:30:00.000Z",
    ]);
  });
});

describe("REC-2: Australia/Lord_Howe (30-minute DST)", () => {
  it("REC-2: gap 02:15 on 2027-10-03 shifts by 30 minutes to 02:45 (+11)", () => {
    const rec = validateRule(daily("Australia/Lord_Howe", "2027-10-02T02:15:00", 3));
    const got = rec.between(-Infinity, Infinity);
    expect(got.map((o) => new Date(o.instant).toISOString())).toEqual([
      "2027-10-01T15:45:00.000Z",
      "2027-10-02T15:45:00.000Z",
      "2027-10-03T15:15:00.000Z",
    ]);
    expect(got[1]?.local).toBe("2027-10-03T02:45:00");
    expect(instants(daily("Australia/Lord_Howe", "2027-10-02T02:15:00", 3, skip))).toEqual([
      "2027-10-01T15:45:00.000Z",
      "2027-10-03T15:15:00.000Z",
      "2027-10-04T15:15:00.000Z",
    ]);
  });

  it("REC-2: overlap 01:45 on 2027-04-04 happens twice, 30 minutes apart", () => {
    expect(instants(daily("Australia/Lord_Howe", "2027-04-04T01:45:00", 1))).toEqual([
      "2027-04-03T14:45:00.000Z",
    ]);
    expect(instants(daily("Australia/Lord_Howe", "2027-04-04T01:45:00", 1, later))).toEqual([
      "2027-04-03T15:15:00.000Z",
    ]);
  });
});

describe("REC-2: Pacific/Chatham (+12:45/+13:45)", () => {
  it("REC-2: gap 03:00 on 2027-09-26 shifts to 04:00 (+13:45)", () => {
    const got = validateRule(daily("Pacific/Chatham", "2027-09-25T03:00:00", 3)).between(
      -Infinity,
      Infinity,
    );
    expect(got.map((o) => new Date(o.instant).toISOString())).toEqual([
      "2027-09-24T14:15:00.000Z",
      "2027-09-25T14:15:00.000Z",
      "2027-09-26T13:15:00.000Z",
    ]);
    expect(got[1]?.local).toBe("2027-09-26T04:00:00");
  });

  it("REC-2: overlap 03:00 on 2027-04-04: +13:45 first, +12:45 under later", () => {
    expect(instants(daily("Pacific/Chatham", "2027-04-04T03:00:00", 1))).toEqual([
      "2027-04-03T13:15:00.000Z",
    ]);
    expect(instants(daily("Pacific/Chatham", "2027-04-04T03:00:00", 1, later))).toEqual([
      "2027-04-03T14:15:00.000Z",
    ]);
  });
});

describe("REC-2: America/Sao_Paulo (DST abolished in 2019)", () => {
  it("REC-2: an all-day date whose midnight does not exist (2018-11-04) starts at 01:00 local", () => {
    const got = validateRule({
      dtstart: "2018-11-03",
      tzid: "America/Sao_Paulo",
      rrule: "FREQ=DAILY;COUNT=3",
    }).between(-Infinity, Infinity);
    expect(got.map((o) => o.local)).toEqual(["2018-11-03", "2018-11-04", "2018-11-05"]);
    expect(got.map((o) => new Date(o.instant).toISOString())).toEqual([
      "2018-11-03T03:00:00.000Z",
      "2018-11-04T03:00:00.000Z",
      "2018-11-05T02:00:00.000Z",
    ]);
  });

  it("REC-2: 09:00 is 11:00Z in the 2018/19 summer and 12:00Z in November 2019 and later (no DST)", () => {
    const rec = validateRule({
      dtstart: "2018-11-05T09:00:00",
      tzid: "America/Sao_Paulo",
      rrule: "FREQ=YEARLY",
    });
    expect(
      rec.between(-Infinity, Infinity, 3).map((o) => new Date(o.instant).toISOString()),
    ).toEqual(["2018-11-05T11:00:00.000Z", "2019-11-05T12:00:00.000Z", "2020-11-05T12:00:00.000Z"]);
  });

  it("REC-2: the repeated hour 23:30 on 2019-02-16", () => {
    expect(instants(daily("America/Sao_Paulo", "2019-02-16T23:30:00", 1))).toEqual([
      "2019-02-17T01:30:00.000Z",
    ]);
    expect(instants(daily("America/Sao_Paulo", "2019-02-16T23:30:00", 1, later))).toEqual([
      "2019-02-17T02:30:00.000Z",
    ]);
  });
});

describe("REC-2: Asia/Kolkata (no DST)", () => {
  it("REC-2: 09:00 is always 03:30Z and the DST policy changes nothing", () => {
    const expected = [
      "2027-03-13T03:30:00.000Z",
      "2027-03-14T03:30:00.000Z",
      "2027-03-15T03:30:00.000Z",
    ];
    expect(instants(daily("Asia/Kolkata", "2027-03-13T09:00:00", 3))).toEqual(expected);
    expect(
      instants(daily("Asia/Kolkata", "2027-03-13T09:00:00", 3, { gap: "skip", overlap: "later" })),
    ).toEqual(expected);
    expect(locals(daily("Asia/Kolkata", "2027-10-30T00:00:00", 2))).toEqual([
      "2027-10-30T00:00:00",
      "2027-10-31T00:00:00",
    ]);
  });
});

describe("REC-2: host time zone", () => {
  it("REC-2: results do not depend on process TZ (suite runs under UTC, America/New_York, Asia/Kolkata)", () => {
    // Same expectation whatever TZ the process runs in; the suite is run under three values.
    expect(
      instants({
        dtstart: "1997-09-02T09:00:00",
        tzid: "America/New_York",
        rrule: "FREQ=DAILY;COUNT=1",
      }),
    ).toEqual(["1997-09-02T13:00:00.000Z"]);
    expect(locals({ dtstart: "2027-01-04", rrule: "FREQ=WEEKLY;COUNT=2" })).toEqual([
      "2027-01-04",
      "2027-01-11",
    ]);
  });
});
