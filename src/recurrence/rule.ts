/**
 * RRULE text → {@link RuleSpec} (RFC 5545 §3.3.10). One parser, two postures: in strict
 * mode every deviation from the RFC throws a {@link ValidationError} naming the part
 * (`rrule.BYMONTHDAY`) and its value; in lenient mode a few unambiguous deviations are
 * repaired and reported as warnings (duplicate UNTIL → earliest, duplicate COUNT →
 * smallest, UNTIL with COUNT → both kept, so the tighter one ends the series; empty parts
 * and `X-` parts ignored). Anything whose meaning is unclear fails in both modes.
 */
import { ValidationError } from "../errors/index.js";
import { maxMonthLength } from "./civil.js";
import { parseDateValue, type DateValue } from "./datetime.js";

/** FREQ values, coarsest first; the index is used for comparisons. */
export const FREQS = [
  "YEARLY",
  "MONTHLY",
  "WEEKLY",
  "DAILY",
  "HOURLY",
  "MINUTELY",
  "SECONDLY",
] as const;
export type Freq = (typeof FREQS)[number];
export const YEARLY = 0;
export const MONTHLY = 1;
export const WEEKLY = 2;
export const DAILY = 3;
export const HOURLY = 4;
export const MINUTELY = 5;
export const SECONDLY = 6;

/** Weekday codes in RFC 5545 order; the index is the weekday number used everywhere (0 = MO). */
export const WEEKDAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"] as const;

/** One BYDAY entry: weekday 0–6 (MO–SU) and ordinal (0 = every such weekday). */
export interface WeekdaySpec {
  weekday: number;
  ordinal: number;
}

/** A parsed RRULE. Lists are sorted and without duplicates; `null` when the part is absent. */
export interface RuleSpec {
  freq: number;
  interval: number;
  count: number | null;
  /** UNTIL values (one in strict mode; lenient keeps every one and uses the earliest). */
  until: DateValue[];
  bySecond: number[] | null;
  byMinute: number[] | null;
  byHour: number[] | null;
  byDay: WeekdaySpec[] | null;
  byMonthDay: number[] | null;
  byYearDay: number[] | null;
  byWeekNo: number[] | null;
  byMonth: number[] | null;
  bySetPos: number[] | null;
  wkst: number;
}

/** Longest RRULE text accepted (characters); bounds parsing work. */
export const MAX_RRULE_LENGTH = 2048;

/**
 * The rule parts that decide which dates match beside FREQ (RFC 5545 §3.3.10): INTERVAL and
 * the BYxxx parts, in the RFC's order.
 */
export const MATCHING_PARTS: readonly string[] = [
  "INTERVAL",
  "BYSECOND",
  "BYMINUTE",
  "BYHOUR",
  "BYDAY",
  "BYMONTHDAY",
  "BYYEARDAY",
  "BYWEEKNO",
  "BYMONTH",
  "BYSETPOS",
];

/** The rule parts RFC 5545 §3.3.10 defines. */
export const KNOWN_PARTS = new Set(["FREQ", "UNTIL", "COUNT", ...MATCHING_PARTS, "WKST"]);

function fail(part: string, message: string, value?: unknown): never {
  throw new ValidationError({ field: part === "" ? "rrule" : `rrule.${part}`, message, value });
}

function parseInteger(
  part: string,
  text: string,
  min: number,
  max: number,
  allowZero = true,
): number {
  const range =
    min < 0 ? `must be between -${max} and ${max} and not 0` : `must be between ${min} and ${max}`;
  if (!/^[+-]?\d+$/.test(text)) fail(part, `must be an integer ${range.slice(8)}`, text);
  // Digits beyond any range are out of range, not "not an integer" (COUNT=1000000000).
  if (text.replace(/^[+-]?0*/, "").length > 9) fail(part, range, text);
  const n = Number(text);
  const abs = Math.abs(n);
  if (!allowZero && n === 0) fail(part, "must not be 0", text);
  if (min < 0 ? abs > max : n < min || n > max) fail(part, range, text);
  return n;
}

function parseIntList(part: string, text: string, min: number, max: number): number[] {
  const values = text.split(",").map((item) => {
    if (item === "") fail(part, "has an empty list item", text);
    return parseInteger(part, item, min, max, min >= 0);
  });
  return [...new Set(values)].sort((a, b) => a - b);
}

function parseWeekday(part: string, text: string): number {
  const i = (WEEKDAYS as readonly string[]).indexOf(text.toUpperCase());
  if (i < 0) fail(part, "must be one of MO, TU, WE, TH, FR, SA, SU", text);
  return i;
}

function parseByDay(text: string): WeekdaySpec[] {
  const seen = new Map<string, WeekdaySpec>();
  for (const item of text.split(",")) {
    const m = /^([+-]?\d+)?([A-Za-z]{2})$/.exec(item);
    if (m === null) fail("BYDAY", "must be a list of [±n]MO…SU", item);
    const weekday = parseWeekday("BYDAY", m[2] as string);
    const ordinal = m[1] === undefined ? 0 : Number(m[1]);
    if (m[1] !== undefined && (ordinal === 0 || Math.abs(ordinal) > 53)) {
      fail("BYDAY", "ordinal must be between -53 and 53 and not 0", item);
    }
    seen.set(`${ordinal}:${weekday}`, { weekday, ordinal });
  }
  return [...seen.values()].sort((a, b) => a.weekday - b.weekday || a.ordinal - b.ordinal);
}

const CUMULATIVE = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];

/** Month (1–12) of a BYYEARDAY value in a year of `len` days; 0 when the day does not exist. */
function monthOfYearDay(yd: number, len: number): number {
  const doy = yd > 0 ? yd : len + yd + 1;
  if (doy < 1 || doy > len) return 0;
  const leap = len === 366 ? 1 : 0;
  for (let m = 12; m >= 1; m--) {
    const start = (CUMULATIVE[m - 1] as number) + (m > 2 ? leap : 0);
    if (doy > start) return m;
  }
  return 0;
}

/** Options for {@link parseRuleText}. */
export interface RuleParseOptions {
  lenient: boolean;
  /** Whether DTSTART is a date (all-day): sub-daily parts are then invalid. */
  dateOnly: boolean;
  warnings: string[];
}

/**
 * Parses RRULE text (RFC 5545 §3.3.10), with or without the `RRULE:` prefix; part names
 * and enumerated values are case-insensitive (RFC 5545 §2). Throws {@link ValidationError}
 * naming the offending part.
 */
export function parseRuleText(input: string, opts: RuleParseOptions): RuleSpec {
  if (input.length > MAX_RRULE_LENGTH)
    fail("", `is longer than ${MAX_RRULE_LENGTH} characters`, input.slice(0, 40));
  let text = input.trim();
  if (/^RRULE:/i.test(text)) text = text.slice(6);
  if (text === "") fail("", "is empty", input);
  const values = new Map<string, string[]>();
  for (const raw of text.split(";")) {
    if (raw.trim() === "") {
      if (opts.lenient) {
        opts.warnings.push("rrule: ignored an empty part");
        continue;
      }
      fail("", "has an empty part (stray ';')", text);
    }
    const eq = raw.indexOf("=");
    if (eq <= 0) fail("", "each part must be NAME=VALUE", raw);
    const name = raw.slice(0, eq).trim().toUpperCase();
    const value = raw.slice(eq + 1).trim();
    if (!KNOWN_PARTS.has(name)) {
      if (opts.lenient && name.startsWith("X-")) {
        opts.warnings.push(`rrule: ignored extension part ${name}`);
        continue;
      }
      fail(
        /^[A-Z0-9-]{1,20}$/.test(name) ? name : "",
        "is not an RRULE part known to RFC 5545",
        raw.slice(0, 60),
      );
    }
    if (value === "") fail(name, "has no value", raw);
    const list = values.get(name);
    if (list === undefined) values.set(name, [value]);
    else {
      const lenientOk =
        opts.lenient && (name === "UNTIL" || name === "COUNT" || list.includes(value));
      if (!lenientOk) fail(name, "appears more than once", value);
      opts.warnings.push(`rrule: duplicate ${name}=${value}; kept the tighter bound`);
      list.push(value);
    }
  }
  const one = (name: string): string | undefined => values.get(name)?.[0];

  const freqText = one("FREQ");
  if (freqText === undefined) fail("FREQ", "is required", text);
  const freq = (FREQS as readonly string[]).indexOf(freqText.toUpperCase());
  if (freq < 0)
    fail(
      "FREQ",
      "must be one of SECONDLY, MINUTELY, HOURLY, DAILY, WEEKLY, MONTHLY, YEARLY",
      freqText,
    );

  const intervalText = one("INTERVAL");
  const interval =
    intervalText === undefined ? 1 : parseInteger("INTERVAL", intervalText, 1, 1_000_000);

  const counts = (values.get("COUNT") ?? []).map((v) => parseInteger("COUNT", v, 1, 100_000_000));
  const count = counts.length === 0 ? null : Math.min(...counts);
  const until: DateValue[] = (values.get("UNTIL") ?? []).map((v) => {
    const parsed = parseDateValue(v);
    if (parsed === null || parsed.kind === "invalid")
      fail("UNTIL", "must be a DATE or DATE-TIME such as 20271231T235959Z", v);
    if (parsed.fractionMs !== 0) fail("UNTIL", "must not have fractional seconds", v);
    return parsed.value;
  });
  if (count !== null && until.length > 0) {
    if (!opts.lenient)
      fail("UNTIL", "must not be used together with COUNT (RFC 5545 §3.3.10)", one("UNTIL"));
    opts.warnings.push("rrule: both UNTIL and COUNT given; the tighter bound ends the series");
  }

  const list = (name: string, min: number, max: number): number[] | null => {
    const v = one(name);
    return v === undefined ? null : parseIntList(name, v, min, max);
  };
  const bySecond = list("BYSECOND", 0, 60);
  const byMinute = list("BYMINUTE", 0, 59);
  const byHour = list("BYHOUR", 0, 23);
  const byMonthDay = list("BYMONTHDAY", -1, 31);
  const byYearDay = list("BYYEARDAY", -1, 366);
  const byWeekNo = list("BYWEEKNO", -1, 53);
  const byMonth = list("BYMONTH", 1, 12);
  const bySetPos = list("BYSETPOS", -1, 366);
  const byDayText = one("BYDAY");
  const byDay = byDayText === undefined ? null : parseByDay(byDayText);
  const wkstText = one("WKST");
  const wkst = wkstText === undefined ? 0 : parseWeekday("WKST", wkstText);

  // RFC 5545 §3.3.10 restrictions.
  if (byDay?.some((d) => d.ordinal !== 0)) {
    if (freq !== MONTHLY && freq !== YEARLY)
      fail("BYDAY", "may carry an ordinal only with FREQ=MONTHLY or YEARLY", byDayText);
    if (freq === YEARLY && byWeekNo !== null)
      fail("BYDAY", "must not carry an ordinal with FREQ=YEARLY and BYWEEKNO", byDayText);
    if (freq === MONTHLY || byMonth !== null) {
      const bad = byDay.find((d) => Math.abs(d.ordinal) > 5);
      if (bad !== undefined)
        fail("BYDAY", "ordinal within a month must be between -5 and 5", byDayText);
    }
  }
  if (byMonthDay !== null && freq === WEEKLY)
    fail("BYMONTHDAY", "must not be used with FREQ=WEEKLY", one("BYMONTHDAY"));
  if (byYearDay !== null && (freq === DAILY || freq === WEEKLY || freq === MONTHLY)) {
    fail("BYYEARDAY", `must not be used with FREQ=${FREQS[freq]}`, one("BYYEARDAY"));
  }
  if (byWeekNo !== null && freq !== YEARLY)
    fail("BYWEEKNO", "may be used only with FREQ=YEARLY", one("BYWEEKNO"));
  if (bySetPos !== null) {
    const others = [bySecond, byMinute, byHour, byDay, byMonthDay, byYearDay, byWeekNo, byMonth];
    if (others.every((x) => x === null))
      fail("BYSETPOS", "must be used together with another BYxxx part", one("BYSETPOS"));
  }
  if (opts.dateOnly) {
    if (freq >= HOURLY) fail("FREQ", "must be DAILY or coarser when DTSTART is a date", freqText);
    for (const name of ["BYHOUR", "BYMINUTE", "BYSECOND"]) {
      if (values.has(name))
        fail(name, "must not be used when DTSTART is a date (RFC 5545 §3.3.10)", one(name));
    }
  }
  // Statically impossible month/day combinations (e.g. BYMONTH=2;BYMONTHDAY=30).
  if (byMonthDay !== null && byMonth !== null) {
    const possible = byMonth.some((m) => byMonthDay.some((d) => Math.abs(d) <= maxMonthLength(m)));
    if (!possible)
      fail("BYMONTHDAY", `never occurs in BYMONTH=${byMonth.join(",")}`, one("BYMONTHDAY"));
  }

  if (byYearDay !== null && byMonth !== null) {
    const possible = byYearDay.some((yd) =>
      [365, 366].some((len) => byMonth.includes(monthOfYearDay(yd, len))),
    );
    if (!possible)
      fail("BYYEARDAY", `never falls in BYMONTH=${byMonth.join(",")}`, one("BYYEARDAY"));
  }
  if (bySetPos !== null && freq >= HOURLY) {
    // Size of the set inside one period of a sub-daily rule.
    const size =
      freq === HOURLY
        ? (byMinute?.length ?? 1) * (bySecond?.length ?? 1)
        : freq === MINUTELY
          ? (bySecond?.length ?? 1)
          : 1;
    if (bySetPos.every((p) => Math.abs(p) > size)) {
      fail(
        "BYSETPOS",
        `never selects anything: each ${FREQS[freq]} period holds ${size} time(s)`,
        one("BYSETPOS"),
      );
    }
  }

  return {
    freq,
    interval,
    count,
    until,
    bySecond,
    byMinute,
    byHour,
    byDay,
    byMonthDay,
    byYearDay,
    byWeekNo,
    byMonth,
    bySetPos,
    wkst,
  };
}
