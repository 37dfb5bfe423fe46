/**
 * `validateRule` (strict) and `parseRule` (lenient) turn a {@link RecurrenceInput} into a
 * {@link Recurrence}: DTSTART + RRULE + RDATE − EXDATE as sorted, distinct instants
 * (RFC 5545 §3.8.5), with the DST policy of REC-2 and the bounds of REC-4.
 */
import { ValidationError } from "../errors/index.js";
import { DAY_SECONDS, civilFromDays, formatDate, formatWall } from "./civil.js";
import { parseDateValue, type DateValue } from "./datetime.js";
import {
  budget,
  compileRule,
  expandWalls,
  MAX_YEAR,
  type Budget,
  type CompiledRule,
} from "./expand.js";
import {
  DAILY,
  FREQS,
  HOURLY,
  MATCHING_PARTS,
  MINUTELY,
  parseRuleText,
  SECONDLY,
  YEARLY,
  type RuleParseOptions,
  type RuleSpec,
} from "./rule.js";
import type {
  DstPolicy,
  Occurrence,
  ParseResult,
  Recurrence,
  RecurrenceInput,
  ScanResult,
} from "./types.js";
import { formatUtcOffset, getZone, isOffsetZone, type Zone } from "./zone.js";

/** Default DST policy (REC-2): shift out of gaps, take the earlier instant of an overlap. */
export const DEFAULT_DST_POLICY: Readonly<DstPolicy> = Object.freeze({
  gap: "shift",
  overlap: "earlier",
});

/** Default and maximum `limit` of {@link Recurrence.between}. */
export const DEFAULT_BETWEEN_LIMIT = 10_000;
/**
 * Work cap of one `between`/`scan` call (OPS-12): periods, days and candidates visited.
 * About 10–25 ms of one core; {@link MAX_MS_PER_CALL} bounds the time as well.
 */
export const MAX_STEPS_PER_CALL = 100_000;
/**
 * Time cap of one `between`/`scan` call, in ms (OPS-12): the expansion reads the clock
 * every few dozen periods (after {@link MIN_STEPS_PER_CALL}) and stops once this much has
 * passed since the call began, whatever the rule. A call
 * stopped by a cap returns what it found; `scan` says how far that answer is complete.
 */
export const MAX_MS_PER_CALL = 25;
/**
 * Steps every `between`/`scan` call gets before its time cap is looked at (OPS-12): an
 * answer within them (every ordinary window) is the same on every machine and load.
 */
export const MIN_STEPS_PER_CALL = 20_000;
/**
 * Work cap of walking a COUNT series from DTSTART (OPS-12), in steps. A COUNT series is
 * counted from its start, so validation walks it once to its end: a rule whose COUNT is
 * not reached (nor year 9999) within this many steps is refused. Steps only, no clock,
 * so the decision is the same on every machine. About 20,000 daily occurrences; 5–15 ms
 * of one core.
 */
export const MAX_COUNT_STEPS = 60_000;
/** Largest COUNT whose whole set is computed once and cached. */
const COUNT_CACHE_LIMIT = 100_000;
/** The result of walking a COUNT series from DTSTART ({@link RecurrenceImpl.countSet}). */
interface CountWalk {
  /** Instants of the set, ascending (only when COUNT ≤ {@link COUNT_CACHE_LIMIT}); never mutated. */
  instants: number[];
  complete: boolean;
  reachedWall: number;
  found: number;
}
/** Most series whose COUNT walk is kept (process-wide, least recently used dropped). */
export const MAX_KEPT_WALKS = 256;
/** Most instants the kept COUNT walks hold together (about 8 MB). */
export const MAX_KEPT_WALK_INSTANTS = 1_000_000;
/** Most feasibility searches kept (process-wide, least recently used dropped). */
export const MAX_KEPT_SEARCHES = 1024;

/**
 * Recent COUNT walks by series (least recently used first), at most {@link MAX_KEPT_WALKS}
 * and {@link MAX_KEPT_WALK_INSTANTS} instants. Process-wide on purpose: a walk depends on
 * the rule alone (steps, no clock), so every scheduler of the process may share it; the
 * bounds keep what they share small.
 */
const countWalks = new Map<string, CountWalk>();
let countWalkInstants = 0;

function rememberCountWalk(key: string, walked: CountWalk): void {
  const replaced = countWalks.get(key);
  if (replaced !== undefined) {
    countWalks.delete(key);
    countWalkInstants -= replaced.instants.length;
  }
  countWalks.set(key, walked);
  countWalkInstants += walked.instants.length;
  while (countWalks.size > MAX_KEPT_WALKS || countWalkInstants > MAX_KEPT_WALK_INSTANTS) {
    const [oldest, value] = countWalks.entries().next().value as [string, CountWalk];
    countWalks.delete(oldest);
    countWalkInstants -= value.instants.length;
  }
}

/** The result of a feasibility search ({@link RecurrenceImpl.ruleYieldsAnything}). */
interface Feasibility {
  yields: boolean | null;
  reachedWall: number;
}
/**
 * Recent feasibility searches by series (least recently used first), at most
 * {@link MAX_KEPT_SEARCHES}; process-wide like {@link countWalks}.
 */
const searches = new Map<string, Feasibility>();

/**
 * The deterministic work validation did for some rules (OPS-12): COUNT walks and
 * feasibility searches, each keyed by its series. They depend on the rule alone (steps,
 * no clock), so work done in one thread answers the same question in another: a worker
 * thread validates, the event loop's thread borrows the result ({@link lendRuleWork})
 * and validates the same rule without walking it again. Structured-clone safe.
 */
export interface RuleWork {
  walks: Array<[key: string, walk: CountWalk]>;
  searches: Array<[key: string, search: Feasibility]>;
  /**
   * The RRULE texts read, each with what reading it gave ({@link RuleParse}), keyed by
   * {@link ruleParseKey}: a borrower builds the same rule from it without reading the
   * text again (REC-3: a create's rule is read once, on the worker thread).
   */
  rules?: Array<[key: string, parse: RuleParse]>;
}

/** What reading one RRULE text gave: the rule and the warnings the reading added. */
export interface RuleParse {
  spec: RuleSpec;
  warnings: string[];
}

/** The key of a rule reading: the text and what its reading depends on. */
function ruleParseKey(text: string, lenient: boolean, dateOnly: boolean): string {
  return `${lenient ? "L" : "S"}${dateOnly ? "D" : "T"}${text}`;
}

/**
 * Reads RRULE text ({@link parseRuleText}), or takes the reading a lent {@link RuleWork}
 * holds for the same text and posture; records the reading while {@link recordRuleWork}
 * runs. Its warnings are added to `opts.warnings` either way.
 */
function readRuleText(text: string, opts: RuleParseOptions): RuleSpec {
  const key = ruleParseKey(text, opts.lenient, opts.dateOnly);
  for (const work of lent) {
    const known = work.rules.get(key);
    if (known !== undefined) {
      opts.warnings.push(...known.warnings);
      return known.spec;
    }
  }
  const before = opts.warnings.length;
  const spec = parseRuleText(text, opts);
  recording?.rules?.push([key, { spec, warnings: opts.warnings.slice(before) }]);
  return spec;
}

/**
 * How many entries the process-wide caches of rule work hold (OPS-12), for tests and
 * diagnostics. Every one is bounded: COUNT walks at most {@link MAX_KEPT_WALKS} series
 * and {@link MAX_KEPT_WALK_INSTANTS} instants, feasibility searches at most
 * {@link MAX_KEPT_SEARCHES}; lent work lives only until its borrower releases it.
 */
export function ruleCacheSizes(): {
  walks: number;
  walkInstants: number;
  searches: number;
  lent: number;
} {
  return {
    walks: countWalks.size,
    walkInstants: countWalkInstants,
    searches: searches.size,
    lent: lent.length,
  };
}

/** Most COUNT-walk instants one {@link recordRuleWork} keeps (about 16 MB). */
const MAX_RECORDED_INSTANTS = 2_000_000;
let recording: (RuleWork & { instants: number }) | null = null;
const lent: Array<{
  walks: Map<string, CountWalk>;
  searches: Map<string, Feasibility>;
  rules: Map<string, RuleParse>;
}> = [];

function recordWalk(key: string, walk: CountWalk): void {
  if (recording === null || recording.instants + walk.instants.length > MAX_RECORDED_INSTANTS)
    return;
  recording.instants += walk.instants.length;
  recording.walks.push([key, walk]);
}

function lentWalk(key: string): CountWalk | undefined {
  for (const work of lent) {
    const walk = work.walks.get(key);
    if (walk !== undefined) return walk;
  }
  return undefined;
}

function lentSearch(key: string): Feasibility | undefined {
  for (const work of lent) {
    const search = work.searches.get(key);
    if (search !== undefined) return search;
  }
  return undefined;
}

/**
 * Runs `run` (e.g. `validateRule` of some inputs) and collects the COUNT walks and
 * feasibility searches it used, computed or remembered (at most 2,000,000 instants of
 * walks; past that a walk is left out and the borrower computes it). Not reentrant.
 * @returns what `run` returned or threw, and the work.
 */
export function recordRuleWork<T>(run: () => T): { work: RuleWork; value?: T; error?: unknown } {
  const previous = recording;
  const rec: RuleWork & { instants: number; rules: Array<[string, RuleParse]> } = {
    walks: [],
    searches: [],
    rules: [],
    instants: 0,
  };
  recording = rec;
  const work = (): RuleWork => ({ walks: rec.walks, searches: rec.searches, rules: rec.rules });
  try {
    const value = run();
    return { work: work(), value };
  } catch (error) {
    return { work: work(), error };
  } finally {
    recording = previous;
  }
}

/**
 * Lends work recorded elsewhere ({@link recordRuleWork}) to this thread's validation
 * until the returned function is called: a COUNT walk or feasibility search of the same
 * series is read from it instead of being computed. Harmless to every other caller, as
 * the work is the same whoever computes it.
 */
export function lendRuleWork(work: RuleWork): () => void {
  const rules = work.rules ?? [];
  if (work.walks.length + work.searches.length + rules.length === 0) return () => {};
  const entry = {
    walks: new Map(work.walks),
    searches: new Map(work.searches),
    rules: new Map(rules),
  };
  lent.push(entry);
  return () => {
    const i = lent.indexOf(entry);
    if (i >= 0) lent.splice(i, 1);
  };
}

/** Most RDATE/EXDATE values accepted. */
export const MAX_DATE_LIST = 1000;

const DAY_MS = DAY_SECONDS * 1000;
/**
 * Feasibility search (OPS-12): the expansion steps validation spends looking for a first
 * occurrence after DTSTART (2–10 ms of one core; about 55 years of a daily rule). A rule with none found within
 * this search — or within one 400-year Gregorian cycle of its periods, after which a
 * daily-or-coarser rule repeats itself — is refused. Steps only, no clock.
 */
export const NO_OCCURRENCE_SEARCH_STEPS = 25_000;
/** Periods that cover one full cycle of the Gregorian calendar (400 years), per FREQ. */
const CYCLE_PERIODS = [400, 4800, 20_871, 146_097];

interface Mode {
  lenient: boolean;
  warnings: string[];
}

function invalid(field: string, message: string, value?: unknown): never {
  throw new ValidationError({ field, message, value });
}

interface DatePoint {
  ms: number;
  /** Day number when the value was a date. */
  days: number | null;
}

class RecurrenceImpl implements Recurrence {
  readonly tzid: string;
  readonly dateOnly: boolean;
  readonly bounded: boolean;
  readonly ruleBounded: boolean;
  readonly first: Occurrence;
  readonly dst: Readonly<DstPolicy>;
  readonly rrule: string | null;
  private readonly zone: Zone;
  private readonly rule: CompiledRule | null;
  private readonly startMs: number;
  private readonly startShifted: boolean;
  private readonly count: number | null;
  private readonly untilMs: number;
  private readonly endMs: number;
  private readonly rdates: number[];
  private readonly exInstants: Set<number>;
  private readonly exDays: Set<number>;
  private countCache: number[] | null = null;

  constructor(args: {
    zone: Zone;
    dateOnly: boolean;
    dst: DstPolicy;
    startWall: number;
    startMs: number;
    startShifted: boolean;
    rule: RuleSpec | null;
    rruleText: string | null;
    untilMs: number;
    endsAtMs: number | null;
    rdates: number[];
    exInstants: Set<number>;
    exDays: Set<number>;
  }) {
    this.zone = args.zone;
    this.tzid = args.zone.id;
    this.dateOnly = args.dateOnly;
    this.dst = Object.freeze({ ...args.dst });
    this.rule = args.rule === null ? null : compileRule(args.rule, args.startWall);
    this.rrule = args.rruleText;
    this.startMs = args.startMs;
    this.startShifted = args.startShifted;
    this.count = args.rule?.count ?? null;
    this.untilMs = args.untilMs;
    this.ruleBounded = args.rule === null || this.count !== null || Number.isFinite(args.untilMs);
    this.endMs = !this.ruleBounded && args.endsAtMs !== null ? args.endsAtMs : Infinity;
    this.bounded = this.ruleBounded || args.endsAtMs !== null;
    this.rdates = args.rdates;
    this.exInstants = args.exInstants;
    this.exDays = args.exDays;
    this.first = this.occurrence(args.startMs);
  }

  private occurrence(ms: number): Occurrence {
    const wall = this.zone.toWall(ms);
    return {
      instant: ms,
      local: this.dateOnly ? formatDate(Math.floor(wall / DAY_SECONDS)) : formatWall(wall),
    };
  }

  /**
   * Instants of DTSTART + RRULE (COUNT, UNTIL applied), ascending and distinct, from
   * about `fromMs` on (earlier ones may appear; the caller filters).
   */
  private *ruleInstants(fromMs: number, b: Budget): Generator<number, void, undefined> {
    const rule = this.rule;
    if (rule === null) {
      yield this.startMs;
      return;
    }
    if (this.count !== null && this.count <= COUNT_CACHE_LIMIT) {
      if (this.countCache === null) this.countCache = this.countSet().instants;
      const cache = this.countCache;
      let lo = 0;
      let hi = cache.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if ((cache[mid] as number) < fromMs) lo = mid + 1;
        else hi = mid;
      }
      for (let i = lo; i < cache.length; i++) yield cache[i] as number;
      return;
    }
    // A COUNT series is counted from DTSTART: its own budget, which validation checked
    // is enough to reach the end of the series (see countSet).
    if (this.count !== null) yield* this.walk(rule, -Infinity, budget(MAX_COUNT_STEPS));
    else yield* this.walk(rule, fromMs, b);
  }

  /**
   * Walks a COUNT series from DTSTART within {@link MAX_COUNT_STEPS}: its instants (kept
   * only up to {@link COUNT_CACHE_LIMIT}) and whether the walk reached the end of the set.
   */
  /** Keeps the set a validation walk computed (COUNT up to {@link COUNT_CACHE_LIMIT}). */
  keepCountSet(instants: number[]): void {
    if (this.count !== null && this.count <= COUNT_CACHE_LIMIT) this.countCache = instants;
  }

  countSet(): CountWalk {
    const rule = this.rule;
    if (rule === null || this.count === null)
      return { instants: [], complete: true, reachedWall: Infinity, found: 0 };
    // The walk depends on nothing but these (steps only, no clock): the same series
    // validated again (an import reads each event's rule up to three times, a calendar
    // may repeat one event under many UIDs, planning parses it once more) walks once.
    const key = this.seriesKey(rule);
    const known = countWalks.get(key);
    if (known !== undefined) {
      countWalks.delete(key);
      countWalks.set(key, known);
      recordWalk(key, known);
      return known;
    }
    const borrowed = lent.length > 0 ? lentWalk(key) : undefined;
    if (borrowed !== undefined) {
      rememberCountWalk(key, borrowed);
      recordWalk(key, borrowed);
      return borrowed;
    }
    const keep = this.count <= COUNT_CACHE_LIMIT;
    const b = budget(MAX_COUNT_STEPS);
    const all: number[] = [];
    let n = 0;
    for (const ms of this.walk(rule, -Infinity, b)) {
      n++;
      if (keep) all.push(ms);
    }
    const complete = !b.exhausted || n >= this.count;
    const walked = { instants: all, complete, reachedWall: b.reachedWall, found: n };
    rememberCountWalk(key, walked);
    recordWalk(key, walked);
    return walked;
  }

  /** What a COUNT walk or feasibility search of this series depends on (steps only, no clock). */
  private seriesKey(rule: CompiledRule): string {
    return JSON.stringify([
      this.zone.id,
      this.dst,
      this.dateOnly,
      rule.startWall,
      this.startMs,
      this.startShifted,
      this.untilMs,
      rule.spec,
    ]);
  }

  /** The rule stream in instant order: DTSTART first, then the rule; gap-shifted instants reordered. */
  private *walk(rule: CompiledRule, fromMs: number, b: Budget): Generator<number, void, undefined> {
    const policy = this.dst;
    const count = this.count ?? Infinity;
    const until = this.untilMs;
    let emitted = 0;
    let last = -Infinity;
    const pending: number[] = [];
    // Fast-forward to the earliest wall time that can resolve at or after fromMs.
    const fromWall =
      fromMs === -Infinity || fromMs <= this.startMs
        ? rule.startWall + 1
        : this.earliestWallFor(fromMs);
    // DTSTART is an explicit DATE-TIME: a gap shifts it whatever the policy (RFC 5545 §3.3.5).
    if (this.startShifted) pending.push(this.startMs);
    else {
      last = this.startMs;
      emitted = 1;
      yield this.startMs;
      if (emitted >= count) return;
    }
    for (const wall of expandWalls(rule, Math.max(fromWall, rule.startWall + 1), b)) {
      // Reading a wall time in the zone costs about as much as a step of the expansion.
      b.steps--;
      const resolved = this.zone.toInstant(wall, policy);
      if (resolved === null) continue;
      const ms = resolved.ms;
      if (resolved.shifted) {
        let i = pending.length;
        while (i > 0 && (pending[i - 1] as number) > ms) i--;
        pending.splice(i, 0, ms);
        if (pending.length > 10_000) pending.length = 10_000;
        continue;
      }
      // Every later candidate is after an unshifted instant: flush what precedes it.
      while (pending.length > 0 && (pending[0] as number) <= ms) {
        const p = pending.shift() as number;
        if (p > until) return;
        if (p > last) {
          last = p;
          yield p;
          if (++emitted >= count) return;
        }
      }
      if (ms > until) return;
      if (ms > last) {
        last = ms;
        yield ms;
        if (++emitted >= count) return;
      }
    }
    for (const p of pending) {
      if (p > until) return;
      if (p > last) {
        last = p;
        yield p;
        if (++emitted >= count) return;
      }
    }
  }

  private excluded(ms: number): boolean {
    if (this.exInstants.has(ms)) return true;
    if (this.exDays.size === 0) return false;
    return this.exDays.has(Math.floor(this.zone.toWall(ms) / DAY_SECONDS));
  }

  /**
   * Instants in `[fromMs, toMs)`, ascending, distinct, at most `limit`, and `throughMs`:
   * every instant in `[fromMs, throughMs)` is listed (`toMs` unless a cap stopped the
   * expansion first; later instants may be listed too).
   */
  private instants(
    fromMs: number,
    toMs: number,
    limit: number,
  ): { list: number[]; throughMs: number; truncated: boolean } {
    const out: number[] = [];
    if (!(toMs > fromMs) || limit <= 0) return { list: out, throughMs: toMs, truncated: false };
    const end = Math.min(toMs, this.endMs === Infinity ? Infinity : this.endMs + 1);
    // Near a zone's transition the walk starts before fromMs (earliestWallFor): the slots
    // it visits there are paid on top, so every call gets past fromMs.
    const lead = this.leadSteps(fromMs);
    const b = budget(MAX_STEPS_PER_CALL + lead, Infinity, {
      maxMs: MAX_MS_PER_CALL,
      minSteps: MIN_STEPS_PER_CALL + lead,
    });
    const list = this.collect(fromMs, end, limit, b, out);
    if (!b.exhausted) return { list, throughMs: toMs, truncated: false };
    // Stopped by a cap: complete up to the earliest instant a wall time the walk did not
    // reach can resolve to, and up to the last instant it listed.
    const reached = b.reachedWall === Infinity ? toMs : this.earliestInstantFrom(b.reachedWall);
    let lastRule = -Infinity;
    for (const ms of list) if (!this.rdates.includes(ms)) lastRule = ms;
    const throughMs = Math.min(toMs, Math.max(fromMs, reached, lastRule + 1));
    return { list, throughMs, truncated: throughMs < toMs };
  }

  /**
   * The earliest wall second whose instant can be at or after `fromMs`: a wall time is read
   * with an offset in force within a day of it (`Zone.toInstant`, gaps shifted by their
   * length), so it is the smallest such offset that decides. Away from a transition this
   * is the wall time of `fromMs` itself; near one it is earlier by the transition's size
   * (an hour, or the day Samoa skipped in 2011), never by a fixed day or two, so a walk
   * of a SECONDLY rule spends its budget after `fromMs`, not before it.
   */
  private earliestWallFor(fromMs: number): number {
    const { min } = this.zone.offsetRange(fromMs - 2 * DAY_MS, fromMs + 2 * DAY_MS);
    return Math.floor((fromMs + min) / 1000);
  }

  /**
   * Steps a walk from `fromMs` may spend on the wall times between
   * {@link earliestWallFor} and the wall time of `fromMs`: two per slot of a sub-daily
   * rule (the slot and the reading of its time), none away from a transition.
   */
  private leadSteps(fromMs: number): number {
    const rule = this.rule;
    if (rule === null || this.count !== null || !Number.isFinite(fromMs) || fromMs <= this.startMs)
      return 0;
    const seconds = this.zone.toWall(fromMs) - this.earliestWallFor(fromMs);
    if (seconds <= 0) return 0;
    const freq = rule.spec.freq;
    const unit = freq === SECONDLY ? 1 : freq === MINUTELY ? 60 : freq === HOURLY ? 3600 : 86_400;
    return 2 * Math.ceil(seconds / (unit * rule.spec.interval)) + 2;
  }

  /**
   * The earliest instant a wall second at or after `wall` can resolve to (the largest
   * offset in force near it decides): every instant before it comes from a wall time
   * before `wall`.
   */
  private earliestInstantFrom(wall: number): number {
    const wms = wall * 1000;
    const { max } = this.zone.offsetRange(wms - 2 * DAY_MS, wms + 3 * DAY_MS);
    return wms - max;
  }

  private collect(fromMs: number, end: number, limit: number, b: Budget, out: number[]): number[] {
    const rd = this.rdates;
    let ri = 0;
    while (ri < rd.length && (rd[ri] as number) < fromMs) ri++;
    let last = -Infinity;
    const push = (ms: number): boolean => {
      if (ms <= last) return true;
      last = ms;
      if (!this.excluded(ms)) out.push(ms);
      return out.length < limit;
    };
    for (const ms of this.ruleInstants(fromMs, b)) {
      if (ms < fromMs) continue;
      if (ms >= end) break;
      while (ri < rd.length && (rd[ri] as number) <= ms) {
        if (!push(rd[ri++] as number)) return out;
      }
      if (!push(ms)) return out;
    }
    while (ri < rd.length && (rd[ri] as number) < end) {
      if (!push(rd[ri++] as number)) return out;
    }
    return out;
  }

  between(fromMs: number, toMs: number, limit = DEFAULT_BETWEEN_LIMIT): Occurrence[] {
    return this.scan(fromMs, toMs, limit).occurrences;
  }

  scan(fromMs: number, toMs: number, limit = DEFAULT_BETWEEN_LIMIT): ScanResult {
    if (Number.isNaN(fromMs) || Number.isNaN(toMs))
      return { occurrences: [], throughMs: fromMs, truncated: false };
    const n = Math.max(0, Math.min(Math.floor(limit), 1_000_000));
    const r = this.instants(fromMs, toMs, n);
    return {
      occurrences: r.list.map((ms) => this.occurrence(ms)),
      throughMs: r.throughMs,
      truncated: r.truncated,
    };
  }

  maxOccurrences(fromMs: number, toMs: number): number {
    if (Number.isNaN(fromMs) || Number.isNaN(toMs)) return 0;
    const end = Math.min(toMs, this.endMs === Infinity ? Infinity : this.endMs + 1);
    if (!(end > fromMs)) return 0;
    let n = 0;
    for (const ms of this.rdates) if (ms >= fromMs && ms < end) n++;
    const rule = this.rule;
    if (rule === null) return n + (this.startMs >= fromMs && this.startMs < end ? 1 : 0);
    const lo = Math.max(fromMs, this.startMs);
    const hi = Math.min(end, this.untilMs + 1);
    // DTSTART is the first instance even when UNTIL is before it (RFC 5545 §3.8.5.3).
    if (!(hi > lo)) return n + (this.startMs >= fromMs && this.startMs < end ? 1 : 0);
    const fromRule = 1 + ruleUpperBound(rule, hi - lo);
    return n + Math.min(fromRule, this.count ?? Infinity);
  }

  next(afterMs: number): Occurrence | null {
    const [ms] = this.instants(afterMs + 1, Infinity, 1).list;
    return ms === undefined ? null : this.occurrence(ms);
  }

  /**
   * The feasibility search (OPS-12): whether the rule yields any wall time after DTSTART
   * — `true`, `false`, or `null` when the search ended first — and the wall second it
   * reached. Steps only (no clock), so the answer is the same on every machine.
   */
  ruleYieldsAnything(): Feasibility {
    const rule = this.rule;
    if (rule === null) return { yields: true, reachedWall: Infinity };
    // Same series, same answer: kept (and recorded, and borrowed) like a COUNT walk.
    const key = this.seriesKey(rule);
    const found = searches.get(key) ?? (lent.length > 0 ? lentSearch(key) : undefined);
    const result = found ?? this.searchFirst(rule);
    searches.delete(key);
    searches.set(key, result);
    if (searches.size > MAX_KEPT_SEARCHES) searches.delete(searches.keys().next().value as string);
    recording?.searches.push([key, result]);
    return result;
  }

  private searchFirst(rule: CompiledRule): Feasibility {
    const freq = rule.spec.freq;
    const periods = freq <= DAILY ? (CYCLE_PERIODS[freq] as number) + 1 : Infinity;
    const b = budget(NO_OCCURRENCE_SEARCH_STEPS, periods);
    for (const wall of expandWalls(rule, rule.startWall + 1, b)) {
      void wall;
      return { yields: true, reachedWall: Infinity };
    }
    // Ended by itself (year 9999), or one full calendar cycle visited: none, ever.
    if (!b.exhausted || b.periods <= 0) return { yields: false, reachedWall: Infinity };
    return { yields: null, reachedWall: b.reachedWall };
  }
}

/** The parts of a rule that decide which dates match, as RRULE text: `INTERVAL=2;BYHOUR=2`. */
function decidingParts(rule: RuleSpec, text: string): string {
  const wanted = new Set(MATCHING_PARTS);
  const parts = text
    .trim()
    .replace(/^RRULE:/i, "")
    .split(";")
    .map((p) => p.trim())
    .filter((p) => wanted.has(p.slice(0, p.indexOf("=")).toUpperCase()));
  return parts.length > 0 ? parts.join(";") : `FREQ=${FREQS[rule.freq]}`;
}

/**
 * OPS-12: decides at validation that the rule can produce occurrences within bounded
 * work — a first occurrence after DTSTART within {@link NO_OCCURRENCE_SEARCH_STEPS}, and
 * for a COUNT series its last one within {@link MAX_COUNT_STEPS} — so no later call
 * walks a rule that never matches. Same decision in both postures (lenient callers
 * quarantine the schedule with the message).
 * @throws ValidationError field `rrule` naming the parts that never (or too rarely) match.
 */
function checkFeasible(rec: RecurrenceImpl, rule: RuleSpec, text: string): void {
  const parts = decidingParts(rule, text);
  // A COUNT series walks from DTSTART anyway: two instants found (DTSTART and one of the
  // rule's) answer the feasibility search too, without spending its steps again.
  const walked = rule.count !== null ? rec.countSet() : null;
  const { yields, reachedWall } =
    walked !== null && walked.found >= 2
      ? { yields: true, reachedWall: walked.reachedWall }
      : rec.ruleYieldsAnything();
  if (yields === false) {
    invalid(
      "rrule",
      `matches no date after DTSTART (no occurrence at all): ${parts} never match together`,
      text,
    );
  }
  if (yields === null) {
    const upTo = formatDate(Math.floor(reachedWall / DAY_SECONDS));
    invalid(
      "rrule",
      `has no occurrence after DTSTART within the search bound (${NO_OCCURRENCE_SEARCH_STEPS.toLocaleString("en-US")} expansion steps, up to ${upTo}): ${parts} never match together, or too rarely for FREQ=${FREQS[rule.freq]}`,
      text,
    );
  }
  if (walked !== null) {
    if (!walked.complete) {
      const upTo = formatDate(Math.floor(walked.reachedWall / DAY_SECONDS));
      invalid(
        "rrule.COUNT",
        `COUNT=${rule.count} is not reached within the work bound (${MAX_COUNT_STEPS.toLocaleString("en-US")} expansion steps from DTSTART, up to ${upTo}, ${walked.found.toLocaleString("en-US")} occurrences by then): lower COUNT or end the series with UNTIL`,
        text,
      );
    }
    rec.keepCountSet(walked.instants);
  }
}

/** Shortest period of each FREQ (days) for FREQ DAILY and coarser: 365, 28, 7, 1. */
const MIN_PERIOD_DAYS = [365, 28, 7, 1];

/**
 * An upper bound of the occurrences a compiled rule yields in any span of `spanMs`, from
 * its shape alone (no expansion): periods the span can touch × candidates one period can
 * hold. A day of slack covers a wall clock that runs faster than the instants (DST).
 */
function ruleUpperBound(r: CompiledRule, spanMs: number): number {
  const spec = r.spec;
  const span = spanMs / 1000 + DAY_SECONDS;
  const setCap = (n: number): number =>
    spec.bySetPos === null ? n : Math.min(n, spec.bySetPos.length);
  if (spec.freq <= DAILY) {
    const months = r.months === null ? 12 : r.months.filter(Boolean).length;
    const perMonth = spec.freq === YEARLY ? months : 1;
    let days = [366, 31, 7, 1][spec.freq] as number;
    if (spec.freq === YEARLY && r.months !== null) days = Math.min(days, months * 31);
    if (r.monthDays !== null) days = Math.min(days, perMonth * r.monthDays.length);
    if (spec.byYearDay !== null) days = Math.min(days, spec.byYearDay.length);
    if (spec.byWeekNo !== null) days = Math.min(days, spec.byWeekNo.length * 7);
    if (r.plainWeekdays !== null && r.ordinalWeekdays !== null) {
      const plain = r.plainWeekdays.filter(Boolean).length;
      const ords = r.ordinalWeekdays.reduce((sum, o) => sum + o.length, 0);
      const weeks = [53, 5, 1, 1][spec.freq] as number;
      days = Math.min(days, plain * weeks + ords * (r.ordinalInMonth ? perMonth : 1));
    }
    const periods =
      Math.floor(span / ((MIN_PERIOD_DAYS[spec.freq] as number) * DAY_SECONDS * spec.interval)) + 2;
    return periods * setCap(days * r.times.length);
  }
  const unit = spec.freq === HOURLY ? 3600 : spec.freq === MINUTELY ? 60 : 1;
  const stride = unit * spec.interval;
  const inner =
    spec.freq === HOURLY
      ? r.minutes.length * r.seconds.length
      : spec.freq === MINUTELY
        ? r.seconds.length
        : 1;
  const perSlot = setCap(inner);
  const bySlots = (Math.floor(span / stride) + 2) * perSlot;
  // Per day: slots of the day that pass BYHOUR (and BYMINUTE, BYSECOND for finer FREQs).
  const hours = r.hourSet === null ? 24 : (spec.byHour as number[]).length;
  const minutes = spec.freq >= MINUTELY && r.minuteSet !== null ? r.minutes.length : 60;
  const seconds = spec.freq === SECONDLY && r.secondSet !== null ? r.seconds.length : 60;
  const slotsPerDay =
    spec.freq === HOURLY
      ? hours
      : spec.freq === MINUTELY
        ? hours * minutes
        : hours * minutes * seconds;
  const perDay = Math.min(Math.floor(DAY_SECONDS / stride) + 1, slotsPerDay) * perSlot;
  const byDays = (Math.floor(span / DAY_SECONDS) + 2) * perDay;
  return Math.min(bySlots, byDays);
}

function normaliseDst(input: Partial<DstPolicy> | undefined): DstPolicy {
  const gap = input?.gap ?? DEFAULT_DST_POLICY.gap;
  const overlap = input?.overlap ?? DEFAULT_DST_POLICY.overlap;
  if (gap !== "shift" && gap !== "skip") invalid("dst.gap", 'must be "shift" or "skip"', gap);
  if (overlap !== "earlier" && overlap !== "later")
    invalid("dst.overlap", 'must be "earlier" or "later"', overlap);
  return { gap, overlap };
}

/** Reads one date value of the input (DTSTART, RDATE, EXDATE, endsAt). */
function readValue(field: string, text: unknown, mode: Mode): DateValue {
  return readValueWithFraction(field, text, mode, false).value;
}

/**
 * Like {@link readValue}; with `allowFraction`, fractional seconds of an instant are kept
 * (returned as `fractionMs`) instead of refused: `2027-01-04T08:00:00.250Z` as DTSTART.
 */
function readValueWithFraction(
  field: string,
  text: unknown,
  mode: Mode,
  allowFraction: boolean,
): { value: DateValue; fractionMs: number } {
  if (typeof text !== "string") invalid(field, "must be a string", text);
  const parsed = parseDateValue(text);
  if (parsed === null)
    invalid(
      field,
      "must be a date (2027-01-04), a local date-time (2027-01-04T09:00:00) or an instant (…Z)",
      text,
    );
  if (parsed.kind === "invalid") invalid(field, parsed.reason, text);
  if (parsed.fractionMs !== 0) {
    if (allowFraction && parsed.value.kind === "instant") {
      return { value: parsed.value, fractionMs: parsed.fractionMs };
    }
    if (!mode.lenient) invalid(field, "must not have fractional seconds", text);
    mode.warnings.push(`${field}: fractional seconds dropped`);
  }
  return { value: parsed.value, fractionMs: 0 };
}

/**
 * A recurrence whose DTSTART instant carried milliseconds: every occurrence keeps that
 * sub-second part (RFC 5545 counts in whole seconds; the engine expands on whole seconds
 * and this wrapper adds the fraction back), so a one-off due at `…:03.267Z` fires then.
 */
class FractionShifted implements Recurrence {
  constructor(
    private readonly inner: RecurrenceImpl,
    private readonly fractionMs: number,
  ) {}
  get tzid() {
    return this.inner.tzid;
  }
  get dateOnly() {
    return this.inner.dateOnly;
  }
  get bounded() {
    return this.inner.bounded;
  }
  get dst() {
    return this.inner.dst;
  }
  get rrule() {
    return this.inner.rrule;
  }
  get ruleBounded() {
    return this.inner.ruleBounded;
  }
  get first(): Occurrence {
    return this.shift(this.inner.first);
  }
  private shift(o: Occurrence): Occurrence {
    return { ...o, instant: o.instant + this.fractionMs };
  }
  between(fromMs: number, toMs: number, limit?: number): Occurrence[] {
    return this.scan(fromMs, toMs, limit).occurrences;
  }
  scan(fromMs: number, toMs: number, limit?: number): ScanResult {
    const r = this.inner.scan(fromMs - this.fractionMs, toMs - this.fractionMs, limit);
    return {
      occurrences: r.occurrences.map((o) => this.shift(o)),
      throughMs: r.throughMs + this.fractionMs,
      truncated: r.truncated,
    };
  }
  maxOccurrences(fromMs: number, toMs: number): number {
    return this.inner.maxOccurrences(fromMs - this.fractionMs, toMs - this.fractionMs);
  }
  next(afterMs: number): Occurrence | null {
    const o = this.inner.next(afterMs - this.fractionMs);
    return o === null ? null : this.shift(o);
  }
}

function build(input: RecurrenceInput, mode: Mode): Recurrence {
  if (input === null || typeof input !== "object") invalid("dtstart", "is required");
  const tzid = input.tzid ?? "UTC";
  if (typeof tzid !== "string") invalid("tzid", "must be an IANA time zone name", tzid);
  let zone: Zone;
  if (isOffsetZone(tzid)) {
    // A fixed offset has no DST rules: "+01:00" is not Berlin in summer.
    const msg = "is a UTC offset, not a time zone: use an IANA name such as Europe/Berlin (or UTC)";
    if (!mode.lenient) invalid("tzid", msg, tzid);
    mode.warnings.push(`tzid: ${msg}; read as the fixed offset ${tzid}`);
  }
  try {
    zone = getZone(tzid);
  } catch {
    invalid("tzid", "is not a known IANA time zone", tzid);
  }
  const dst = normaliseDst(input.dst);
  if (input.dtstart === undefined || input.dtstart === null || input.dtstart === "")
    invalid("dtstart", "is required");
  const { value: start, fractionMs: startFractionMs } = readValueWithFraction(
    "dtstart",
    input.dtstart,
    mode,
    true,
  );
  const dateOnly = start.kind === "date";
  const startWall =
    start.kind === "date"
      ? start.days * DAY_SECONDS
      : start.kind === "local"
        ? start.wall
        : zone.toWall(start.ms);
  const startYear = civilFromDays(Math.floor(startWall / DAY_SECONDS)).year;
  if (startYear < 1 || startYear > MAX_YEAR) {
    invalid("dtstart", `must be between years 0001 and ${MAX_YEAR}`, input.dtstart);
  }
  const resolvedStart = zone.toInstant(startWall, { ...dst, gap: "shift" }) as {
    ms: number;
    shifted: boolean;
  };
  const startMs = start.kind === "instant" ? start.ms : resolvedStart.ms;
  const startShifted = start.kind !== "instant" && resolvedStart.shifted;

  // Converts a value to an instant: dates are local midnight, local times read in the zone.
  const toMs = (v: DateValue): number =>
    v.kind === "instant"
      ? v.ms
      : (
          zone.toInstant(v.kind === "date" ? v.days * DAY_SECONDS : v.wall, {
            ...dst,
            gap: "shift",
          }) as { ms: number }
        ).ms;

  let rule: RuleSpec | null = null;
  let rruleText: string | null = null;
  let untilMs = Infinity;
  if (input.rrule !== undefined && input.rrule !== null && typeof input.rrule !== "string") {
    invalid("rrule", "must be a string", input.rrule);
  }
  if (typeof input.rrule === "string" && input.rrule.trim() !== "") {
    rule = readRuleText(input.rrule, { lenient: mode.lenient, dateOnly, warnings: mode.warnings });
    rruleText = input.rrule.trim().replace(/^RRULE:/i, "");
    for (const u of rule.until) {
      const untilIsDate = u.kind === "date";
      if (untilIsDate !== dateOnly) {
        const msg = dateOnly
          ? "must be a DATE when DTSTART is a date"
          : "must be a DATE-TIME when DTSTART is a date-time";
        if (!mode.lenient) invalid("rrule.UNTIL", `${msg} (RFC 5545 §3.3.10)`, input.rrule);
        mode.warnings.push(`rrule.UNTIL: ${msg}; read it as the end of that day`);
      } else if (u.kind === "local" && (start.kind === "instant" || zone.id !== "UTC")) {
        // §3.3.10: with a UTC or zoned DTSTART, UNTIL MUST be a UTC date-time.
        const msg = "must be a UTC date-time (…Z) when DTSTART is in a time zone";
        if (!mode.lenient) invalid("rrule.UNTIL", `${msg} (RFC 5545 §3.3.10)`, input.rrule);
        mode.warnings.push(`rrule.UNTIL: ${msg}; read it in ${zone.id}`);
      }
      // A DATE UNTIL on a date-time series includes the whole day.
      const ms =
        u.kind === "date" && !dateOnly ? toMs({ kind: "date", days: u.days + 1 }) - 1 : toMs(u);
      untilMs = Math.min(untilMs, ms);
    }
    if (untilMs < startMs) {
      if (!mode.lenient) invalid("rrule.UNTIL", "is before DTSTART", input.rrule);
      mode.warnings.push("rrule.UNTIL: before DTSTART; only DTSTART remains");
    }
  }

  const readList = (
    field: "rdate" | "exdate",
    values: readonly string[] | undefined,
  ): DatePoint[] => {
    if (values === undefined || values === null) return [];
    if (!Array.isArray(values)) invalid(field, "must be a list", values);
    if (values.length > MAX_DATE_LIST)
      invalid(field, `must have at most ${MAX_DATE_LIST} values`, values.length);
    return values.map((text: unknown, i) => {
      const v = readValue(`${field}.${i}`, text, mode);
      return { ms: toMs(v), days: v.kind === "date" ? v.days : null };
    });
  };
  const rdates = [...new Set(readList("rdate", input.rdate).map((p) => p.ms))].sort(
    (a, b) => a - b,
  );
  const exInstants = new Set<number>();
  const exDays = new Set<number>();
  for (const p of readList("exdate", input.exdate)) {
    if (p.days !== null) {
      if (dateOnly) exInstants.add(p.ms);
      else exDays.add(p.days);
    } else exInstants.add(p.ms);
  }

  let endsAtMs: number | null = null;
  if (input.endsAt !== undefined && input.endsAt !== null) {
    endsAtMs = toMs(readValue("endsAt", input.endsAt, mode));
  }

  const rec = new RecurrenceImpl({
    zone,
    dateOnly,
    dst,
    startWall,
    startMs,
    startShifted,
    rule,
    rruleText,
    untilMs,
    endsAtMs,
    rdates,
    exInstants,
    exDays,
  });

  if (rule !== null) checkFeasible(rec, rule, input.rrule as string);
  const firstKept = exInstants.size + exDays.size > 0 ? rec.scan(-Infinity, Infinity, 1) : null;
  if (firstKept !== null && firstKept.occurrences.length === 0 && !firstKept.truncated) {
    invalid("exdate", "excludes every occurrence (no occurrence at all)", input.exdate);
  }
  return startFractionMs === 0 ? rec : new FractionShifted(rec, startFractionMs);
}

/**
 * Strict posture (REC-3) for input from people (API, CLI): parses and checks DTSTART,
 * TZID, RRULE (RFC 5545 §3.3.10), RDATE, EXDATE, `endsAt` and the DST policy.
 *
 * @returns an immutable {@link Recurrence}, safe to cache.
 * @throws ValidationError naming the offending part (`rrule.BYMONTHDAY`, `rrule.UNTIL`,
 *   `tzid`, `dtstart`, `rdate.0`, …) and its value: unknown, duplicate or malformed part,
 *   out-of-range number, UNTIL with COUNT, INTERVAL ≤ 0, BYSETPOS alone, combinations the
 *   RFC forbids, an unknown zone, or a rule with no occurrence at all.
 */
export function validateRule(input: RecurrenceInput): Recurrence {
  return build(input, { lenient: false, warnings: [] });
}

/**
 * Lenient posture (REC-3) for stored rules, used by the scheduler: never throws. Repairs
 * unambiguous deviations and reports them as `warnings` (a duplicate UNTIL keeps the
 * earliest, UNTIL with COUNT keeps the tighter bound, empty and `X-` parts are ignored,
 * a mismatched UNTIL value type is read as the end of that day); anything else is
 * returned as `{ ok: false, error }` so that one bad rule quarantines only its own
 * schedule. Work is bounded for any input.
 */
export function parseRule(input: RecurrenceInput): ParseResult {
  const warnings: string[] = [];
  try {
    const recurrence = build(input, { lenient: true, warnings });
    return { ok: true, recurrence, warnings };
  } catch (err) {
    if (err instanceof ValidationError) return { ok: false, error: err };
    return {
      ok: false,
      error: new ValidationError(
        { field: "rrule", message: "could not be read", value: String(err).slice(0, 120) },
        { cause: err },
      ),
    };
  }
}

/**
 * A schedule's DTSTART as its wall clock in `tzid` with the zone's UTC offset at that
 * instant (`2027-01-04T09:00:00+01:00`), whatever form it was given in (local, basic
 * format or an instant with `Z` or an offset); a date for an all-day schedule. A local
 * time in a DST gap reads as the shifted time it starts at. One form for lists and
 * details alike (API-1).
 * @returns null when `dtstart` or `tzid` cannot be read (a stored rule later quarantined).
 */
export function dtstartInZone(
  dtstart: string,
  tzid: string,
  dst?: Partial<DstPolicy>,
): string | null {
  try {
    const zone = getZone(tzid);
    const { value } = readValueWithFraction(
      "dtstart",
      dtstart,
      { lenient: true, warnings: [] },
      true,
    );
    if (value.kind === "date") return formatDate(value.days);
    const ms =
      value.kind === "instant"
        ? value.ms
        : (zone.toInstant(value.wall, { ...normaliseDst(dst), gap: "shift" }) as { ms: number }).ms;
    return `${formatWall(zone.toWall(ms))}${formatUtcOffset(zone.offsetAt(ms))}`;
  } catch {
    return null;
  }
}
