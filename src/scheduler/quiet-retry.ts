/**
 * DEL-15 for retries: a retry whose next attempt would fall inside its reminder's quiet
 * window waits for the window's end, as a first attempt due there does
 * (src/scheduler/quiet-hours.ts decides that one when the row is planned). A reminder
 * with `priority: "critical"` is never deferred.
 *
 * The executor asks {@link QuietRetries.defer} after a send failed and the outcome is a
 * retry: it reads the reminder's window (one primary-key read, only on that path, so a
 * healthy send costs nothing), computes the window's end in its zone (DST-correct, the
 * same rule as planning: {@link quietDeferral}) and, when the retry lands inside, records
 * `deferred_until` / reason `QUIET_HOURS` on the row it still holds, fenced like the settle.
 * The settle then writes the window's end as `run_at`. A database error here never loses
 * a delivery: the retry keeps its backoff time and the error is logged.
 */
import type { Logger } from "../observability/logger.js";
import type { Database } from "../store/database.js";
import { reminderQuiet } from "../store/quiet-retries.js";
import { recordQuietRetry } from "../store/deliveries/index.js";
import { quietDeferral } from "./quiet-hours.js";

export interface QuietRetryDeps {
  db: Database;
  logger: Logger;
  owner: string;
}

/** The claimed row a retry is for (what the fence and the lookup need). */
export interface QuietRetryRow {
  id: number;
  attempt: number;
  schedule_id: string;
  reminder_key: string;
}

export class QuietRetries {
  readonly #d: QuietRetryDeps;

  constructor(deps: QuietRetryDeps) {
    this.#d = deps;
  }

  /**
   * The instant a retry of `row` planned for `runAt` waits until instead, or null when it
   * keeps `runAt` (no window, a critical reminder, a time outside the window, the row no
   * longer held, or a database error, which is logged).
   * @param now the "now" written as the row's `updated_at` (the clock's `sqlNow()`; null:
   *   the database's own clock).
   */
  async defer(row: QuietRetryRow, runAt: Date, now: Date | null): Promise<Date | null> {
    try {
      const reminder = await reminderQuiet(this.#d.db, row.schedule_id, row.reminder_key);
      if (!reminder) return null;
      const until = quietDeferral(reminder, runAt.getTime());
      if (!until) return null;
      const held = await recordQuietRetry(this.#d.db, now, {
        id: row.id,
        attempt: row.attempt,
        owner: this.#d.owner,
        until,
      });
      if (!held) return null;
      this.#d.logger.info(
        { deliveryId: row.id, retryAt: runAt.toISOString(), deferredUntil: until.toISOString() },
        "retry falls in the reminder's quiet hours: deferred to the window's end",
      );
      return until;
    } catch (err) {
      this.#d.logger.warn(
        { err, deliveryId: row.id },
        "could not check the quiet window of a retry; it keeps its backoff time",
      );
      return null;
    }
  }
}
