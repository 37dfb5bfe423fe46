/**
 * The admission columns of a waiting delivery (DEL-3, DEL-10, REC-6), as SQL expressions
 * shared by every statement that writes them: planning inserts, edits (realign), pause,
 * resume, quarantine, revive, redrive. Each statement that changes what admission depends
 * on rewrites these columns on the affected rows in the same transaction, so the claim
 * never joins the schedule (see ADMISSION_PREDICATE in `sql.ts`).
 *
 * Aliases: `d` is the delivery, the schedule alias is a parameter; `NOW` is "now".
 */
import { notHeld, NOW } from "./sql.js";

/**
 * `stale_at` of a waiting row: for a never-tried row of a recurring schedule that the
 * misfire policy has not judged (`not late`), its due time plus the grace period; past
 * it the row waits for the misfire sweep. NULL otherwise: one-offs (sent late, REC-6),
 * rows judged late, rows tried at least once (a redrive always has attempts). A row
 * deferred by quiet hours (DEL-15) counts its grace from `deferred_until`.
 * @param s alias of a relation with the schedule's `recurring` and `grace_ms`.
 * @param dueAt SQL for the row's due time (default: its deferral, else `d.due_at`).
 */
export function staleAtSql(
  s: string,
  dueAt = "coalesce(d.deferred_until, d.due_at)",
  attempt = "d.attempt",
  late = "d.late",
) {
  return `case when ${s}.recurring and ${attempt} = 0 and not ${late}
    then ${dueAt} + make_interval(secs => ${s}.grace_ms::double precision / 1000) end`;
}

/**
 * The waiting state a row of schedule `s` has: `paused` (held, not claimable) unless the
 * schedule is active; an active schedule's held row goes back to `pending` when never
 * tried, else `retry`; other waiting rows keep theirs.
 */
export function waitingStateSql(s: string): string {
  return `case when ${s}.state <> 'active' then 'paused'
    when d.state = 'paused' then case when d.attempt = 0 then 'pending' else 'retry' end
    else d.state end`;
}

/**
 * Brings the waiting rows (`pending`, `retry`, `paused`) of the schedules in relation
 * `s` (columns `id`, `state`, `expires_at`, `recurring`, `grace_ms`) in line with them:
 * state (held or not), expiry, staleness. Touches only rows that change. The whole
 * UPDATE, for a statement or a CTE of a statement that changes the schedules (pause,
 * resume, quarantine): `with changed as (update punctual_schedules …)
 * ${syncWaitingSql("c", "changed c")}`. Ends with the WHERE clause, so the caller may add
 * `and …` and a RETURNING list.
 * @param from the FROM item that binds `s` (a table with alias, or a CTE name with alias).
 */
export function syncWaitingSql(s: string, from: string): string {
  return `update punctual_deliveries d
  set state = ${waitingStateSql(s)},
    expires_at = ${s}.expires_at,
    stale_at = ${staleAtSql(s)},
    updated_at = ${NOW}
  from ${from}
  where d.schedule_id = ${s}.id and d.state in ('pending', 'retry', 'paused')
    and (d.state, d.expires_at, d.stale_at) is distinct from
        (${waitingStateSql(s)}, ${s}.expires_at, ${staleAtSql(s)})
    and ${notHeld("d")}`;
}

/**
 * DEL-10: cancels the waiting rows (`pending`, `retry`, `paused`) of the schedules in
 * relation `c` (column `id`): state `cancelled`, reason `schedule_cancelled`. A `claimed`
 * row is in flight and left alone (a retry of it ends `cancelled` through the trigger
 * `punctual_deliveries_rewait`). The whole UPDATE, for a CTE of the statement that
 * cancels the schedule; ends with the WHERE clause.
 * @param from the FROM item that binds `c`.
 */
export function cancelWaitingSql(c: string, from: string): string {
  return `update punctual_deliveries d
  set state = 'cancelled', reason = 'schedule_cancelled', finished_at = ${NOW}, updated_at = ${NOW}
  from ${from}
  where d.schedule_id = ${c}.id and d.state in ('pending', 'retry', 'paused') and ${notHeld("d")}`;
}

/**
 * API-5 / DEL-10: reopens the rows of the revived schedules in relation `r` (columns `id`,
 * `expires_at`, `recurring`, `grace_ms`) that were cancelled with them and are not yet past
 * the grace period: `pending` again (same keys), with the schedule's expiry and grace.
 * The whole UPDATE, for the statement that revives the schedule.
 * @param from the FROM item that binds `r`.
 */
export function reviveCancelledSql(r: string, from: string): string {
  return `update punctual_deliveries d
set state = 'pending', finished_at = null, reason = null, expires_at = ${r}.expires_at,
    stale_at = ${staleAtSql(r)}, updated_at = ${NOW}
from ${from}
where d.schedule_id = ${r}.id and d.state = 'cancelled' and d.reason = 'schedule_cancelled'
  and d.due_at >= ${NOW} - make_interval(secs => ${r}.grace_ms::double precision / 1000)`;
}
