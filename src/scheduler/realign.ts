/**
 * Realign on edit (DEL-9). When the fields that move occurrences change (DTSTART, zone,
 * rule, RDATE/EXDATE, endsAt, DST policy, reminders), the waiting deliveries of the
 * schedule are brought in line with the new definition inside the caller's transaction:
 * rows whose (reminder, occurrence) is no longer in the new set are deleted, rows whose
 * offset changed move their due time, missing rows are created; rows already claimed,
 * sent, dead, in doubt or skipped are never touched. Missed occurrences of the new set
 * then follow the misfire policy (REC-6) like any other. Last, the admission columns of
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
  OLDEST_WAITING_SQL,
  REALIGN_DELETE_SQL,
  REALIGN_MOVE_SQL,
  REMINDERS_OF_SQL,
  SET_WATERMARK_SQL,
  SYNC_WAITING_SQL,
  type PlanReminderRow,
  type PlanScheduleRow,
} from "../store/planning.js";
import { insertDeliveries, planSchedule, recurrenceInputOf } from "./plan.js";

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

/** Removes the waiting rows not in `keys` (see REALIGN_DELETE_SQL). @returns how many. */
async function removeWaiting(tx: Queryable, now: Date | null, scheduleId: string, keys: string[]) {
  const { rows } = await tx.query<{ removed: number }>(REALIGN_DELETE_SQL, [now, scheduleId, keys]);
  return Number(rows[0]?.removed ?? 0);
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
  const parsed = parseRule(recurrenceInputOf(schedule));
  const { rows: reminders } = await tx.query<PlanReminderRow>(REMINDERS_OF_SQL, [[schedule.id]]);
  if (!parsed.ok) {
    // Strict validation ran before; a failure here means nothing can be planned.
    const deleted = await removeWaiting(tx, now, schedule.id, []);
    await tx.query(SYNC_WAITING_SQL, [now, schedule.id]);
    return { deleted, moved: 0, created: 0 };
  }
  // Where new rows may start: recurring series from now − grace (older occurrences were
  // not missed: they were not in the schedule), one-offs from the beginning (sent late).
  const insertFrom = schedule.recurring ? nowMs - schedule.grace_ms : -8.64e15;
  const { rows: oldestRows } = await tx.query<{ oldest: Date | null }>(OLDEST_WAITING_SQL, [
    schedule.id,
  ]);
  const oldest = oldestRows[0]?.oldest?.getTime() ?? insertFrom;
  const checkFrom = Math.min(insertFrom, oldest);
  const plan = planSchedule(
    { ...schedule, planned_until: new Date(checkFrom) },
    parsed.recurrence,
    reminders,
    deps.channels,
    deps.options,
  );
  const keys = plan.deliveries.map((d) => d.key);
  const deleted = await removeWaiting(tx, now, schedule.id, keys);
  const { rows: movedRows } = await tx.query<{ moved: number }>(REALIGN_MOVE_SQL, [
    now,
    keys,
    plan.deliveries.map((d) => d.dueAt),
    plan.deliveries.map((d) => d.channel),
    plan.deliveries.map((d) => d.onLostLease),
    plan.deliveries.map((d) => d.maxAttempts),
    insertFrom > -8e15 ? new Date(insertFrom) : null,
  ]);
  const moved = Number(movedRows[0]?.moved ?? 0);
  const fresh = plan.deliveries.filter((d) => d.dueAt.getTime() >= insertFrom);
  const created = await insertDeliveries(tx, now, fresh);
  await tx.query(SET_WATERMARK_SQL, [schedule.id, new Date(plan.plannedUntil), plan.complete]);
  await tx.query(SYNC_WAITING_SQL, [now, schedule.id]);
  if (deleted + moved + created > 0) {
    deps.logger.info({ scheduleId: schedule.id, deleted, moved, created }, "schedule realigned");
  }
  return { deleted, moved, created };
}
