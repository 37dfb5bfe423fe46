/**
 * Time-zone arithmetic: offsets from the IANA database through Temporal
 * (`temporal-polyfill`), cached as constant-offset segments so that converting millions of
 * wall-clock times stays cheap. Never reads the host time zone.
 */
import { ValidationError } from "../errors/index.js";
import { Temporal } from "temporal-polyfill";
import type { DstPolicy } from "./types.js";

const DAY_MS = 86_400_000;
/** 400 Gregorian years: the calendar, weekdays included, repeats after them. */
const CYCLE_MS = 146_097 * DAY_MS;
/**
 * From this instant (2500-01-01Z) on, offsets are read 400 years (or a multiple) earlier.
 * The IANA database lists no transition after the 2080s; later ones come from each zone's
 * last rule, which is stated in calendar terms ("last Sunday in March") and so repeats
 * every 400 years. Folding keeps the segment cache small and far-future walks cheap.
 */
const FOLD_FROM_MS = 16_725_225_600_000;
/** Folded instants land in [2100-01-01Z, 2500-01-01Z). */
const FOLD_BASE_MS = FOLD_FROM_MS - CYCLE_MS;

interface Segment {
  /** First instant (ms, inclusive) with this offset. */
  start: number;
  /** First instant (ms) after the segment. */
  end: number;
  /** UTC offset in ms. */
  offset: number;
}

/** Result of reading a wall-clock time in a zone. */
export interface ResolvedInstant {
  /** Epoch ms. */
  ms: number;
  /** True when the wall time fell in a gap and was moved forward. */
  shifted: boolean;
}

/** One IANA zone with a cache of offset segments. Create through {@link getZone}. */
export class Zone {
  readonly id: string;
  private readonly segments: Segment[] = [];
  private last: Segment | undefined;

  constructor(id: string) {
    this.id = id;
  }

  /** UTC offset in ms at an instant. */
  offsetAt(ms: number): number {
    if (ms >= FOLD_FROM_MS && ms !== Infinity)
      ms -= Math.floor((ms - FOLD_BASE_MS) / CYCLE_MS) * CYCLE_MS;
    const last = this.last;
    if (last !== undefined && ms >= last.start && ms < last.end) return last.offset;
    const segs = this.segments;
    let lo = 0;
    let hi = segs.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const s = segs[mid] as Segment;
      if (ms < s.start) hi = mid - 1;
      else if (ms >= s.end) lo = mid + 1;
      else {
        this.last = s;
        return s.offset;
      }
    }
    const seg = this.computeSegment(ms);
    segs.splice(lo, 0, seg);
    this.last = seg;
    return seg.offset;
  }

  private computeSegment(ms: number): Segment {
    const zdt = Temporal.Instant.fromEpochMilliseconds(ms).toZonedDateTimeISO(this.id);
    const offset = zdt.offsetNanoseconds / 1e6;
    const next = zdt.getTimeZoneTransition("next");
    const prev = zdt.getTimeZoneTransition("previous");
    let start = prev === null ? -Infinity : prev.epochMilliseconds;
    // `previous` is strictly before `ms`; when `ms` is itself a transition the segment starts at `ms`.
    const before = Temporal.Instant.fromEpochMilliseconds(ms - 1).toZonedDateTimeISO(this.id);
    if (before.offsetNanoseconds / 1e6 !== offset) start = ms;
    const end = next === null ? Infinity : next.epochMilliseconds;
    return { start: Math.min(start, ms), end: Math.max(end, ms + 1), offset };
  }

  /** Wall-clock second (floating, seconds since 1970-01-01T00:00:00) of an instant. */
  toWall(ms: number): number {
    return Math.floor((ms + this.offsetAt(ms)) / 1000);
  }

  /**
   * Instant of a wall-clock second under a DST policy (RFC 5545 §3.3.5): in a gap,
   * `shift` moves the time forward by the gap's length, `skip` returns `null`; in an
   * overlap, `earlier`/`later` pick the first/second instant.
   */
  toInstant(wall: number, policy: DstPolicy): ResolvedInstant | null {
    const wms = wall * 1000;
    const before = this.offsetAt(wms - DAY_MS);
    const after = this.offsetAt(wms + DAY_MS);
    if (before === after) {
      const ms = wms - before;
      if (this.offsetAt(ms) === before) return { ms, shifted: false };
    }
    // Around a transition: try every offset seen nearby.
    const offsets = new Set([before, this.offsetAt(wms), after]);
    let first = Infinity;
    let second = -Infinity;
    for (const off of offsets) {
      const ms = wms - off;
      if (this.offsetAt(ms) === off) {
        first = Math.min(first, ms);
        second = Math.max(second, ms);
      }
    }
    if (first !== Infinity)
      return { ms: policy.overlap === "later" ? second : first, shifted: false };
    if (policy.gap === "skip") return null;
    return { ms: wms - before, shifted: true };
  }
}

const zones = new Map<string, Zone>();

/**
 * Whether `tzid` is a UTC offset (`+05:00`, `-0800`, `+05`) rather than a zone name. Such
 * offsets are read by {@link getZone} (stored rules keep working) but are refused from
 * people: an offset has no DST rules, so a series in one drifts from local time.
 */
export function isOffsetZone(tzid: string): boolean {
  return /^[+-]\d/.test(tzid);
}

/**
 * The zone for an IANA name (or a fixed offset such as `+05:30`), case-insensitive.
 * Throws `RangeError` for an unknown zone.
 */
export function getZone(tzid: string): Zone {
  const cached = zones.get(tzid);
  if (cached !== undefined) return cached;
  if (tzid.length === 0 || tzid.length > 64) throw new RangeError(`unknown time zone ${tzid}`);
  const id = Temporal.Instant.fromEpochMilliseconds(0).toZonedDateTimeISO(tzid).timeZoneId;
  let zone = zones.get(id);
  if (zone === undefined) {
    zone = new Zone(id);
    zones.set(id, zone);
  }
  if (zones.size < 10_000) zones.set(tzid, zone);
  return zone;
}

/**
 * The zone named `tzid`, for input from people.
 * @throws ValidationError (field `tzid`) when the name is not an IANA zone.
 */
export function zoneOrThrow(tzid: string): Zone {
  try {
    return getZone(tzid);
  } catch {
    throw new ValidationError({
      field: "tzid",
      message: "is not a known IANA time zone",
      value: tzid,
    });
  }
}
