/**
 * DEL-15: quiet hours as a pure function, across DST changes in two zones.
 */
import { describe, expect, it } from "vitest";
import { quietHoursEnd, type QuietHours } from "../../../src/recurrence/index.js";

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

const berlin: QuietHours = { tzid: "Europe/Berlin", start: "22:00", end: "07:00" };
const newYork: QuietHours = { tzid: "America/New_York", start: "22:00", end: "07:00" };

describe("DEL-15: quiet hours", () => {
  it("DEL-15: a due instant inside a window crossing midnight is deferred to its end in the zone", () => {
    // 23:30 Berlin (CET, +01:00) on Monday 2027-01-04 → 07:00 Tuesday.
    expect(iso(quietHoursEnd(at("2027-01-04T22:30:00Z"), berlin))).toBe("2027-01-05T06:00:00.000Z");
    // 03:00 Berlin, after midnight, same window.
    expect(iso(quietHoursEnd(at("2027-01-05T02:00:00Z"), berlin))).toBe("2027-01-05T06:00:00.000Z");
    // Outside: 07:00 sharp (end is exclusive) and 21:59.
    expect(quietHoursEnd(at("2027-01-05T06:00:00Z"), berlin)).toBeNull();
    expect(quietHoursEnd(at("2027-01-05T20:59:00Z"), berlin)).toBeNull();
    // 22:00 sharp is inside (start inclusive).
    expect(iso(quietHoursEnd(at("2027-01-05T21:00:00Z"), berlin))).toBe("2027-01-06T06:00:00.000Z");
  });

  it("DEL-15: a window within one day (12:00–14:00)", () => {
    const lunch: QuietHours = { tzid: "America/New_York", start: "12:00", end: "14:00" };
    expect(iso(quietHoursEnd(at("2027-01-04T17:30:00Z"), lunch))).toBe("2027-01-04T19:00:00.000Z");
    expect(quietHoursEnd(at("2027-01-04T19:00:00Z"), lunch)).toBeNull();
  });

  it("DEL-15: across the spring-forward night in Europe/Berlin the end keeps 07:00 local (now +02:00)", () => {
    // 2027-03-28: 02:00 CET → 03:00 CEST. Due 23:00 CET on the 27th; end 07:00 CEST = 05:00Z.
    expect(iso(quietHoursEnd(at("2027-03-27T22:00:00Z"), berlin))).toBe("2027-03-28T05:00:00.000Z");
  });

  it("DEL-15: across the fall-back night in America/New_York the end keeps 07:00 local (now −05:00)", () => {
    // 2027-11-07: 02:00 EDT → 01:00 EST. Due 23:00 EDT on the 6th (03:00Z); end 07:00 EST = 12:00Z.
    expect(iso(quietHoursEnd(at("2027-11-07T03:00:00Z"), newYork))).toBe(
      "2027-11-07T12:00:00.000Z",
    );
    // And across spring-forward (2027-03-14, 02:00 EST → 03:00 EDT): 07:00 EDT = 11:00Z.
    expect(iso(quietHoursEnd(at("2027-03-14T03:30:00Z"), newYork))).toBe(
      "2027-03-14T11:00:00.000Z",
    );
  });

  it("DEL-15: an end that does not exist on the spring-forward day moves to the next valid instant", () => {
    // Window 23:00–02:30 in Berlin; 02:30 does not exist on 2027-03-28: the end is 03:00 CEST (01:00Z).
    const q: QuietHours = { tzid: "Europe/Berlin", start: "23:00", end: "02:30" };
    expect(iso(quietHoursEnd(at("2027-03-27T23:30:00Z"), q))).toBe("2027-03-28T01:00:00.000Z");
    // New York: 02:30 on 2027-03-14 does not exist: 03:00 EDT (07:00Z).
    const ny: QuietHours = { tzid: "America/New_York", start: "23:00", end: "02:30" };
    expect(iso(quietHoursEnd(at("2027-03-14T05:00:00Z"), ny))).toBe("2027-03-14T07:00:00.000Z");
  });

  it("DEL-15: an end that exists twice on the fall-back day takes the first", () => {
    // Berlin 2027-10-31: 03:00 CEST → 02:00 CET, 02:30 twice (00:30Z and 01:30Z).
    const q: QuietHours = { tzid: "Europe/Berlin", start: "23:00", end: "02:30" };
    expect(iso(quietHoursEnd(at("2027-10-30T22:00:00Z"), q))).toBe("2027-10-31T00:30:00.000Z");
    // Due in the second 02:15 (01:15Z): the first 02:30 is already past, so the second.
    expect(iso(quietHoursEnd(at("2027-10-31T01:15:00Z"), q))).toBe("2027-10-31T01:30:00.000Z");
  });

  it("DEL-15: days names the day the window starts on", () => {
    // Friday 2027-01-08 only: Friday 23:00 and Saturday 06:00 are quiet, Saturday 23:00 not.
    const fri: QuietHours = { ...berlin, days: ["FR"] };
    expect(iso(quietHoursEnd(at("2027-01-08T22:00:00Z"), fri))).toBe("2027-01-09T06:00:00.000Z");
    expect(iso(quietHoursEnd(at("2027-01-09T05:00:00Z"), fri))).toBe("2027-01-09T06:00:00.000Z");
    expect(quietHoursEnd(at("2027-01-09T22:00:00Z"), fri)).toBeNull();
    // Thursday night's window (ends Friday 07:00) is not a Friday window.
    expect(quietHoursEnd(at("2027-01-08T05:00:00Z"), fri)).toBeNull();
  });

  it("DEL-15: start equal to end is an empty window", () => {
    expect(quietHoursEnd(at("2027-01-04T22:30:00Z"), { ...berlin, end: "22:00" })).toBeNull();
  });
});
