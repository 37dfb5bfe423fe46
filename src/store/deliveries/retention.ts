/**
 * Retention (OPS-12): finished delivery rows and old attempt rows are deleted in bounded
 * batches, oldest first, each through an index so a batch stops at its limit. Dead and
 * in-doubt rows stay until a person acts. `$1` is "now" (NULL: the database clock).
 */
import type { Queryable } from "../database.js";
import { execute } from "../statement.js";
import { msBeforeNow } from "./sql.js";

/**
 * Retention: deletes finished rows (sent, skipped, cancelled) older than the retention
 * period, in bounded batches, oldest first (index `punctual_deliveries_finished_at`, so
 * a batch stops at its limit), then deleted by primary key (`= any(array(…))`: never a
 * join that could read the table). Dead and in-doubt rows stay until a person acts.
 * $1 now, $2 retention ms, $3 limit.
 */
export const RETENTION_SQL = `
with old as (
  select id from punctual_deliveries
  where state in ('sent', 'skipped', 'cancelled')
    and updated_at < ${msBeforeNow("$2")}
  order by updated_at, id limit $3
  for update skip locked
)
delete from punctual_deliveries d where d.id = any(array(select id from old))`;

/**
 * Retention of the attempt log: deletes attempt rows that ended more than $2 ms ago, in a
 * bounded batch, oldest first (index `punctual_attempts_ended_at`). Rows of deliveries
 * that are still open keep their attempts only as long as this allows too: the log is
 * an audit trail with its own horizon. $1 now, $2 retention ms, $3 limit
 */
export const DELETE_OLD_ATTEMPTS_SQL = `
delete from punctual_attempts a where a.id = any(array(
  select id from punctual_attempts
  where ended_at < ${msBeforeNow("$2")}
  order by ended_at limit $3))`;

/** Runs {@link RETENTION_SQL}: deletes at most `limit` finished rows older than `retentionMs`. */
export async function deleteFinished(
  db: Queryable,
  now: Date | null,
  retentionMs: number,
  limit: number,
): Promise<number> {
  return execute(db, RETENTION_SQL, [now, retentionMs, limit]);
}

/** Runs {@link DELETE_OLD_ATTEMPTS_SQL}; returns how many attempt rows it deleted. */
export function deleteOldAttempts(
  db: Queryable,
  p: { now: Date | null; retentionMs: number; limit: number },
): Promise<number> {
  return execute(db, DELETE_OLD_ATTEMPTS_SQL, [p.now, p.retentionMs, p.limit]);
}
