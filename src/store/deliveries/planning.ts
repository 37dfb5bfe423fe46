/**
 * The writes of planning, misfire and realign on the delivery rows (DEL-1, DEL-7, DEL-9,
 * REC-6, DEL-15, DEL-17): planned rows inserted, missed rows skipped or marked late, rows
 * of a changed set removed, moved or reopened, and the admission columns rewritten from
 * the schedule. Which schedules need planning and the watermarks are `../planning.ts`.
 * `$1` is always "now" (NULL = database clock).
 */
import type { Queryable } from "../database.js";
import { columnsOf, execute, firstRow } from "../statement.js";
import { NOW } from "./sql.js";
import { staleAtSql } from "./waiting.js";

/**
 * Inserts planned deliveries; a row that exists (same delivery key, or same schedule,
 * reminder and occurrence) is left as it is, so planning is idempotent and safe with many
 * planners. Parameters: $1 now, then parallel arrays $2 keys, $3 schedule ids,
 * $4 reminder keys, $5 occurrence instants, $6 due instants, $7 channels,
 * $8 lost-lease policies, $9 max attempts, $10 quiet-hours deferrals (NULL: not deferred).
 * The admission columns come from the schedule row in the same statement (DEL-3): held
 * (`paused`) unless the schedule is active, its expiry, and `stale_at` (REC-6). Nothing is
 * inserted for a cancelled schedule. DEL-13: `limiter` is `tenant/key`, the key being the
 * reminder's `rate_limit_key` or else the channel name (one primary-key read per row).
 * DEL-15: a deferred row keeps its `due_at` and waits from `deferred_until` (`run_at`),
 * with reason `QUIET_HOURS`; its misfire grace counts from there.
 * API-11: $11 the recipient of each row (NULL: none); API-13: $12 what a critical
 * reminder went past for it (`QUIET_HOURS`; NULL: nothing).
 */
export const INSERT_DELIVERIES_SQL = `
insert into punctual_deliveries
  (delivery_key, schedule_id, reminder_key, occurrence_at, due_at, run_at, channel,
   on_lost_lease, max_attempts, state, expires_at, stale_at, created_at, updated_at,
   deferred_until, deferred_reason, limiter, recipient_id, bypassed)
select u.key, u.schedule_id, u.reminder_key, u.occurrence_at, u.due_at,
       coalesce(u.deferred_until, u.due_at), u.channel, u.on_lost_lease, u.max_attempts,
       case when s.state = 'active' then 'pending' else 'paused' end,
       s.expires_at, ${staleAtSql("s", "coalesce(u.deferred_until, u.due_at)", "0", "false")},
       ${NOW}, ${NOW}, u.deferred_until,
       case when u.deferred_until is not null then 'QUIET_HOURS' end,
       s.tenant || '/' || coalesce((select r.rate_limit_key from punctual_reminders r
                                    where r.schedule_id = u.schedule_id and r.key = u.reminder_key),
                                   u.channel),
       u.recipient_id, u.bypassed
from unnest($2::text[], $3::uuid[], $4::text[], $5::timestamptz[], $6::timestamptz[],
            $7::text[], $8::text[], $9::int[], $10::timestamptz[], $11::text[], $12::text[])
  as u(key, schedule_id, reminder_key, occurrence_at, due_at, channel, on_lost_lease, max_attempts,
       deferred_until, recipient_id, bypassed)
join punctual_schedules s on s.id = u.schedule_id and s.state <> 'cancelled'
on conflict do nothing`;

/**
 * Applies misfire decisions. Parameters: $1 now, $2 ids to skip, $3 their reasons,
 * $4 ids to send late, $5 their paced send times (DEL-17; NULL: unchanged). Only touches
 * rows still waiting; a row kept and late is judged: `stale_at` is cleared, so it is
 * admissible again (DEL-3), from its paced `run_at` on.
 */
export const APPLY_MISFIRE_SQL = `
with skipped as (
  update punctual_deliveries d
  set state = 'skipped', reason = u.reason, stale_at = null, finished_at = ${NOW},
      updated_at = ${NOW}
  from unnest($2::bigint[], $3::text[]) as u(id, reason)
  where d.id = u.id and d.state in ('pending', 'retry')
  returning d.id
),
late as (
  update punctual_deliveries d
  set late = true, stale_at = null, run_at = coalesce(u.run_at, d.run_at), updated_at = ${NOW}
  from unnest($4::bigint[], $5::timestamptz[]) as u(id, run_at)
  where d.id = u.id and d.state = 'pending'
  returning d.id
)
select (select count(*) from skipped) as skipped, (select count(*) from late) as late,
  array(select id from skipped) as skipped_ids`;

/** What {@link APPLY_MISFIRE_SQL} changed. */
export interface MisfireCountsRow {
  skipped: number;
  late: number;
  /** Ids this statement skipped (a row another worker skipped first is not among them). */
  skipped_ids: Array<number | string>;
}

/** Result columns of {@link APPLY_MISFIRE_SQL}. */
export const APPLY_MISFIRE_COLUMNS = columnsOf<MisfireCountsRow>()([
  "skipped",
  "late",
  "skipped_ids",
]);

/**
 * DEL-9: brings waiting rows of the new set in line with it: due time (a changed
 * offset), channel, lost-lease policy and attempt budget (a changed reminder). A `retry`
 * row keeps its retry time unless the new due time is later. Rows an earlier realign
 * cancelled (reason `realigned`, they had attempts) that are back in the set reopen as
 * `retry`, with their history. $1 now, then parallel arrays $2 keys, $3 due instants,
 * $4 channels, $5 lost-lease policies, $6 max attempts, $7 the earliest due instant
 * a reopened row may have (older ones stay cancelled; NULL: no limit), and $8 the
 * quiet-hours deferrals (DEL-15; NULL: not deferred), so an edited window moves rows too.
 * Admission columns (held state, expiry, `stale_at` of a moved row) are rewritten by
 * `SYNC_WAITING_MANY_SQL` (`realign.ts`) afterwards, in the same transaction.
 */
export const REALIGN_MOVE_SQL = `
with u as (
  select * from unnest($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::int[],
                       $8::timestamptz[])
    as u(key, due_at, channel, on_lost_lease, max_attempts, deferred_until)
),
reopened as (
  update punctual_deliveries d
  set state = 'retry', finished_at = null, reason = null, due_at = u.due_at,
      run_at = greatest(coalesce(u.deferred_until, u.due_at), ${NOW}), channel = u.channel,
      deferred_until = u.deferred_until,
      deferred_reason = case when u.deferred_until is not null then 'QUIET_HOURS' end,
      on_lost_lease = u.on_lost_lease, max_attempts = greatest(u.max_attempts, d.failures + 1),
      updated_at = ${NOW}
  from u
  where d.delivery_key = u.key and d.state = 'cancelled' and d.reason = 'realigned'
    and u.due_at >= coalesce($7::timestamptz, '-infinity'::timestamptz)
  returning d.id
),
moved as (
  update punctual_deliveries d
  set due_at = u.due_at,
      run_at = case when d.state = 'pending' then coalesce(u.deferred_until, u.due_at)
                    else greatest(d.run_at, coalesce(u.deferred_until, u.due_at)) end,
      channel = u.channel, on_lost_lease = u.on_lost_lease, max_attempts = u.max_attempts,
      deferred_until = u.deferred_until,
      deferred_reason = case when u.deferred_until is not null then 'QUIET_HOURS' end,
      updated_at = ${NOW}
  from u
  where d.delivery_key = u.key and d.state in ('pending', 'retry', 'paused')
    and (d.due_at, d.channel, d.on_lost_lease, d.max_attempts, d.deferred_until)
        is distinct from (u.due_at, u.channel, u.on_lost_lease, u.max_attempts, u.deferred_until)
  returning d.id
)
select (select count(*) from reopened) + (select count(*) from moved) as moved`;

/** What {@link REALIGN_MOVE_SQL} moved or reopened. */
export interface MovedRow {
  moved: number;
}

/** Result columns of {@link REALIGN_MOVE_SQL}. */
export const REALIGN_MOVE_COLUMNS = columnsOf<MovedRow>()(["moved"]);

// ---------------------------------------------------------------------------------------
// One typed function per statement.

/** A delivery to insert, as {@link insertPlannedDeliveries} takes it. */
export interface DeliveryToInsert {
  key: string;
  scheduleId: string;
  reminderKey: string;
  occurrenceAt: Date;
  dueAt: Date;
  channel: string;
  onLostLease: "retry" | "in_doubt";
  maxAttempts: number;
  /** DEL-15: the end of the quiet window `dueAt` falls in (the row waits until it); null: none. */
  deferredUntil?: Date | null;
  /** API-11: the recipient the row is for; null or absent: none. */
  recipientId?: string | null;
  /** API-13: what a critical reminder went past (`QUIET_HOURS`); null or absent: nothing. */
  bypassed?: string | null;
}

/** Parameters of {@link insertPlannedDeliveries}. */
export interface InsertDeliveriesParams {
  /** Pinned "now" (tests) or null for the database clock. */
  now: Date | null;
  deliveries: readonly DeliveryToInsert[];
}

/**
 * DEL-1 / DEL-7: runs {@link INSERT_DELIVERIES_SQL} for one batch (the caller chunks).
 * @returns the rows created (existing ones are left as they are).
 */
export function insertPlannedDeliveries(tx: Queryable, p: InsertDeliveriesParams): Promise<number> {
  const d = p.deliveries;
  return execute(tx, INSERT_DELIVERIES_SQL, [
    p.now,
    d.map((r) => r.key),
    d.map((r) => r.scheduleId),
    d.map((r) => r.reminderKey),
    d.map((r) => r.occurrenceAt),
    d.map((r) => r.dueAt),
    d.map((r) => r.channel),
    d.map((r) => r.onLostLease),
    d.map((r) => r.maxAttempts),
    d.map((r) => r.deferredUntil ?? null),
    d.map((r) => r.recipientId ?? null),
    d.map((r) => r.bypassed ?? null),
  ]);
}

/** Parameters of {@link recordMisfire}. */
export interface RecordMisfireParams {
  now: Date | null;
  /** Rows to skip, with the reason of each (`stale`, `expired`). */
  skip: ReadonlyArray<{ id: number; reason: string }>;
  /** Rows kept and sent late. */
  lateIds: readonly number[];
  /** DEL-17: paced send time of each of `lateIds` (same order; null: unchanged). Absent: none. */
  lateRunAt?: ReadonlyArray<Date | null>;
}

/** REC-6: runs {@link APPLY_MISFIRE_SQL}: records the misfire policy's decisions. */
export async function recordMisfire(
  db: Queryable,
  p: RecordMisfireParams,
): Promise<MisfireCountsRow | null> {
  return firstRow<MisfireCountsRow>(db, APPLY_MISFIRE_SQL, [
    p.now,
    p.skip.map((s) => s.id),
    p.skip.map((s) => s.reason),
    p.lateIds,
    p.lateIds.map((_, i) => p.lateRunAt?.[i] ?? null),
  ]);
}

/** A delivery of the new set, as {@link realignWaiting} takes it. */
export interface RealignedDelivery {
  key: string;
  dueAt: Date;
  channel: string;
  onLostLease: "retry" | "in_doubt";
  maxAttempts: number;
  /** DEL-15: the quiet-hours deferral of `dueAt`, or null. */
  deferredUntil?: Date | null;
}

/** Parameters of {@link realignWaiting}. */
export interface RealignWaitingParams {
  now: Date | null;
  deliveries: readonly RealignedDelivery[];
  /** The earliest due time a reopened row may have; null: no limit. */
  reopenFrom: Date | null;
}

/** DEL-9: runs {@link REALIGN_MOVE_SQL}. @returns how many rows moved or reopened. */
export async function realignWaiting(tx: Queryable, p: RealignWaitingParams): Promise<number> {
  const d = p.deliveries;
  const row = await firstRow<MovedRow>(tx, REALIGN_MOVE_SQL, [
    p.now,
    d.map((x) => x.key),
    d.map((x) => x.dueAt),
    d.map((x) => x.channel),
    d.map((x) => x.onLostLease),
    d.map((x) => x.maxAttempts),
    p.reopenFrom,
    d.map((x) => x.deferredUntil ?? null),
  ]);
  return Number(row?.moved ?? 0);
}
