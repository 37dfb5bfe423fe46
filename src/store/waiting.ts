/**
 * The admission columns of a waiting delivery (DEL-3, DEL-10, REC-6), as SQL expressions
 * shared by every statement that writes them: planning inserts, edits (realign), pause,
 * resume, quarantine, revive, redrive. Each statement that changes what admission depends
 * on rewrites these columns on the affected rows in the same transaction, so the claim
 * never joins the schedule (see ADMISSION_PREDICATE in `deliveries.ts`).
 *
 * Aliases: `d` is the delivery, the schedule alias is a parameter; `NOW` is "now".
 */

const NOW = "coalesce($1::timestamptz, now())";

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
 * state (held or not), expiry, staleness. Touches only rows that change. Meant as the
 * body of an UPDATE or a CTE: `update punctual_deliveries d ${syncWaitingSql("s", from)}`.
 * @param from the FROM item that binds `s` (a table with alias, or a CTE name with alias).
 */
export function syncWaitingSql(s: string, from: string): string {
  return `set state = ${waitingStateSql(s)},
    expires_at = ${s}.expires_at,
    stale_at = ${staleAtSql(s)},
    updated_at = ${NOW}
  from ${from}
  where d.schedule_id = ${s}.id and d.state in ('pending', 'retry', 'paused')
    and (d.state, d.expires_at, d.stale_at) is distinct from
        (${waitingStateSql(s)}, ${s}.expires_at, ${staleAtSql(s)})`;
}
