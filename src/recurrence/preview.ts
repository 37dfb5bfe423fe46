/**
 * Preview (REC-7): the next occurrences of a rule, computed by exactly the code the
 * scheduler uses ({@link validateRule} then {@link Recurrence.between}).
 */
import { ValidationError } from "../errors/index.js";
import { parseDateValue } from "./datetime.js";
import { validateRule } from "./recurrence.js";
import type { Recurrence, RecurrenceInput } from "./types.js";
import { getZone } from "./zone.js";

/** Input of {@link preview}: a recurrence and the window and count of occurrences to list. */
export interface PreviewInput extends RecurrenceInput {
  /** Inclusive lower bound: an instant, or a local date-time read in `tzid`. Default: DTSTART. */
  after?: string | null;
  /** Exclusive upper bound, same forms. Default: none. */
  before?: string | null;
  /** Most occurrences returned, 1–10,000; default 10. */
  count?: number;
}

/** One previewed occurrence. */
export interface PreviewItem {
  /** ISO instant in UTC with milliseconds, e.g. `2027-01-04T08:00:00.000Z`. */
  instant: string;
  /** Wall clock in the zone, `YYYY-MM-DDTHH:mm:ss`, or `YYYY-MM-DD` when date-only. */
  local: string;
}

/** Largest `count` accepted by {@link preview}. */
export const MAX_PREVIEW_COUNT = 10_000;

function bound(field: string, text: string, rec: Recurrence): number {
  const parsed = typeof text === "string" ? parseDateValue(text) : null;
  if (parsed === null || parsed.kind === "invalid") {
    throw new ValidationError({
      field,
      message: "must be an instant such as 2027-01-04T08:00:00Z or a local date-time",
      value: text,
    });
  }
  const v = parsed.value;
  if (v.kind === "instant") return v.ms + parsed.fractionMs;
  const zone = getZone(rec.tzid);
  const wall = v.kind === "date" ? v.days * 86_400 : v.wall;
  return (
    (zone.toInstant(wall, { gap: "shift", overlap: "earlier" }) as { ms: number }).ms +
    parsed.fractionMs
  );
}

/**
 * Occurrences in `[after, before)`, ascending, at most `count`.
 * @returns `[{ instant: "2027-01-04T08:00:00.000Z", local: "2027-01-04T09:00:00" }, …]`
 * @throws ValidationError as {@link validateRule} does, or for a bad `after`, `before` or `count`.
 */
export function preview(input: PreviewInput): PreviewItem[] {
  const count = input.count ?? 10;
  if (!Number.isInteger(count) || count < 1 || count > MAX_PREVIEW_COUNT) {
    throw new ValidationError({
      field: "count",
      message: `must be an integer from 1 to ${MAX_PREVIEW_COUNT}`,
      value: count,
    });
  }
  const rec = validateRule(input);
  const from =
    input.after === undefined || input.after === null
      ? rec.first.instant
      : bound("after", input.after, rec);
  const to =
    input.before === undefined || input.before === null
      ? Infinity
      : bound("before", input.before, rec);
  return rec
    .between(from, to, count)
    .map((o) => ({ instant: new Date(o.instant).toISOString(), local: o.local }));
}
