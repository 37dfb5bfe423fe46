/**
 * `dryRunDeliveries`: what the scheduler would plan for an import, without a database.
 */
import { ValidationError } from "../errors/index.js";
import { applyOffset, validateRule, type Recurrence } from "../recurrence/index.js";
import { validated } from "./import.js";
import type { CalendarImport, DryRunDelivery, ImportedSchedule } from "./types.js";
import { isoZ } from "./values.js";

/** Most deliveries one dry run lists. */
export const MAX_DRY_RUN_DELIVERIES = 1_000_000;
const PAGE = 10_000;

function recurrenceOf(schedule: ImportedSchedule): Recurrence {
  const cached = validated.get(schedule);
  if (cached !== undefined) return cached;
  return validateRule({
    dtstart: schedule.dtstart,
    tzid: schedule.tzid,
    rrule: schedule.rrule,
    rdate: schedule.rdate,
    exdate: schedule.exdate,
  });
}

/**
 * Every delivery whose occurrence falls in `[fromMs, toMs)` (epoch ms), computed as the
 * scheduler plans it: occurrences from `Recurrence.between` (RFC 5545 §3.8.5 expansion),
 * due instants from `applyOffset` (day parts on the wall clock, time parts exact,
 * §3.8.6.3). No misfire policy: past windows are listed as they are.
 *
 * @returns deliveries sorted by `dueAt`, then `uid`, then `occurrenceAt` and `reminderKey`.
 *   `occurrenceAt` is an ISO instant with `Z`, or `YYYY-MM-DD` for all-day schedules;
 *   `recurrenceId` is the RECURRENCE-ID of a moved instance, else null.
 * @throws ValidationError field `window` for an empty or non-finite window, or when it
 *   holds more than {@link MAX_DRY_RUN_DELIVERIES} deliveries.
 */
export function dryRunDeliveries(
  imported: CalendarImport,
  window: { fromMs: number; toMs: number },
): DryRunDelivery[] {
  const { fromMs, toMs } = window;
  if (!Number.isFinite(fromMs) || !Number.isFinite(toMs) || toMs <= fromMs) {
    throw new ValidationError({
      field: "window",
      message: "must have finite from < to",
      value: window,
    });
  }
  const out: Array<DryRunDelivery & { dueMs: number }> = [];
  for (const event of imported.events) {
    const schedule = event.schedule;
    const recurrence = recurrenceOf(schedule);
    let from = fromMs;
    for (;;) {
      const page = recurrence.between(from, toMs, PAGE);
      for (const occ of page) {
        const occurrenceIso = isoZ(occ.instant);
        const occurrenceAt = recurrence.dateOnly ? occ.local.slice(0, 10) : occurrenceIso;
        const recurrenceId = event.recurrenceIds[occurrenceIso] ?? null;
        for (const reminder of schedule.reminders) {
          const dueMs = applyOffset(occ, reminder.offset, recurrence.tzid, recurrence.dst);
          out.push({
            uid: event.uid,
            recurrenceId,
            occurrenceAt,
            dueAt: isoZ(dueMs),
            reminderKey: reminder.key,
            dueMs,
          });
        }
        if (out.length > MAX_DRY_RUN_DELIVERIES) {
          throw new ValidationError({
            field: "window",
            message: `holds more than ${MAX_DRY_RUN_DELIVERIES} deliveries: choose a shorter window`,
          });
        }
      }
      if (page.length < PAGE) break;
      from = (page[page.length - 1] as { instant: number }).instant + 1;
    }
  }
  out.sort(
    (a, b) =>
      a.dueMs - b.dueMs ||
      cmp(a.uid, b.uid) ||
      cmp(a.occurrenceAt, b.occurrenceAt) ||
      cmp(a.reminderKey, b.reminderKey),
  );
  return out.map(({ dueMs: _dueMs, ...rest }) => rest);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
