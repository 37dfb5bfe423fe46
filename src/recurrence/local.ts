/**
 * Helpers for other modules: read a local date-time in a zone, check a zone name.
 */
import { accepts, ValidationError } from "../errors/index.js";
import { DAY_SECONDS } from "./civil.js";
import { parseDateValue } from "./datetime.js";
import { DEFAULT_DST_POLICY } from "./recurrence.js";
import type { DstPolicy } from "./types.js";
import { getZone, zoneOrThrow } from "./zone.js";

/** Whether `tzid` names a time zone known to the IANA database (or a fixed offset like `+05:30`). */
export function isValidTimeZone(tzid: string): boolean {
  return accepts(getZone, tzid);
}

/**
 * The zone name as the IANA database spells it (`europe/berlin` → `Europe/Berlin`; zone
 * names are case-insensitive, and links such as `Asia/Calcutta` stay as given), or `tzid`
 * unchanged when it names no zone (validation then refuses it, naming the field).
 */
export function canonicalTimeZone(tzid: string): string {
  try {
    return getZone(tzid).id;
  } catch {
    return tzid;
  }
}

/**
 * Instant (epoch ms) of a local date-time `2027-01-04T09:00:00` or date `2027-01-04`
 * (local midnight) read in `tzid` under a DST policy; an instant with `Z` or an offset is
 * returned as is. Returns `null` only when the time falls in a gap and `dst.gap` is `skip`.
 * @throws ValidationError (field `local` or `tzid`) for a malformed value or unknown zone.
 */
export function toInstant(
  local: string,
  tzid: string,
  dst: Partial<DstPolicy> = {},
): number | null {
  const parsed = parseDateValue(local);
  if (parsed === null || parsed.kind === "invalid") {
    throw new ValidationError({
      field: "local",
      message: "must be a date, a local date-time or an instant",
      value: local,
    });
  }
  const v = parsed.value;
  if (v.kind === "instant") return v.ms + parsed.fractionMs;
  const zone = zoneOrThrow(tzid);
  const policy = { ...DEFAULT_DST_POLICY, ...dst };
  const r = zone.toInstant(v.kind === "date" ? v.days * DAY_SECONDS : v.wall, policy);
  return r === null ? null : r.ms + parsed.fractionMs;
}
