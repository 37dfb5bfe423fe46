/**
 * Proleptic Gregorian calendar arithmetic on plain numbers. Days are counted from
 * 1970-01-01 (day 0); a "wall second" is a count of seconds since 1970-01-01T00:00:00 of
 * a wall clock that has no time zone (a floating date-time). Nothing here reads the host
 * time zone or uses `Date`.
 */

/** Seconds in one civil day. */
export const DAY_SECONDS = 86_400;

/** Days since 1970-01-01 of a proleptic Gregorian date (month 1–12). */
export function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const mp = (month + 9) % 12;
  const doy = Math.floor((153 * mp + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}

/** A civil date. */
export interface CivilDate {
  year: number;
  month: number;
  day: number;
}

/** Inverse of {@link daysFromCivil}. */
export function civilFromDays(days: number): CivilDate {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor(
    (doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365,
  );
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  return { year: yoe + era * 400 + (month <= 2 ? 1 : 0), month, day };
}

/** Weekday of a day number: 0 = Monday … 6 = Sunday (RFC 5545 order MO..SU). */
export function weekday(days: number): number {
  return (((days + 3) % 7) + 7) % 7;
}

export function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

export function yearLength(year: number): number {
  return isLeapYear(year) ? 366 : 365;
}

const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

export function monthLength(year: number, month: number): number {
  return month === 2 && isLeapYear(year) ? 29 : (MONTH_DAYS[month - 1] ?? 31);
}

/** Largest day a month can ever have (February: 29). */
export function maxMonthLength(month: number): number {
  return month === 2 ? 29 : (MONTH_DAYS[month - 1] ?? 31);
}

/** First day (day number) of the week that starts on `wkst` and contains `days`. */
export function weekStart(days: number, wkst: number): number {
  return days - ((weekday(days) - wkst + 7) % 7);
}

/** Day number of the first day of week 1 of `year` for week start `wkst` (RFC 5545 §3.3.10 BYWEEKNO, ISO 8601 rule: week 1 holds at least four days of the year). */
export function firstWeekStart(year: number, wkst: number): number {
  return weekStart(daysFromCivil(year, 1, 4), wkst);
}

/** Number of weeks (52 or 53) in the week-numbering year `year`. */
export function weeksInYear(year: number, wkst: number): number {
  return (firstWeekStart(year + 1, wkst) - firstWeekStart(year, wkst)) / 7;
}

/**
 * Week number of a day: `[weekNo, weeksInItsWeekYear]`. A day belongs to the week-numbering
 * year of the fourth day of its week.
 */
export function weekNumber(days: number, wkst: number): [number, number] {
  const ws = weekStart(days, wkst);
  const wy = civilFromDays(ws + 3).year;
  const w1 = firstWeekStart(wy, wkst);
  return [(ws - w1) / 7 + 1, weeksInYear(wy, wkst)];
}

function pad(n: number, width: number): string {
  const s = String(Math.abs(n)).padStart(width, "0");
  return n < 0 ? `-${s}` : s;
}

/** `YYYY-MM-DD` of a day number. */
export function formatDate(days: number): string {
  const c = civilFromDays(days);
  return `${pad(c.year, 4)}-${pad(c.month, 2)}-${pad(c.day, 2)}`;
}

/** `YYYY-MM-DDTHH:mm:ss` of a wall second. */
export function formatWall(wall: number): string {
  const days = Math.floor(wall / DAY_SECONDS);
  const sod = wall - days * DAY_SECONDS;
  const h = Math.floor(sod / 3600);
  const m = Math.floor((sod % 3600) / 60);
  const s = sod % 60;
  return `${formatDate(days)}T${pad(h, 2)}:${pad(m, 2)}:${pad(s, 2)}`;
}

/** Wall second of a civil date-time. */
export function wallOf(year: number, month: number, day: number, h = 0, m = 0, s = 0): number {
  return daysFromCivil(year, month, day) * DAY_SECONDS + h * 3600 + m * 60 + s;
}
