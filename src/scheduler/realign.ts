/**
 * Realign on edit (DEL-9). When the fields that move occurrences change (DTSTART, zone,
 * rule, RDATE/EXDATE, endsAt, DST policy, reminders), the waiting deliveries of the
 * schedule are brought in line with the new definition inside the caller's transaction:
 * rows whose (reminder, occurrence) is no longer in the new set are deleted, rows whose
 * offset changed move their due time, missing rows are created; rows already claimed,
 * sent, dead, in doubt or skipped are never touched. A recurring series' new rows start
 * at the edit (nothing of the new definition is created in the past and sent late); rows
 * that already existed keep their day: a waiting row whose occurrence and reminder the
 * edited schedule still has moves in place (same key) to its new due time wherever that
 * lies — before now minus the grace period (a reminder 15 minutes before 09:00 made an
 * hour before, edited at 08:30) or past the planning window — and is then judged by the
 * misfire policy (REC-6) like any missed row: sent late, or skipped `stale` and recorded,
 * never dropped silently. A tried row (`retry`) moves the same way and keeps its backoff:
 * its next try is at its retry time or its new due time, whichever is later (DEL-4). Last,
 * the admission columns of every waiting row are rewritten from the edited schedule (held
 * or not, expiry, `stale_at` for a changed grace or recurrence), so the claim never needs
 * the schedule (DEL-3). A reminder removed by the edit, or an occurrence (EXDATE, a
 * shortened COUNT, a changed rule), has no key in the new set: its waiting rows are
 * deleted (never tried) or cancelled with reason `realigned` (with attempts) here.
 */
import type { Channel } from "../channels/types.js";
import type { Clock } from "../clock/index.js";
import type { SchedulerOptions } from "../config/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import { parseRule } from "../recurrence/index.js";
import type { Queryable } from "../store/database.js";
import {
  oldestWaitingMany,
  remindersOf,
  setWatermarks,
  type PlanReminderRow,
  type PlanScheduleRow,
  type SetWatermarkParams,
} from "../store/planning.js";
import {
  realignWaiting,
  removeWaitingNotInMany,
  syncWaitingMany,
  waitingNotInMany,
  type RealignedDelivery,
  type WaitingNotInRow,
} from "../store/deliveries/index.js";
import { ruleInputOfRow } from "../definition/index.js";
import type { Recurrence } from "../recurrence/types.js";
import {
  insertDeliveries,
  lostLeasePolicy,
  plannedDelivery,
  planSchedule,
  type PlannedDelivery,
} from "./plan.js";

/**
 * Longest stretch, in ms, that {@link realignSchedules} plans before it lets the event
 * loop run (OPS-12: an import realigns hundreds of schedules per chunk).
 */
export const REALIGN_SLICE_MS = 20;

export interface RealignDeps {
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  options: SchedulerOptions;
  channels: ReadonlyMap<string, Channel>;
}

/** What a realign changed. */
export interface RealignReport {
  deleted: number;
  moved: number;
  created: number;
}

/**
 * Realigns one schedule (already updated and locked in `tx`).
 * @param schedule the updated row, with `db_now`.
 */
export function realignSchedule(
  tx: Queryable,
  schedule: PlanScheduleRow & { state: string },
  deps: RealignDeps,
): Promise<RealignReport> {
  return realignSchedules(tx, [schedule], deps);
}

/**
 * Realigns many schedules (each already updated and locked in `tx`) with a fixed number
 * of statements whatever their count (an import's chunk, API-5): the same rules as one by
 * one, the rows read and written for all of them at once. Between schedules the event
 * loop gets a turn when planning has held it for {@link REALIGN_SLICE_MS} (OPS-12).
 * @param schedules the updated rows, each with `db_now`.
 * @returns what changed, summed over the schedules.
 */
export async function realignSchedules(
  tx: Queryable,
  schedules: ReadonlyArray<PlanScheduleRow & { state: string }>,
  deps: RealignDeps,
): Promise<RealignReport> {
  if (schedules.length === 0) return { deleted: 0, moved: 0, created: 0 };
  const now = deps.clock.sqlNow();
  const scheduleIds = schedules.map((s) => s.id);
  const allReminders = await remindersOf(tx, { scheduleIds });
  const remindersBy = new Map<string, PlanReminderRow[]>();
  for (const r of allReminders) {
    const list = remindersBy.get(r.schedule_id);
    if (list) list.push(r);
    else remindersBy.set(r.schedule_id, [r]);
  }
  const oldestBy = await oldestWaitingMany(tx, { scheduleIds });
  const keys: string[] = [];
  // Moves are grouped by their reopen bound (one statement per distinct bound; an import's
  // schedules share one or two).
  const movesBy = new Map<number, RealignedDelivery[]>();
  const fresh: PlannedDelivery[] = [];
  const marks: SetWatermarkParams[] = [];
  const recurrences = new Map<string, Recurrence>();
  let sliceStart = performance.now();
  for (const schedule of schedules) {
    const parsed = parseRule(ruleInputOfRow(schedule));
    // Strict validation ran before; a failure here means nothing can be planned: no keys,
    // so every waiting row of the schedule goes.
    if (!parsed.ok) continue;
    recurrences.set(schedule.id, parsed.recurrence);
    const nowMs = schedule.db_now.getTime();
    // DEL-9: an edited series takes effect from the edit on. New rows of a recurring series
    // start at now: an occurrence of the new definition before the edit was never in the
    // schedule, so it was not missed and is not sent late. Only rows that already existed
    // keep the misfire grace (REC-6): waiting rows stay, and a row an earlier realign
    // cancelled reopens when due within now − grace. One-offs start from the beginning (an
    // edited one-off in the past is sent late).
    const insertFrom = schedule.recurring ? nowMs : -8.64e15;
    const reopenFrom = schedule.recurring ? nowMs - schedule.grace_ms : -8.64e15;
    const oldest = oldestBy.get(schedule.id)?.getTime() ?? reopenFrom;
    const checkFrom = Math.min(reopenFrom, oldest);
    const plan = planSchedule(
      { ...schedule, planned_until: new Date(checkFrom) },
      parsed.recurrence,
      remindersBy.get(schedule.id) ?? [],
      deps.channels,
      deps.options,
    );
    for (const d of plan.deliveries) keys.push(d.key);
    const moves = movesBy.get(reopenFrom);
    if (moves) moves.push(...plan.deliveries);
    else movesBy.set(reopenFrom, [...plan.deliveries]);
    for (const d of plan.deliveries) if (d.dueAt.getTime() >= insertFrom) fresh.push(d);
    marks.push({
      scheduleId: schedule.id,
      plannedUntil: new Date(plan.plannedUntil),
      complete: plan.complete,
    });
    if (performance.now() - sliceStart >= REALIGN_SLICE_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
  }
  // REC-6: a waiting row the window left out whose occurrence stays keeps its day.
  const placed = await placeWaiting(
    await waitingNotInMany(tx, { scheduleIds, keys }),
    recurrences,
    remindersBy,
    deps.channels,
  );
  for (const d of placed) keys.push(d.key);
  const deleted = await removeWaitingNotInMany(tx, { now, scheduleIds, keys });
  let moved = 0;
  if (placed.length > 0) {
    moved += await realignWaiting(tx, { now, deliveries: placed, reopenFrom: null });
  }
  for (const [reopenFrom, deliveries] of movesBy) {
    moved += await realignWaiting(tx, {
      now,
      deliveries,
      reopenFrom: reopenFrom > -8e15 ? new Date(reopenFrom) : null,
    });
  }
  const created = await insertDeliveries(tx, now, fresh);
  if (marks.length > 0) await setWatermarks(tx, { marks });
  await syncWaitingMany(tx, { now, scheduleIds });
  if (deleted + moved + created > 0) {
    deps.logger.info(
      schedules.length === 1
        ? { scheduleId: scheduleIds[0], deleted, moved, created }
        : { schedules: schedules.length, deleted, moved, created },
      "schedule realigned",
    );
  }
  return { deleted, moved, created };
}

/**
 * DEL-9 / REC-6: places in the edited schedules the waiting rows their realign window did
 * not plan ({@link waitingNotInMany}): a row keeps its day when its reminder is still on
 * the schedule and its occurrence instant is still in the edited set (its delivery key
 * names the instant, so an occurrence the edit moved is another occurrence, and the row of
 * the old one goes). Each such row becomes the delivery planning would write for it —
 * same key, the due time from the reminder's offset as it is now, even one already past
 * or beyond the planning window — and moves in place; a row not placed is removed by the
 * caller (DEL-9). One bounded expansion per row (`scan` of its own instant, OPS-12), the
 * event loop given a turn every {@link REALIGN_SLICE_MS}.
 * @param recurrences the edited recurrence of each schedule (absent: not parsed, nothing placed).
 * @param remindersBy the reminders of each schedule as edited.
 * @returns the deliveries of the rows placed.
 */
export async function placeWaiting(
  rows: readonly WaitingNotInRow[],
  recurrences: ReadonlyMap<string, Recurrence>,
  remindersBy: ReadonlyMap<string, readonly PlanReminderRow[]>,
  channels: ReadonlyMap<string, Channel>,
): Promise<PlannedDelivery[]> {
  const placed: PlannedDelivery[] = [];
  let sliceStart = performance.now();
  for (const row of rows) {
    if (performance.now() - sliceStart >= REALIGN_SLICE_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
    const recurrence = recurrences.get(row.schedule_id);
    const reminder = remindersBy.get(row.schedule_id)?.find((r) => r.key === row.reminder_key);
    if (!recurrence || !reminder) continue;
    const at = row.occurrence_at.getTime();
    const [occurrence] = recurrence.scan(at, at + 1, 1).occurrences;
    if (!occurrence || occurrence.instant !== at) continue;
    const policy = lostLeasePolicy(reminder, channels.get(reminder.channel));
    const delivery = plannedDelivery(row.schedule_id, reminder, occurrence, recurrence, policy);
    // A row keyed otherwise (not by this occurrence) is not this occurrence's: not placed.
    if (delivery.key === row.delivery_key) placed.push(delivery);
  }
  return placed;
}
