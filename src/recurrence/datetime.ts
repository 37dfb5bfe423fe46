/**
 * Date and date-time values as people and RFC 5545 write them, read without the host time
 * zone: `2027-01-04` / `20270104` (a date), `2027-01-04T09:00:00` / `20270104T090000` (a
 * local date-time, read in the schedule's zone) and the same with `Z` or an offset
 * `+01:00` (an instant).
 */
import { DAY_SECONDS, daysFromCivil, monthLength } from "./civil.js";

/** Earliest instant a value may name: 0001-01-01T00:00:00Z (epoch ms). */
export const MIN_INSTANT_MS = -62_135_596_800_000;
/** Latest instant a value may name: 9999-12-31T23:59:59.999Z (epoch ms). */
export const MAX_INSTANT_MS = 253_402_300_799_999;

/** A parsed value: a date (day number), a local wall second, or an instant (epoch ms). */
export type DateValue =
  | { kind: "date"; days: number }
  | { kind: "local"; wall: number }
  | { kind: "instant"; ms: number };

/** Parse outcome: the value plus any fractional seconds (ms) it carried. */
export type ParsedDateValue =
  { kind: "ok"; value: DateValue; fractionMs: number } | { kind: "invalid"; reason: string };

const PATTERN =
  /^(\d{4})(-?)(\d{2})\2(\d{2})(?:[Tt ](\d{2})(?::?(\d{2})(?::?(\d{2})(?:[.,](\d{1,9}))?)?)?(Z|z|[+-]\d{2}(?::?\d{2})?)?)?$/;

/**
 * Parses a DATE, local DATE-TIME or instant. Returns `null` when the text has another
 * shape, `{kind:'invalid'}` when the shape is right but a field is out of range.
 */
export function parseDateValue(text: string): ParsedDateValue | null {
  if (text.length > 40) return null;
  const m = PATTERN.exec(text.trim());
  if (m === null) return null;
  const year = Number(m[1]);
  const month = Number(m[3]);
  const day = Number(m[4]);
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > monthLength(year, month)) {
    return { kind: "invalid", reason: "no such date" };
  }
  const days = daysFromCivil(year, month, day);
  if (m[5] === undefined) return { kind: "ok", value: { kind: "date", days }, fractionMs: 0 };
  const h = Number(m[5]);
  const min = Number(m[6] ?? "0");
  const s = Number(m[7] ?? "0");
  if (h > 23 || min > 59 || s > 59) return { kind: "invalid", reason: "no such time of day" };
  const fractionMs = m[8] === undefined ? 0 : Math.floor(Number(`0.${m[8]}`) * 1000);
  const wall = days * DAY_SECONDS + h * 3600 + min * 60 + s;
  const zone = m[9];
  if (zone === undefined) return { kind: "ok", value: { kind: "local", wall }, fractionMs };
  let offsetMin = 0;
  if (zone !== "Z" && zone !== "z") {
    const digits = zone.replace(":", "");
    const oh = Number(digits.slice(1, 3));
    const om = Number(digits.slice(3, 5) || "0");
    if (oh > 23 || om > 59) return { kind: "invalid", reason: "no such UTC offset" };
    offsetMin = (zone.startsWith("-") ? -1 : 1) * (oh * 60 + om);
  }
  const ms = wall * 1000 - offsetMin * 60_000;
  // Years 0001–9999 once read in UTC: an offset must not carry a value out of them.
  if (ms < MIN_INSTANT_MS || ms > MAX_INSTANT_MS)
    return { kind: "invalid", reason: "must be in the years 0001 to 9999 (UTC)" };
  return { kind: "ok", value: { kind: "instant", ms }, fractionMs };
}
