/**
 * Realign on edit (DEL-9). When the fields that move occurrences change (DTSTART, zone,
 * rule, RDATE/EXDATE, endsAt, DST policy, reminders), the waiting deliveries of the
 * schedule are brought in line with the new definition inside the caller's transaction:
 * rows whose (reminder, occurrence) is no longer in the new set are deleted, rows whose
 * offset changed move their due time, missing rows are created; rows already claimed,
 * sent, dead, in doubt or skipped are never touched. A recurring series' new rows start
 * at the edit (nothing of the new definition is created in the past and sent late); rows
 * that already existed and were missed follow the misfire policy (REC-6) like any other. Last, the admission columns of
 * every waiting row are rewritten from the edited schedule (held or not, expiry,
 * `stale_at` for a changed grace or recurrence), so the claim never needs the schedule
 * (DEL-3). A reminder removed by the edit has no key in the new set: its waiting rows are
 * deleted (never tried) or cancelled (with attempts) here.
 */
import type { Channel } from "../channels/types.js";
import type { Clock } from "../clock/index.js";
import type { SchedulerOptions } from "../config/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import { parseRule } from "../recurrence/index.js";
import type { Queryable } from "../store/database.js";
import {
  oldestWaiting,
  remindersOf,
  setWatermark,
  type PlanScheduleRow,
} from "../store/planning.js";
import { realignWaiting, removeWaitingNotIn, syncWaiting } from "../store/deliveries/index.js";
import { ruleInputOfRow } from "../definition/index.js";
import { insertDeliveries, planSchedule } from "./plan.js";

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
export async function realignSchedule(
  tx: Queryable,
  schedule: PlanScheduleRow & { state: string },
  deps: RealignDeps,
): Promise<RealignReport> {
  const now = deps.clock.sqlNow();
  const nowMs = schedule.db_now.getTime();
  const parsed = parseRule(ruleInputOfRow(schedule));
  const reminders = await remindersOf(tx, { scheduleIds: [schedule.id] });
  if (!parsed.ok) {
    // Strict validation ran before; a failure here means nothing can be planned.
    const deleted = await removeWaitingNotIn(tx, { now, scheduleId: schedule.id, keys: [] });
    await syncWaiting(tx, { now, scheduleId: schedule.id });
    return { deleted, moved: 0, created: 0 };
  }
  // DEL-9: an edited series takes effect from the edit on. New rows of a recurring series
  // start at now: an occurrence of the new definition before the edit was never in the
  // schedule, so it was not missed and is not sent late. Only rows that already existed
  // keep the misfire grace (REC-6): waiting rows stay, and a row an earlier realign
  // cancelled reopens when due within now − grace. One-offs start from the beginning (an
  // edited one-off in the past is sent late).
  const insertFrom = schedule.recurring ? nowMs : -8.64e15;
  const reopenFrom = schedule.recurring ? nowMs - schedule.grace_ms : -8.64e15;
  const oldest = (await oldestWaiting(tx, { scheduleId: schedule.id }))?.getTime() ?? reopenFrom;
  const checkFrom = Math.min(reopenFrom, oldest);
  const plan = planSchedule(
    { ...schedule, planned_until: new Date(checkFrom) },
    parsed.recurrence,
    reminders,
    deps.channels,
    deps.options,
  );
  const keys = plan.deliveries.map((d) => d.key);
  const deleted = await removeWaitingNotIn(tx, { now, scheduleId: schedule.id, keys });
  const moved = await realignWaiting(tx, {
    now,
    deliveries: plan.deliveries,
    reopenFrom: reopenFrom > -8e15 ? new Date(reopenFrom) : null,
  });
  const fresh = plan.deliveries.filter((d) => d.dueAt.getTime() >= insertFrom);
  const created = await insertDeliveries(tx, now, fresh);
  await setWatermark(tx, {
    scheduleId: schedule.id,
    plannedUntil: new Date(plan.plannedUntil),
    complete: plan.complete,
  });
  await syncWaiting(tx, { now, scheduleId: schedule.id });
  if (deleted + moved + created > 0) {
    deps.logger.info({ scheduleId: schedule.id, deleted, moved, created }, "schedule realigned");
  }
  return { deleted, moved, created };
}
