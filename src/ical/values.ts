/**
 * iCalendar value types used by the import: DATE and DATE-TIME (RFC 5545 §3.3.4, §3.3.5)
 * and DURATION (§3.3.6), converted to the engine's notations.
 */

/** A DATE or DATE-TIME value as written, without its zone resolved. */
export type IcalTime =
  | { kind: "date"; date: string }
  | { kind: "utc"; local: string }
  | { kind: "local"; local: string };

const DATE_TIME = /^(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})?(Z)?)?$/;

function validCivil(y: number, mo: number, d: number, h: number, mi: number, s: number): boolean {
  if (y < 1 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 60) return false;
  const dim = new Date(Date.UTC(2000, mo, 0)).getUTCDate();
  const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
  return d <= (mo === 2 ? (leap ? 29 : 28) : dim);
}

/**
 * Reads a DATE (`20270104`) or DATE-TIME (`20270104T090000`, `…Z`) value (§3.3.4, §3.3.5).
 * `VALUE=DATE` or an 8-digit value is a date (some exporters omit the parameter).
 * Seconds may be missing (`T0900`, tolerated). Returns `null` when unreadable or invalid.
 */
export function parseIcalTime(value: string, valueType?: string): IcalTime | null {
  const m = DATE_TIME.exec(value.trim());
  if (m === null) return null;
  const [, y, mo, d, h, mi, s, z] = m;
  const date = `${y}-${mo}-${d}`;
  const hh = Number(h ?? 0);
  const mm = Number(mi ?? 0);
  const ss = Number(s ?? 0);
  if (!validCivil(Number(y), Number(mo), Number(d), hh, mm, ss === 60 ? 59 : ss)) return null;
  if (h === undefined || valueType?.toUpperCase() === "DATE") return { kind: "date", date };
  const local = `${date}T${h}:${mi}:${s === "60" ? "59" : (s ?? "00")}`;
  return z === "Z" ? { kind: "utc", local } : { kind: "local", local };
}

/** A duration split as the engine applies it: nominal days and an exact part in ms. */
export interface Duration {
  days: number;
  exactMs: number;
}

const DURATION =
  /^([+-])?P(?:(\d{1,6})W|(?:(\d{1,6})D)?(?:T(?:(\d{1,7})H)?(?:(\d{1,9})M)?(?:(\d{1,10})S)?)?)$/;

/**
 * Reads a DURATION value (§3.3.6): `-PT15M`, `P1D`, `-P0DT0H15M0S`, `P1W`. Returns `null`
 * for anything else (`PT-2H`, `P`, `PT`, years or months).
 */
export function parseDuration(text: string): Duration | null {
  const t = text.trim().toUpperCase();
  const m = DURATION.exec(t);
  if (m === null || t.endsWith("P") || t.endsWith("T")) return null;
  const [, sign, w, d, h, mi, s] = m;
  const k = sign === "-" ? -1 : 1;
  const days = (Number(w ?? 0) * 7 + Number(d ?? 0)) * k;
  const exactMs = (Number(h ?? 0) * 3600 + Number(mi ?? 0) * 60 + Number(s ?? 0)) * 1000 * k;
  return { days: days + 0, exactMs: exactMs + 0 };
}

/**
 * Canonical offset text accepted by the schedule contract (`-PT15M`, `P1D`, `-P1DT2H`,
 * `PT0S`). When days and the exact part have opposite signs (a single ISO 8601 duration
 * cannot say "one day later minus 15 minutes"), the days are counted as 24 exact hours.
 */
export function formatOffset(d: Duration): string {
  let { days, exactMs } = d;
  if (days !== 0 && exactMs !== 0 && Math.sign(days) !== Math.sign(exactMs)) {
    exactMs += days * 86_400_000;
    days = 0;
  }
  const negative = days < 0 || exactMs < 0;
  const ad = Math.abs(days);
  let secs = Math.round(Math.abs(exactMs) / 1000);
  const h = Math.floor(secs / 3600);
  secs -= h * 3600;
  const m = Math.floor(secs / 60);
  secs -= m * 60;
  let time = "";
  if (h > 0) time += `${h}H`;
  if (m > 0) time += `${m}M`;
  if (secs > 0) time += `${secs}S`;
  if (ad === 0 && time === "") return "PT0S";
  return `${negative ? "-" : ""}P${ad > 0 ? `${ad}D` : ""}${time === "" ? "" : `T${time}`}`;
}

/** `YYYY-MM-DDTHH:mm:ss` → `YYYYMMDDTHHmmss` (the RRULE UNTIL notation). */
export function compactLocal(local: string): string {
  return local.replace(/[-:]/g, "");
}

/** Adds whole days to a `YYYY-MM-DD` date. */
export function addDays(date: string, days: number): string {
  const ms = Date.parse(`${date}T00:00:00Z`) + days * 86_400_000;
  return new Date(ms).toISOString().slice(0, 10);
}

/** Whole days from date `a` to date `b` (both `YYYY-MM-DD`). */
export function daysBetween(a: string, b: string): number {
  return Math.round((Date.parse(`${b}T00:00:00Z`) - Date.parse(`${a}T00:00:00Z`)) / 86_400_000);
}

/** Adds seconds to a local wall time `YYYY-MM-DDTHH:mm:ss` (civil arithmetic, no zone). */
export function addWallSeconds(local: string, seconds: number): string {
  const ms = Date.parse(`${local}Z`) + seconds * 1000;
  return new Date(ms).toISOString().slice(0, 19);
}

/** Seconds from wall time `a` to wall time `b` (civil arithmetic). */
export function wallSecondsBetween(a: string, b: string): number {
  return Math.round((Date.parse(`${b}Z`) - Date.parse(`${a}Z`)) / 1000);
}

/** ISO 8601 UTC instant with `Z`, second precision. */
export function isoZ(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}
