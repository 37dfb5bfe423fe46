/**
 * `dryRunDeliveries`: what the scheduler would plan for an import, without a database.
 */
import { ValidationError } from "../errors/index.js";
import { applyOffset, validateRule, type Recurrence } from "../recurrence/index.js";
import { validated, yieldToEventLoop, IMPORT_SLICE_MS } from "./import.js";
import type { CalendarImport, DryRunDelivery, ImportedSchedule } from "./types.js";
import { isoZ } from "./values.js";

/**
 * Most deliveries one dry run lists (OPS-12). The window is refused before anything is
 * expanded when the upper bound of its deliveries ({@link dryRunUpperBound}) is larger.
 */
export const MAX_DRY_RUN_DELIVERIES = 100_000;
/** Occurrences per `scan` call; the async dry run may give the event loop a turn between. */
const PAGE = 2_000;

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
 * An upper bound of the deliveries a dry run over `[fromMs, toMs)` lists, from each
 * rule's shape alone (`Recurrence.maxOccurrences` × reminders): constant work per event,
 * nothing is expanded. Stops counting once past `stopAbove`.
 */
export function dryRunUpperBound(
  imported: CalendarImport,
  window: { fromMs: number; toMs: number },
  stopAbove = MAX_DRY_RUN_DELIVERIES,
): number {
  let total = 0;
  for (const event of imported.events) {
    const schedule = event.schedule;
    total +=
      recurrenceOf(schedule).maxOccurrences(window.fromMs, window.toMs) * schedule.reminders.length;
    if (total > stopAbove) return total;
  }
  return total;
}

/** The checks of a dry-run window, before any expansion. */
function checkWindow(imported: CalendarImport, window: { fromMs: number; toMs: number }): void {
  const { fromMs, toMs } = window;
  if (!Number.isFinite(fromMs) || !Number.isFinite(toMs) || toMs <= fromMs) {
    throw new ValidationError({
      field: "window",
      message: "must have finite from < to",
      value: window,
    });
  }
  const bound = dryRunUpperBound(imported, window);
  if (bound > MAX_DRY_RUN_DELIVERIES) {
    throw new ValidationError({
      field: "window",
      message: `may hold more than ${MAX_DRY_RUN_DELIVERIES.toLocaleString("en-US")} deliveries (checked before computing any): choose a shorter window`,
    });
  }
}

type Row = DryRunDelivery & { dueMs: number };

/**
 * The deliveries of one event in the window, pushed to `out` one page of `scan` at a time
 * (a step of the generator), resumed where a cap stopped a page.
 */
function* eventDeliveries(
  event: CalendarImport["events"][number],
  fromMs: number,
  toMs: number,
  out: Row[],
): Generator<void, void, undefined> {
  const schedule = event.schedule;
  const recurrence = recurrenceOf(schedule);
  let from = fromMs;
  while (from < toMs) {
    const page = recurrence.scan(from, toMs, PAGE);
    let last = -Infinity;
    for (const occ of page.occurrences) {
      if (occ.instant < from || (page.truncated && occ.instant >= page.throughMs)) continue;
      last = occ.instant;
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
          message: `holds more than ${MAX_DRY_RUN_DELIVERIES.toLocaleString("en-US")} deliveries: choose a shorter window`,
        });
      }
    }
    if (page.truncated) from = Math.max(page.throughMs, from + 1);
    else if (page.occurrences.length >= PAGE) from = last + 1;
    else break;
    yield;
  }
}

function sorted(out: Row[]): DryRunDelivery[] {
  out.sort(
    (a, b) =>
      a.dueMs - b.dueMs ||
      cmp(a.uid, b.uid) ||
      cmp(a.occurrenceAt, b.occurrenceAt) ||
      cmp(a.reminderKey, b.reminderKey),
  );
  return out.map(({ dueMs: _dueMs, ...rest }) => rest);
}

/**
 * Every delivery whose occurrence falls in `[fromMs, toMs)` (epoch ms), computed as the
 * scheduler plans it: occurrences from `Recurrence.scan` (RFC 5545 §3.8.5 expansion),
 * due instants from `applyOffset` (day parts on the wall clock, time parts exact,
 * §3.8.6.3). No misfire policy: past windows are listed as they are.
 *
 * @returns deliveries sorted by `dueAt`, then `uid`, then `occurrenceAt` and `reminderKey`.
 *   `occurrenceAt` is an ISO instant with `Z`, or `YYYY-MM-DD` for all-day schedules;
 *   `recurrenceId` is the RECURRENCE-ID of a moved instance, else null.
 * @throws ValidationError field `window` for an empty or non-finite window, or — before
 *   anything is expanded — when the window may hold more than
 *   {@link MAX_DRY_RUN_DELIVERIES} deliveries (OPS-12).
 */
export function dryRunDeliveries(
  imported: CalendarImport,
  window: { fromMs: number; toMs: number },
): DryRunDelivery[] {
  checkWindow(imported, window);
  const out: Row[] = [];
  for (const event of imported.events) {
    for (const _page of eventDeliveries(event, window.fromMs, window.toMs, out));
  }
  return sorted(out);
}

/**
 * {@link dryRunDeliveries} in slices (OPS-12): after about 10 ms of work the event loop
 * gets a turn, so a large dry run never holds up other requests for long. Same result
 * and errors.
 */
export async function dryRunDeliveriesAsync(
  imported: CalendarImport,
  window: { fromMs: number; toMs: number },
  yieldNow: () => Promise<void> = yieldToEventLoop,
): Promise<DryRunDelivery[]> {
  checkWindow(imported, window);
  const out: Row[] = [];
  let sliceStart = performance.now();
  for (const event of imported.events) {
    for (const _page of eventDeliveries(event, window.fromMs, window.toMs, out)) {
      if (performance.now() - sliceStart >= IMPORT_SLICE_MS) {
        await yieldNow();
        sliceStart = performance.now();
      }
    }
    if (performance.now() - sliceStart >= IMPORT_SLICE_MS) {
      await yieldNow();
      sliceStart = performance.now();
    }
  }
  await yieldNow();
  return sorted(out);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
