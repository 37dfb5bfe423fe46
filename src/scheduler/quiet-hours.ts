/**
 * DEL-15: where quiet hours take effect. The deferral is decided when a delivery is
 * planned (and re-decided when an edit realigns it, DEL-9): a delivery whose due instant
 * falls inside its reminder's quiet window keeps `due_at` and waits from the window's end
 * (`run_at = deferred_until`, reason `QUIET_HOURS`). Deciding it there keeps the claim,
 * the settle and every process unaware of quiet hours, and the row itself records the
 * decision for the API. A reminder with `priority: "critical"` is never deferred.
 *
 * Retries: a retry's time is set by its backoff (DEL-4) when its send fails; one that
 * would land inside the window waits for its end the same way, recorded the same way
 * (src/scheduler/quiet-retry.ts). Catch-up sends (DEL-17) of a deferred row are judged
 * from the deferred instant.
 */
import { quietHoursEnd } from "../recurrence/index.js";
import type { PlanReminderRow } from "../store/planning.js";

/**
 * The instant a delivery of `reminder` due at `dueMs` (epoch ms) waits until, or null
 * when it is sent at its due time (no window, a critical reminder, or a due instant
 * outside the window).
 */
export function quietDeferral(
  reminder: Pick<PlanReminderRow, "quiet_hours" | "priority">,
  dueMs: number,
): Date | null {
  if (!reminder.quiet_hours || reminder.priority === "critical") return null;
  const end = quietHoursEnd(dueMs, reminder.quiet_hours);
  return end === null || end <= dueMs ? null : new Date(end);
}
