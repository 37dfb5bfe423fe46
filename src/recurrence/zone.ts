/**
 * Time-zone arithmetic: offsets from the IANA database that ships with the runtime (ICU,
 * read through `Intl.DateTimeFormat`), cached per zone and year as constant-offset
 * segments, so that converting millions of wall-clock times stays cheap and the first walk
 * of a zone across centuries costs a few milliseconds (OPS-12). Never reads the host time
 * zone. Names are resolved (aliases, case) through Temporal (`temporal-polyfill`).
 */
import { ValidationError } from "../errors/index.js";
import { Temporal } from "temporal-polyfill";
import { civilFromDays, daysFromCivil, isLeapYear, weekday } from "./civil.js";
import type { DstPolicy } from "./types.js";

const DAY_MS = 86_400_000;
const HOUR_S = 3_600;
/**
 * Before this instant (-4e9 s, 1843-03-31Z) a zone keeps the offset it has then: the IANA
 * database lists no transition earlier (local mean time until the 1840s at the earliest).
 */
const EARLIEST_S = -4e9;
/**
 * From this year on offsets come from each zone's last rule, which is stated in calendar
 * terms ("last Sunday in March, 01:00 UTC"): a year then has the offsets of any other such
 * year that starts on the same weekday and has the same length. The IANA database lists
 * explicit transitions up to the 2080s at most, so years from 2131 on are read from a
 * year of 2101–2130 of the same kind (those 30 years hold all 14 kinds), which keeps the
 * cache of a zone to at most about 230 years (1900–2130) however far a series runs.
 */
const FOLD_FROM_YEAR = 2131;
const FOLD_BASE_YEAR = 2101;
/** Last year read as is (Intl's range ends in 275760; MAX_YEAR of expansion is 9999). */
const LAST_YEAR = 275_000;
/**
 * Sampling step (days) when looking for a year's transitions: a change of offset that
 * returns to the previous offset within fewer days would be missed. In the IANA database
 * (2025c, 1843–2130) every such excursion lasts 20 days or more, except in the zones of
 * {@link SHORT_EXCURSION_ZONES}, which are sampled every {@link SHORT_SAMPLE_DAYS} days.
 */
const SAMPLE_DAYS = 19;
const SHORT_SAMPLE_DAYS = 3;
/**
 * Zones (ICU's canonical names) with an excursion shorter than 20 days: Gaza and Hebron
 * 7 days (2040), Boa Vista, Noronha and Recife 7 (2000), Tunis 8,
 * Vienna 10, Tirane 12, Tucumán 12, Fortaleza and Maceió 14, four Argentine zones 19.
 */
const SHORT_EXCURSION_ZONES = new Set([
  "Asia/Gaza",
  "Asia/Hebron",
  "America/Boa_Vista",
  "America/Noronha",
  "America/Recife",
  "Africa/Tunis",
  "Europe/Vienna",
  "Europe/Tirane",
  "America/Argentina/Tucuman",
  "America/Fortaleza",
  "America/Maceio",
  "America/Argentina/Rio_Gallegos",
  "America/Argentina/La_Rioja",
  "America/Argentina/Catamarca",
  "America/Catamarca",
]);

interface YearTable {
  /** Start (ms) of each segment of the year; the first is the year's first instant (UTC). */
  starts: number[];
  /** UTC offset (ms) of each segment. */
  offsets: number[];
  /** First instant (ms) of the next year. */
  end: number;
}

/** Result of reading a wall-clock time in a zone. */
export interface ResolvedInstant {
  /** Epoch ms. */
  ms: number;
  /** True when the wall time fell in a gap and was moved forward. */
  shifted: boolean;
}

const WALL_TEXT = /^(\d+)\/(\d+)\/(\d+) (AD|BC), (\d+):(\d+):(\d+)$/;

/** `±HH:MM` (a fixed-offset zone, as Temporal names it) in ms, or null. */
function fixedOffsetMs(id: string): number | null {
  const m = /^([+-])(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(id);
  if (m === null) return null;
  const ms = (Number(m[2]) * 3600 + Number(m[3]) * 60 + Number(m[4] ?? 0)) * 1000;
  return m[1] === "-" ? -ms : ms;
}

/** One IANA zone with a cache of offset segments. Create through {@link getZone}. */
export class Zone {
  readonly id: string;
  /**
   * How many times this zone's offsets were read from the IANA data (each about 2–5 µs of
   * CPU). Filling one year of a zone reads it about 20 times, and about 10 more per transition.
   */
  readings = 0;
  private readonly fixed: number | null;
  private readonly format: Intl.DateTimeFormat | null;
  private readonly stepSeconds: number;
  private readonly years = new Map<number, YearTable>();
  private readonly foldShift = new Map<number, number>();
  private early: number | undefined;
  private lastStart = 0;
  private lastEnd = -1;
  private lastOffset = 0;

  constructor(id: string) {
    this.id = id;
    this.fixed = id === "UTC" ? 0 : fixedOffsetMs(id);
    this.format =
      this.fixed !== null
        ? null
        : new Intl.DateTimeFormat("en-US", {
            timeZone: id,
            hourCycle: "h23",
            era: "short",
            year: "numeric",
            month: "numeric",
            day: "numeric",
            hour: "numeric",
            minute: "numeric",
            second: "numeric",
          });
    const icuId = this.format?.resolvedOptions().timeZone ?? "";
    this.stepSeconds =
      (SHORT_EXCURSION_ZONES.has(icuId) || SHORT_EXCURSION_ZONES.has(id)
        ? SHORT_SAMPLE_DAYS
        : SAMPLE_DAYS) * 86_400;
  }

  /** UTC offset in ms at an instant. */
  offsetAt(ms: number): number {
    if (this.fixed !== null) return this.fixed;
    if (ms >= this.lastStart && ms < this.lastEnd) return this.lastOffset;
    if (ms < EARLIEST_S * 1000 || Number.isNaN(ms)) {
      this.early ??= this.read(EARLIEST_S - 1);
      return this.early;
    }
    let year = civilFromDays(Math.floor(Math.min(ms, 8.64e15 - 1) / DAY_MS)).year;
    let shift = 0;
    if (year >= FOLD_FROM_YEAR) {
      shift = this.shiftOf(Math.min(year, LAST_YEAR));
      year = civilFromDays(Math.floor((Math.min(ms, 8.64e15 - 1) - shift) / DAY_MS)).year;
    }
    const table = this.yearTable(year);
    const local = ms - shift;
    let i = table.starts.length - 1;
    while (i > 0 && (table.starts[i] as number) > local) i--;
    const offset = table.offsets[i] as number;
    const end = i + 1 < table.starts.length ? (table.starts[i + 1] as number) : table.end;
    // A folded year has the same length as the year it is read from: shift the segment back.
    this.lastStart = (table.starts[i] as number) + shift;
    this.lastEnd = end + shift;
    this.lastOffset = offset;
    return offset;
  }

  /** ms to subtract from an instant of `year` (≥ FOLD_FROM_YEAR) to land in a year of the same kind. */
  private shiftOf(year: number): number {
    const cached = this.foldShift.get(year);
    if (cached !== undefined) return cached;
    const days = daysFromCivil(year, 1, 1);
    let base = FOLD_BASE_YEAR;
    while (
      isLeapYear(base) !== isLeapYear(year) ||
      weekday(daysFromCivil(base, 1, 1)) !== weekday(days)
    )
      base++;
    const shift = (days - daysFromCivil(base, 1, 1)) * DAY_MS;
    if (this.foldShift.size < 20_000) this.foldShift.set(year, shift);
    return shift;
  }

  /** UTC offset (ms) at a whole epoch second, read from the IANA data. */
  private read(sec: number): number {
    this.readings++;
    const text = (this.format as Intl.DateTimeFormat).format(sec * 1000);
    const m = WALL_TEXT.exec(text);
    let y: number, mo: number, d: number, h: number, mi: number, s: number;
    if (m !== null) {
      y = m[4] === "BC" ? 1 - Number(m[3]) : Number(m[3]);
      mo = Number(m[1]);
      d = Number(m[2]);
      h = Number(m[5]);
      mi = Number(m[6]);
      s = Number(m[7]);
    } else {
      // Another ICU layout: read the parts instead (slower, same result).
      const parts: Record<string, string> = {};
      for (const p of (this.format as Intl.DateTimeFormat).formatToParts(sec * 1000))
        parts[p.type] = p.value;
      const yy = Number(parts.year);
      y = /^b/i.test(parts.era ?? "") ? 1 - yy : yy;
      mo = Number(parts.month);
      d = Number(parts.day);
      h = Number(parts.hour) % 24;
      mi = Number(parts.minute);
      s = Number(parts.second);
    }
    const wall = daysFromCivil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s;
    return (wall - sec) * 1000;
  }

  /** The segments of one year (UTC), found by sampling every few days and bisecting each change. */
  private yearTable(year: number): YearTable {
    const cached = this.years.get(year);
    if (cached !== undefined) return cached;
    const from = daysFromCivil(year, 1, 1) * 86_400;
    const to = daysFromCivil(year + 1, 1, 1) * 86_400;
    const starts = [from * 1000];
    const offsets = [this.read(from)];
    let at = from;
    let off = offsets[0] as number;
    while (at < to) {
      const next = Math.min(at + this.stepSeconds, to);
      const nextOff = next === to ? this.read(to - 1) : this.read(next);
      // Several transitions may fall between two samples (A → B → C): find each in turn.
      let lo = at;
      let loOff = off;
      while (loOff !== nextOff) {
        const t = this.transitionIn(lo, next === to ? to - 1 : next, loOff);
        loOff = this.read(t);
        starts.push(t * 1000);
        offsets.push(loOff);
        lo = t;
      }
      at = next;
      off = nextOff;
    }
    const table: YearTable = { starts, offsets, end: to * 1000 };
    this.years.set(year, table);
    return table;
  }

  /**
   * First second in (lo, hi] whose offset is not `loOff` (lo has it, hi has not). Hours
   * first: transitions fall on whole hours of UTC almost always, so that is usually all.
   */
  private transitionIn(lo: number, hi: number, loOff: number): number {
    while (hi - lo > HOUR_S) {
      let mid = lo + Math.floor((hi - lo) / 2 / HOUR_S) * HOUR_S;
      if (mid <= lo) mid = lo + Math.floor((hi - lo) / 2);
      if (this.read(mid) === loOff) lo = mid;
      else hi = mid;
    }
    if (hi - lo > 1 && this.read(hi - 1) !== loOff) {
      while (hi - lo > 1) {
        const mid = lo + Math.floor((hi - lo) / 2);
        if (this.read(mid) === loOff) lo = mid;
        else hi = mid;
      }
    }
    return hi;
  }

  /**
   * The smallest and largest UTC offset (ms) in force at any instant of `[fromMs, toMs]`,
   * read segment by segment from the offset cache (an hour at a time where it has none).
   * How far a wall time near these instants can be from them, for a walk that must not
   * start too late or claim too much (OPS-12).
   */
  offsetRange(fromMs: number, toMs: number): { min: number; max: number } {
    if (this.fixed !== null) return { min: this.fixed, max: this.fixed };
    let min = Infinity;
    let max = -Infinity;
    let t = fromMs;
    while (t <= toMs) {
      const off = this.offsetAt(t);
      if (off < min) min = off;
      if (off > max) max = off;
      // The segment the reading fell in (kept by offsetAt) ends at lastEnd.
      t = t >= this.lastStart && t < this.lastEnd ? this.lastEnd : t + HOUR_S * 1000;
    }
    const last = this.offsetAt(toMs);
    return { min: Math.min(min, last), max: Math.max(max, last) };
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

/** `+hh:mm` / `-hh:mm` for an offset in ms. */
export function formatUtcOffset(offsetMs: number): string {
  const minutes = Math.round(Math.abs(offsetMs) / 60_000);
  const hh = String(Math.floor(minutes / 60)).padStart(2, "0");
  const mm = String(minutes % 60).padStart(2, "0");
  return `${offsetMs < 0 ? "-" : "+"}${hh}:${mm}`;
}

/**
 * When `dtstart` is an instant written with a numeric UTC offset (`…+01:00`, not `Z`)
 * that is not the offset of `tzid` at that instant: both offsets and the wall-clock time
 * the instant reads as in `tzid` (docs/recurrence.md: an instant dtstart is converted to
 * the wall clock of `tzid`, so the instant wins). Null when they agree, for `Z`, for a
 * local date-time or a date, and for an unknown zone or an unreadable value (those are
 * refused elsewhere).
 */
export function dtstartOffsetConflict(
  dtstart: string,
  tzid: string,
): { given: string; zone: string; local: string } | null {
  const m = /^(\d{4}-?\d{2}-?\d{2}T\d{2}:?\d{2}(?::?\d{2})?(?:\.\d+)?)([+-])(\d{2}):?(\d{2})$/.exec(
    dtstart.trim(),
  );
  if (!m) return null;
  const [, , sign, hh, mm] = m;
  const givenMs = (sign === "-" ? -1 : 1) * (Number(hh) * 60 + Number(mm)) * 60_000;
  const instant = Date.parse(dtstart.trim());
  if (Number.isNaN(instant)) return null;
  let zone: Zone;
  try {
    zone = getZone(tzid);
  } catch {
    return null;
  }
  const zoneMs = zone.offsetAt(instant);
  if (zoneMs === givenMs) return null;
  const local = new Date(instant + zoneMs).toISOString().slice(0, 19);
  return { given: formatUtcOffset(givenMs), zone: formatUtcOffset(zoneMs), local };
}
