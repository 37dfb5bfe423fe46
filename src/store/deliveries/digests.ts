/**
 * Digests (DEL-19): the deliveries of one digest key (per tenant and channel) that fall due
 * within `windowMs` of the first are sent as one message. Members are ordinary delivery
 * rows (planned, cancelled, paused, realigned like any other) that carry their digest key
 * (migration 0048 fills it on insert from the reminder's `digest`) and wait outside the
 * claim index. The digest sweep then, per digest:
 *
 * 1. forms it ({@link FORM_DIGESTS_SQL}) once its first member's due time + window has
 *    come, or as soon as `maxItems` members are due: a `punctual_digests` row is inserted
 *    already `claimed` by the forming worker (lease, attempt 1), and its members move
 *    `pending`/`retry` → `grouped` with its id — membership is frozen here, so a member
 *    cancelled or edited before this statement is not an item, and a member is in one
 *    digest only (the state and the row lock decide, `FOR UPDATE SKIP LOCKED`);
 * 2. sends it once (the digest id is the idempotency key) and settles it
 *    ({@link SETTLE_DIGEST_SQL}), fenced by id + attempt + `claimed` + owner like a
 *    delivery's settle: the digest and every grouped member change in one statement;
 * 3. or, when the lease ran out first, recovery ({@link RECOVER_DIGESTS_SQL}) retries it
 *    with the same id and members (an idempotent channel, or at-least-once) or makes the
 *    digest and all its members `in_doubt` together.
 *
 * Every statement takes `$1` = "now" (NULL: the database clock, OPS-9).
 */
import type { ReminderTemplate } from "../../channels/template.js";
import type { Database, Queryable } from "../database.js";
import {
  COUNT_BUSY_SQL,
  LOCK_BUCKET_SQL,
  paceSlots,
  TOKENS_NOW,
  type BucketRow,
} from "../rate-limits.js";
import { columnsOf, execute, firstRow, rows } from "../statement.js";
import { DELIVERY_IDENTITY_KEYS, type DeliveryIdentity } from "../schedules.js";
import { msAfterNow, msBeforeNow, NOW } from "./sql.js";

/** A digest this worker holds (formed or re-claimed), as the send needs it. */
export interface ClaimedDigest {
  id: string;
  tenant: string;
  digest_key: string;
  channel: string;
  attempt: number;
  failures: number;
  max_attempts: number;
  on_lost_lease: "retry" | "in_doubt";
  opened_at: Date;
  member_count: number;
  /** DEL-13: the members' limiter (`tenant/key`), or null (no limit applies). */
  limiter: string | null;
  /** DEL-13: the send instant of a token the digest paid for ahead of time, or null. */
  slot_at: Date | null;
  /** DEL-13: Retry-After deferrals granted before this try (no attempt spent). */
  deferrals: number;
  /** When the digest's first try began (null: none yet); the deferral budget's age counts from it. */
  first_attempt_at: Date | null;
  lease_expires_at: Date;
  db_now: Date;
}

/** The columns of a claimed digest (the claims' result columns are built from it). */
const CLAIMED_DIGEST_KEYS = columnsOf<ClaimedDigest>()([
  "id",
  "tenant",
  "digest_key",
  "channel",
  "attempt",
  "failures",
  "max_attempts",
  "on_lost_lease",
  "opened_at",
  "member_count",
  "limiter",
  "slot_at",
  "deferrals",
  "first_attempt_at",
  "lease_expires_at",
  "db_now",
]);

const CLAIMED_DIGEST_RETURNING = `g.id, g.tenant, g.digest_key, g.channel, g.attempt, g.failures,
  g.max_attempts, g.on_lost_lease, g.opened_at, g.member_count, g.limiter, g.slot_at,
  g.deferrals, g.first_attempt_at, g.lease_expires_at, ${NOW} as db_now`;

/**
 * The advisory lock that makes one worker at a time form digests (cluster-wide on
 * PostgreSQL; a PGlite process is alone with its database). Transaction-scoped: take it
 * in the transaction that runs {@link FORM_DIGESTS_SQL}, in a statement before it, so that
 * statement's snapshot sees every digest the previous holder formed. Without it, two
 * workers forming at once could each take part of one key's due members (never the same
 * member twice: the row locks decide) and send one key's window as two messages.
 * No parameters; one row, `locked` true when this transaction holds the lock.
 */
export const DIGEST_FORM_LOCK_SQL = `select pg_try_advisory_xact_lock(hashtext('punctual.digests.form')) as locked`;

/** Result columns of {@link DIGEST_FORM_LOCK_SQL}. */
export const DIGEST_FORM_LOCK_COLUMNS = columnsOf<{ locked: boolean }>()(["locked"]);

/**
 * DEL-19: forms the digests that are ready and claims them for this worker.
 *
 * Parameters: $1 now, $2 lease owner, $3 lease ms, $4 most digests to form, $5 channel
 * names this worker can send.
 *
 * The due members (`pending`/`retry` with a digest key, `run_at` come, not expired, not
 * past their grace — the admission predicate of DEL-3 on the digest index) are locked
 * `FOR UPDATE SKIP LOCKED` (a member an edit holds waits for the next digest) and grouped
 * by (tenant, channel, key), oldest first. A group's first member opens its window
 * (`opened_at`; its reminder's `windowMs` and `maxItems` are the group's); the group is
 * ready when `opened_at + window` has come or `maxItems` of its members fall due inside
 * the window; its items are the members due inside the window, oldest first, at most
 * `maxItems` (later ones open the next digest). One statement inserts the digest rows
 * (`claimed`, attempt 1, lease from the database clock) and moves the items to `grouped`
 * with the digest id (their attempt + 1: the digest's try is theirs; `late` as a claim
 * sets it against the window's end). Returns the digests formed.
 *
 * Invariant: a member joins at most one digest (it leaves `pending`/`retry` in the same
 * statement, under its row lock); a member not `pending`/`retry` now (cancelled, paused,
 * moved to a later due time by an edit) is no item.
 */
export const FORM_DIGESTS_SQL = `
with waiting as (
  select d.id, d.digest_tenant, d.channel, d.digest_key, d.run_at, d.digest_window_ms,
         d.digest_max_items, d.max_attempts, d.on_lost_lease, d.limiter
  from punctual_deliveries d
  where d.digest_key is not null and d.state in ('pending', 'retry')
    and d.run_at <= ${NOW}
    and coalesce(d.expires_at > ${NOW}, true)
    and coalesce(d.stale_at > ${NOW}, true)
    and coalesce(d.channel = any($5::text[]), false)
  for update of d skip locked
),
ranked as (
  select w.*,
         first_value(w.run_at) over g as first_at,
         first_value(w.digest_window_ms) over g as window_ms,
         first_value(w.digest_max_items) over g as max_items,
         first_value(w.max_attempts) over g as group_max_attempts,
         first_value(w.on_lost_lease) over g as group_on_lost_lease,
         first_value(w.limiter) over g as group_limiter,
         row_number() over g as rn
  from waiting w
  window g as (partition by w.digest_tenant, w.channel, w.digest_key order by w.run_at, w.id)
),
inside as (
  select r.* from ranked r
  where r.run_at < r.first_at + make_interval(secs => r.window_ms::double precision / 1000)
    and r.rn <= r.max_items
),
ready as materialized (
  select 'dg_' || replace(gen_random_uuid()::text, '-', '') as digest_id, x.*
  from (
    select i.digest_tenant, i.channel, i.digest_key, min(i.first_at) as first_at,
           min(i.window_ms) as window_ms, min(i.max_items) as max_items,
           min(i.group_max_attempts) as max_attempts, min(i.group_on_lost_lease) as on_lost_lease,
           min(i.group_limiter) as limiter,
           count(*)::int as members
    from inside i
    group by i.digest_tenant, i.channel, i.digest_key
    having min(i.first_at) + make_interval(secs => min(i.window_ms)::double precision / 1000) <= ${NOW}
        or count(*) >= min(i.max_items)
    order by min(i.first_at), i.digest_tenant, i.channel, i.digest_key
    limit $4
  ) x
),
inserted as (
  insert into punctual_digests as g
    (id, tenant, digest_key, channel, state, opened_at, window_ms, max_items, member_count,
     attempt, failures, max_attempts, on_lost_lease, limiter, run_at, lease_owner,
     lease_expires_at, claimed_at, created_at, updated_at)
  select r.digest_id, r.digest_tenant, r.digest_key, r.channel, 'claimed', r.first_at,
         r.window_ms, r.max_items, r.members, 1, 0, r.max_attempts, r.on_lost_lease, r.limiter,
         ${NOW}, $2, ${msAfterNow("$3")}, ${NOW}, ${NOW}, ${NOW}
  from ready r
  returning ${CLAIMED_DIGEST_RETURNING}
),
grouped as (
  update punctual_deliveries d
  set state = 'grouped',
      digest_id = r.digest_id,
      attempt = d.attempt + 1,
      late = d.late or (d.attempt = 0 and ${NOW} > r.first_at
               + make_interval(secs => r.window_ms::double precision / 1000) + interval '1 second'),
      stale_at = null,
      updated_at = ${NOW}
  from inside i
  join ready r on r.digest_tenant = i.digest_tenant and r.channel = i.channel
              and r.digest_key = i.digest_key
  where d.id = i.id
  returning d.id
)
select g.*, (select count(*) from grouped)::int as grouped_count from inserted g
order by g.opened_at, g.id`;

/** One row of {@link FORM_DIGESTS_SQL}. */
export type FormedDigestRow = ClaimedDigest & { grouped_count: number };

/** Result columns of {@link FORM_DIGESTS_SQL}. */
export const FORM_DIGESTS_COLUMNS = columnsOf<FormedDigestRow>()([
  ...CLAIMED_DIGEST_KEYS,
  "grouped_count",
] as const);

/**
 * DEL-19: claims digests waiting to retry (their members stay `grouped`: the same items,
 * the same id). Parameters: $1 now, $2 owner, $3 lease ms, $4 limit, $5 channel names.
 * `FOR UPDATE SKIP LOCKED` on the retry index: concurrent workers never take the same one.
 * Each member's `attempt` counts the try with the digest's (DEL-14: the attempt a member
 * records for this try is its own next number).
 */
export const CLAIM_DIGEST_RETRIES_SQL = `
with due as (
  select g.id from punctual_digests g
  where g.state = 'retry' and g.run_at <= ${NOW} and coalesce(g.channel = any($5::text[]), false)
  order by g.run_at, g.id
  limit $4
  for update of g skip locked
),
claimed as (
  update punctual_digests g
  set state = 'claimed', attempt = g.attempt + 1, lease_owner = $2,
      lease_expires_at = ${msAfterNow("$3")}, claimed_at = ${NOW}, updated_at = ${NOW},
      holds_slot = false, deferred_reason = null, deferred_until = null
  where g.id in (select id from due)
  returning ${CLAIMED_DIGEST_RETURNING}
),
members as (
  update punctual_deliveries d
  set attempt = d.attempt + 1, updated_at = ${NOW}
  from claimed c
  where d.digest_id = c.id and d.state = 'grouped'
  returning d.id
)
select c.* from claimed c
order by c.id`;

/** Result columns of {@link CLAIM_DIGEST_RETRIES_SQL}. */
export const CLAIM_DIGEST_RETRIES_COLUMNS = CLAIMED_DIGEST_KEYS;

/** One item of a digest: a member delivery and what its message says about it. */
export interface DigestItemRow extends DeliveryIdentity {
  recipient_id: string | null;
  /** Whether the member was late: its digest was formed more than 1 s past its window's end. */
  late: boolean;
  title: string | null;
  payload: unknown;
  tzid: string;
  target: unknown;
  template: ReminderTemplate | null;
}

/** Result columns of {@link DIGEST_ITEMS_SQL}. */
export const DIGEST_ITEMS_COLUMNS = columnsOf<DigestItemRow>()([
  ...DELIVERY_IDENTITY_KEYS,
  "recipient_id",
  "late",
  "title",
  "payload",
  "tzid",
  "target",
  "template",
]);

/**
 * DEL-19: the items of digest $1 (its members, due order), with their schedule's title,
 * payload and zone and their reminder's target and template as they are now.
 */
export const DIGEST_ITEMS_SQL = `
select d.id, d.delivery_key, d.schedule_id, d.reminder_key, d.occurrence_at, d.due_at,
       d.recipient_id, d.late, s.title, s.payload, s.tzid, r.target, r.template
from punctual_deliveries d
join punctual_schedules s on s.id = d.schedule_id
left join punctual_reminders r on r.schedule_id = d.schedule_id and r.key = d.reminder_key
where d.digest_id = $1 and d.state = 'grouped'
order by d.run_at, d.id`;

/** The outcome of one send of a digest. */
export interface DigestSettleInput {
  id: string;
  /** The claim's attempt: the fencing token. */
  attempt: number;
  /** `skipped`: a digest for a recipient without a target or opted out (API-11, API-13). */
  state: "sent" | "retry" | "dead" | "in_doubt" | "skipped";
  runAt: Date | null;
  reason: string | null;
  error: string | null;
  failure: 0 | 1;
  startedAt: Date;
  status: number | null;
  messageId: string | null;
  /**
   * DEL-14: the try's outcome as an attempt records it (`transient`, `permanent`,
   * `timeout`, `rate_limited`, `sent`); null when no try was made (nothing recorded).
   */
  outcome: string | null;
  /** DEL-13: 1 when this outcome is a Retry-After deferral (no attempt spent); 0 otherwise. */
  deferral: 0 | 1;
}

/**
 * DEL-2 / DEL-19: the fence of a claimed digest's settle, release and deferral, on alias
 * `g`: its id, the attempt it was claimed at, still claimed, by this owner. $2 owner, $3
 * id, $4 attempt.
 */
const DIGEST_FENCE = "g.id = $3 and g.attempt = $4 and g.state = 'claimed' and g.lease_owner = $2";

/**
 * The tail of a statement that gives a claimed digest back unsent (released, or deferred):
 * the attempt its grouped members took is given back with it (a member whose failures
 * already count that attempt keeps it), and the digest's id is returned. `given` names
 * the CTE that updated the digest and returns its `id`.
 */
function membersGivenBack(given: string): string {
  return `members as (
  update punctual_deliveries d
  set attempt = d.attempt - 1, updated_at = ${NOW}
  from ${given} r
  where d.digest_id = r.id and d.state = 'grouped' and d.attempt > d.failures
  returning d.id
)
select r.id from ${given} r`;
}

/**
 * DEL-19 / DEL-2 / DEL-14: settles one digest, fenced by id, attempt, `claimed` and owner,
 * and gives its outcome to every `grouped` member in the same statement: `sent` (the
 * sending attempt kept on each row, as a delivery's own), `dead` or `in_doubt` with the
 * reason; on `retry` the members stay grouped for the next try of the same digest, each
 * counting the failure (`failures`, `last_error`) as the digest does.
 *
 * Every try that did not send is recorded for each member as a row of
 * `punctual_attempts` (its outcome `$13`: transient, permanent, timeout, rate_limited),
 * with the member's own number for that try (a member's attempt counts with its digest's
 * from its forming: claims and give-backs move both), so its attempts and explanation show
 * each failed try of its digest; `settled` is false when the settle was fenced out (the
 * digest was recovered meanwhile), and the row is then recorded for every member of the
 * digest, whatever its state now. `$13` NULL records nothing (no try was made: a digest
 * skipped before its send).
 *
 * DEL-13: a Retry-After deferral (`$14` 1) is counted in `deferrals` of the digest and of
 * each member, not in `failures`, and leaves `attempt` as the claim made it (attempts
 * spent = `attempt − deferrals`), as a delivery's settle does; the digest records
 * `RETRY_AFTER` until its `run_at` for explain. Any settle clears its concurrency slot and
 * a paid token.
 *
 * Parameters: $1 now, $2 owner, $3 id, $4 attempt, $5 state, $6 run_at, $7 reason,
 * $8 error, $9 failure increment, $10 started_at, $11 status, $12 message id, $13 outcome,
 * $14 deferral (0 or 1).
 * Returns one row: `settled` (0 when the lease was lost: nothing changed) and `members`
 * (members that left `grouped`).
 */
export const SETTLE_DIGEST_SQL = `
with settled as (
  update punctual_digests g
  set state = $5::text,
      sent_at = case when $5::text = 'sent' then ${NOW} end,
      finished_at = case when $5::text in ('dead', 'in_doubt', 'skipped') then ${NOW} end,
      reason = case when $5::text in ('dead', 'in_doubt', 'skipped') then $7::text end,
      run_at = coalesce($6::timestamptz, g.run_at),
      last_error = coalesce($8::text, g.last_error),
      failures = g.failures + $9::int,
      lease_owner = null, lease_expires_at = null, claimed_at = null,
      sent_by = case when $5::text = 'sent' then $2 end,
      send_status = case when $5::text = 'sent' then $11::int end,
      send_message_id = case when $5::text = 'sent' then $12::text end,
      deferrals = g.deferrals + $14::int,
      first_attempt_at = coalesce(g.first_attempt_at, $10::timestamptz),
      deferred_reason = case when $5::text = 'retry' and $14::int = 1 then 'RETRY_AFTER' end,
      deferred_until = case when $5::text = 'retry' and $14::int = 1 then $6::timestamptz end,
      holds_slot = false, slot_at = null,
      updated_at = ${NOW}
  where ${DIGEST_FENCE}
  returning g.id, g.state
),
members as (
  update punctual_deliveries d
  set state = case when s.state = 'retry' then 'grouped' else s.state end,
      sent_at = case when s.state = 'sent' then ${NOW} end,
      finished_at = case when s.state in ('dead', 'in_doubt', 'skipped') then ${NOW} end,
      reason = case when s.state in ('dead', 'in_doubt', 'skipped') then $7::text end,
      last_error = coalesce($8::text, d.last_error),
      failures = d.failures + $9::int,
      deferrals = d.deferrals + $14::int,
      first_attempt_at = coalesce(d.first_attempt_at, $10::timestamptz),
      sent_by = case when s.state = 'sent' then $2 end,
      send_started_at = case when s.state = 'sent' then $10::timestamptz end,
      send_status = case when s.state = 'sent' then $11::int end,
      send_message_id = case when s.state = 'sent' then $12::text end,
      updated_at = ${NOW}
  from settled s
  where d.digest_id = s.id and d.state = 'grouped'
  returning d.id, d.state
),
recorded as (
  insert into punctual_attempts
    (delivery_id, attempt, worker, started_at, ended_at, outcome, settled, status, message_id, error)
  select d.id, d.attempt - (g.attempt - $4::int), $2, $10::timestamptz, ${NOW}, $13::text,
         exists (select 1 from settled), $11::int, $12::text, $8::text
  from punctual_deliveries d join punctual_digests g on g.id = $3
  where $13::text is not null and d.digest_id = $3
    and (not exists (select 1 from settled) or d.state = 'grouped')
    and not (exists (select 1 from settled) and $5::text = 'sent' and $8::text is null)
)
select (select count(*) from settled)::int as settled,
       (select count(*) from members m where m.state <> 'grouped')::int as members`;

/** The row of {@link SETTLE_DIGEST_SQL}. */
export interface DigestSettled {
  settled: number;
  members: number;
}

/** Result columns of {@link SETTLE_DIGEST_SQL}. */
export const SETTLE_DIGEST_COLUMNS = columnsOf<DigestSettled>()(["settled", "members"]);

/**
 * DEL-19 / DEL-16: gives a digest back unsent (its lease too short to start, shutdown):
 * `retry` now with its attempt restored (its members' too), its members still grouped
 * (the same items go out under the same id). Fenced like the settle. $1 now, $2 owner,
 * $3 id, $4 attempt.
 */
export const RELEASE_DIGEST_SQL = `
with released as (
  update punctual_digests g
  set state = 'retry', attempt = g.attempt - 1, run_at = ${NOW},
      lease_owner = null, lease_expires_at = null, claimed_at = null, updated_at = ${NOW}
  where ${DIGEST_FENCE}
  returning g.id
),
${membersGivenBack("released")}`;

/** Result columns of {@link RELEASE_DIGEST_SQL}. */
export const RELEASE_DIGEST_COLUMNS = columnsOf<{ id: string }>()(["id"]);

/**
 * DEL-13 / CH-7 / DEL-19: gives a claimed digest back unsent to wait for its limiter's next
 * token or concurrency slot (`RATE_LIMITED`) or its host's circuit (`CIRCUIT_OPEN`):
 * `retry` at `$5` (not before now) with its attempt restored, its members' too (no attempt
 * spent, no deferral counted), its members still grouped (the same items go out under the
 * same id: nothing is formed again), the reason and the instant recorded for explain, its
 * lease released. Fenced like the settle. $1 now, $2 owner, $3 id, $4 attempt, $5 until,
 * $6 reason, $7 the send instant of a token it paid for (NULL: none).
 */
export const DEFER_DIGEST_SQL = `
with deferred as (
  update punctual_digests g
  set state = 'retry', attempt = g.attempt - 1,
      run_at = greatest($5::timestamptz, ${NOW}),
      deferred_reason = $6::text, deferred_until = greatest($5::timestamptz, ${NOW}),
      slot_at = $7::timestamptz, holds_slot = false,
      lease_owner = null, lease_expires_at = null, claimed_at = null, updated_at = ${NOW}
  where ${DIGEST_FENCE}
  returning g.id
),
${membersGivenBack("deferred")}`;

/** Result columns of {@link DEFER_DIGEST_SQL}. */
export const DEFER_DIGEST_COLUMNS = columnsOf<{ id: string }>()(["id"]);

/** Why a digest waits unsent: a rate limit (DEL-13) or its host's open circuit (CH-7). */
export type DigestDeferReason = "RATE_LIMITED" | "CIRCUIT_OPEN";

/** DEL-13 / CH-7: runs {@link DEFER_DIGEST_SQL}; true when the digest was given back. */
export async function deferDigest(
  db: Queryable,
  now: Date | null,
  owner: string,
  p: {
    id: string;
    attempt: number;
    until: Date;
    reason: DigestDeferReason;
    slotAt: Date | null;
  },
): Promise<boolean> {
  const r = await rows<{ id: string }>(db, DEFER_DIGEST_SQL, [
    now,
    owner,
    p.id,
    p.attempt,
    p.until,
    p.reason,
    p.slotAt,
  ]);
  return r.length > 0;
}

/**
 * DEL-13: takes one token of bucket ($2 tenant, $3 key), as {@link CLAIM_LIMITED_SQL} takes
 * one per row: `x` tokens as of `a` (the later of now and `refilled_at`) leave `x − 1` as
 * of `a` when `x ≥ 1`, else 0 as of `a + (1 − x) / rate` seconds, the token's own instant
 * (the bucket owes it; the next claim in any process starts after it). Run after
 * {@link LOCK_BUCKET_SQL} in the same transaction. $1 now.
 */
export const SPEND_DIGEST_TOKEN_SQL = `
update punctual_rate_limits l
set tokens = greatest(0, ${TOKENS_NOW("l")} - 1),
    refilled_at = greatest(l.refilled_at, ${NOW})
      + make_interval(secs => greatest(0, 1 - ${TOKENS_NOW("l")}) / l.rate_per_second)
where l.tenant = $2 and l.key = $3`;

/**
 * DEL-13: marks a claimed digest as holding one concurrency slot of its limiter (counted by
 * {@link COUNT_BUSY_SQL} until it leaves `claimed`) and spends the token it paid for, if
 * any (a later try, after a crash or a give-back, takes a token of its own), fenced like
 * the settle. Run after {@link LOCK_BUCKET_SQL} in the same transaction. $1 now, $2 owner,
 * $3 id, $4 attempt.
 */
export const HOLD_DIGEST_SLOT_SQL = `
update punctual_digests g
set holds_slot = true, slot_at = null, updated_at = ${NOW}
where ${DIGEST_FENCE}`;

/**
 * How long a digest held back by its limiter's concurrency cap waits before it is tried
 * again, ms (a slot frees when a send ends, which no token arithmetic foretells).
 */
export const DIGEST_CAP_WAIT_MS = 1_000;

/** Parameters of {@link admitDigest}. */
export interface DigestAdmission {
  now: Date | null;
  owner: string;
  id: string;
  attempt: number;
  /** The digest's limiter, `tenant/key` (a tenant name has no `/`). */
  limiter: string;
  /** The send instant of a token the digest paid for on an earlier claim, or null. */
  slotAt: Date | null;
}

/** What {@link admitDigest} decided. */
export type DigestAdmitted =
  /** Send now: no limit, or a token taken (or paid before) and a slot held. */
  | { send: true }
  /** Given back, `RATE_LIMITED` until `until` (the token's instant, or a cap's wait). */
  | { send: false; until: Date; lost: false }
  /** The digest's lease was lost meanwhile: nothing taken, nothing changed. */
  | { send: false; lost: true };

/** Thrown inside {@link admitDigest}'s transaction to roll it back when the fence fails. */
class LostDigest extends Error {}

/**
 * DEL-13 / DEL-19: admits one claimed digest under its limiter, in one transaction: locks
 * the bucket ({@link LOCK_BUCKET_SQL}; no limit: send), counts the limiter's sends under
 * way across processes ({@link COUNT_BUSY_SQL}); at the cap the digest is given back until
 * {@link DIGEST_CAP_WAIT_MS} later. Otherwise it takes one token
 * ({@link SPEND_DIGEST_TOKEN_SQL}; none when it paid for one before): when the token is
 * there now it holds a slot and is sent; when the token accrues later, the digest has
 * paid for it and waits in `retry` until its instant (`slot_at`), where it takes no further
 * token — so digests queue for tokens as ordinary rows do, and a busy key cannot starve
 * them. The digest and the bucket change together or not at all (fenced: a lost lease
 * changes nothing).
 */
export async function admitDigest(db: Database, p: DigestAdmission): Promise<DigestAdmitted> {
  const cut = p.limiter.indexOf("/");
  const tenant = p.limiter.slice(0, cut);
  const key = p.limiter.slice(cut + 1);
  try {
    return await db.transaction(async (tx): Promise<DigestAdmitted> => {
      const bucket = await firstRow<Omit<BucketRow, "busy">>(tx, LOCK_BUCKET_SQL, [
        p.now,
        tenant,
        key,
      ]);
      if (!bucket) return { send: true };
      const readAt = new Date(bucket.read_at).getTime();
      const hold = async (): Promise<DigestAdmitted> => {
        const held = await execute(tx, HOLD_DIGEST_SLOT_SQL, [p.now, p.owner, p.id, p.attempt]);
        if (held === 0) throw new LostDigest();
        return { send: true };
      };
      const defer = async (until: number, slotAt: Date | null): Promise<DigestAdmitted> => {
        const back = await deferDigest(tx, p.now, p.owner, {
          id: p.id,
          attempt: p.attempt,
          until: new Date(until),
          reason: "RATE_LIMITED",
          slotAt,
        });
        if (!back) throw new LostDigest();
        return { send: false, until: new Date(until), lost: false };
      };
      if (bucket.concurrency !== null) {
        const busy = (await firstRow<{ busy: number }>(tx, COUNT_BUSY_SQL, [p.now, p.limiter]))
          ?.busy;
        if ((busy ?? 0) >= bucket.concurrency) {
          const paid = p.slotAt?.getTime() ?? 0;
          return defer(Math.max(readAt + DIGEST_CAP_WAIT_MS, paid), p.slotAt);
        }
      }
      if (p.slotAt !== null) {
        // Paid on an earlier claim: no second token; not before its instant.
        return p.slotAt.getTime() > readAt ? defer(p.slotAt.getTime(), p.slotAt) : hold();
      }
      // Whole milliseconds, never before the token (a `Date` holds no less).
      const slot = Math.ceil(paceSlots(bucket, 1)[0] as number);
      await execute(tx, SPEND_DIGEST_TOKEN_SQL, [p.now, tenant, key]);
      return slot > readAt ? defer(slot, new Date(slot)) : hold();
    });
  } catch (err) {
    if (err instanceof LostDigest) return { send: false, lost: true };
    throw err;
  }
}

/**
 * DEL-19 / DEL-16: renews the leases of the digests this worker is sending, fenced like the
 * settle (id, attempt, `claimed`, owner) and only while the lease has not run out, so a
 * digest send slower than the lease keeps its lease and reaches the receiver once.
 * $1 now, $2 owner, $3 lease ms, $4 ids (text[]), $5 attempts (int[]). Returns the digests
 * renewed, each with its new expiry and the database's now.
 */
export const RENEW_DIGEST_LEASES_SQL = `
update punctual_digests g
set lease_expires_at = ${msAfterNow("$3")}, updated_at = ${NOW}
from unnest($4::text[], $5::int[]) as u(id, attempt)
where g.id = u.id and g.attempt = u.attempt and g.state = 'claimed' and g.lease_owner = $2
  and g.lease_expires_at > ${NOW}
returning g.id, g.lease_expires_at, ${NOW} as db_now`;

/** A digest lease {@link RENEW_DIGEST_LEASES_SQL} renewed. */
export interface RenewedDigestLease {
  id: string;
  lease_expires_at: Date;
  db_now: Date;
}

/** Result columns of {@link RENEW_DIGEST_LEASES_SQL}. */
export const RENEW_DIGEST_LEASES_COLUMNS = columnsOf<RenewedDigestLease>()([
  "id",
  "lease_expires_at",
  "db_now",
]);

/** DEL-19 / DEL-16: runs {@link RENEW_DIGEST_LEASES_SQL}. */
export async function renewDigestLeases(
  db: Queryable,
  now: Date | null,
  owner: string,
  leaseMs: number,
  held: ReadonlyArray<{ id: string; attempt: number }>,
): Promise<RenewedDigestLease[]> {
  if (held.length === 0) return [];
  return rows<RenewedDigestLease>(db, RENEW_DIGEST_LEASES_SQL, [
    now,
    owner,
    leaseMs,
    held.map((h) => h.id),
    held.map((h) => h.attempt),
  ]);
}

/**
 * DEL-19 / DEL-6: recovers digests whose lease expired before they settled (a crashed or
 * stalled worker): back to `retry` with the same id and members where the channel
 * de-duplicates by idempotency key or the reminder chose at-least-once (counting one
 * failure; `dead` when that was the last), else `in_doubt` (LEASE_EXPIRED) — the digest
 * and all its members together, in one statement. Each member counts the failure and
 * records the lost try as an attempt `lease_expired` (DEL-14), as a recovered delivery
 * does. $1 now, $2 limit, $3 retry delay ms.
 */
export const RECOVER_DIGESTS_SQL = `
with expired as (
  select g.id, g.lease_owner, g.claimed_at from punctual_digests g
  where g.state = 'claimed' and g.lease_expires_at <= ${NOW}
  order by g.lease_expires_at, g.id
  limit $2
  for update of g skip locked
),
recovered as (
  update punctual_digests g
  set state = case when g.on_lost_lease = 'in_doubt' then 'in_doubt'
                   when g.failures + 1 >= g.max_attempts then 'dead'
                   else 'retry' end,
      reason = case when g.on_lost_lease = 'in_doubt' then 'LEASE_EXPIRED'
                    when g.failures + 1 >= g.max_attempts then 'SEND_FAILED' end,
      finished_at = case when g.on_lost_lease = 'in_doubt' or g.failures + 1 >= g.max_attempts
                         then ${NOW} end,
      run_at = ${msAfterNow("$3")},
      failures = g.failures + 1,
      last_error = 'lease expired before the digest settled (worker crashed, stalled or lost the database)',
      lease_owner = null, lease_expires_at = null, claimed_at = null, updated_at = ${NOW}
  where g.id in (select id from expired)
  returning g.id, g.state, g.channel, g.member_count
),
members as (
  update punctual_deliveries d
  set state = case when r.state = 'retry' then 'grouped' else r.state end,
      finished_at = case when r.state = 'retry' then null else ${NOW} end,
      reason = case when r.state = 'in_doubt' then 'LEASE_EXPIRED'
                    when r.state = 'dead' then 'SEND_FAILED' end,
      failures = d.failures + 1,
      first_attempt_at = coalesce(d.first_attempt_at, e.claimed_at),
      last_error = 'lease expired before the digest settled (worker crashed, stalled or lost the database)',
      updated_at = ${NOW}
  from recovered r join expired e on e.id = r.id
  where d.digest_id = r.id and d.state = 'grouped'
  returning d.id, d.state
),
recorded as (
  insert into punctual_attempts (delivery_id, attempt, worker, started_at, ended_at, outcome, settled, error)
  select d.id, d.attempt, e.lease_owner, e.claimed_at, ${NOW}, 'lease_expired', true, 'lease expired'
  from punctual_deliveries d join expired e on e.id = d.digest_id
  join recovered r on r.id = e.id
  where d.state = 'grouped'
)
select r.id, r.state, r.channel, r.member_count,
       (select count(*) from members m where m.state <> 'grouped')::int as members_finished
from recovered r`;

/** A digest {@link RECOVER_DIGESTS_SQL} moved out of `claimed`. */
export interface RecoveredDigest {
  id: string;
  state: "retry" | "in_doubt" | "dead";
  channel: string;
  member_count: number;
  members_finished: number;
}

/** Result columns of {@link RECOVER_DIGESTS_SQL}. */
export const RECOVER_DIGESTS_COLUMNS = columnsOf<RecoveredDigest>()([
  "id",
  "state",
  "channel",
  "member_count",
  "members_finished",
]);

/**
 * Retention (OPS-12): deletes sent and skipped digests older than the retention period, in
 * a bounded batch, oldest first (index `punctual_digests_finished`), as the retention of
 * delivery rows deletes their members; dead and in-doubt digests stay, like their members,
 * until a person acts. $1 now, $2 retention ms, $3 limit.
 */
export const DIGEST_RETENTION_SQL = `
delete from punctual_digests g where g.id = any(array(
  select id from punctual_digests
  where state in ('sent', 'skipped') and updated_at < ${msBeforeNow("$2")}
  order by updated_at, id limit $3))`;

/** Runs {@link DIGEST_RETENTION_SQL}; returns how many digests it deleted. */
export function deleteFinishedDigests(
  db: Queryable,
  now: Date | null,
  retentionMs: number,
  limit: number,
): Promise<number> {
  return execute(db, DIGEST_RETENTION_SQL, [now, retentionMs, limit]);
}

/** Parameters of {@link formDigests}. */
export interface FormDigestParams {
  now: Date | null;
  owner: string;
  leaseMs: number;
  limit: number;
  channels: readonly string[];
}

/**
 * DEL-19: runs {@link DIGEST_FORM_LOCK_SQL} and, when this worker got the lock,
 * {@link FORM_DIGESTS_SQL} in one transaction. Returns the digests formed (none when
 * another worker is forming).
 */
export async function formDigests(db: Database, p: FormDigestParams): Promise<FormedDigestRow[]> {
  const run = async (tx: Queryable) => {
    const lock = await firstRow<{ locked: boolean }>(tx, DIGEST_FORM_LOCK_SQL, []);
    if (!lock?.locked) return [];
    return rows<FormedDigestRow>(tx, FORM_DIGESTS_SQL, [
      p.now,
      p.owner,
      p.leaseMs,
      p.limit,
      p.channels,
    ]);
  };
  return db.transaction(run);
}

/** DEL-19: runs {@link CLAIM_DIGEST_RETRIES_SQL}. */
export async function claimDigestRetries(
  db: Queryable,
  p: FormDigestParams,
): Promise<ClaimedDigest[]> {
  return rows<ClaimedDigest>(db, CLAIM_DIGEST_RETRIES_SQL, [
    p.now,
    p.owner,
    p.leaseMs,
    p.limit,
    p.channels,
  ]);
}

/** DEL-19: runs {@link DIGEST_ITEMS_SQL}. */
export async function digestItems(db: Queryable, digestId: string): Promise<DigestItemRow[]> {
  return rows<DigestItemRow>(db, DIGEST_ITEMS_SQL, [digestId]);
}

/** DEL-19: runs {@link SETTLE_DIGEST_SQL}; `settled` 0 means the lease was lost. */
export async function settleDigest(
  db: Queryable,
  now: Date | null,
  owner: string,
  s: DigestSettleInput,
): Promise<DigestSettled> {
  const row = await firstRow<DigestSettled>(db, SETTLE_DIGEST_SQL, [
    now,
    owner,
    s.id,
    s.attempt,
    s.state,
    s.runAt,
    s.reason,
    s.error?.slice(0, 2_000) ?? null,
    s.failure,
    s.startedAt,
    s.status,
    s.messageId,
    s.outcome,
    s.deferral,
  ]);
  return row ?? { settled: 0, members: 0 };
}

/** DEL-19: runs {@link RELEASE_DIGEST_SQL}; true when the digest was given back. */
export async function releaseDigest(
  db: Queryable,
  now: Date | null,
  owner: string,
  held: { id: string; attempt: number },
): Promise<boolean> {
  const r = await rows<{ id: string }>(db, RELEASE_DIGEST_SQL, [now, owner, held.id, held.attempt]);
  return r.length > 0;
}

/** DEL-19: runs {@link RECOVER_DIGESTS_SQL}. */
export async function recoverDigests(
  db: Queryable,
  now: Date | null,
  limit: number,
  retryDelayMs: number,
): Promise<RecoveredDigest[]> {
  return rows<RecoveredDigest>(db, RECOVER_DIGESTS_SQL, [now, limit, retryDelayMs]);
}
