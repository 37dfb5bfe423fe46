/**
 * Expansion of an RRULE in floating wall-clock time (RFC 5545 §3.3.10, §3.8.5.3) on plain
 * civil-date arithmetic. Yields wall seconds in ascending order; converting them to
 * instants (and the DST policy) is the caller's job. Every loop is bounded by a
 * {@link Budget}.
 */
import {
  DAY_SECONDS,
  civilFromDays,
  daysFromCivil,
  monthLength,
  weekNumber,
  weekStart,
  weekday,
  yearLength,
} from "./civil.js";
import {
  DAILY,
  HOURLY,
  MINUTELY,
  MONTHLY,
  SECONDLY,
  WEEKLY,
  YEARLY,
  type RuleSpec,
} from "./rule.js";

/** Last year expanded; later periods end the iteration. */
export const MAX_YEAR = 9999;
const MAX_WALL = daysFromCivil(MAX_YEAR + 1, 1, 1) * DAY_SECONDS;

/** Work allowance shared by the loops of one expansion. */
export interface Budget {
  /** Remaining steps (periods, days and candidates visited). */
  steps: number;
  /** Remaining periods (optional finer cap). */
  periods: number;
  /** Set when a cap (steps, periods or time) stopped the iteration. */
  exhausted: boolean;
  /** Steps granted when the budget was created. */
  readonly granted: number;
  /** Clock reading (ms, from `now`) after which the expansion stops; `Infinity` for none. */
  readonly deadline: number;
  /** Reads the clock the deadline is measured on (ms). */
  readonly now: () => number;
  /** Steps always granted before the deadline is looked at. */
  readonly minSteps: number;
  /** Periods left before the next clock reading. */
  untilClockCheck: number;
  /** Set when the deadline (not the step or period cap) stopped the iteration. */
  timedOut: boolean;
  /**
   * When exhausted: the wall second before which every candidate was considered (the
   * start of the first period not visited). `Infinity` while the expansion runs or once
   * it ended by itself.
   */
  reachedWall: number;
}

/** Periods between two clock readings of a budget with a deadline. */
const CLOCK_CHECK_PERIODS = 64;

/** Budgets created while {@link measureWork} runs; `null` when nothing measures. */
let metered: Budget[] | null = null;

/** Options of {@link budget}. */
export interface BudgetOptions {
  /** Time allowance in ms, measured on `now`; default none. Ignored inside {@link measureWork}. */
  maxMs?: number;
  /** Clock for `maxMs` (ms); default `performance.now`. */
  now?: () => number;
  /**
   * Steps spent before the clock is read at all (default 0): below them a call's answer
   * never depends on the machine's speed or load.
   */
  minSteps?: number;
}

/**
 * Creates a budget of `steps` (and at most `periods` periods), optionally also bounded in
 * time: with `maxMs`, the loops read the clock every {@link CLOCK_CHECK_PERIODS} periods
 * and stop once `maxMs` has passed (`timedOut`). While {@link measureWork} counts, the
 * time bound is off, so step counts do not depend on the machine's speed or load. With
 * `minSteps`, the clock is not read before that many steps are spent.
 */
export function budget(steps: number, periods = Infinity, options: BudgetOptions = {}): Budget {
  const now = options.now ?? (() => performance.now());
  const timed = options.maxMs !== undefined && metered === null;
  const b: Budget = {
    steps,
    periods,
    exhausted: false,
    granted: steps,
    deadline: timed ? now() + (options.maxMs as number) : Infinity,
    now,
    minSteps: options.minSteps ?? 0,
    untilClockCheck: CLOCK_CHECK_PERIODS,
    timedOut: false,
    reachedWall: Infinity,
  };
  metered?.push(b);
  return b;
}

/** Counts one period against the clock of `b`; stops `b` once its deadline has passed. */
function clockTick(b: Budget): void {
  if (b.deadline === Infinity || --b.untilClockCheck > 0) return;
  b.untilClockCheck = CLOCK_CHECK_PERIODS;
  if (b.granted - b.steps >= b.minSteps && b.now() > b.deadline) {
    b.timedOut = true;
    b.steps = 0;
  }
}

/** Expansion work spent by one call, as counted by {@link measureWork}. */
export interface WorkReport<T> {
  /** What the measured function returned. */
  result: T;
  /** Steps spent over every budget created during the call (granted − remaining, summed). */
  steps: number;
  /** The most any one of those budgets spent. */
  maxStepsPerBudget: number;
  /** How many budgets the call created. */
  budgets: number;
}

/**
 * Starts counting this thread's expansion work across turns of the event loop (an
 * HTTP request, an import), in the steps {@link measureWork} counts; the time bounds
 * are off meanwhile. Only work done on this thread counts (not a worker thread's).
 * @returns a function that stops counting and answers the steps spent.
 * @throws Error when something already measures.
 */
export function meterWork(): () => number {
  if (metered !== null) throw new Error("meterWork is not re-entrant");
  const budgets: Budget[] = [];
  metered = budgets;
  return () => {
    if (metered === budgets) metered = null;
    return budgets.reduce((n, b) => n + b.granted - b.steps, 0);
  };
}

/**
 * Runs `fn` synchronously and reports the expansion work it spent, counted in the same
 * steps the loops charge to their {@link Budget} (periods, days and candidates visited).
 * Bounding work by steps instead of elapsed time keeps a check independent of the
 * machine's speed and load. Expansions left suspended when `fn` returns (a generator
 * not yet drained) count what they had spent by then. Not re-entrant: nested calls
 * throw.
 *
 * @throws Error when called from inside another `measureWork`.
 */
export function measureWork<T>(fn: () => T): WorkReport<T> {
  if (metered !== null) throw new Error("measureWork is not re-entrant");
  const budgets: Budget[] = [];
  metered = budgets;
  let result: T;
  try {
    result = fn();
  } finally {
    metered = null;
  }
  let steps = 0;
  let maxStepsPerBudget = 0;
  for (const b of budgets) {
    const spent = b.granted - b.steps;
    steps += spent;
    maxStepsPerBudget = Math.max(maxStepsPerBudget, spent);
  }
  return { result, steps, maxStepsPerBudget, budgets: budgets.length };
}

/** A rule with the DTSTART-derived defaults of RFC 5545 §3.3.10 filled in. */
export interface CompiledRule {
  spec: RuleSpec;
  /** DTSTART as a wall second. */
  startWall: number;
  months: boolean[] | null;
  monthDays: number[] | null;
  /** plain[wd]: every such weekday; ords[wd]: ordinals for that weekday. */
  plainWeekdays: boolean[] | null;
  ordinalWeekdays: number[][] | null;
  /** Ordinals are counted within the month (true) or the year (false). */
  ordinalInMonth: boolean;
  hours: number[];
  minutes: number[];
  seconds: number[];
  /** Seconds of day, sorted, for FREQ DAILY and coarser. */
  times: number[];
  /** Set of BYxxx values as lookup tables for the limit checks of sub-daily FREQs. */
  hourSet: boolean[] | null;
  minuteSet: boolean[] | null;
  secondSet: boolean[] | null;
}

/** Fills in defaults from DTSTART and precomputes lookup tables. */
export function compileRule(spec: RuleSpec, startWall: number): CompiledRule {
  const startDay = Math.floor(startWall / DAY_SECONDS);
  const sod = startWall - startDay * DAY_SECONDS;
  const start = civilFromDays(startDay);
  const { freq } = spec;
  let byMonth = spec.byMonth;
  let byMonthDay = spec.byMonthDay;
  let byDay = spec.byDay;
  const noDayPart = byMonthDay === null && byDay === null && spec.byYearDay === null;
  if (noDayPart) {
    if (freq === YEARLY) {
      if (spec.byWeekNo !== null) byDay = [{ weekday: weekday(startDay), ordinal: 0 }];
      else {
        byMonth = byMonth ?? [start.month];
        byMonthDay = [start.day];
      }
    } else if (freq === MONTHLY) byMonthDay = [start.day];
    else if (freq === WEEKLY) byDay = [{ weekday: weekday(startDay), ordinal: 0 }];
  }
  let plainWeekdays: boolean[] | null = null;
  let ordinalWeekdays: number[][] | null = null;
  if (byDay !== null) {
    plainWeekdays = [false, false, false, false, false, false, false];
    ordinalWeekdays = [[], [], [], [], [], [], []];
    for (const d of byDay) {
      if (d.ordinal === 0) plainWeekdays[d.weekday] = true;
      else ordinalWeekdays[d.weekday]?.push(d.ordinal);
    }
  }
  const table = (values: number[] | null, size: number): boolean[] | null => {
    if (values === null) return null;
    const t = new Array<boolean>(size).fill(false);
    for (const v of values) t[v] = true;
    return t;
  };
  const hours = spec.byHour ?? [Math.floor(sod / 3600)];
  const minutes = spec.byMinute ?? [Math.floor((sod % 3600) / 60)];
  const seconds = spec.bySecond ?? [sod % 60];
  const times: number[] = [];
  if (freq <= DAILY) {
    for (const h of hours)
      for (const m of minutes) for (const s of seconds) times.push(h * 3600 + m * 60 + s);
    times.sort((a, b) => a - b);
  }
  return {
    spec,
    startWall,
    months: table(byMonth, 13),
    monthDays: byMonthDay,
    plainWeekdays,
    ordinalWeekdays,
    ordinalInMonth: freq === MONTHLY || byMonth !== null,
    hours,
    minutes,
    seconds,
    times: [...new Set(times)],
    hourSet: table(spec.byHour, 24),
    minuteSet: table(spec.byMinute, 60),
    secondSet: table(spec.bySecond, 61),
  };
}

/** Whether a day passes the day-level BYxxx parts (BYMONTH, BYWEEKNO, BYYEARDAY, BYMONTHDAY, BYDAY). */
function dayMatches(
  r: CompiledRule,
  days: number,
  year: number,
  month: number,
  dom: number,
): boolean {
  if (r.months !== null && r.months[month] !== true) return false;
  const spec = r.spec;
  if (spec.byWeekNo !== null) {
    const [no, total] = weekNumber(days, spec.wkst);
    if (!spec.byWeekNo.includes(no) && !spec.byWeekNo.includes(no - total - 1)) return false;
  }
  let doy = 0;
  let ylen = 0;
  if (spec.byYearDay !== null) {
    doy = days - daysFromCivil(year, 1, 1) + 1;
    ylen = yearLength(year);
    if (!spec.byYearDay.includes(doy) && !spec.byYearDay.includes(doy - ylen - 1)) return false;
  }
  let mlen = 0;
  if (r.monthDays !== null) {
    mlen = monthLength(year, month);
    if (!r.monthDays.includes(dom) && !r.monthDays.includes(dom - mlen - 1)) return false;
  }
  if (r.plainWeekdays !== null) {
    const wd = weekday(days);
    if (r.plainWeekdays[wd] === true) return true;
    const ords = r.ordinalWeekdays?.[wd];
    if (ords === undefined || ords.length === 0) return false;
    let pos: number;
    let neg: number;
    if (r.ordinalInMonth) {
      if (mlen === 0) mlen = monthLength(year, month);
      pos = Math.floor((dom - 1) / 7) + 1;
      neg = -(Math.floor((mlen - dom) / 7) + 1);
    } else {
      if (doy === 0) {
        doy = days - daysFromCivil(year, 1, 1) + 1;
        ylen = yearLength(year);
      }
      pos = Math.floor((doy - 1) / 7) + 1;
      neg = -(Math.floor((ylen - doy) / 7) + 1);
    }
    return ords.includes(pos) || ords.includes(neg);
  }
  return true;
}

function checkDay(r: CompiledRule, days: number): boolean {
  const c = civilFromDays(days);
  return dayMatches(r, days, c.year, c.month, c.day);
}

/** Candidate days of one period for FREQ DAILY and coarser, ascending. */
function periodDays(r: CompiledRule, freq: number, index: number, b: Budget): number[] {
  const out: number[] = [];
  const spec = r.spec;
  if (freq === YEARLY) {
    for (let month = 1; month <= 12; month++) {
      if (r.months !== null && r.months[month] !== true) continue;
      const first = daysFromCivil(index, month, 1);
      const len = monthLength(index, month);
      b.steps -= len;
      for (let dom = 1; dom <= len; dom++)
        if (dayMatches(r, first + dom - 1, index, month, dom)) out.push(first + dom - 1);
    }
  } else if (freq === MONTHLY) {
    const year = Math.floor(index / 12);
    const month = (index % 12) + 1;
    if (r.months !== null && r.months[month] !== true) return out;
    const first = daysFromCivil(year, month, 1);
    const len = monthLength(year, month);
    b.steps -= len;
    if (r.monthDays !== null && r.plainWeekdays === null && spec.byYearDay === null) {
      // Fast path: BYMONTHDAY alone.
      for (const md of r.monthDays) {
        const dom = md > 0 ? md : len + md + 1;
        if (dom >= 1 && dom <= len) out.push(first + dom - 1);
      }
      out.sort((a, b2) => a - b2);
      return [...new Set(out)];
    }
    for (let dom = 1; dom <= len; dom++)
      if (dayMatches(r, first + dom - 1, year, month, dom)) out.push(first + dom - 1);
  } else if (freq === WEEKLY) {
    b.steps -= 7;
    for (let d = index; d < index + 7; d++) if (checkDay(r, d)) out.push(d);
  } else {
    b.steps -= 1;
    if (checkDay(r, index)) out.push(index);
  }
  return out;
}

/** Applies BYSETPOS to a period of `n` ordered candidates: the selected indices, ascending. */
function setPositions(bySetPos: number[], n: number): number[] {
  const idx = new Set<number>();
  for (const p of bySetPos) {
    const i = p > 0 ? p - 1 : n + p;
    if (i >= 0 && i < n) idx.add(i);
  }
  return [...idx].sort((a, b) => a - b);
}

/**
 * Wall seconds produced by the rule, ascending, starting with the period that contains
 * `fromWall` (or DTSTART's period, whichever is later). Candidates before `fromWall` are
 * not yielded; DTSTART itself is not special here. Bounds (COUNT, UNTIL) are not applied.
 */
export function* expandWalls(
  r: CompiledRule,
  fromWall: number,
  b: Budget,
): Generator<number, void, undefined> {
  const spec = r.spec;
  const { freq, interval } = spec;
  const startWall = r.startWall;
  const lower = Math.max(fromWall, startWall);
  if (lower >= MAX_WALL) return;
  const startDay = Math.floor(startWall / DAY_SECONDS);
  const lowerDay = Math.floor(lower / DAY_SECONDS);

  if (freq <= DAILY) {
    // Period index: year, month count, week-start day or day.
    let index: number;
    let step: number;
    if (freq === YEARLY) {
      const y0 = civilFromDays(startDay).year;
      const y = civilFromDays(lowerDay).year;
      index = y0 + Math.floor((y - y0) / interval) * interval;
      step = interval;
    } else if (freq === MONTHLY) {
      const s = civilFromDays(startDay);
      const l = civilFromDays(lowerDay);
      const m0 = s.year * 12 + s.month - 1;
      const m = l.year * 12 + l.month - 1;
      index = m0 + Math.floor((m - m0) / interval) * interval;
      step = interval;
    } else if (freq === WEEKLY) {
      const w0 = weekStart(startDay, spec.wkst);
      index = w0 + Math.floor((lowerDay - w0) / (7 * interval)) * 7 * interval;
      step = 7 * interval;
    } else {
      index = startDay + Math.floor((lowerDay - startDay) / interval) * interval;
      step = interval;
    }
    const times = r.times;
    const nt = times.length;
    let cut = Infinity;
    while (b.steps > 0 && b.periods > 0) {
      clockTick(b);
      if (b.steps <= 0) break;
      b.periods--;
      b.steps--;
      const year =
        freq === YEARLY
          ? index
          : freq === MONTHLY
            ? Math.floor(index / 12)
            : civilFromDays(index).year;
      if (year > MAX_YEAR) return;
      const days = periodDays(r, freq, index, b);
      if (days.length > 0) {
        if (spec.bySetPos !== null) {
          for (const i of setPositions(spec.bySetPos, days.length * nt)) {
            const wall =
              (days[Math.floor(i / nt)] as number) * DAY_SECONDS + (times[i % nt] as number);
            if (wall >= lower) yield wall;
          }
        } else {
          for (const d of days) {
            if (d < lowerDay) continue;
            const base = d * DAY_SECONDS;
            for (const t of times) {
              b.steps--;
              const wall = base + t;
              if (wall >= lower) yield wall;
            }
            if (b.steps <= 0) {
              // Stopped inside the period: the days after `d` were not considered.
              cut = base + DAY_SECONDS;
              break;
            }
          }
        }
      }
      index += step;
    }
    b.exhausted = true;
    b.reachedWall = Math.min(cut, periodStartWall(freq, index));
    return;
  }

  // Sub-daily: a period is one hour, minute or second slot.
  const unit = freq === HOURLY ? 3600 : freq === MINUTELY ? 60 : 1;
  const stride = unit * interval;
  const startSlot = Math.floor(startWall / unit) * unit;
  let slot =
    startSlot + Math.floor((Math.floor(lower / unit) * unit - startSlot) / stride) * stride;
  // Offsets inside a slot (finer parts expand), ascending.
  let inner: number[];
  if (freq === HOURLY) {
    inner = [];
    for (const m of r.minutes) for (const s of r.seconds) inner.push(m * 60 + s);
    inner = [...new Set(inner)].sort((a, c) => a - c);
  } else if (freq === MINUTELY) inner = [...r.seconds];
  else inner = [0];
  // FREQ=SECONDLY;INTERVAL=1 with BYSECOND: for each second of a minute, the next one at
  // or after it that BYSECOND lists (60: none left in this minute).
  let nextSecond: number[] | null = null;
  if (freq === SECONDLY && stride === 1 && r.secondSet !== null) {
    const set = r.secondSet;
    nextSecond = new Array<number>(61).fill(60);
    for (let sec = 59; sec >= 0; sec--)
      nextSecond[sec] = set[sec] === true ? sec : (nextSecond[sec + 1] as number);
  }
  let dayOk = -1;
  let dayChecked = Number.NaN;
  const nextAligned = (target: number): number =>
    slot + Math.ceil((target - slot) / stride) * stride;
  while (b.steps > 0 && b.periods > 0) {
    if (slot >= MAX_WALL) return;
    clockTick(b);
    if (b.steps <= 0) break;
    b.periods--;
    b.steps--;
    const day = Math.floor(slot / DAY_SECONDS);
    if (day !== dayChecked) {
      dayChecked = day;
      dayOk = checkDay(r, day) ? 1 : 0;
    }
    if (dayOk === 0) {
      slot = nextAligned((day + 1) * DAY_SECONDS);
      continue;
    }
    const sod = slot - day * DAY_SECONDS;
    const hour = Math.floor(sod / 3600);
    if (r.hourSet !== null && r.hourSet[hour] !== true) {
      slot = nextAligned(day * DAY_SECONDS + (hour + 1) * 3600);
      continue;
    }
    if (
      freq >= MINUTELY &&
      r.minuteSet !== null &&
      r.minuteSet[Math.floor((sod % 3600) / 60)] !== true
    ) {
      slot = nextAligned(slot - (sod % 60) + 60);
      continue;
    }
    if (freq === SECONDLY && r.secondSet !== null && r.secondSet[sod % 60] !== true) {
      // Every second (INTERVAL=1): straight to the next second of the minute in BYSECOND,
      // or the next minute, in one step; with an INTERVAL, the next aligned slot.
      slot =
        nextSecond === null ? slot + stride : slot - (sod % 60) + (nextSecond[sod % 60] as number);
      continue;
    }
    if (spec.bySetPos !== null) {
      for (const i of setPositions(spec.bySetPos, inner.length)) {
        const wall = slot + (inner[i] as number);
        if (wall >= lower) yield wall;
      }
    } else {
      for (const off of inner) {
        const wall = slot + off;
        if (wall >= lower) yield wall;
      }
    }
    slot += stride;
  }
  b.exhausted = true;
  b.reachedWall = slot;
}

/** First wall second of the period `index` of a FREQ DAILY or coarser rule. */
function periodStartWall(freq: number, index: number): number {
  if (freq === YEARLY) return daysFromCivil(index, 1, 1) * DAY_SECONDS;
  if (freq === MONTHLY)
    return daysFromCivil(Math.floor(index / 12), (index % 12) + 1, 1) * DAY_SECONDS;
  return index * DAY_SECONDS;
}
