import { describe, expect, it } from "vitest";
import { Temporal } from "temporal-polyfill";
import { Zone } from "../../../src/recurrence/zone.js";

/** The offset Temporal (the reference reader of the IANA data) gives at an instant, in ms. */
const reference = (id: string, ms: number): number =>
  Temporal.Instant.fromEpochMilliseconds(ms).toZonedDateTimeISO(id).offsetNanoseconds / 1e6;

const YEAR_MS = 365.2425 * 86_400_000;
const at = (year: number): number => Math.floor(Date.UTC(2000, 0, 1) + (year - 2000) * YEAR_MS);

describe("Zone offsets (REC-2)", () => {
  it("REC-2: offsets match Temporal's from 1800 to 9999, folded far-future years included", () => {
    let seed = 11;
    const rand = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
    const zones = [
      "Europe/Berlin",
      "America/New_York",
      "Australia/Lord_Howe",
      "America/Sao_Paulo",
      "Africa/Casablanca",
      "Asia/Gaza",
      "Pacific/Chatham",
      "Asia/Kolkata",
      "Europe/Amsterdam",
    ];
    for (const id of zones) {
      const zone = new Zone(id);
      for (let i = 0; i < 150; i++) {
        const year = i < 100 ? 1800 + rand() * 331 : 2131 + rand() * 7_800;
        const ms = at(year);
        expect([id, new Date(ms).toISOString(), zone.offsetAt(ms)]).toEqual([
          id,
          new Date(ms).toISOString(),
          reference(id, ms),
        ]);
      }
    }
  });

  it("REC-2: a change of offset that lasts only days is found (Noronha, 7 days in 2000; Gaza, 7 days in 2040)", () => {
    for (const [id, from, to] of [
      ["America/Noronha", Date.UTC(2000, 9, 1), Date.UTC(2000, 10, 1)],
      ["Asia/Gaza", Date.UTC(2040, 9, 10), Date.UTC(2040, 10, 10)],
    ] as const) {
      const zone = new Zone(id);
      const seen = new Set<number>();
      for (let ms = from; ms < to; ms += 3_600_000) {
        expect(zone.offsetAt(ms)).toBe(reference(id, ms));
        seen.add(zone.offsetAt(ms));
      }
      expect(seen.size).toBeGreaterThan(1);
    }
  });

  it("REC-2: the instant of a transition is exact to the second (Berlin, 2027-03-28T01:00:00Z)", () => {
    const zone = new Zone("Europe/Berlin");
    const t = Date.UTC(2027, 2, 28, 1);
    expect(zone.offsetAt(t - 1)).toBe(3_600_000);
    expect(zone.offsetAt(t)).toBe(7_200_000);
    // Local mean time before the first transition (1893): +00:53:28.
    expect(zone.offsetAt(Date.UTC(1500, 0, 1))).toBe((53 * 60 + 28) * 1000);
  });

  it("REC-2: fixed-offset zones and UTC need no lookup", () => {
    expect(new Zone("+05:30").offsetAt(0)).toBe(19_800_000);
    expect(new Zone("-08:00").offsetAt(Date.UTC(2300, 5, 1))).toBe(-28_800_000);
    const utc = new Zone("UTC");
    expect(utc.offsetAt(Date.UTC(2027, 5, 1))).toBe(0);
    expect(utc.readings).toBe(0);
  });

  it("OPS-12: the first walk of a zone from 2000 to 2500 reads the zone data a bounded number of times", () => {
    // Every reading costs a few µs of CPU; before the segments were filled a year at a time
    // and far-future years folded onto 2101–2130, this walk cost ~0.5 ms per DST transition.
    const zone = new Zone("Australia/Lord_Howe");
    for (let ms = Date.UTC(2000, 0, 1); ms < Date.UTC(2500, 0, 1); ms += 86_400_000)
      zone.offsetAt(ms);
    // 131 distinct years (2000–2130) × (20 samples + ~2 × 10 for the transitions).
    expect(zone.readings).toBeLessThan(8_000);
    const again = zone.readings;
    for (let ms = Date.UTC(2000, 0, 1); ms < Date.UTC(9000, 0, 1); ms += 7 * 86_400_000)
      zone.offsetAt(ms);
    expect(zone.readings).toBe(again);
  });
});
