/**
 * Test helpers: write expected local date-times compactly. They only format what the test
 * author wrote; nothing here calls the code under test.
 */
import { validateRule, type RecurrenceInput } from "../../../src/recurrence/index.js";

/** `on("1997-09", [2, 3], "09:00")` → `["1997-09-02T09:00:00", "1997-09-03T09:00:00"]`. */
export function on(month: string, days: number[], time = "09:00"): string[] {
  return days.map((d) => `${month}-${String(d).padStart(2, "0")}T${time}:00`);
}

/** Local times of the first `n` occurrences (or all up to 10,000). */
export function locals(input: RecurrenceInput, n = 10_000): string[] {
  return validateRule(input)
    .between(-Infinity, Infinity, n)
    .map((o) => o.local);
}

/** ISO instants of the first `n` occurrences. */
export function instants(input: RecurrenceInput, n = 10_000): string[] {
  return validateRule(input)
    .between(-Infinity, Infinity, n)
    .map((o) => new Date(o.instant).toISOString());
}

/** Range of integers `[from, to]`. */
export function range(from: number, to: number, step = 1): number[] {
  const out: number[] = [];
  for (let i = from; i <= to; i += step) out.push(i);
  return out;
}

/**
 * Most steps one period of an expansion can charge after its budget's last check: the
 * period itself, its days (a year of 366) and one day's candidate times (24 × 60 × 60).
 * A budget of `n` steps never spends more than `n + ONE_PERIOD`.
 */
export const ONE_PERIOD = 1 + 366 + 24 * 60 * 60;
