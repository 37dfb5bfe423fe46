/**
 * RRULE text editing (RFC 5545 §3.3.10), for the iCalendar importer (API-5): lenient
 * repairs of exported rules, the rule as a list of parts and back, the notation tidied
 * (names and values upper-cased, UNTIL rewritten by the caller), and a rule moved by whole
 * days and wall seconds (a `RANGE=THISANDFUTURE` override). Text in, text out: the rule's
 * meaning is checked by `validateRule`.
 */

import { KNOWN_PARTS } from "./rule.js";

/** An RRULE as its parts in order, name (upper case) → value as written ("" without `=`). */
export type RuleParts = Map<string, string>;

/** Splits an RRULE text (`FREQ=WEEKLY;COUNT=3`) into its parts, in order. */
export function ruleParts(rrule: string): RuleParts {
  const rule: RuleParts = new Map();
  for (const p of rrule.split(";")) {
    const eq = p.indexOf("=");
    rule.set(eq === -1 ? p : p.slice(0, eq), eq === -1 ? "" : p.slice(eq + 1));
  }
  return rule;
}

/** Joins {@link ruleParts} back into RRULE text. */
export function formatRuleParts(rule: RuleParts): string {
  return [...rule].map(([key, v]) => (v === "" ? key : `${key}=${v}`)).join(";");
}

/**
 * The RRULE in strict notation: an `RRULE:` prefix removed, white space inside parts
 * removed, empty parts dropped, names and values upper-cased; the value of UNTIL is
 * rewritten by `until` (given the value as written). Null when no part is left.
 */
export function tidyRuleText(raw: string, until: (value: string) => string): string | null {
  const parts = raw
    .replace(/^RRULE:/i, "")
    .split(";")
    .map((p) => p.replace(/\s+/g, ""))
    .filter((p) => p !== "");
  if (parts.length === 0) return null;
  return parts
    .map((p) => {
      const eq = p.indexOf("=");
      if (eq === -1) return p.toUpperCase();
      const key = p.slice(0, eq).toUpperCase();
      const value = p.slice(eq + 1);
      return key === "UNTIL" ? `UNTIL=${until(value)}` : `${key}=${value.toUpperCase()}`;
    })
    .join(";");
}

const WEEKDAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"];

/**
 * Rewrites `rule` in place for a series moved by `shift` (whole days, then wall seconds):
 * BYDAY of a WEEKLY or DAILY rule turns with the days. False (the rule left as it was, or
 * partly turned) when the rule cannot follow the move: a time-of-day part with a move in
 * seconds, or a day-of-month/year, week number, set position or month part, or an ordinal
 * BYDAY, with a move in days.
 */
export function shiftRuleParts(rule: RuleParts, shift: { days: number; seconds: number }): boolean {
  if (shift.seconds !== 0 && ["BYHOUR", "BYMINUTE", "BYSECOND"].some((p) => rule.has(p)))
    return false;
  if (shift.days === 0) return true;
  if (["BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYSETPOS", "BYMONTH"].some((p) => rule.has(p)))
    return false;
  const byday = rule.get("BYDAY");
  if (byday === undefined) return true;
  const freq = rule.get("FREQ");
  if (freq !== "WEEKLY" && freq !== "DAILY") return false;
  const out: string[] = [];
  for (const d of byday.split(",")) {
    const i = WEEKDAYS.indexOf(d);
    if (i === -1) return false;
    out.push(WEEKDAYS[(((i + shift.days) % 7) + 7) % 7] as string);
  }
  rule.set("BYDAY", out.join(","));
  return true;
}

/** What {@link repairRuleText} changed in an RRULE text, for an import warning. */
export interface RuleRepair {
  /** The rule without `RRULE:` prefixes and without the dropped parts (parts `;`-joined). */
  text: string;
  /**
   * How many leading `RRULE:` prefixes were removed. The value of an iCalendar RRULE
   * property has none, so there any count above 0 is a doubled prefix.
   */
  prefixes: number;
  /** The parts left out, as written (trimmed): unknown names, `X-` extensions, text without `=`. */
  dropped: string[];
  /**
   * Parts whose name is one or two letters off a known part (`UNTL`, `CONT`): a typo whose
   * meaning is unclear, so nothing is dropped for them — a caller should refuse the rule.
   */
  misspelt: string[];
}

/** Edit distance between two short strings (part names), capped at 3. */
function nameDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2) return 3;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row.push(
        Math.min(
          (prev[j] as number) + 1,
          (row[j - 1] as number) + 1,
          (prev[j - 1] as number) + cost,
        ),
      );
    }
    prev = row;
  }
  return Math.min(3, prev[b.length] as number);
}

/**
 * Lenient repairs of RRULE text as calendar exports write it (used by the iCalendar
 * importer, API-5): every leading `RRULE:` prefix goes (Google writes `RRULE:RRULE:…`),
 * and parts that are not RFC 5545 §3.3.10 rule parts — unknown names, `X-` extensions,
 * text without `=` — are left out and returned in `dropped`. Empty parts go silently.
 * Known parts are kept as written; their values are checked later by `validateRule`.
 * A name one or two letters off a known part is not dropped but reported in `misspelt`.
 */
export function repairRuleText(input: string): RuleRepair {
  let text = input.trim();
  let prefixes = 0;
  while (/^RRULE:/i.test(text)) {
    text = text.slice(6).trimStart();
    prefixes++;
  }
  const kept: string[] = [];
  const dropped: string[] = [];
  const misspelt: string[] = [];
  for (const raw of text.split(";")) {
    const part = raw.trim();
    if (part === "") continue;
    const eq = part.indexOf("=");
    const name = eq <= 0 ? "" : part.slice(0, eq).trim().toUpperCase();
    if (KNOWN_PARTS.has(name)) kept.push(part);
    else if (
      name.length >= 3 &&
      !name.startsWith("X-") &&
      [...KNOWN_PARTS].some((known) => nameDistance(name, known) <= (name.length >= 5 ? 2 : 1))
    )
      misspelt.push(part);
    else dropped.push(part);
  }
  return { text: kept.join(";"), prefixes, dropped, misspelt };
}
