/**
 * Contract of the recurrence engine (REC-1 … REC-7). Everything under src/recurrence/ is
 * pure: no I/O, no `Date` arithmetic in local time, no dependence on the host's `TZ`.
 * Instants are epoch milliseconds (UTC); local date-times are ISO strings without offset.
 */
import type { ValidationError } from "../errors/index.js";

/** What to do with a local time that does not exist or exists twice (REC-2). */
export interface DstPolicy {
  /** Spring-forward gap: `shift` moves forward by the gap's length (RFC 5545 §3.3.5); `skip` drops it. Default `shift`. */
  gap: "shift" | "skip";
  /** Fall-back overlap: `earlier` takes the first instant, `later` the second. Default `earlier`. */
  overlap: "earlier" | "later";
}

/** The recurrence part of a schedule, as people and the API give it. */
export interface RecurrenceInput {
  /**
   * DTSTART: a local date-time `2027-01-04T09:00:00` read in `tzid`, a date `2027-01-04`
   * (all-day: local midnight in `tzid`), or an instant with `Z` or an offset.
   */
  dtstart: string;
  /** IANA time zone name; default `UTC`. */
  tzid?: string;
  /** RRULE value without the `RRULE:` prefix (the prefix is tolerated). */
  rrule?: string | null;
  /** RDATE values: local date-times (read in `tzid`), dates, or instants. */
  rdate?: readonly string[];
  /** EXDATE values: local date-times (read in `tzid`), dates, or instants. */
  exdate?: readonly string[];
  /** Bounds an unbounded rule only (REC-4). Instant. */
  endsAt?: string | null;
  dst?: Partial<DstPolicy>;
}

/** One occurrence of a schedule. */
export interface Occurrence {
  /** Epoch milliseconds. */
  instant: number;
  /** Local wall-clock time in the schedule's zone: `YYYY-MM-DDTHH:mm:ss`, or `YYYY-MM-DD` when date-only. */
  local: string;
}

/** A parsed, validated recurrence, ready to expand. Immutable and safe to cache. */
export interface Recurrence {
  readonly tzid: string;
  /** True for date-only (all-day, `VALUE=DATE`) schedules. */
  readonly dateOnly: boolean;
  /** True when the set is finite: no RRULE, or the RRULE has COUNT/UNTIL, or `endsAt` is set. */
  readonly bounded: boolean;
  /**
   * Occurrences with `fromMs <= instant < toMs`, ascending, distinct, at most `limit`
   * (default 10,000). Bounded work whatever the rule.
   */
  between(fromMs: number, toMs: number, limit?: number): Occurrence[];
  /**
   * Like {@link between}, and says how far the answer is complete (OPS-12): every
   * occurrence in `[fromMs, throughMs)` is listed. `throughMs` is `toMs` unless the
   * call's work cap (steps or time) stopped the expansion first (`truncated`); ask again
   * from `throughMs` for the rest.
   */
  scan(fromMs: number, toMs: number, limit?: number): ScanResult;
  /**
   * An upper bound of the occurrences in `[fromMs, toMs)`, from the rule's shape alone
   * (periods the window touches × candidates a period can hold, COUNT, UNTIL, RDATEs):
   * constant work, nothing is expanded (OPS-12). Used to refuse oversized windows first.
   */
  maxOccurrences(fromMs: number, toMs: number): number;
  /** First occurrence strictly after `afterMs` (epoch ms), or `null` when the set has ended. */
  next(afterMs: number): Occurrence | null;
  /** DTSTART as an occurrence: always the first one (RFC 5545 §3.3.10). */
  readonly first: Occurrence;
  /** The DST policy in force, defaults filled in. */
  readonly dst: Readonly<DstPolicy>;
  /** The RRULE text without the `RRULE:` prefix, or `null` without a rule. */
  readonly rrule: string | null;
  /** True when there is no RRULE or the RRULE itself has COUNT or UNTIL (REC-4). */
  readonly ruleBounded: boolean;
}

/** Result of {@link Recurrence.scan}. */
export interface ScanResult {
  /** Occurrences, as {@link Recurrence.between} returns them. */
  occurrences: Occurrence[];
  /** Epoch ms up to which (exclusive) the list is complete. */
  throughMs: number;
  /** True when a work cap, not `toMs` or the limit, ended the expansion. */
  truncated: boolean;
}

/** Result of lenient parsing: never throws (REC-3). */
export type ParseResult =
  { ok: true; recurrence: Recurrence; warnings: string[] } | { ok: false; error: ValidationError };
