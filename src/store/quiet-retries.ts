/**
 * DEL-15: the statements behind a retry that falls inside its reminder's quiet window
 * (src/scheduler/quiet-retry.ts). A planned delivery due inside the window is deferred
 * when it is planned (`INSERT_DELIVERIES_SQL`); a retry's time is only known when its send
 * fails, so the executor reads the reminder's window then and, when the retry would land
 * inside it, records the deferral on the row it still holds before the settle moves
 * `run_at` to the window's end (`RECORD_QUIET_RETRY_SQL` in `deliveries/deferrals.ts`:
 * every write of a delivery row lives in `deliveries/`). This module reads the window.
 */
import type { QuietHours } from "../recurrence/index.js";
import type { Queryable } from "./database.js";
import { columnsOf, firstRow } from "./statement.js";

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

/** DEL-15: runs {@link REMINDER_QUIET_SQL}. */
export function reminderQuiet(
  db: Queryable,
  scheduleId: string,
  reminderKey: string,
): Promise<ReminderQuietRow | null> {
  return firstRow<ReminderQuietRow>(db, REMINDER_QUIET_SQL, [scheduleId, reminderKey]);
}
