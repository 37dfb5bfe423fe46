/**
 * DEL-15: the statements behind a retry that falls inside its reminder's quiet window
 * (src/scheduler/quiet-retry.ts). A planned delivery due inside the window is deferred
 * when it is planned (`INSERT_DELIVERIES_SQL`); a retry's time is only known when its send
 * fails, so the executor reads the reminder's window then and, when the retry would land
 * inside it, records the deferral on the row it still holds before the settle moves
 * `run_at` to the window's end. The write takes `$1` = "now" (NULL: the database clock).
 */
import type { QuietHours } from "../recurrence/index.js";
import type { Queryable } from "./database.js";
import { columnsOf, execute, firstRow } from "./statement.js";

const NOW = "coalesce($1::timestamptz, now())";

/** A reminder's quiet window and priority, as {@link REMINDER_QUIET_SQL} reads them. */
export interface ReminderQuietRow {
  /** The quiet window, or null (none). */
  quiet_hours: QuietHours | null;
  /** `critical` bypasses the window; null: normal. */
  priority: "normal" | "critical" | null;
}

/**
 * The quiet window and priority of one reminder, by primary key. $1 schedule id,
 * $2 reminder key. No row: the reminder is gone (the settle's trigger then puts such a
 * retry where its schedule is).
 */
export const REMINDER_QUIET_SQL = `
select r.quiet_hours, r.priority
from punctual_reminders r
where r.schedule_id = $1::uuid and r.key = $2`;

/** Result columns of {@link REMINDER_QUIET_SQL}. */
export const REMINDER_QUIET_COLUMNS = columnsOf<ReminderQuietRow>()(["quiet_hours", "priority"]);

/**
 * Records a quiet-hours deferral on a claimed row, fenced like the settle: only while it
 * is still `claimed` by this owner at this attempt. $1 now, $2 id, $3 attempt, $4 owner,
 * $5 the window's end. The settle that follows moves `run_at` there; the row then reads
 * like a planned deferral (`deferred_until`, reason `QUIET_HOURS`).
 */
export const RECORD_QUIET_RETRY_SQL = `
update punctual_deliveries d
set deferred_until = $5::timestamptz, deferred_reason = 'QUIET_HOURS', updated_at = ${NOW}
where d.id = $2 and d.attempt = $3 and d.state = 'claimed'
  and d.lease_owner is not distinct from $4`;

/** DEL-15: runs {@link REMINDER_QUIET_SQL}. */
export function reminderQuiet(
  db: Queryable,
  scheduleId: string,
  reminderKey: string,
): Promise<ReminderQuietRow | null> {
  return firstRow<ReminderQuietRow>(db, REMINDER_QUIET_SQL, [scheduleId, reminderKey]);
}

/** DEL-15: runs {@link RECORD_QUIET_RETRY_SQL}; returns whether the row was still held. */
export async function recordQuietRetry(
  db: Queryable,
  now: Date | null,
  p: { id: number; attempt: number; owner: string; until: Date },
): Promise<boolean> {
  return (await execute(db, RECORD_QUIET_RETRY_SQL, [now, p.id, p.attempt, p.owner, p.until])) > 0;
}
