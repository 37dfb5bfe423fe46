/**
 * Reminder offsets: signed ISO 8601 / RFC 5545 §3.3.6 durations such as `-PT15M`, `PT0S`,
 * `-P1D`, `P1W` or `-P1DT2H`, applied to an occurrence (RFC 5545 §3.8.6.3: days and weeks
 * are nominal and follow the wall clock; hours, minutes and seconds are exact).
 */
import { MAX_OFFSET_DAYS, offsetRefusal } from "../domain/index.js";
import { accepts, ValidationError } from "../errors/index.js";
import { DAY_SECONDS } from "./civil.js";
import { parseDateValue } from "./datetime.js";
import type { DstPolicy, Occurrence } from "./types.js";
import { zoneOrThrow } from "./zone.js";

/** A parsed duration: nominal days (weeks × 7 + days) and an exact part in ms, both signed. */
export interface Offset {
  days: number;
  exactMs: number;
}

const DURATION =
  /^([+-])?P(?:(\d{1,6})W|(?:(\d{1,6})D)?(?:T(?:(\d{1,7})H)?(?:(\d{1,9})M)?(?:(\d{1,10})S)?)?)$/;

/**
 * Parses a duration (RFC 5545 §3.3.6 grammar: weeks alone, or days and/or a time part).
 * Years and months are refused (they have no fixed length).
 * @throws ValidationError with field `offset` when the text is not such a duration.
 */
export function parseOffset(text: string): Offset {
  const m =
    typeof text === "string" && text.length <= 40 ? DURATION.exec(text.trim().toUpperCase()) : null;
  const bad = (message = offsetRefusal(text)): never => {
    throw new ValidationError({ field: "offset", message, value: text });
  };
  if (m === null) return bad();
  const [, sign, w, d, h, mi, s] = m;
  const body = text.trim().toUpperCase();
  if (body.endsWith("P") || body.endsWith("T")) return bad();
  const k = sign === "-" ? -1 : 1;
  const days = (Number(w ?? 0) * 7 + Number(d ?? 0)) * k;
  const exactMs = (Number(h ?? 0) * 3600 + Number(mi ?? 0) * 60 + Number(s ?? 0)) * 1000 * k;
  if (Math.abs(days) > MAX_OFFSET_DAYS || Math.abs(exactMs) > MAX_OFFSET_DAYS * 86_400_000) {
    return bad(
      `reaches beyond ${MAX_OFFSET_DAYS.toLocaleString("en-US")} days (about 100 years) from its occurrence`,
    );
  }
  return { days: days === 0 ? 0 : days, exactMs: exactMs === 0 ? 0 : exactMs };
}

/** Whether {@link parseOffset} accepts the text. */
export function isValidOffset(text: string): boolean {
  return accepts(parseOffset, text);
}

/**
 * Instant (epoch ms) of a reminder: the occurrence moved by `offset`. The day part moves
 * the wall-clock date in `tzid` (a nonexistent result moves forward by the gap, an
 * ambiguous one takes the instant `dst.overlap` names, default the earlier, RFC 5545
 * §3.3.5); the time part is then added
 * as an exact duration. So `-P1D` before a 09:00 occurrence is 09:00 the day before even
 * across a DST change, while `-PT24H` is exactly 24 hours before.
 * @throws ValidationError (field `offset` or `tzid`) for a bad duration or zone.
 */
export function applyOffset(
  occurrence: Occurrence,
  offset: string,
  tzid: string,
  dst: Partial<DstPolicy> = {},
): number {
  const { days, exactMs } = parseOffset(offset);
  let ms = occurrence.instant;
  if (days !== 0) {
    const zone = zoneOrThrow(tzid);
    const parsed = parseDateValue(occurrence.local);
    let wall = zone.toWall(ms);
    if (parsed?.kind === "ok" && parsed.value.kind !== "instant") {
      wall = parsed.value.kind === "date" ? parsed.value.days * DAY_SECONDS : parsed.value.wall;
    }
    // A reminder is never dropped: a nonexistent local time shifts forward; an ambiguous
    // one follows the schedule's overlap policy.
    const resolved = zone.toInstant(wall + days * DAY_SECONDS, {
      gap: "shift",
      overlap: dst.overlap ?? "earlier",
    });
    // Keep the sub-second part of the occurrence (an instant DTSTART with milliseconds).
    ms = (resolved as { ms: number }).ms + (((occurrence.instant % 1000) + 1000) % 1000);
  }
  return ms + exactMs;
}
