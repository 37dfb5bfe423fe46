/**
 * The pieces of SQL every statement on the delivery rows shares, defined once (DEL-3,
 * DEL-2, OPS-9): the database clock, the admission predicate, the fence of a claimed row
 * and the update that gives a claim back. `d` is always the delivery alias and `$1`
 * always "now".
 */

/**
 * SQL for "now": the pinned instant `$1` (tests, the test clock), or the database clock
 * when `$1` is NULL. The database clock is authoritative for due times and leases (OPS-9),
 * so every store statement that reads the time takes it as `$1` and writes this.
 */
export const NOW = "coalesce($1::timestamptz, now())";

/** SQL for {@link NOW} plus `ms` milliseconds (`ms`: an SQL expression, e.g. `$3`). */
export function msAfterNow(ms: string): string {
  return `${NOW} + make_interval(secs => (${ms})::double precision / 1000)`;
}

/** SQL for {@link NOW} minus `ms` milliseconds (`ms`: an SQL expression, e.g. `$3`). */
export function msBeforeNow(ms: string): string {
  return `${NOW} - make_interval(secs => (${ms})::double precision / 1000)`;
}

/**
 * DEL-3: the one admission predicate, row-local, on a queue row `q` (`punctual_queue`,
 * migration 0050): a delivery may be claimed when
 * - it waits: it has a queue row (only a `pending` / `retry` ledger row that is not a
 *   digest member has one; the rows of a paused, quarantined or cancelled schedule are
 *   `paused` / `cancelled` in the ledger and have none, DEL-10) and no worker holds it
 *   (`lease_owner` is NULL: an expired lease waits for recovery, DEL-6);
 * - its due or retry time (`run_at`) has come;
 * - its schedule's expiry (`expires_at`, copied onto the row) has not passed;
 * - the misfire policy has had its say (REC-6): a never-tried row of a recurring schedule
 *   past its grace period (`stale_at`) waits for the misfire sweep, which marks it late
 *   (clearing `stale_at`) or skips it, so no backlog is sent unjudged.
 * NULL-safe: NULL `expires_at` / `stale_at` mean "no limit" (`is null or …`), where a
 * plain comparison would be NULL and so false. No join: every term reads the queue row.
 * The ledger keeps the queue's admission columns in step through the trigger
 * `punctual_deliveries_queue_sync` (migration 0050).
 *
 * {@link WAITING_PREDICATE} is everything but the due time (the wake-up query looks for
 * the earliest `run_at` among those); {@link ADMISSION_PREDICATE} adds it. Used by the
 * claim, the wake-up query and the delivery counts alike.
 */
export const WAITING_PREDICATE = `
  q.lease_owner is null
  and coalesce(q.expires_at > ${NOW}, true)
  and coalesce(q.stale_at > ${NOW}, true)`;

/** {@link WAITING_PREDICATE} and due now: what the claim may take (DEL-3). */
export const ADMISSION_PREDICATE = `
  q.run_at <= ${NOW}
  and q.lease_owner is null
  and coalesce(q.expires_at > ${NOW}, true)
  and coalesce(q.stale_at > ${NOW}, true)`;

/**
 * DEL-2: the fence of every write after the claim, less the attempt, on the queue row `q`
 * that holds the lease: it is still leased (`lease_owner` set) and by this owner (`owner`:
 * the SQL of the owner parameter). The caller adds `q.id = …` and `q.attempt = …`
 * (decision 4 of docs/architecture.md: all four clauses).
 */
export function heldBy(owner: string): string {
  return `q.lease_owner is not null and q.lease_owner is not distinct from ${owner}`;
}

/**
 * DEL-2 / DEL-10: the ledger row `d` is not held by a committed claim (its queue row has no
 * lease). Statements that change a schedule's waiting rows (pause, resume, cancel) add it,
 * so they neither change nor lock a row a worker holds; a claim still in progress is
 * judged by the trigger `punctual_deliveries_queue_guard` (migration 0050), which waits
 * for it.
 */
export function notHeld(d: string): string {
  return `not exists (select 1 from punctual_queue q where q.id = ${d}.id and q.lease_owner is not null)`;
}

/**
 * DEL-16 / OPS-6 / CH-7: the SET list of the queue row `q` that gives a claim back unsent:
 * its attempt restored (the claim spent nothing), its lease cleared. The ledger row was
 * not written by the claim; {@link REJUDGE_SQL} then judges it against its schedule as it
 * is now (trigger `punctual_deliveries_rewait`). Used by the release of unstarted claims,
 * the release of orphaned claims and the circuit breaker's deferral.
 */
export const GIVE_BACK = `attempt = q.attempt - 1,
    lease_owner = null, lease_expires_at = null, claimed_at = null`;

/**
 * DEL-10: judges ledger rows whose claim was given back ({@link GIVE_BACK}) against their
 * schedule as it is now: a row whose schedule was paused, cancelled or lost its reminder
 * while it was held lands `paused` / `cancelled` (trigger `punctual_deliveries_rewait`),
 * and its queue row goes with it (trigger `punctual_deliveries_queue_sync`). `run_at`
 * moves to `$3` at the earliest (NULL: unchanged). Run after the give-back, in its own
 * statement (the triggers read the queue as the give-back left it). $1 now, $2 ids,
 * $3 earliest run_at.
 */
export const REJUDGE_SQL = `
update punctual_deliveries d
set run_at = greatest(d.run_at, coalesce($3::timestamptz, d.run_at)), updated_at = ${NOW}
where d.id = any($2::bigint[]) and d.state in ('pending', 'retry')`;

/**
 * DEL-15: whether a delivery was claimed late: on its first claim (`d.attempt` the ledger's,
 * before the claim), more than 1 s after its due time or its quiet-hours deferral; once
 * late, always late. `claimedAt`: SQL of the claim's instant.
 */
export function lateAtClaim(claimedAt: string): string {
  return `(d.late or (d.attempt = 0
                      and ${claimedAt} > coalesce(d.deferred_until, d.due_at) + interval '1 second'))`;
}
