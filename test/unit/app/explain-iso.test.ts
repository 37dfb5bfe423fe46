/**
 * OPS-16: the explanation writes every instant with its own ISO 8601 formatter (the date
 * part kept per UTC day); it must write exactly what `Date.prototype.toISOString` writes.
 */
import { describe, expect, it } from "vitest";
import { iso } from "../../../src/app/explain.js";

describe("explain's instant formatter (OPS-16)", () => {
  it("OPS-16: writes what toISOString writes, across days, before 1970 and at the ends of four-digit years", () => {
    const edges = [
      0,
      -1,
      1,
      86_399_999,
      86_400_000,
      -86_400_000,
      -86_400_001,
      Date.parse("2028-02-29T23:59:59.999Z"),
      Date.parse("2028-03-01T00:00:00.000Z"),
      Date.parse("0000-01-01T00:00:00.000Z"),
      Date.parse("0000-01-01T00:00:00.000Z") - 1,
      Date.parse("9999-12-31T23:59:59.999Z"),
      Date.parse("9999-12-31T23:59:59.999Z") + 1,
      8.64e15,
      -8.64e15,
    ];
    // A deterministic walk over many days and times (a linear congruential sequence).
    let x = 12_345;
    const walk = Array.from({ length: 20_000 }, () => {
      x = (x * 1_103_515_245 + 12_345) % 2 ** 31;
      return Math.round((x / 2 ** 31 - 0.5) * 2 * 4e12);
    });
    for (const ms of [...edges, ...walk]) expect(iso(ms)).toBe(new Date(ms).toISOString());
  });
});
