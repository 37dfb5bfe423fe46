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
 * DEL-3: the one admission predicate, row-local: a delivery `d` may be claimed when
 * - it waits (`pending` or `retry`). The waiting rows of a paused or quarantined schedule
 *   are `paused` and those of a cancelled schedule `cancelled`, moved in the transaction
 *   that changes the schedule (DEL-10); rows of a removed reminder are deleted or
 *   cancelled by the edit that removes it (DEL-9); a claimed row that comes back to
 *   waiting lands where its schedule is now (trigger `punctual_deliveries_rewait`);
 * - its due or retry time (`run_at`) has come;
 * - its schedule's expiry (`expires_at`, copied onto the row) has not passed;
 * - the misfire policy has had its say (REC-6): a never-tried row of a recurring schedule
 *   past its grace period (`stale_at`) waits for the misfire sweep, which marks it late
 *   (clearing `stale_at`) or skips it, so no backlog is sent unjudged.
 * NULL-safe: NULL `expires_at` / `stale_at` mean "no limit" (`is null or …`), where a
 * plain comparison would be NULL and so false. The rest of what DEL-3 lists is implied
 * by the state through CHECK constraints: a waiting row holds no lease
 * (`punctual_deliveries_lease`) and was not sent (`punctual_deliveries_sent_at`; one row
 * per occurrence by the unique key). No join: every term reads the row itself.
 *
 * {@link WAITING_PREDICATE} is everything but the due time (the wake-up query looks for
 * the earliest `run_at` among those); {@link ADMISSION_PREDICATE} adds it. Used by the
 * claim, the wake-up query and the delivery counts alike.
 */
export const WAITING_PREDICATE = `
  d.claimable_at is not null
  and coalesce(d.expires_at > ${NOW}, true)
  and coalesce(d.stale_at > ${NOW}, true)`;

/** {@link WAITING_PREDICATE} and due now: what the claim may take (DEL-3). */
export const ADMISSION_PREDICATE = `
  d.claimable_at <= ${NOW}
  and coalesce(d.expires_at > ${NOW}, true)
  and coalesce(d.stale_at > ${NOW}, true)`;

/**
 * DEL-2: the fence of every write after the claim, less the attempt: the row is still
 * `claimed` and by this owner (`owner`: the SQL of the owner parameter). The caller adds
 * `d.id = …` and `d.attempt = …` (decision 4 of docs/architecture.md: all four clauses).
 */
export function heldBy(owner: string): string {
  return `d.state = 'claimed' and d.lease_owner is not distinct from ${owner}`;
}

/**
 * DEL-16 / OPS-6 / CH-7: the SET list that gives a claim back unsent: the row returns to
 * `pending` (never tried) or `retry` with its attempt restored (the claim spent nothing),
 * its lease cleared. A row whose schedule changed meanwhile lands where the schedule is
 * now (trigger `punctual_deliveries_rewait`). Used by the release of unstarted claims,
 * the release of orphaned claims and the circuit breaker's deferral.
 */
export const GIVE_BACK = `state = case when d.attempt - 1 = 0 then 'pending' else 'retry' end,
    attempt = d.attempt - 1,
    lease_owner = null, lease_expires_at = null, claimed_at = null, updated_at = ${NOW}`;
