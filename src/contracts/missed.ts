/**
 * OPS-13 / API-9: a schedule's missed occurrences as `GET /v1/schedules/{id}` returns them
 * (`missed`), and `scheduler.schedules.get(id).describe()` (`missedSummary`, `missed`).
 */

/** An occurrence the misfire policy (REC-6) or the expiry skipped. */
export interface MissedOccurrenceView {
  deliveryId: number;
  reminderKey: string;
  /** The occurrence, ISO 8601 UTC. */
  occurrenceAt: string;
  /** When its reminder was due, ISO 8601 UTC. */
  dueAt: string;
  /** `stale` (missed beyond its grace) or `expired` (past the schedule's expiry). */
  reason: string;
}

/**
 * What the rule called for in a bounded window, beside what was recorded. Counts are of
 * deliveries: one per occurrence and reminder, whose due instant lies in `[from, to]`. Triggered sends
 * (not occurrences of the rule) are left out; backfilled ones count.
 */
export interface MissedOccurrencesSummary {
  /**
   * Start of the window, ISO 8601 UTC: {@link MISSED_WINDOW_MS} before `to`, and for a
   * series not before the schedule was created (it plans nothing earlier).
   */
  from: string;
  /** End of the window: now, ISO 8601 UTC. */
  to: string;
  /** Deliveries the stored rule and reminders call for, due in the window. */
  expected: number;
  /** False when the expansion stopped at its bound: `expected` is then a lower bound. */
  complete: boolean;
  /** Sent. */
  sent: number;
  /** Skipped, by reason (`stale`: missed beyond the grace; `expired`: past the expiry). */
  skipped: Record<string, number>;
  /** Waiting (pending, retry, claimed or paused): not sent yet, not missed either. */
  waiting: number;
  /** Ended unsent after trying: `dead` or `in_doubt`. */
  failed: number;
  /** Cancelled. */
  cancelled: number;
  /**
   * Expected but with no delivery row in the window (an occurrence the current rule has
   * and nothing planned, e.g. one before an edit moved the series, or a row deleted by
   * retention); never below 0.
   */
  unrecorded: number;
}

/** `missed` of `GET /v1/schedules/{id}`: the summary and the most recent missed occurrences. */
export interface MissedOccurrencesView extends MissedOccurrencesSummary {
  /** The most recent skipped occurrences (at most 20, any age), newest first. */
  items: MissedOccurrenceView[];
}

/** The window of {@link MissedOccurrencesSummary}: 7 days, ms. */
export const MISSED_WINDOW_MS = 7 * 86_400_000;

/** Most occurrences expanded for one summary (OPS-12); past it `complete` is false. */
export const MISSED_MAX_OCCURRENCES = 10_000;
