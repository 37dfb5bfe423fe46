/**
 * The due-date table (DEL-1): statements that claim, settle and recover deliveries.
 *
 * Every statement takes `$1` = "now" (timestamptz or NULL). NULL means the database
 * clock (`now()`), which is authoritative for due times and leases (OPS-9); tests pin
 * it by passing an instant.
 */
import type { Queryable } from "./database.js";

/** SQL for "now": the pinned instant `$1`, or the database clock. */
const NOW = "coalesce($1::timestamptz, now())";

/**
 * DEL-3: the one admission predicate. A delivery `d` of schedule `s` may be claimed when
 * - the schedule is active (paused, cancelled and invalid schedules send nothing);
 * - the delivery waits (`pending` or `retry`; never `claimed`, `sent`, `dead`,
 *   `in_doubt`, `skipped`, `cancelled`);
 * - no lease holds it (a `pending`/`retry` row has none by CHECK; written defensively);
 * - its due and retry time (`run_at`) has come;
 * - it was not already delivered for this occurrence (`sent_at` is NULL);
 * - its reminder still exists (an edit may have removed it while the row was in flight);
 * - the misfire policy has had its say (REC-6): the schedule has not expired, and a
 *   recurring schedule's row that missed its grace period waits until the misfire sweep
 *   has judged it (marked late to send, or skipped) — so no backlog is sent unjudged.
 * Written NULL-safe: a NULL lease expiry counts as free, and `IS DISTINCT FROM` /
 * `IS NULL` are used where a plain comparison would be NULL (and so false) for NULLs.
 * Used by the claim, the backlog gauge and the next-wake-up query alike.
 */
export const ADMISSION_PREDICATE = `
  s.state = 'active'
  and d.state in ('pending', 'retry')
  and (d.lease_expires_at is null or d.lease_expires_at <= ${NOW})
  and d.run_at <= ${NOW}
  and d.sent_at is null
  and d.state is distinct from 'sent'
  and exists (select 1 from punctual_reminders r
              where r.schedule_id = d.schedule_id and r.key = d.reminder_key)
  and (s.expires_at is null or s.expires_at > ${NOW})
  and (not s.recurring or d.late or d.attempt > 0
       or d.due_at >= ${NOW} - make_interval(secs => s.grace_ms::double precision / 1000))`;

/** The columns a worker needs to send a claimed delivery. */
export interface ClaimedDelivery {
  id: number;
  delivery_key: string;
  schedule_id: string;
  reminder_key: string;
  occurrence_at: Date;
  due_at: Date;
  attempt: number;
  failures: number;
  max_attempts: number;
  channel: string;
  on_lost_lease: "retry" | "in_doubt";
  lease_expires_at: Date;
  late: boolean;
  payload: unknown;
  target: unknown;
  /** The claim statement's "now" (database clock, or the pinned instant in tests). */
  db_now: Date;
}

/**
 * DEL-2: claim due deliveries in one statement.
 *
 * Parameters: $1 now, $2 lease owner (`host#pid#nonce`), $3 lease length ms, $4 limit
 * (the worker's free send slots, never more), $5 channel names this worker can send.
 *
 * Shape and why: a CTE picks admissible rows in a total order (`run_at, id`, served by
 * the partial index `punctual_deliveries_claim`) with `FOR UPDATE OF d SKIP LOCKED`, so
 * concurrent claimers never wait on each other nor take the same row; the UPDATE then
 * sets `claimed`, the lease and `attempt = attempt + 1` (the fencing token) and returns
 * what the send needs, joined from the schedule and reminder, in the same round trip.
 * Alternatives measured on these machines: claiming one row per statement (1–3k rows/s)
 * and SELECT-then-UPDATE in two statements (a second round trip per batch) both lost to
 * this batched form (PGlite 11–18k rows/s, PostgreSQL 20–25k rows/s per worker).
 * `late` is set on the first claim when it happens more than 1 s after the due time
 * (the threshold of `applyMisfire`, LATE_THRESHOLD_MS).
 */
export const CLAIM_SQL = `
with due as (
  select d.id
  from punctual_deliveries d
  join punctual_schedules s on s.id = d.schedule_id
  where ${ADMISSION_PREDICATE}
    and d.channel = any($5::text[])
  order by d.run_at, d.id
  limit $4
  for update of d skip locked
)
update punctual_deliveries d
set state = 'claimed',
    attempt = d.attempt + 1,
    lease_owner = $2,
    lease_expires_at = ${NOW} + make_interval(secs => $3::double precision / 1000),
    claimed_at = ${NOW},
    late = d.late or (d.attempt = 0 and ${NOW} > d.due_at + interval '1 second'),
    updated_at = ${NOW}
from due, punctual_schedules s, punctual_reminders r
where d.id = due.id
  and s.id = d.schedule_id
  and r.schedule_id = d.schedule_id and r.key = d.reminder_key
returning d.id, d.delivery_key, d.schedule_id, d.reminder_key, d.occurrence_at, d.due_at,
          d.attempt, d.failures, d.max_attempts, d.channel, d.on_lost_lease,
          d.lease_expires_at, d.late, s.payload, r.target, ${NOW} as db_now`;

/** Outcome of one send, as the settle statement records it. */
export interface SettleInput {
  id: number;
  /** The claim's attempt number: the fencing token. */
  attempt: number;
  /** New state. */
  state: "sent" | "retry" | "dead" | "in_doubt";
  /** For `retry`: when it is next eligible. */
  runAt: Date | null;
  /** For final states: the reason code. */
  reason: string | null;
  error: string | null;
  /** 1 when this outcome is a real failure (DEL-4), 0 otherwise (sent, rate-limited). */
  failure: 0 | 1;
  startedAt: Date;
  /** Attempt outcome for the audit trail (DEL-14). */
  outcome: "sent" | "transient" | "permanent" | "rate_limited" | "timeout";
  status: number | null;
  messageId: string | null;
}

/**
 * DEL-2 / DEL-14: settle a batch of sends, fenced, and record every attempt.
 *
 * Parameters: $1 now, $2 lease owner, then parallel arrays $3 ids, $4 attempts,
 * $5 states, $6 run_at, $7 reasons, $8 errors, $9 failure increments, $10 started_at,
 * $11 outcomes, $12 statuses, $13 message ids.
 *
 * Invariant: a row changes only if it is still `claimed` by this owner at this attempt
 * (`id`, `attempt`, `state`, `lease_owner` all match). A settle that lost its lease
 * (recovered or reclaimed meanwhile) changes nothing; its attempt is still recorded,
 * with `settled = false`, and the caller logs it. Batched with `unnest` so one round
 * trip settles a whole batch.
 */
export const SETTLE_SQL = `
with input as (
  select * from unnest($3::bigint[], $4::int[], $5::text[], $6::timestamptz[], $7::text[],
                       $8::text[], $9::int[], $10::timestamptz[], $11::text[], $12::int[], $13::text[])
    as u0(id, attempt, state, run_at, reason, error, failure, started_at, outcome, status, message_id)
),
with_gone as (
  -- A retry whose reminder was removed (an edit while it was in flight) or whose schedule
  -- was cancelled meanwhile has nothing left to retry: it ends cancelled.
  select u0.*, not exists (
           select 1 from punctual_deliveries x
           join punctual_schedules s on s.id = x.schedule_id and s.state <> 'cancelled'
           join punctual_reminders r on r.schedule_id = x.schedule_id and r.key = x.reminder_key
           where x.id = u0.id) as gone
  from input u0
),
settled as (
  update punctual_deliveries d
  set state = case when u.state = 'retry' and u.gone then 'cancelled' else u.state end,
      sent_at = case when u.state = 'sent' then ${NOW} end,
      finished_at = case when u.state in ('dead', 'in_doubt') or (u.state = 'retry' and u.gone) then ${NOW} end,
      reason = case when u.state in ('dead', 'in_doubt') then u.reason
                    when u.state = 'retry' and u.gone then 'reminder_removed' end,
      run_at = coalesce(u.run_at, d.run_at),
      last_error = coalesce(u.error, d.last_error),
      failures = d.failures + u.failure,
      lease_owner = null,
      lease_expires_at = null,
      claimed_at = null,
      updated_at = ${NOW}
  from with_gone u
  where d.id = u.id and d.attempt = u.attempt and d.state = 'claimed'
    and d.lease_owner is not distinct from $2
  returning d.id
),
recorded as (
  insert into punctual_attempts
    (delivery_id, attempt, worker, started_at, ended_at, outcome, settled, status, message_id, error)
  select u.id, u.attempt, $2, u.started_at, ${NOW}, u.outcome, s.id is not null, u.status,
         u.message_id, u.error
  from input u left join settled s on s.id = u.id
  where exists (select 1 from punctual_deliveries x where x.id = u.id)
)
select id from settled`;

/**
 * DEL-6: recover claims whose lease expired before they settled (a crashed or paused
 * worker). Parameters: $1 now, $2 limit, $3 retry delay ms.
 *
 * A row whose channel de-duplicates by idempotency key, or whose reminder opted into
 * at-least-once (`on_lost_lease = 'retry'`), goes back to `retry` with the same delivery
 * key (counting one failure, so a delivery that crashes its worker every time ends dead);
 * any other becomes `in_doubt` (at most once): the send may or may not have happened,
 * and only a person can tell. Each recovery is recorded as an attempt `lease_expired`.
 * SKIP LOCKED lets several workers recover at once without waiting on each other.
 */
export const RECOVER_SQL = `
with expired as (
  select d.id, d.lease_owner, d.claimed_at, d.attempt
  from punctual_deliveries d
  where d.state = 'claimed' and d.lease_expires_at <= ${NOW}
  order by d.lease_expires_at, d.id
  limit $2
  for update skip locked
),
recovered as (
  update punctual_deliveries d
  set state = case
        when d.on_lost_lease = 'in_doubt' then 'in_doubt'
        when d.failures + 1 >= d.max_attempts then 'dead'
        else 'retry' end,
      reason = case
        when d.on_lost_lease = 'in_doubt' then 'LEASE_EXPIRED'
        when d.failures + 1 >= d.max_attempts then 'SEND_FAILED' end,
      finished_at = case
        when d.on_lost_lease = 'in_doubt' or d.failures + 1 >= d.max_attempts then ${NOW} end,
      run_at = ${NOW} + make_interval(secs => $3::double precision / 1000),
      failures = d.failures + 1,
      last_error = 'lease expired before the send settled (worker crashed, stalled or lost the database)',
      lease_owner = null,
      lease_expires_at = null,
      claimed_at = null,
      updated_at = ${NOW}
  from expired e
  where d.id = e.id
  returning d.id, d.state, d.delivery_key, d.schedule_id, d.channel
),
recorded as (
  insert into punctual_attempts (delivery_id, attempt, worker, started_at, ended_at, outcome, settled, error)
  select e.id, e.attempt, e.lease_owner, e.claimed_at, ${NOW}, 'lease_expired', true, 'lease expired'
  from expired e join recovered r on r.id = e.id
)
select id, state, delivery_key, schedule_id, channel from recovered`;

/** Release claims this worker never started (graceful shutdown, OPS-6). $1 now, $2 owner, $3 ids, $4 attempts. */
export const RELEASE_SQL = `
update punctual_deliveries d
set state = case when d.attempt - 1 = 0 then 'pending' else 'retry' end,
    attempt = d.attempt - 1,
    lease_owner = null, lease_expires_at = null, claimed_at = null, updated_at = ${NOW}
from unnest($3::bigint[], $4::int[]) as u(id, attempt)
where d.id = u.id and d.attempt = u.attempt and d.state = 'claimed' and d.lease_owner is not distinct from $2
returning d.id`;

/**
 * When the next delivery falls due (for the wake-up timer): the earliest `run_at` among
 * waiting rows of active schedules (ORDER BY … LIMIT 1 walks the claim index and stops
 * at the first row of an active schedule), and the earliest lease expiry.
 * $1 now, $2 channel names.
 */
export const NEXT_WAKE_SQL = `
select
  (select d.run_at from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
    where d.state in ('pending', 'retry') and s.state = 'active' and d.channel = any($2::text[])
      and exists (select 1 from punctual_reminders r
                  where r.schedule_id = d.schedule_id and r.key = d.reminder_key)
      and (s.expires_at is null or s.expires_at > ${NOW})
      and (not s.recurring or d.late or d.attempt > 0
           or d.due_at >= ${NOW} - make_interval(secs => s.grace_ms::double precision / 1000))
    order by d.run_at limit 1) as next_run_at,
  (select min(lease_expires_at) from punctual_deliveries where state = 'claimed') as next_lease_expiry,
  ${NOW} as db_now`;

/** Typed wrapper: runs a statement and returns its rows. */
export async function rows<T>(
  db: Queryable,
  sql: string,
  params: readonly unknown[],
): Promise<T[]> {
  return (await db.query<T>(sql, params)).rows;
}

/**
 * DEL-16: renews the leases of rows this worker holds (prefetched, sending, or waiting
 * for their settle), fenced like the settle: by `id`, `attempt`, `state = 'claimed'` and
 * owner. A lease that already ran out is never revived: once it has expired, recovery
 * may judge the row at any moment, so the holder must give it up (the executor aborts
 * or drops it). Parameters: $1 now, $2 owner, $3 lease ms, $4 ids, $5 attempts.
 * Returns the rows still held, with their new expiry and the statement's "now".
 */
export const RENEW_SQL = `
update punctual_deliveries d
set lease_expires_at = ${NOW} + make_interval(secs => $3::double precision / 1000),
    updated_at = ${NOW}
from unnest($4::bigint[], $5::int[]) as u(id, attempt)
where d.id = u.id and d.attempt = u.attempt and d.state = 'claimed'
  and d.lease_owner is not distinct from $2
  and d.lease_expires_at > ${NOW}
returning d.id, d.lease_expires_at, ${NOW} as db_now`;

/**
 * DEL-16: gives back every row claimed by this owner that it does not hold: the rows of
 * a claim whose reply was lost with its connection (the statement committed, the worker
 * never saw the rows). They return to `pending` / `retry` with their attempt restored,
 * for any worker to claim at once instead of a lease later. The owner id is unique per
 * process start, so no other process's claim can match. Parameters: $1 now, $2 owner,
 * $3 ids the worker holds (never touched).
 */
export const RELEASE_ORPHANS_SQL = `
update punctual_deliveries d
set state = case when d.attempt - 1 = 0 then 'pending' else 'retry' end,
    attempt = d.attempt - 1,
    lease_owner = null, lease_expires_at = null, claimed_at = null, updated_at = ${NOW}
where d.state = 'claimed' and d.lease_owner = $2 and not (d.id = any($3::bigint[]))
returning d.id`;

/** Parameters of {@link claimDeliveries}. */
export interface ClaimParams {
  /** Pinned "now" (tests) or null for the database clock. */
  now: Date | null;
  /** Lease owner (`host#pid#nonce`). */
  owner: string;
  /** Lease length, ms. */
  leaseMs: number;
  /** Most rows to claim. */
  limit: number;
  /** Channels this worker can send. */
  channels: readonly string[];
}

/** DEL-2: runs {@link CLAIM_SQL}. */
export async function claimDeliveries(db: Queryable, p: ClaimParams): Promise<ClaimedDelivery[]> {
  return rows<ClaimedDelivery>(db, CLAIM_SQL, [p.now, p.owner, p.leaseMs, p.limit, p.channels]);
}

/**
 * DEL-2 / DEL-14: runs {@link SETTLE_SQL} for a batch. Returns the ids whose outcome was
 * recorded; any other id of the batch had lost its lease (its attempt is still recorded).
 */
export async function settleDeliveries(
  db: Queryable,
  now: Date | null,
  owner: string,
  batch: readonly SettleInput[],
): Promise<Set<number>> {
  const settled = await rows<{ id: number }>(db, SETTLE_SQL, [
    now,
    owner,
    batch.map((b) => b.id),
    batch.map((b) => b.attempt),
    batch.map((b) => b.state),
    batch.map((b) => b.runAt),
    batch.map((b) => b.reason),
    batch.map((b) => b.error?.slice(0, 2_000) ?? null),
    batch.map((b) => b.failure),
    batch.map((b) => b.startedAt),
    batch.map((b) => b.outcome),
    batch.map((b) => b.status),
    batch.map((b) => b.messageId),
  ]);
  return new Set(settled.map((r) => r.id));
}

/** A row whose lease {@link renewLeases} extended. */
export interface RenewedLease {
  id: number;
  lease_expires_at: Date;
  db_now: Date;
}

/** DEL-16: runs {@link RENEW_SQL}; `held` pairs each id with its claim's attempt. */
export async function renewLeases(
  db: Queryable,
  now: Date | null,
  owner: string,
  leaseMs: number,
  held: ReadonlyArray<{ id: number; attempt: number }>,
): Promise<RenewedLease[]> {
  if (held.length === 0) return [];
  return rows<RenewedLease>(db, RENEW_SQL, [
    now,
    owner,
    leaseMs,
    held.map((h) => h.id),
    held.map((h) => h.attempt),
  ]);
}

/** OPS-6 / DEL-16: runs {@link RELEASE_SQL}: gives back claims this worker will not send. */
export async function releaseClaims(
  db: Queryable,
  now: Date | null,
  owner: string,
  held: ReadonlyArray<{ id: number; attempt: number }>,
): Promise<number[]> {
  if (held.length === 0) return [];
  const released = await rows<{ id: number }>(db, RELEASE_SQL, [
    now,
    owner,
    held.map((h) => h.id),
    held.map((h) => h.attempt),
  ]);
  return released.map((r) => r.id);
}

/** DEL-16: runs {@link RELEASE_ORPHANS_SQL}. Returns the ids given back. */
export async function releaseOrphans(
  db: Queryable,
  now: Date | null,
  owner: string,
  heldIds: readonly number[],
): Promise<number[]> {
  const released = await rows<{ id: number }>(db, RELEASE_ORPHANS_SQL, [now, owner, heldIds]);
  return released.map((r) => r.id);
}

/** A row {@link recoverExpired} moved out of `claimed`. */
export interface RecoveredRow {
  id: number;
  state: "retry" | "in_doubt" | "dead";
  delivery_key: string;
  schedule_id: string;
  channel: string;
}

/** DEL-6: runs {@link RECOVER_SQL}: at most `limit` expired leases, retry after `retryDelayMs`. */
export async function recoverExpired(
  db: Queryable,
  now: Date | null,
  limit: number,
  retryDelayMs: number,
): Promise<RecoveredRow[]> {
  return rows<RecoveredRow>(db, RECOVER_SQL, [now, limit, retryDelayMs]);
}

/** When this worker should next look (see {@link NEXT_WAKE_SQL}). */
export interface NextWake {
  next_run_at: Date | null;
  next_lease_expiry: Date | null;
  db_now: Date;
}

/** Runs {@link NEXT_WAKE_SQL}. */
export async function nextWake(
  db: Queryable,
  now: Date | null,
  channels: readonly string[],
): Promise<NextWake | null> {
  return (await rows<NextWake>(db, NEXT_WAKE_SQL, [now, channels]))[0] ?? null;
}
