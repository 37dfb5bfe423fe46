/**
 * Reminder offsets (RFC 5545 §3.8.6.3 durations): nominal days, exact hours.
 */
import { describe, expect, it } from "vitest";
import { offsetSchema } from "../../../src/contracts/index.js";
import { ValidationError } from "../../../src/errors/index.js";
import {
  applyOffset,
  isValidOffset,
  parseOffset,
  toInstant,
} from "../../../src/recurrence/index.js";

const iso = (ms: number) => new Date(ms).toISOString();

describe("REC-6: reminder offsets", () => {
  // Sunday 2027-03-28 09:00 CEST (07:00Z), the day Berlin moves to summer time.
  const occ = { instant: Date.UTC(2027, 2, 28, 7), local: "2027-03-28T09:00:00" };

  it("REC-6: -PT15M and PT0S are exact", () => {
    expect(iso(applyOffset(occ, "-PT15M", "Europe/Berlin"))).toBe("2027-03-28T06:45:00.000Z");
    expect(iso(applyOffset(occ, "PT0S", "Europe/Berlin"))).toBe("2027-03-28T07:00:00.000Z");
  });

  it("REC-6: -P1D keeps the wall clock across DST (09:00 CET the day before), -PT24H does not", () => {
    expect(iso(applyOffset(occ, "-P1D", "Europe/Berlin"))).toBe("2027-03-27T08:00:00.000Z");
    expect(iso(applyOffset(occ, "-PT24H", "Europe/Berlin"))).toBe("2027-03-27T07:00:00.000Z");
  });

  it("REC-6: P1W and -P1DT2H combine nominal days with exact hours", () => {
    expect(iso(applyOffset(occ, "P1W", "Europe/Berlin"))).toBe("2027-04-04T07:00:00.000Z");
    // 09:00 CET on 27 March (08:00Z), then 2 hours earlier.
    expect(iso(applyOffset(occ, "-P1DT2H", "Europe/Berlin"))).toBe("2027-03-27T06:00:00.000Z");
  });

  it("REC-6: a day offset landing in a gap moves forward by the gap", () => {
    const o = { instant: Date.UTC(2027, 2, 29, 0, 30), local: "2027-03-29T02:30:00" };
    expect(iso(applyOffset(o, "-P1D", "Europe/Berlin"))).toBe("2027-03-28T01:30:00.000Z");
  });

  it("REC-6: date-only occurrences move by whole local days", () => {
    const o = { instant: Date.UTC(2027, 0, 3, 23), local: "2027-01-04" };
    expect(iso(applyOffset(o, "-P1DT-0S".replace("T-0S", ""), "Europe/Berlin"))).toBe(
      "2027-01-02T23:00:00.000Z",
    );
  });

  it("REC-6: parseOffset rejects what is not a duration, naming the field offset", () => {
    for (const bad of ["", "15m", "P", "PT", "P1M", "P1Y", "-P1W2D", "PT1.5H", "P-1D", "--PT1M"]) {
      expect(isValidOffset(bad)).toBe(false);
      try {
        parseOffset(bad);
        throw new Error(`accepted ${bad}`);
      } catch (err) {
        expect(err).toBeInstanceOf(ValidationError);
        expect((err as ValidationError).issues[0]?.field).toBe("offset");
      }
    }
    expect(parseOffset("-P1DT2H")).toEqual({ days: -1, exactMs: -7_200_000 });
    expect(parseOffset("+PT90S")).toEqual({ days: 0, exactMs: 90_000 });
  });

  it("API-1 REC-6: a refused offset says why: months or years, a fraction, the range, else the grammar", () => {
    const why = (text: string) => {
      try {
        parseOffset(text);
      } catch (err) {
        return (err as ValidationError).issues[0]?.message ?? "";
      }
      throw new Error(`accepted ${text}`);
    };
    for (const text of ["-P1M", "P1Y", "-P1Y2M", "P1MT2H"]) {
      expect(why(text)).toMatch(/^has months or years, which have no fixed length/);
    }
    // A minute is not a month: PT1M is accepted.
    expect(parseOffset("-PT1M")).toEqual({ days: 0, exactMs: -60_000 });
    for (const text of ["PT0.5S", "PT1,5H", "-P1.5D"]) {
      expect(why(text)).toMatch(/^has a fraction/);
    }
    expect(why("-P99999D")).toBe(
      "reaches beyond 36,600 days (about 100 years) from its occurrence",
    );
    expect(why("soon")).toBe(
      "must be an ISO 8601 duration such as -PT15M, PT0S, -P1D, P1W or -P1DT2H",
    );
    // The API's schema gives the same reasons before any parsing.
    const parsed = offsetSchema.safeParse("-P1M");
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.message).toMatch(/^has months or years/);
  });

  it("REC-2: toInstant reads a local time in a zone under the DST policy", () => {
    expect(iso(toInstant("2027-01-04T09:00:00", "Europe/Berlin") as number)).toBe(
      "2027-01-04T08:00:00.000Z",
    );
    expect(iso(toInstant("2027-03-28T02:30:00", "Europe/Berlin") as number)).toBe(
      "2027-03-28T01:30:00.000Z",
    );
    expect(toInstant("2027-03-28T02:30:00", "Europe/Berlin", { gap: "skip" })).toBeNull();
    expect(
      iso(toInstant("2027-10-31T02:30:00", "Europe/Berlin", { overlap: "later" }) as number),
    ).toBe("2027-10-31T01:30:00.000Z");
    expect(() => toInstant("2027-01-04T09:00:00", "Nowhere/Zone")).toThrow(ValidationError);
  });
});

describe("nominal offsets and the overlap policy", () => {
  it("REC-2: -P1D before a 01:30 occurrence lands on the ambiguous 01:30 the policy names", () => {
    // New York falls back on 2027-11-07: 01:30 happens at 05:30Z (EDT) and 06:30Z (EST).
    const occurrence = {
      instant: Date.parse("2027-11-08T06:30:00Z"),
      local: "2027-11-08T01:30:00",
    };
    expect(new Date(applyOffset(occurrence, "-P1D", "America/New_York")).toISOString()).toBe(
      "2027-11-07T05:30:00.000Z",
    );
    expect(
      new Date(
        applyOffset(occurrence, "-P1D", "America/New_York", { overlap: "later" }),
      ).toISOString(),
    ).toBe("2027-11-07T06:30:00.000Z");
  });
  it("REC-1: a day offset keeps the milliseconds of the occurrence", () => {
    const occurrence = {
      instant: Date.parse("2027-01-05T08:00:03.267Z"),
      local: "2027-01-05T08:00:03",
    };
    expect(new Date(applyOffset(occurrence, "-P1D", "UTC")).toISOString()).toBe(
      "2027-01-04T08:00:03.267Z",
    );
  });
});
