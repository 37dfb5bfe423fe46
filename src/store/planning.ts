/**
 * Planning statements (DEL-7, REC-5, REC-6): which schedules need planning, how planned
 * deliveries are inserted, how the watermark advances, and how stale rows are found.
 * Parameters are listed per statement; `$1` is always "now" (NULL = database clock).
 */
import type { CatchUp, QuietHours } from "../recurrence/index.js";
import type { Queryable } from "./database.js";
import {
  remindersOfIdsSql,
  SCHEDULE_AT_ROW_KEYS,
  type ScheduleRow,
  type ScheduleRowAt,
} from "./schedules.js";
import { columnsOf, execute, firstRow, rows } from "./statement.js";
import { staleAtSql, syncWaitingSql } from "./waiting.js";

const NOW = "coalesce($1::timestamptz, now())";

/** A schedule as the planner reads it. */
export type PlanScheduleRow = Pick<
  ScheduleRow,
  | "id"
  | "version"
  | "dtstart"
  | "tzid"
  | "rrule"
  | "rdate"
  | "exdate"
  | "recurring"
  | "ends_at"
  | "expires_at"
  | "dst_gap"
  | "dst_overlap"
  | "grace_ms"
  | "perpetual"
  | "created_at"
> & {
  /** Planning watermark: deliveries due before it exist. */
  planned_until: Date | null;
  cap_logged_at: Date | null;
  /** "Now" of the statement that read the row. */
  db_now: Date;
};

export interface PlanReminderRow {
  schedule_id: string;
  key: string;
  offset_duration: string;
  channel: string;
  on_lost_lease: "retry" | "in_doubt" | null;
  max_attempts: number;
  /** DEL-15: the quiet window, or null (absent: none). */
  quiet_hours?: QuietHours | null;
  /** DEL-15: `critical` bypasses the quiet window; null or absent: normal. */
  priority?: "normal" | "critical" | null;
}

/** Result columns of {@link LOCK_SCHEDULES_TO_PLAN_SQL}. */
export const LOCK_SCHEDULES_TO_PLAN_COLUMNS = columnsOf<PlanScheduleRow>()([
  "id",
  "version",
  "dtstart",
  "tzid",
  "rrule",
  "rdate",
  "exdate",
  "recurring",
  "ends_at",
  "expires_at",
  "dst_gap",
  "dst_overlap",
  "grace_ms",
  "perpetual",
  "planned_until",
  "cap_logged_at",
  "created_at",
  "db_now",
]);

/** Result columns of {@link REMINDERS_OF_SQL}. */
export const REMINDERS_OF_COLUMNS = columnsOf<PlanReminderRow>()([
  "schedule_id",
  "key",
  "offset_duration",
  "channel",
  "on_lost_lease",
  "max_attempts",
  "quiet_hours",
  "priority",
]);

/**
 * Locks a batch of active schedules whose watermark is within `$2` ms of now + plan-ahead.
 * Parameters: $1 now, $2 ms ahead of now that must be planned, $3 limit.
 * SKIP LOCKED: many planners at once each take different schedules; none waits.
 */
export const LOCK_SCHEDULES_TO_PLAN_SQL = `
select s.id, s.version, s.dtstart, s.tzid, s.rrule, s.rdate, s.exdate, s.recurring, s.ends_at,
       s.expires_at, s.dst_gap, s.dst_overlap, s.grace_ms, s.perpetual, s.planned_until,
       s.cap_logged_at, s.created_at, ${NOW} as db_now
from punctual_schedules s
where s.state = 'active' and not s.plan_complete
  and (s.planned_until is null or s.planned_until < ${NOW} + make_interval(secs => $2::double precision / 1000))
order by s.planned_until nulls first, s.id
limit $3
for update of s skip locked`;

/**
 * Reminders of the given schedules. $1 schedule ids (repeats read once). OPS-12: by
 * primary key, one lookup per id, so the cost follows the number of ids and not the size
 * of the table, statistics or none ({@link remindersOfIdsSql}; as `schedule_id = any($1)`
 * an import of 50,000 events into an embedded database read the whole table per batch).
 */
export const REMINDERS_OF_SQL = `
select r.schedule_id, r.key, r.offset_duration, r.channel, r.on_lost_lease, r.max_attempts,
       r.quiet_hours, r.priority
from ${remindersOfIdsSql("$1")}
order by r.schedule_id, r.key`;

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
 */
export const INSERT_DELIVERIES_SQL = `
insert into punctual_deliveries
  (delivery_key, schedule_id, reminder_key, occurrence_at, due_at, run_at, channel,
   on_lost_lease, max_attempts, state, expires_at, stale_at, created_at, updated_at,
   deferred_until, deferred_reason, limiter)
select u.key, u.schedule_id, u.reminder_key, u.occurrence_at, u.due_at,
       coalesce(u.deferred_until, u.due_at), u.channel, u.on_lost_lease, u.max_attempts,
       case when s.state = 'active' then 'pending' else 'paused' end,
       s.expires_at, ${staleAtSql("s", "coalesce(u.deferred_until, u.due_at)", "0", "false")},
       ${NOW}, ${NOW}, u.deferred_until,
       case when u.deferred_until is not null then 'QUIET_HOURS' end,
       s.tenant || '/' || coalesce((select r.rate_limit_key from punctual_reminders r
                                    where r.schedule_id = u.schedule_id and r.key = u.reminder_key),
                                   u.channel)
from unnest($2::text[], $3::uuid[], $4::text[], $5::timestamptz[], $6::timestamptz[],
            $7::text[], $8::text[], $9::int[], $10::timestamptz[])
  as u(key, schedule_id, reminder_key, occurrence_at, due_at, channel, on_lost_lease, max_attempts,
       deferred_until)
join punctual_schedules s on s.id = u.schedule_id and s.state <> 'cancelled'
on conflict do nothing`;

/**
 * Advances watermarks. Parameters: $1 now, then parallel arrays $2 ids, $3 new
 * watermarks, $4 complete flags, $5 whether the REC-5 cap was logged now.
 * Only moves forward (`greatest`), so a slow planner never rewinds a faster one.
 */
export const ADVANCE_WATERMARK_SQL = `
update punctual_schedules s
set planned_until = greatest(s.planned_until, u.planned_until),
    plan_complete = s.plan_complete or u.complete,
    cap_logged_at = case when u.cap_logged then coalesce(s.cap_logged_at, ${NOW}) else s.cap_logged_at end
from unnest($2::uuid[], $3::timestamptz[], $4::boolean[], $5::boolean[])
  as u(id, planned_until, complete, cap_logged)
where s.id = u.id`;

/**
 * REC-3: quarantine a schedule whose stored rule no longer parses; its waiting rows are
 * held (`paused`) in the same statement, so nothing of it is claimed (DEL-3).
 * $1 now, $2 id, $3 reason.
 */
export const QUARANTINE_SQL = `
with quarantined as (
  update punctual_schedules set state = 'invalid', invalid_reason = $3, updated_at = ${NOW}
  where id = $2 and state = 'active'
  returning id, state, expires_at, recurring, grace_ms
)
update punctual_deliveries d
${syncWaitingSql("q", "quarantined q")}`;

/** A planned row that missed its time, as the misfire policy sees it. */
export interface StaleRow {
  id: number;
  schedule_id: string;
  reminder_key: string;
  /** Channel of the row (metrics count a skip by channel, OPS-13). */
  channel: string;
  occurrence_at: Date;
  due_at: Date;
  misfire: "skip" | "latest" | "all";
  grace_ms: number;
  recurring: boolean;
  expires_at: Date | null;
  /** DEL-15: the quiet-hours deferral; the row's grace counts from it. */
  deferred_until: Date | null;
  /** DEL-17: the schedule's catch-up bounds, or null. */
  catch_up: CatchUp | null;
  /** "Now" of the statement: the instant the misfire policy judges against. */
  db_now: Date;
}

/** Result columns of {@link SELECT_STALE_SQL}. */
export const SELECT_STALE_COLUMNS = columnsOf<StaleRow>()([
  "id",
  "schedule_id",
  "reminder_key",
  "channel",
  "occurrence_at",
  "due_at",
  "misfire",
  "grace_ms",
  "recurring",
  "expires_at",
  "deferred_until",
  "catch_up",
  "db_now",
]);

/**
 * REC-6: the rows the misfire policy must judge now, whole (schedule, reminder) groups
 * at a time so the policy sees each group's missed rows together:
 * - groups are found through two partial indexes, in the order rows became due for
 *   judgement, at most $2 rows from each: never-tried rows of recurring schedules past
 *   their grace (`stale_at <= now`, index `punctual_deliveries_stale`) and waiting rows
 *   past their schedule's expiry (`expires_at <= now`, index `punctual_deliveries_expiry`,
 *   due or not: nothing of an expired schedule is ever sent);
 * - for each group, every waiting row that is stale or expired, and for `latest` also
 *   the unjudged rows already due inside the grace period (then nothing missed is sent).
 * An idle pass reads two empty index ranges, whatever the table holds.
 * Parameters: $1 now, $2 limit per index. Ordered so one (schedule, reminder) is
 * contiguous, oldest first.
 */
export const SELECT_STALE_SQL = `
with picked as (
  (select d.schedule_id, d.reminder_key from punctual_deliveries d
    where d.state = 'pending' and d.stale_at is not null and d.stale_at <= ${NOW}
    order by d.stale_at, d.id
    limit $2)
  union all
  (select d.schedule_id, d.reminder_key from punctual_deliveries d
    where d.state in ('pending', 'retry') and d.expires_at is not null and d.expires_at <= ${NOW}
    order by d.expires_at, d.id
    limit $2)
),
grp as (select distinct schedule_id, reminder_key from picked)
select x.id, x.schedule_id, x.reminder_key, x.channel, x.occurrence_at, x.due_at, s.misfire, s.grace_ms,
       s.recurring, x.expires_at, x.deferred_until, s.catch_up, ${NOW} as db_now
from grp g
join punctual_schedules s on s.id = g.schedule_id
cross join lateral (
  select d.id, d.schedule_id, d.reminder_key, d.channel, d.occurrence_at, d.due_at, d.expires_at,
         d.deferred_until
  from punctual_deliveries d
  where d.schedule_id = g.schedule_id and d.state in ('pending', 'retry')
    and d.reminder_key = g.reminder_key
    and (d.expires_at <= ${NOW}
         or (d.state = 'pending' and d.stale_at <= ${NOW})
         -- 'latest' must also see what is due inside the grace period.
         or (s.misfire = 'latest' and d.state = 'pending' and d.stale_at is not null
             and coalesce(d.deferred_until, d.due_at) <= ${NOW}))
) x
order by x.schedule_id, x.reminder_key, x.due_at, x.id`;

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

/** Locks one schedule for an edit. $1 now, $2 tenant, $3 id. */
export const LOCK_SCHEDULE_FOR_EDIT_SQL = `
select s.*, ${NOW} as db_now
from punctual_schedules s
where s.tenant = $2 and s.id = $3
for update`;

/** Result columns of {@link LOCK_SCHEDULE_FOR_EDIT_SQL}. */
export const LOCK_SCHEDULE_FOR_EDIT_COLUMNS = SCHEDULE_AT_ROW_KEYS;

/** The earliest due time among a schedule's waiting rows (NULL: none). */
export interface OldestWaitingRow {
  oldest: Date | null;
}

/** Oldest waiting delivery of a schedule (realign checks membership from there). $1 schedule id */
export const OLDEST_WAITING_SQL = `
select min(due_at) as oldest from punctual_deliveries
where schedule_id = $1 and state in ('pending', 'retry', 'paused')`;

/**
 * DEL-9: removes waiting rows (`pending`, `retry`, `paused`) of a schedule whose key is not in the
 * new set: never-tried rows are deleted; rows with attempts are kept for their history
 * (DEL-14) and become `cancelled`, reason `realigned`. Claimed, sent, dead, in-doubt and
 * skipped rows are untouched. $1 now, $2 schedule id, $3 keys of the new set.
 * Returns `removed`.
 */
export const REALIGN_DELETE_SQL = `
with gone as (
  -- Locked, so a claim that commits first is seen (and the row then skipped below):
  -- an edit never deletes or cancels a row a worker has just claimed.
  select id, attempt from punctual_deliveries
  where schedule_id = $2 and state in ('pending', 'retry', 'paused')
    and not (delivery_key = any($3::text[]))
    -- API-9: a triggered delivery is outside the recurrence: an edit leaves it (0014).
    and not exists (select 1 from punctual_triggers t where t.delivery_id = punctual_deliveries.id)
  for update
),
deleted as (
  delete from punctual_deliveries d using gone g
  where d.id = g.id and g.attempt = 0 and d.state in ('pending', 'retry', 'paused')
  returning d.id
),
cancelled as (
  update punctual_deliveries d
  set state = 'cancelled', reason = 'realigned', finished_at = ${NOW}, updated_at = ${NOW}
  from gone g
  where d.id = g.id and g.attempt > 0 and d.state in ('pending', 'retry', 'paused')
  returning d.id
)
select (select count(*) from deleted) + (select count(*) from cancelled) as removed`;

/** What {@link REALIGN_DELETE_SQL} removed. */
export interface RemovedRow {
  removed: number;
}

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
 * {@link SYNC_WAITING_SQL} afterwards, in the same transaction.
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

/** Sets the watermark after a realign (may move it back). $1 id, $2 watermark, $3 complete */
export const SET_WATERMARK_SQL = `
update punctual_schedules set planned_until = $2, plan_complete = $3 where id = $1`;

/**
 * DEL-3 / DEL-9 / DEL-10: rewrites the admission columns of a schedule's waiting rows
 * from the schedule as it is now (held or not, expiry, `stale_at` for its grace and
 * recurrence). Run by an edit after the schedule row and the rows moved, in the same
 * transaction. $1 now, $2 schedule id. Returns `synced`.
 */
export const SYNC_WAITING_SQL = `
with synced as (
  update punctual_deliveries d
  ${syncWaitingSql("s", "punctual_schedules s")}
    and s.id = $2
  returning d.id
)
select count(*) as synced from synced`;

/** What {@link SYNC_WAITING_SQL} rewrote. */
export interface SyncedRow {
  synced: number;
}

/** Result columns of {@link OLDEST_WAITING_SQL}. */
export const OLDEST_WAITING_COLUMNS = columnsOf<OldestWaitingRow>()(["oldest"]);
/** Result columns of {@link REALIGN_DELETE_SQL}. */
export const REALIGN_DELETE_COLUMNS = columnsOf<RemovedRow>()(["removed"]);
/** Result columns of {@link REALIGN_MOVE_SQL}. */
export const REALIGN_MOVE_COLUMNS = columnsOf<MovedRow>()(["moved"]);
/** Result columns of {@link SYNC_WAITING_SQL}. */
export const SYNC_WAITING_COLUMNS = columnsOf<SyncedRow>()(["synced"]);

// ---------------------------------------------------------------------------------------
// One typed function per statement.

/** Parameters of {@link lockSchedulesToPlan}. */
export interface LockSchedulesToPlanParams {
  /** Pinned "now" (tests) or null for the database clock. */
  now: Date | null;
  /** Schedules whose watermark is within this many ms of now must be planned. */
  aheadMs: number;
  /** Most schedules to lock. */
  limit: number;
}

/** DEL-7: runs {@link LOCK_SCHEDULES_TO_PLAN_SQL} (row locks held until `tx` ends). */
export function lockSchedulesToPlan(
  tx: Queryable,
  p: LockSchedulesToPlanParams,
): Promise<PlanScheduleRow[]> {
  return rows<PlanScheduleRow>(tx, LOCK_SCHEDULES_TO_PLAN_SQL, [p.now, p.aheadMs, p.limit]);
}

/** DEL-7 / DEL-9: runs {@link REMINDERS_OF_SQL}: the reminders of `scheduleIds`, by schedule and key. */
export function remindersOf(
  db: Queryable,
  p: { scheduleIds: readonly string[] },
): Promise<PlanReminderRow[]> {
  return rows<PlanReminderRow>(db, REMINDERS_OF_SQL, [p.scheduleIds]);
}

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
  ]);
}

/** A watermark to advance, as {@link advanceWatermarks} takes it. */
export interface WatermarkMark {
  id: string;
  /** New watermark: everything due before it is planned. */
  until: Date;
  /** No occurrence left after it. */
  complete: boolean;
  /** REC-5: the expansion cap was logged by this pass. */
  capLogged: boolean;
}

/** DEL-7 / REC-5: runs {@link ADVANCE_WATERMARK_SQL} (forward only). */
export async function advanceWatermarks(
  tx: Queryable,
  p: { now: Date | null; marks: readonly WatermarkMark[] },
): Promise<void> {
  await execute(tx, ADVANCE_WATERMARK_SQL, [
    p.now,
    p.marks.map((m) => m.id),
    p.marks.map((m) => m.until),
    p.marks.map((m) => m.complete),
    p.marks.map((m) => m.capLogged),
  ]);
}

/** Parameters of {@link quarantineSchedule}. */
export interface QuarantineParams {
  now: Date | null;
  scheduleId: string;
  /** Why its stored rule no longer parses (kept as `invalid_reason`). */
  reason: string;
}

/** REC-3: runs {@link QUARANTINE_SQL}: the schedule becomes `invalid`, its waiting rows held. */
export async function quarantineSchedule(tx: Queryable, p: QuarantineParams): Promise<void> {
  await execute(tx, QUARANTINE_SQL, [p.now, p.scheduleId, p.reason]);
}

/** REC-6: runs {@link SELECT_STALE_SQL}: at most `limitPerIndex` rows from each index, whole groups. */
export function selectStale(
  db: Queryable,
  p: { now: Date | null; limitPerIndex: number },
): Promise<StaleRow[]> {
  return rows<StaleRow>(db, SELECT_STALE_SQL, [p.now, p.limitPerIndex]);
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

/** Parameters of {@link lockScheduleForEdit}. */
export interface LockScheduleForEditParams {
  now: Date | null;
  tenant: string;
  id: string;
}

/** DEL-9: runs {@link LOCK_SCHEDULE_FOR_EDIT_SQL}; `null` when the tenant has no such schedule. */
export function lockScheduleForEdit(
  tx: Queryable,
  p: LockScheduleForEditParams,
): Promise<ScheduleRowAt | null> {
  return firstRow<ScheduleRowAt>(tx, LOCK_SCHEDULE_FOR_EDIT_SQL, [p.now, p.tenant, p.id]);
}

/** DEL-9: runs {@link OLDEST_WAITING_SQL}: the earliest due time of the schedule's waiting rows, or null. */
export async function oldestWaiting(
  tx: Queryable,
  p: { scheduleId: string },
): Promise<Date | null> {
  return (await firstRow<OldestWaitingRow>(tx, OLDEST_WAITING_SQL, [p.scheduleId]))?.oldest ?? null;
}

/** Parameters of {@link removeWaitingNotIn}. */
export interface RemoveWaitingParams {
  now: Date | null;
  scheduleId: string;
  /** Delivery keys of the new set: waiting rows with any other key go. */
  keys: readonly string[];
}

/** DEL-9: runs {@link REALIGN_DELETE_SQL}. @returns how many rows were deleted or cancelled. */
export async function removeWaitingNotIn(tx: Queryable, p: RemoveWaitingParams): Promise<number> {
  const row = await firstRow<RemovedRow>(tx, REALIGN_DELETE_SQL, [p.now, p.scheduleId, p.keys]);
  return Number(row?.removed ?? 0);
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

/** Parameters of {@link setWatermark}. */
export interface SetWatermarkParams {
  scheduleId: string;
  plannedUntil: Date;
  complete: boolean;
}

/** DEL-9: runs {@link SET_WATERMARK_SQL} (may move the watermark back). */
export async function setWatermark(tx: Queryable, p: SetWatermarkParams): Promise<void> {
  await execute(tx, SET_WATERMARK_SQL, [p.scheduleId, p.plannedUntil, p.complete]);
}

/** DEL-3 / DEL-9 / DEL-10: runs {@link SYNC_WAITING_SQL}. @returns how many rows were rewritten. */
export async function syncWaiting(
  tx: Queryable,
  p: { now: Date | null; scheduleId: string },
): Promise<number> {
  const row = await firstRow<SyncedRow>(tx, SYNC_WAITING_SQL, [p.now, p.scheduleId]);
  return Number(row?.synced ?? 0);
}

/**
 * API-8 (testing kit): the lowest planning watermark among active schedules that still
 * plan. The kit's `runUntil` reads it to stop the test
 * clock where the plan sweep has work (watermark minus half the plan-ahead, the sweep's
 * own test), so jumping ahead never skips planning. Read-only; across tenants, like the
 * sweep it predicts. No parameters.
 */
export const NEXT_PLANNING_SQL = `
select min(s.planned_until) as planned_until
from punctual_schedules s
where s.state = 'active' and not s.plan_complete`;

/** A row of {@link NEXT_PLANNING_SQL}. */
export interface NextPlanningRow {
  /** Lowest watermark, or null when no schedule plans (or none was planned yet). */
  planned_until: Date | null;
}

/** Result columns of {@link NEXT_PLANNING_SQL}. */
export const NEXT_PLANNING_COLUMNS = columnsOf<NextPlanningRow>()(["planned_until"]);

/** API-8: runs {@link NEXT_PLANNING_SQL}. */
export async function nextPlanning(db: Queryable): Promise<NextPlanningRow> {
  return (await firstRow<NextPlanningRow>(db, NEXT_PLANNING_SQL, [])) ?? { planned_until: null };
}
