/**
 * Reading `timestamptz` values sent as text by PostgreSQL, fast (the worker's hot path).
 *
 * The `pg` driver's stock parser (`postgres-date`) runs two or three regular expressions
 * and a `split` per value; a claimed delivery carries several timestamps, so under a burst
 * it was one of the largest parts of the worker's CPU (docs/benchmarks.md, "Worker CPU per
 * delivery"). The text PostgreSQL sends with `DateStyle = ISO` (its default, and what
 * `pg` expects) has one fixed shape for every instant of years 1000–9999 AD in any session
 * time zone: `YYYY-MM-DD HH:MM:SS[.ffffff]±HH[:MM[:SS]]`. {@link parseTimestamptz} reads
 * that shape by character codes and hands anything else (`infinity`, `-infinity`, BC
 * years, years beyond 9999 or before 1000, another `DateStyle`) to the stock parser, so
 * its results are the stock parser's for every input.
 */

/** Value of the `count` decimal digits of `text` at `at`, or −1 if one is not a digit. */
function digits(text: string, at: number, count: number): number {
  let value = 0;
  for (let i = at; i < at + count; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    value = value * 10 + d;
  }
  return value;
}

/**
 * Epoch ms of `text` when it has the shape PostgreSQL sends for a `timestamptz` with
 * `DateStyle = ISO` in any time zone (`2026-12-07 16:17:12.123456+00`, `… 09:00:00-05`,
 * `… 12:00:00+05:30`, `… 12:00:00+00:09:21`) and a year from 1000 to 9999; otherwise
 * null. Fractions of a millisecond are truncated, as the stock parser truncates them.
 */
export function fastTimestamptzMs(text: string): number | null {
  const n = text.length;
  // "YYYY-MM-DD HH:MM:SS" then at least "+HH".
  if (
    n < 22 ||
    text.charCodeAt(4) !== 45 /* - */ ||
    text.charCodeAt(7) !== 45 ||
    text.charCodeAt(10) !== 32 /*   */ ||
    text.charCodeAt(13) !== 58 /* : */ ||
    text.charCodeAt(16) !== 58
  ) {
    return null;
  }
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  if (year < 1000 || month < 1 || day < 1 || hour < 0 || minute < 0 || second < 0) return null;
  let i = 19;
  let ms = 0;
  if (text.charCodeAt(i) === 46 /* . */) {
    i++;
    const start = i;
    while (i < n) {
      const d = text.charCodeAt(i) - 48;
      if (d < 0 || d > 9) break;
      if (i - start < 3) ms = ms * 10 + d;
      i++;
    }
    const read = i - start;
    if (read === 0) return null;
    if (read === 1) ms *= 100;
    else if (read === 2) ms *= 10;
  }
  const sign = text.charCodeAt(i);
  if (sign !== 43 /* + */ && sign !== 45 /* - */) return null;
  const offHours = digits(text, i + 1, 2);
  if (offHours < 0) return null;
  i += 3;
  let offset = offHours * 3_600;
  if (i < n) {
    if (text.charCodeAt(i) !== 58) return null;
    const offMinutes = digits(text, i + 1, 2);
    if (offMinutes < 0) return null;
    offset += offMinutes * 60;
    i += 3;
    if (i < n) {
      if (text.charCodeAt(i) !== 58) return null;
      const offSeconds = digits(text, i + 1, 2);
      if (offSeconds < 0) return null;
      offset += offSeconds;
      i += 3;
    }
  }
  if (i !== n) return null;
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, ms);
  return utc - (sign === 45 ? -offset : offset) * 1_000;
}

/**
 * A `timestamptz` text parser for the `pg` driver: {@link fastTimestamptzMs} when the text
 * has the server's ISO shape, else `fallback` (the driver's stock parser, which also
 * reads `infinity` as `Infinity` and BC years).
 */
export function timestamptzParser<T>(fallback: (text: string) => T): (text: string) => Date | T {
  return (text) => {
    const ms = fastTimestamptzMs(text);
    return ms === null ? fallback(text) : new Date(ms);
  };
}
