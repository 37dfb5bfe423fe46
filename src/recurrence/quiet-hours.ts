/**
 * Quiet hours (DEL-15) as pure functions: whether an instant falls inside a reminder's
 * quiet window in the recipient's zone, and the instant the window ends.
 *
 * Terms:
 * - a *window* is `[start, end)` in wall-clock time of `tzid`, `HH:MM` each; when
 *   `start > end` it crosses midnight (22:00–07:00 runs from 22:00 of one day to 07:00 of
 *   the next);
 * - `days` (RFC 5545 weekday names, `MO` … `SU`) names the days a window STARTS on: with
 *   `days: ["FR"]` and 22:00–07:00, Friday 23:00 and Saturday 06:00 are quiet, Saturday
 *   23:00 is not. Absent: every day.
 *
 * DST: the window is compared on the wall clock. Its end is read back to an instant so:
 * an end that does not exist that day (a spring-forward gap) is the first instant after
 * the gap (the transition itself); an end that exists twice (a fall-back overlap) is the
 * first of the two that comes after the deferred instant.
 */
import { Temporal } from "temporal-polyfill";
import { DAY_SECONDS, weekday } from "./civil.js";
import { getZone, type Zone } from "./zone.js";

/** RFC 5545 weekday names, Monday first (index = {@link weekday} of a day). */
export const WEEKDAY_NAMES = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"] as const;

/** A weekday name. */
export type WeekdayName = (typeof WEEKDAY_NAMES)[number];

/** A reminder's quiet window (DEL-15), as stored and as the API takes it. */
export interface QuietHours {
  /** IANA zone of the recipient, e.g. `Europe/Berlin`. */
  tzid: string;
  /** Start of the window, `HH:MM` (24-hour) wall-clock time in `tzid`. */
  start: string;
  /** End of the window (exclusive), `HH:MM`; before `start` when the window crosses midnight. */
  end: string;
  /** The days a window starts on; absent or empty: every day. */
  days?: WeekdayName[];
}

/** `HH:MM`, 00:00 to 23:59. */
export const QUIET_TIME_PATTERN = /^([01]\d|2[0-3]):[0-5]\d$/;

/** Seconds since midnight of `HH:MM`. @throws RangeError when not `HH:MM`. */
export function quietTimeSeconds(text: string): number {
  if (!QUIET_TIME_PATTERN.test(text)) throw new RangeError(`not an HH:MM time: ${text}`);
  return Number(text.slice(0, 2)) * 3600 + Number(text.slice(3, 5)) * 60;
}

/**
 * The instant (epoch ms) of wall second `wall` in `zone`, for the end of a quiet window:
 * in a gap, the first valid instant after it (the transition); in an overlap, the first
 * of the two instants later than `afterMs` (else the first).
 */
function endInstant(zone: Zone, wall: number, afterMs: number): number {
  const wms = wall * 1000;
  const candidates = new Set<number>();
  for (const probe of [wms - 86_400_000, wms, wms + 86_400_000]) {
    const ms = wms - zone.offsetAt(probe);
    if (zone.toWall(ms) === wall) candidates.add(ms);
  }
  const valid = [...candidates].sort((a, b) => a - b);
  if (valid.length > 0) return valid.find((ms) => ms > afterMs) ?? valid[0]!;
  // A gap: the transition is after the instant read with the later offset and at or
  // before the one read with the earlier offset.
  const from = wms - Math.max(zone.offsetAt(wms - 86_400_000), zone.offsetAt(wms + 86_400_000));
  const transition = Temporal.Instant.fromEpochMilliseconds(from)
    .toZonedDateTimeISO(zone.id)
    .getTimeZoneTransition("next");
  return transition === null ? wms - zone.offsetAt(wms) : transition.epochMilliseconds;
}

/**
 * DEL-15: when `dueMs` (epoch ms) falls inside a quiet window of `quiet`, the instant
 * (epoch ms) that window ends, in `quiet.tzid`; `null` when it does not (or when start
 * equals end: an empty window). Pure; never reads the host's zone.
 * @throws RangeError for an unknown zone or a malformed time (validated at create).
 */
export function quietHoursEnd(dueMs: number, quiet: QuietHours): number | null {
  const start = quietTimeSeconds(quiet.start);
  const end = quietTimeSeconds(quiet.end);
  if (start === end) return null;
  const zone = getZone(quiet.tzid);
  const wall = zone.toWall(dueMs);
  const day = Math.floor(wall / DAY_SECONDS);
  const second = wall - day * DAY_SECONDS;
  const days = quiet.days !== undefined && quiet.days.length > 0 ? new Set(quiet.days) : null;
  const startsOn = (d: number) => days === null || days.has(WEEKDAY_NAMES[weekday(d)]!);
  let endDay: number | null = null;
  if (start < end) {
    if (second >= start && second < end && startsOn(day)) endDay = day;
  } else if (second >= start && startsOn(day)) {
    endDay = day + 1;
  } else if (second < end && startsOn(day - 1)) {
    endDay = day;
  }
  if (endDay === null) return null;
  return Math.max(dueMs, endInstant(zone, endDay * DAY_SECONDS + end, dueMs));
}
