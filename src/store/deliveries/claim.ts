/**
 * The hot path of the due-date table (DEL-1, DEL-2, DEL-6, DEL-16): the statements that
 * claim, settle, renew, release and recover deliveries.
 *
 * Every statement takes `$1` = "now" (timestamptz or NULL). NULL means the database
 * clock (`now()`), which is authoritative for due times and leases (OPS-9); tests pin
 * it by passing an instant.
 */
import type { ReminderTemplate } from "../../channels/template.js";
import { numberArray, textArray } from "../array-literals.js";
import { pinnedOf, type Queryable } from "../database.js";
import { columnsOf, execute, rows } from "../statement.js";
import { DELIVERY_IDENTITY_KEYS, type DeliveryIdentity } from "../schedules.js";
import {
  ADMISSION_PREDICATE,
  GIVE_BACK,
  heldBy,
  lateAtClaim,
  msAfterNow,
  NOW,
  REJUDGE_SQL,
  WAITING_PREDICATE,
} from "./sql.js";

/** The columns a worker needs to send a claimed delivery. */
export interface ClaimedDelivery extends DeliveryIdentity {
  attempt: number;
  failures: number;
  max_attempts: number;
  /** Earlier claims that ended deferred by a Retry-After (DEL-13); attempts spent = `attempt − deferrals`. */
  deferrals: number;
  /** When the row's first try began (NULL: none settled yet); the deferral budget's age counts from it. */
  first_attempt_at: Date | null;
  channel: string;
  on_lost_lease: "retry" | "in_doubt";
  lease_expires_at: Date;
  late: boolean;
  payload: unknown;
  target: unknown;
  /** CH-6: the reminder's template, or null. */
  template: ReminderTemplate | null;
  /** The schedule's time zone (templates format instants in it by default). */
  tzid: string;
  /** OPS-15: W3C traceparent of the request that created the schedule, or null. */
  trace_parent: string | null;
  /** The schedule's tenant (its circuits, CH-7, and its allowed e-mail senders, CH-2). */
  tenant: string;
  /** The statement's "now" (database clock unless pinned): stamp signatures with it (OPS-9). */
  db_now: Date;
  /** API-11: the recipient the delivery is for (judged at send), or null. */
  recipient_id: string | null;
}

/** A row named by its id: what the settle and the releases return. */
export interface IdRow {
  id: number;
}

/** Result columns of {@link IdRow} statements. */
const ID_COLUMNS = columnsOf<IdRow>()(["id"]);

/**
 * DEL-2: claim due deliveries in one statement.
 *
 * Parameters: $1 now, $2 lease owner (`host#pid#nonce`), $3 lease length ms, $4 limit,
 * $5 channel names this worker can send, $6 limiters with a rate limit (DEL-13: their rows
 * are claimed by `CLAIM_LIMITED_SQL` in rate-limits.ts, under their token bucket; empty
 * when no limit is set, and then the filter is a constant).
 *
 * Shape: a CTE walks the partial index `punctual_deliveries_claimable` (`claimable_at,
 * id`; `claimable_at` is `run_at` of a `pending`/`retry` row, a generated column) in
 * order, filters each row by the row-local {@link ADMISSION_PREDICATE} and the channel
 * (`coalesce`-wrapped, so its estimate does not shrink to nothing without statistics),
 * stops at the limit, and locks with
 * `FOR UPDATE SKIP LOCKED`, so concurrent claimers never wait on each other nor take the
 * same row. The UPDATE sets `claimed`, the lease and `attempt = attempt + 1` (the fencing
 * token), clears `stale_at` (a tried row is judged); the outer SELECT returns what the
 * send needs in claim order (oldest first), payload and target from scalar subqueries by
 * primary key, one per claimed row (no join whose plan could depend on statistics).
 *
 * Invariant: the plan is Limit → LockRows → Index Scan on the claim index (no Sort, no
 * join below the limit) on both engines, before and after ANALYZE, run pinned
 * (`Database.pinned`: sequential and bitmap scans off; test/integration/claim-plan.test.ts),
 * so a claim costs the rows it takes plus the not-admissible rows ahead of them (stale or
 * expired rows until the misfire sweep judges them; other workers' channels), never the
 * whole due backlog, and never the rows of paused schedules (not in the index).
 *
 * Alternatives measured here (bench/claim-plan.ts: 20k due rows, never analyzed, then
 * analyzed; rows read = rows the scans of punctual_deliveries returned or filtered, from
 * EXPLAIN ANALYZE; times are medians of 7 on a 2-core machine at load 14–21, noisy):
 * - admission by joining schedules and reminders (the previous claim): before ANALYZE the
 *   planner expected one row and sorted every due row before the LIMIT — claim of 8 read
 *   20,008 rows (PostgreSQL 56 ms, PGlite 297 ms), claim of 100 read 20,100 (82 / 742 ms);
 *   with 50k due rows of a paused schedule ahead of them, 50,016 rows even after ANALYZE
 *   (82 / 661 ms), and the wake-up query 50,001 rows (53 / 146 ms);
 * - a row-local predicate that still names the state (`state in ('pending', 'retry')`,
 *   plain `is null or` arms): the state filter alone makes the estimate collapse on stale
 *   statistics, and the plan was again a bitmap scan and a Sort of every due row;
 * - this shape: claim of 8 reads 16 rows (8 from the index, 8 by primary key), claim of
 *   100 reads 200, before and after ANALYZE and beside the paused schedule's 50k rows
 *   (PostgreSQL 1.2–10 ms, PGlite 6–54 ms under that load); the wake-up query reads 1 row;
 * - earlier: one row per statement (1–3k rows/s) and SELECT-then-UPDATE in two statements
 *   (a second round trip per batch) lost to the batched form;
 * - run as written (not pinned) over a table of nothing but due rows (a first burst, 20k
 *   due now, no history): the filters' default selectivities multiplied to a few hundred
 *   expected rows, and the plan was a sequential scan (never analyzed) or a bitmap scan
 *   (analyzed mid-burst) of the table and a sort of every due row — 13 ms for a claim of
 *   100; pinned, the same claims cost 136 → 73 µs per claimed row in a loop of 100-row
 *   claims and settles on one connection (PostgreSQL, fsync on), and the 20k burst at
 *   C = 8 went from 0.47× to 0.57× graphile-worker batched (docs/benchmarks.md);
 * - the UPDATE joined to the `due` CTE (`from due where d.id = due.id`): on a
 *   never-analyzed table (a fresh burst) the planner hashed `due` and scanned every
 *   delivery to probe it, 464 of a 100-row claim's 2,871 buffers over 20k rows; by
 *   primary key (`id = any(array(select id from due))`) the claim reads 2,619, none of
 *   them a scan of the table.
 * `late` is set on the first claim when it happens more than 1 s after the due time, or
 * after the quiet-hours deferral when there is one (DEL-15; the threshold of
 * `applyMisfire`, LATE_THRESHOLD_MS).
 */
/**
 * The `due` and `claimed` CTEs of {@link CLAIM_SQL} (and of {@link SETTLE_AND_CLAIM_SQL}),
 * with the positions of their lease length, limit and channel parameters and the limiter
 * filter (DEL-13: the main claim `exclude`s the rate-limited keys, which are claimed under
 * their bucket by the claim of rate-limits.ts, `only` its one limiter); `$1` is "now" and
 * `$2` the lease owner everywhere. One text for every claim, so none can drift.
 */
export function claimCtes(
  lease: string,
  limit: string,
  channels: string,
  limiter: { exclude: string } | { only: string },
): string {
  const limiterFilter =
    "only" in limiter
      ? `coalesce(q.limiter = ${limiter.only}, false)`
      : `not coalesce(q.limiter = any(${limiter.exclude}::text[]), false)`;
  return `due as (
  select q.id
  from punctual_queue q
  where ${ADMISSION_PREDICATE}
    and coalesce(q.channel = any(${channels}::text[]), false)
    and ${limiterFilter}
  order by q.run_at, q.id
  limit ${limit}
  for update of q skip locked
),
leased as (
  update punctual_queue q
  set attempt = q.attempt + 1,
      lease_owner = $2,
      lease_expires_at = ${msAfterNow(lease)},
      claimed_at = ${NOW}
  where q.id = any(array(select due.id from due))
  returning q.id, q.attempt, q.lease_expires_at, q.claimed_at, q.run_at
),
claimed as (
  select d.id, d.delivery_key, d.schedule_id, d.reminder_key, d.occurrence_at, d.due_at,
         l.attempt, d.failures, d.max_attempts, d.deferrals, d.first_attempt_at, d.channel,
         d.on_lost_lease, l.lease_expires_at, ${lateAtClaim("l.claimed_at")} as late, l.run_at,
         d.recipient_id
  from leased l
  cross join lateral (select * from punctual_deliveries d where d.id = l.id offset 0) d
)`;
}

/**
 * What {@link CLAIM_SQL} (and every claim) returns of the claimed rows `c`, in claim order:
 * the row's own columns ({@link ClaimedRow}), then the schedule's four values the send
 * needs in one JSON array (`schedule`: payload, tzid, trace_parent, tenant) and the
 * reminder's two (`reminder`: target, template), each from one scalar subquery by primary
 * key (one index probe per table and claimed row; no join whose plan could depend on
 * statistics). {@link claimedOf} spreads them into a {@link ClaimedDelivery}.
 *
 * Measured here (docs/benchmarks.md, "Worker CPU per delivery: the claimed row's shape"):
 * the earlier form read the same six values with six scalar subqueries (six index probes
 * per claimed row) and the worker's driver parsed each as its own column.
 */
export const CLAIMED_SELECT = `
select c.id, c.delivery_key, c.schedule_id, c.reminder_key, c.occurrence_at, c.due_at,
       c.attempt, c.failures, c.max_attempts, c.deferrals, c.first_attempt_at, c.channel,
       c.on_lost_lease, c.lease_expires_at, c.late, c.recipient_id,
       (select json_build_array(s.payload, s.tzid, s.trace_parent, s.tenant)
          from punctual_schedules s where s.id = c.schedule_id) as schedule,
       (select json_build_array(r.target, r.template) from punctual_reminders r
         where r.schedule_id = c.schedule_id and r.key = c.reminder_key) as reminder,
       ${NOW} as db_now
from claimed c
order by c.run_at, c.id`;

/**
 * One row as every claim statement returns it ({@link CLAIMED_SELECT}): the delivery's
 * own columns, and its schedule's and reminder's values as JSON arrays (null when the
 * schedule or reminder is gone).
 */
export type ClaimedRow = Omit<
  ClaimedDelivery,
  "payload" | "target" | "template" | "tzid" | "trace_parent" | "tenant"
> & {
  /** `[payload, tzid, trace_parent, tenant]` of the schedule. */
  schedule: [unknown, string, string | null, string] | null;
  /** `[target, template]` of the reminder. */
  reminder: [unknown, ReminderTemplate | null] | null;
};

/** Result columns of {@link CLAIM_SQL} (and of every claim: {@link ClaimedRow}). */
export const CLAIM_COLUMNS = columnsOf<ClaimedRow>()([
  ...DELIVERY_IDENTITY_KEYS,
  "attempt",
  "failures",
  "max_attempts",
  "deferrals",
  "first_attempt_at",
  "channel",
  "on_lost_lease",
  "lease_expires_at",
  "late",
  "recipient_id",
  "schedule",
  "reminder",
  "db_now",
]);

/**
 * The {@link ClaimedDelivery} of a claimed row: its schedule's and reminder's values
 * spread into their fields (null, as a missing row's scalar subquery gave them before, when
 * the schedule or reminder is gone). One object of one shape per row.
 */
export function claimedOf(r: ClaimedRow): ClaimedDelivery {
  const s = r.schedule;
  const m = r.reminder;
  return {
    id: r.id,
    delivery_key: r.delivery_key,
    schedule_id: r.schedule_id,
    reminder_key: r.reminder_key,
    occurrence_at: r.occurrence_at,
    due_at: r.due_at,
    attempt: r.attempt,
    failures: r.failures,
    max_attempts: r.max_attempts,
    deferrals: r.deferrals,
    first_attempt_at: r.first_attempt_at,
    channel: r.channel,
    on_lost_lease: r.on_lost_lease,
    lease_expires_at: r.lease_expires_at,
    late: r.late,
    payload: s ? s[0] : null,
    target: m ? m[0] : null,
    template: m ? m[1] : null,
    // A claimed row's schedule exists (deliveries go with it); null only as before, had it gone.
    tzid: (s ? s[1] : null) as string,
    trace_parent: s ? s[2] : null,
    tenant: (s ? s[3] : null) as string,
    db_now: r.db_now,
    recipient_id: r.recipient_id,
  };
}

export const CLAIM_SQL = `
with ${claimCtes("$3", "$4", "$5", { exclude: "$6" })}${CLAIMED_SELECT}`;

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
  /** 1 when this outcome is a Retry-After deferral (DEL-13): counted in `deferrals`, not as an attempt spent. */
  deferral: 0 | 1;
  startedAt: Date;
  /** Attempt outcome for the audit trail (DEL-14). */
  outcome: "sent" | "transient" | "permanent" | "rate_limited" | "timeout";
  status: number | null;
  messageId: string | null;
}

/** What a holder's write of the ledger returns for {@link requeueCtes}. */
const REQUEUE_RETURNING = `d.id, d.state, d.claimable_at, d.channel, d.limiter, d.expires_at, d.stale_at,
            d.delivery_key, d.schedule_id`;

/**
 * The queue's side of a holder's write of the ledger (a settle, a recovery, a skip at
 * send), as two CTEs over the ledger rows it wrote (`written`, returning
 * {@link REQUEUE_RETURNING}): a row that waits again (a retry that its schedule still
 * admits: `claimable_at` set after the trigger `punctual_deliveries_rewait` judged it)
 * keeps its queue row, released, at its new `run_at`; any other loses it. The queue rows
 * were locked by the fence, and each is written once (updated or deleted). With `held`
 * (the CTE of the queue rows the fence matched, column `id`), a third CTE deletes those
 * whose ledger row was not written because it no longer waits (`orphaned`: made final or
 * paused by a release that knows no queue), so it cannot be given back and claimed again;
 * by primary key over an id array, so no plan scans the queue.
 */
function requeueCtes(written: string, held?: string): string {
  const orphaned = held
    ? `,
orphaned as (
  delete from punctual_queue q
  where q.id = any(array(
    select h.id from ${held} h where not exists (select 1 from ${written} w where w.id = h.id)))
)`
    : "";
  return `requeued as (
  update punctual_queue q
  set run_at = w.claimable_at, lease_owner = null, lease_expires_at = null, claimed_at = null,
      channel = w.channel, limiter = w.limiter, expires_at = w.expires_at, stale_at = w.stale_at
  from ${written} w
  where q.id = w.id and w.claimable_at is not null
),
dequeued as (
  delete from punctual_queue q using ${written} w
  where q.id = w.id and w.claimable_at is null
)${orphaned}`;
}

/** A settled outcome whose attempt {@link SETTLE_SQL} keeps on the delivery row (`u` the input). */
const KEPT_ON_ROW = `(u.state = 'sent' and u.outcome = 'sent' and u.error is null)`;

/**
 * DEL-2 / DEL-14: settle a batch of sends, fenced, and record every attempt.
 *
 * Parameters: $1 now, $2 lease owner, then parallel arrays $3 ids, $4 attempts,
 * $5 states, $6 run_at (epoch ms), $7 reasons, $8 errors, $9 failure increments,
 * $10 started_at (epoch ms), $11 outcomes, $12 statuses, $13 message ids, $14 deferral
 * increments. The two instants go as epoch ms (`double precision`), which the statement
 * turns into `timestamptz` with `to_timestamp`: the worker formats no date text per row.
 *
 * Invariant: a row changes only if it is still `claimed` by this owner at this attempt
 * (`id`, `attempt`, `state`, `lease_owner` all match). A settle that lost its lease
 * (recovered or reclaimed meanwhile) changes nothing; its attempt is still recorded,
 * with `settled = false`, and the caller logs it. Batched with `unnest` so one round
 * trip settles a whole batch. A queue row the fence matched whose ledger row no longer
 * waits (`pending` / `retry`: it was made final or paused by a write that should not
 * have touched a held row, e.g. a release that knows no queue) is deleted (`orphaned`),
 * so it cannot be released and claimed again in a loop of sends.
 *
 * Where each attempt is recorded (DEL-14; migration 0007): the attempt that sends a row
 * and settles it (`sent`, no error) is written on the delivery row the statement updates
 * anyway (`sent_by`, `send_started_at`, `send_status`, `send_message_id`; its end is
 * `sent_at`); every other attempt (a failure, a rate-limited reply, a timeout, a settle
 * fenced out) is a row of `punctual_attempts`, unless its delivery was deleted
 * meanwhile. The history (`punctual_delivery_attempts`) reads both.
 *
 * Shape: rows are found by primary key (`id = any($3)`) and the existence check of
 * fenced-out rows reads the primary key for those rows only, so no plan scans the table
 * whatever the statistics say (with a join on the `input` CTE alone, never-analyzed
 * tables got a sequential scan of every delivery per settle).
 *
 * A retry whose schedule was paused, cancelled or lost its reminder while the send ran
 * lands where the schedule is now (`paused`, or `cancelled` with reason
 * `schedule_cancelled` / `reminder_removed`): the trigger `punctual_deliveries_rewait`
 * (migration 0002) does it for every claimed → waiting move, so this statement needs no
 * join. Measured here (20k one-offs, C = 8, PostgreSQL fsync on, loaded machine): the
 * earlier form with a per-row NOT EXISTS over schedules and reminders, plus two more full
 * indexes on the table (dropped in 0003), settled at ~0.3 ms per row; this form at about
 * two thirds of that. Keeping the sending attempt on the row (0007) and reading rows by
 * primary key: the burst's settles went from 35.6 to 25 shared buffers and from 10.1 to
 * 7 WAL records per row (pg_stat_statements, 20k rows at C = 8); EXPLAIN of a 100-row
 * settle over 20k never-analyzed rows: no scan of the table (was 469 buffers per
 * statement for the attempts' existence check alone), no attempt insert.
 *
 * DEL-13: a Retry-After deferral adds to `deferrals`, not to `failures`, and leaves
 * `attempt` as the claim made it (attempts spent = `attempt − deferrals`): a try that was
 * sent keeps its fence number, so a stale settle of the deferred claim (a retried settle
 * whose reply was lost) cannot land on the next claim of the same owner, as it would if
 * the deferral gave its attempt back (test/integration/fences.test.ts).
 * `first_attempt_at` keeps the first try's start: the deferral budget's age counts from it.
 */
/** The CTEs of {@link SETTLE_SQL} (and of {@link SETTLE_AND_CLAIM_SQL}): parameters $1–$14. */
const SETTLE_CTES = `input as (
  select u.id, u.attempt, u.state, to_timestamp(u.run_ms / 1000) as run_at, u.reason, u.error,
         u.failure, to_timestamp(u.started_ms / 1000) as started_at, u.outcome, u.status,
         u.message_id, u.deferral
  from unnest($3::bigint[], $4::int[], $5::text[], $6::double precision[], $7::text[],
              $8::text[], $9::int[], $10::double precision[], $11::text[], $12::int[], $13::text[],
              $14::int[])
    as u(id, attempt, state, run_ms, reason, error, failure, started_ms, outcome, status, message_id,
         deferral)
),
fenced as (
  select u.*, q.claimed_at
  from input u
  cross join lateral (
    select q.claimed_at from punctual_queue q
    where q.id = u.id and q.attempt = u.attempt and ${heldBy("$2")}
    for update of q
  ) q
),
settled as (
  update punctual_deliveries d
  set state = u.state,
      attempt = u.attempt,
      late = ${lateAtClaim("u.claimed_at")},
      stale_at = null,
      sent_at = case when u.state = 'sent' then ${NOW} end,
      finished_at = case when u.state in ('dead', 'in_doubt') then ${NOW} end,
      reason = case when u.state in ('dead', 'in_doubt') then u.reason end,
      run_at = coalesce(u.run_at, d.run_at),
      last_error = coalesce(u.error, d.last_error),
      failures = d.failures + u.failure,
      deferrals = d.deferrals + u.deferral,
      first_attempt_at = coalesce(d.first_attempt_at, u.started_at),
      sent_by = case when ${KEPT_ON_ROW} then $2 end,
      send_started_at = case when ${KEPT_ON_ROW} then u.started_at end,
      send_status = case when ${KEPT_ON_ROW} then u.status end,
      send_message_id = case when ${KEPT_ON_ROW} then u.message_id end,
      updated_at = ${NOW}
  from fenced u
  where d.id = any(array(select f.id from fenced f)) and d.id = u.id
    and d.state in ('pending', 'retry')
  returning ${REQUEUE_RETURNING}
),
${requeueCtes("settled", "fenced")},
unsettled as (
  select u.id from input u where not exists (select 1 from settled s where s.id = u.id)
),
present as (
  select x.id from punctual_deliveries x where x.id = any(array(select id from unsettled))
),
recorded as (
  insert into punctual_attempts
    (delivery_id, attempt, worker, started_at, ended_at, outcome, settled, status, message_id, error)
  select u.id, u.attempt, $2, u.started_at, ${NOW}, u.outcome, s.id is not null, u.status,
         u.message_id, u.error
  from input u
  left join settled s on s.id = u.id
  where case when s.id is not null then not (${KEPT_ON_ROW})
             else u.id in (select p.id from present p) end
)`;

export const SETTLE_SQL = `
with ${SETTLE_CTES}
select id from settled`;

/** Result columns of {@link SETTLE_SQL}. */
export const SETTLE_COLUMNS = ID_COLUMNS;

/**
 * DEL-2 / DEL-14: {@link SETTLE_SQL} and {@link CLAIM_SQL} in one statement: the settle of
 * a batch with the next claim riding on it, so a busy worker pays one statement's fixed
 * cost and one commit per batch instead of two.
 *
 * Parameters: $1–$14 as {@link SETTLE_SQL} (`$2` is also the claim's lease owner), then
 * $15 lease length ms, $16 claim limit, $17 channel names (as $3–$5 of the claim).
 *
 * Invariant: the settle's fences and the claim's admission are exactly those of the two
 * statements (the same CTE text). Both parts read one snapshot: a row this statement
 * settles back to `retry` is not claimed by it (its new version is not visible to the
 * claim), and the rows each part changes are disjoint (the settle takes `claimed` rows of
 * this owner, the claim `pending` / `retry` rows through the claim index). One row per
 * claimed delivery, in claim order, each carrying `settled_ids` (the ids whose outcome
 * was recorded, as JSON); when nothing was claimed, one row whose claim columns are NULL.
 *
 * Measured here (5,000 due now, C = 8, loaded 2-core machine; docs/benchmarks.md, "Larger
 * refills, claims riding on settles"): commits per delivery 0.058 → 0.048 beside the two
 * statements apart; the CPU gain alone was within noise, with the larger refills it is
 * part of database CPU per delivery 170–182 → 122–124 µs. Server-side prepared
 * statements were measured too and dropped: their generic plans doubled the database CPU.
 */
export const SETTLE_AND_CLAIM_SQL = `
with ${SETTLE_CTES},
${claimCtes("$15", "$16", "$17", { exclude: "$18" })},
claimed_rows as (${CLAIMED_SELECT}
)
select (select coalesce(json_agg(s.id), '[]'::json) from settled s) as settled_ids, x.*
from (select 1) one
left join lateral (select * from claimed_rows) x on true`;

/** One row of {@link SETTLE_AND_CLAIM_SQL}: a claimed row, or only `settled_ids`. */
export type SettleAndClaimRow = { settled_ids: number[] } & {
  [K in keyof ClaimedRow]: ClaimedRow[K] | null;
};

/** Result columns of {@link SETTLE_AND_CLAIM_SQL}. */
export const SETTLE_AND_CLAIM_COLUMNS = columnsOf<SettleAndClaimRow>()([
  "settled_ids",
  ...CLAIM_COLUMNS,
] as const);

/**
 * DEL-6: recover claims whose lease expired before they settled (a crashed or paused
 * worker). Parameters: $1 now, $2 limit, $3 retry delay ms.
 *
 * A row whose channel de-duplicates by idempotency key, or whose reminder opted into
 * at-least-once (`on_lost_lease = 'retry'`), goes back to `retry` with the same delivery
 * key (counting one failure, so a delivery that crashes its worker every time ends dead);
 * any other becomes `in_doubt` (at most once): the send may or may not have happened,
 * and only a person can tell. Each recovery is recorded as an attempt `lease_expired`.
 * SKIP LOCKED lets several workers recover at once without waiting on each other. Only a
 * ledger row that still waits (`pending` / `retry`) is judged; an expired queue row whose
 * ledger row does not (final, paused, or gone: written by a release that knows no queue)
 * is deleted, so one such row cannot fail the recovery of every other.
 */
export const RECOVER_SQL = `
with expired as (
  select q.id, q.lease_owner, q.claimed_at, q.attempt
  from punctual_queue q
  where q.run_at <= ${NOW} and q.lease_owner is not null and q.lease_expires_at <= ${NOW}
  order by q.run_at, q.id
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
      attempt = e.attempt,
      late = ${lateAtClaim("e.claimed_at")},
      stale_at = null,
      run_at = ${msAfterNow("$3")},
      failures = d.failures + 1,
      first_attempt_at = coalesce(d.first_attempt_at, e.claimed_at),
      last_error = 'lease expired before the send settled (worker crashed, stalled or lost the database)',
      updated_at = ${NOW}
  from expired e
  where d.id = e.id and d.state in ('pending', 'retry')
  returning ${REQUEUE_RETURNING}
),
${requeueCtes("recovered", "expired")},
recorded as (
  insert into punctual_attempts (delivery_id, attempt, worker, started_at, ended_at, outcome, settled, error)
  select e.id, e.attempt, e.lease_owner, e.claimed_at, ${NOW}, 'lease_expired', true, 'lease expired'
  from expired e join recovered r on r.id = e.id
)
select id, state, delivery_key, schedule_id, channel from recovered`;

/** Result columns of {@link RECOVER_SQL}. */
export const RECOVER_COLUMNS = columnsOf<RecoveredRow>()([
  "id",
  "state",
  "delivery_key",
  "schedule_id",
  "channel",
]);

/**
 * Release claims this worker never started (graceful shutdown, OPS-6): the queue rows only
 * ({@link GIVE_BACK}); {@link rejudge} then judges their ledger rows. $1 owner, $2 ids,
 * $3 attempts (no "now": nothing here reads the clock).
 */
export const RELEASE_SQL = `
update punctual_queue q
set ${GIVE_BACK}
from unnest($2::bigint[], $3::int[]) as u(id, attempt)
where q.id = u.id and q.attempt = u.attempt and ${heldBy("$1")}
returning q.id`;

/** Result columns of {@link RELEASE_SQL}. */
export const RELEASE_COLUMNS = ID_COLUMNS;

/**
 * When the next delivery falls due (for the wake-up timer): the earliest `run_at` among
 * waiting rows ({@link WAITING_PREDICATE}: the claim index in order, stopping at the
 * first row that will be admissible at its time), and the earliest lease expiry (the
 * lease index). $1 now, $2 channel names.
 */
export const NEXT_WAKE_SQL = `
select
  (select q.run_at from punctual_queue q
    where ${WAITING_PREDICATE}
      and coalesce(q.channel = any($2::text[]), false)
    order by q.run_at, q.id limit 1) as next_run_at,
  (select min(q.lease_expires_at) from punctual_queue q
    where q.run_at <= ${NOW} and q.lease_owner is not null) as next_lease_expiry,
  ${NOW} as db_now`;

/** Result columns of {@link NEXT_WAKE_SQL}. */
export const NEXT_WAKE_COLUMNS = columnsOf<NextWake>()([
  "next_run_at",
  "next_lease_expiry",
  "db_now",
]);

/**
 * DEL-16: renews the leases of rows this worker holds (prefetched, sending, or waiting
 * for their settle), fenced like the settle: by `id`, `attempt`, `state = 'claimed'` and
 * owner. A lease that already ran out is never revived: once it has expired, recovery
 * may judge the row at any moment, so the holder must give it up (the executor aborts
 * or drops it). Parameters: $1 now, $2 owner, $3 lease ms, $4 ids, $5 attempts.
 * Returns the rows still held, with their new expiry and the statement's "now".
 */
export const RENEW_SQL = `
update punctual_queue q
set lease_expires_at = ${msAfterNow("$3")}
from unnest($4::bigint[], $5::int[]) as u(id, attempt)
where q.id = u.id and q.attempt = u.attempt and ${heldBy("$2")}
  and q.lease_expires_at > ${NOW}
returning q.id, q.lease_expires_at, ${NOW} as db_now`;

/** Result columns of {@link RENEW_SQL}. */
export const RENEW_COLUMNS = columnsOf<RenewedLease>()(["id", "lease_expires_at", "db_now"]);

/**
 * DEL-16: gives back every row claimed by this owner that it does not hold: the rows of
 * a claim whose reply was lost with its connection (the statement committed, the worker
 * never saw the rows). They return to `pending` / `retry` with their attempt restored,
 * for any worker to claim at once instead of a lease later. The owner id is unique per
 * process start, so no other process's claim can match. Parameters: $1 now, $2 owner,
 * $3 ids the worker holds (never touched).
 */
export const RELEASE_ORPHANS_SQL = `
update punctual_queue q
set ${GIVE_BACK}
where q.run_at <= ${NOW} and q.lease_owner = $2 and not (q.id = any($3::bigint[]))
returning q.id`;

/** Result columns of {@link RELEASE_ORPHANS_SQL}. */
export const RELEASE_ORPHANS_COLUMNS = ID_COLUMNS;

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
  /** DEL-13: limiters (`tenant/key`) with a rate limit, left to their own claim; default none. */
  limited?: readonly string[];
  /** DEL-16: called right before the statement leaves ({@link QueryOptions.onSent}). */
  onSent?: () => void;
}

/** DEL-2: runs {@link CLAIM_SQL}. */
export async function claimDeliveries(db: Queryable, p: ClaimParams): Promise<ClaimedDelivery[]> {
  const claimed = await rows<ClaimedRow>(
    pinnedOf(db),
    CLAIM_SQL,
    [p.now, p.owner, p.leaseMs, p.limit, p.channels, p.limited ?? []],
    { onSent: p.onSent },
  );
  return claimed.map(claimedOf);
}

/**
 * Parameters $1–$14 of {@link SETTLE_SQL} for a batch: the twelve parallel arrays as
 * array literals built by element type (src/store/array-literals.ts), not by the driver's
 * generic per-element encoding; instants as epoch ms. Exported for the plan tests.
 */
export function settleParams(
  now: Date | null,
  owner: string,
  batch: readonly SettleInput[],
): unknown[] {
  const n = batch.length;
  const ids = new Array<number>(n);
  const attempts = new Array<number>(n);
  const states = new Array<string>(n);
  const runAts = new Array<number | null>(n);
  const reasons = new Array<string | null>(n);
  const errors = new Array<string | null>(n);
  const failures = new Array<number>(n);
  const startedAts = new Array<number>(n);
  const outcomes = new Array<string>(n);
  const statuses = new Array<number | null>(n);
  const messageIds = new Array<string | null>(n);
  const deferrals = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const b = batch[i] as SettleInput;
    ids[i] = b.id;
    attempts[i] = b.attempt;
    states[i] = b.state;
    runAts[i] = b.runAt === null ? null : b.runAt.getTime();
    reasons[i] = b.reason;
    errors[i] = b.error?.slice(0, 2_000) ?? null;
    failures[i] = b.failure;
    startedAts[i] = b.startedAt.getTime();
    outcomes[i] = b.outcome;
    statuses[i] = b.status;
    messageIds[i] = b.messageId;
    deferrals[i] = b.deferral;
  }
  return [
    now,
    owner,
    numberArray(ids),
    numberArray(attempts),
    textArray(states),
    numberArray(runAts),
    textArray(reasons),
    textArray(errors),
    numberArray(failures),
    numberArray(startedAts),
    textArray(outcomes),
    numberArray(statuses),
    textArray(messageIds),
    numberArray(deferrals),
  ];
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
  const settled = await rows<IdRow>(pinnedOf(db), SETTLE_SQL, settleParams(now, owner, batch));
  return new Set(settled.map((r) => r.id));
}

/** What {@link settleAndClaim} did: the ids whose outcome was recorded, and the rows claimed. */
export interface SettleAndClaimResult {
  settled: Set<number>;
  claimed: ClaimedDelivery[];
}

/**
 * DEL-2 / DEL-14: runs {@link SETTLE_AND_CLAIM_SQL}: settles `batch` as
 * {@link settleDeliveries} does and claims up to `claim.limit` rows as
 * {@link claimDeliveries} does, in one statement (the claim's owner and "now" are the
 * settle's).
 */
export async function settleAndClaim(
  db: Queryable,
  now: Date | null,
  owner: string,
  batch: readonly SettleInput[],
  claim: Pick<ClaimParams, "leaseMs" | "limit" | "channels" | "limited" | "onSent">,
): Promise<SettleAndClaimResult> {
  const result = await rows<SettleAndClaimRow>(
    pinnedOf(db),
    SETTLE_AND_CLAIM_SQL,
    [
      ...settleParams(now, owner, batch),
      claim.leaseMs,
      claim.limit,
      claim.channels,
      claim.limited ?? [],
    ],
    { onSent: claim.onSent },
  );
  const settled = new Set<number>(result[0]?.settled_ids ?? []);
  const claimed: ClaimedDelivery[] = [];
  for (const r of result) {
    if (r.id === null) continue;
    claimed.push(claimedOf(r as ClaimedRow));
  }
  return { settled, claimed };
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
  onSent?: () => void,
): Promise<RenewedLease[]> {
  if (held.length === 0) return [];
  return rows<RenewedLease>(
    db,
    RENEW_SQL,
    [now, owner, leaseMs, held.map((h) => h.id), held.map((h) => h.attempt)],
    { onSent },
  );
}

/** OPS-6 / DEL-16: runs {@link RELEASE_SQL}: gives back claims this worker will not send. */
export async function releaseClaims(
  db: Queryable,
  now: Date | null,
  owner: string,
  held: ReadonlyArray<{ id: number; attempt: number }>,
): Promise<number[]> {
  if (held.length === 0) return [];
  const released = await rows<IdRow>(db, RELEASE_SQL, [
    owner,
    held.map((h) => h.id),
    held.map((h) => h.attempt),
  ]);
  const ids = released.map((r) => r.id);
  await rejudge(db, now, ids, null);
  return ids;
}

/**
 * DEL-10: runs {@link REJUDGE_SQL} for rows whose claim was given back: each lands where
 * its schedule is now, `run_at` moved to `runAt` at the earliest (null: unchanged).
 */
export async function rejudge(
  db: Queryable,
  now: Date | null,
  ids: readonly number[],
  runAt: Date | null,
): Promise<void> {
  if (ids.length === 0) return;
  await execute(db, REJUDGE_SQL, [now, ids, runAt]);
}

/** DEL-16: runs {@link RELEASE_ORPHANS_SQL}. Returns the ids given back. */
export async function releaseOrphans(
  db: Queryable,
  now: Date | null,
  owner: string,
  heldIds: readonly number[],
): Promise<number[]> {
  const released = await rows<IdRow>(db, RELEASE_ORPHANS_SQL, [now, owner, heldIds]);
  const ids = released.map((r) => r.id);
  await rejudge(db, now, ids, null);
  return ids;
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
  return (await rows<NextWake>(pinnedOf(db), NEXT_WAKE_SQL, [now, channels]))[0] ?? null;
}
