/**
 * Planning statements (DEL-7, REC-5, REC-6): which schedules need planning, how the
 * watermark advances, and how stale rows are found. The writes of the delivery rows that
 * planning, misfire and realign make (insert, skip, mark late, remove, move, sync) live in
 * `deliveries/planning.ts`.
 * Parameters are listed per statement; `$1` is always "now" (NULL = database clock).
 */
import type { CatchUp, QuietHours } from "../recurrence/index.js";
import type { Queryable } from "./database.js";
import {
  remindersOfIdsSql,
  SCHEDULE_AT_ROW_KEYS,
  SCHEDULE_TIMING_KEYS,
  type ScheduleRow,
  type ScheduleTimingKey,
  type ScheduleRowAt,
} from "./schedules.js";
import { NOW } from "./deliveries/sql.js";
import { syncWaitingSql } from "./deliveries/waiting.js";
import {
  columnsOf,
  execute,
  firstRow,
  firstRowStatement,
  rows,
  rowsStatement,
} from "./statement.js";

/** A schedule as the planner reads it. */
export type PlanScheduleRow = Pick<
  ScheduleRow,
  "id" | "version" | ScheduleTimingKey | "grace_ms" | "perpetual" | "created_at" | "trace_parent"
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
  ...SCHEDULE_TIMING_KEYS,
  "grace_ms",
  "perpetual",
  "planned_until",
  "cap_logged_at",
  "created_at",
  "trace_parent",
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
 * Locks a batch of active schedules whose watermark is within `$2` ms of now + plan-ahead,
 * returning {@link LOCK_SCHEDULES_TO_PLAN_COLUMNS}. Parameters: $1 now, $2 ms ahead of now
 * that must be planned, $3 limit.
 * SKIP LOCKED: many planners at once each take different schedules; none waits.
 */
export const LOCK_SCHEDULES_TO_PLAN_SQL = `
select ${LOCK_SCHEDULES_TO_PLAN_COLUMNS.filter((c) => c !== "db_now")
  .map((c) => `s.${c}`)
  .join(", ")}, ${NOW} as db_now
from punctual_schedules s
where s.state = 'active' and not s.plan_complete
  and (s.planned_until is null or s.planned_until < ${NOW} + make_interval(secs => $2::double precision / 1000))
  -- API-11: a schedule for recipients is planned per recipient (deliveries/recipients.ts).
  and not exists (select 1 from punctual_schedule_audiences a where a.schedule_id = s.id)
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
${syncWaitingSql("q", "quarantined q")}`;

/** A planned row that missed its time, as the misfire policy sees it. */
export interface StaleRow {
  id: number;
  schedule_id: string;
  reminder_key: string;
  /** API-11: the row's recipient, or null: each recipient's rows are judged apart. */
  recipient_id: string | null;
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
  "recipient_id",
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
 * Parameters: $1 now, $2 limit per index. Ordered so one (schedule, reminder, recipient)
 * is contiguous, oldest first: the policy judges each recipient's rows apart (API-11), so
 * `latest` keeps each person's most recent missed occurrence.
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
select x.id, x.schedule_id, x.reminder_key, x.recipient_id, x.channel, x.occurrence_at, x.due_at,
       s.misfire, s.grace_ms, s.recurring, x.expires_at, x.deferred_until, s.catch_up,
       ${NOW} as db_now
from grp g
join punctual_schedules s on s.id = g.schedule_id
cross join lateral (
  select d.id, d.schedule_id, d.reminder_key, d.recipient_id, d.channel, d.occurrence_at,
         d.due_at, d.expires_at, d.deferred_until
  from punctual_deliveries d
  where d.schedule_id = g.schedule_id and d.state in ('pending', 'retry')
    and d.reminder_key = g.reminder_key
    and (d.expires_at <= ${NOW}
         or (d.state = 'pending' and d.stale_at <= ${NOW})
         -- 'latest' must also see what is due inside the grace period.
         or (s.misfire = 'latest' and d.state = 'pending' and d.stale_at is not null
             and coalesce(d.deferred_until, d.due_at) <= ${NOW}))
) x
order by x.schedule_id, x.reminder_key, x.recipient_id, x.due_at, x.id`;

/** Locks one schedule for an edit. $1 now, $2 tenant, $3 id. */
export const LOCK_SCHEDULE_FOR_EDIT_SQL = `
select s.*, ${NOW} as db_now
from punctual_schedules s
where s.tenant = $2 and s.id = $3
for update`;

/** Result columns of {@link LOCK_SCHEDULE_FOR_EDIT_SQL}. */
export const LOCK_SCHEDULE_FOR_EDIT_COLUMNS = SCHEDULE_AT_ROW_KEYS;

/**
 * DEL-9 / API-5: locks the tenant's schedules $3 for an edit of them all (an import's
 * chunk), in id order; ids the tenant does not have are left out. $1 now, $2 tenant.
 */
export const LOCK_SCHEDULES_FOR_EDIT_SQL = `
select s.*, ${NOW} as db_now
from (select distinct unnest($3::uuid[]) as id) ids
cross join lateral (
  select * from punctual_schedules x where x.id = ids.id and x.tenant = $2 offset 0
) s
order by s.id
for update of s`;

/** Result columns of {@link LOCK_SCHEDULES_FOR_EDIT_SQL}. */
export const LOCK_SCHEDULES_FOR_EDIT_COLUMNS = SCHEDULE_AT_ROW_KEYS;

/** The earliest due time among one schedule's waiting rows. */
export interface OldestWaitingManyRow {
  schedule_id: string;
  oldest: Date;
}

/**
 * DEL-9: the earliest due time of the waiting rows of each of the schedules $1 (a schedule
 * without waiting rows is left out).
 */
export const OLDEST_WAITING_MANY_SQL = `
select ids.id as schedule_id, w.oldest
from (select distinct unnest($1::uuid[]) as id) ids
cross join lateral (
  select min(d.due_at) as oldest from punctual_deliveries d
  where d.schedule_id = ids.id and d.state in ('pending', 'retry', 'paused')
) w
where w.oldest is not null`;

/** Result columns of {@link OLDEST_WAITING_MANY_SQL}. */
export const OLDEST_WAITING_MANY_COLUMNS = columnsOf<OldestWaitingManyRow>()([
  "schedule_id",
  "oldest",
]);

/**
 * DEL-9: sets the watermarks of the realigned schedules, forward or back (unlike
 * {@link ADVANCE_WATERMARK_SQL}). Parallel arrays: $1 ids, $2 watermarks, $3 complete flags.
 */
export const SET_WATERMARKS_SQL = `
update punctual_schedules s set planned_until = u.until, plan_complete = u.complete
from unnest($1::uuid[], $2::timestamptz[], $3::boolean[]) as u(id, until, complete)
where s.id = u.id`;

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
export const lockSchedulesToPlan = rowsStatement<PlanScheduleRow, LockSchedulesToPlanParams>(
  LOCK_SCHEDULES_TO_PLAN_SQL,
  (p) => [p.now, p.aheadMs, p.limit],
);

/** DEL-7 / DEL-9: runs {@link REMINDERS_OF_SQL}: the reminders of `scheduleIds`, by schedule and key. */
export const remindersOf = rowsStatement<PlanReminderRow, { scheduleIds: readonly string[] }>(
  REMINDERS_OF_SQL,
  (p) => [p.scheduleIds],
);

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
export const selectStale = rowsStatement<StaleRow, { now: Date | null; limitPerIndex: number }>(
  SELECT_STALE_SQL,
  (p) => [p.now, p.limitPerIndex],
);

/** Parameters of {@link lockScheduleForEdit}. */
export interface LockScheduleForEditParams {
  now: Date | null;
  tenant: string;
  id: string;
}

/** DEL-9: runs {@link LOCK_SCHEDULE_FOR_EDIT_SQL}; `null` when the tenant has no such schedule. */
export const lockScheduleForEdit = firstRowStatement<ScheduleRowAt, LockScheduleForEditParams>(
  LOCK_SCHEDULE_FOR_EDIT_SQL,
  (p) => [p.now, p.tenant, p.id],
);

/** DEL-9 / API-5: runs {@link LOCK_SCHEDULES_FOR_EDIT_SQL} (row locks held until `tx` ends). */
export const lockSchedulesForEdit = rowsStatement<
  ScheduleRowAt,
  { now: Date | null; tenant: string; ids: readonly string[] }
>(LOCK_SCHEDULES_FOR_EDIT_SQL, (p) => [p.now, p.tenant, p.ids]);

/** DEL-9: runs {@link OLDEST_WAITING_MANY_SQL}: by schedule id, the earliest due time of its waiting rows. */
export async function oldestWaitingMany(
  tx: Queryable,
  p: { scheduleIds: readonly string[] },
): Promise<Map<string, Date>> {
  const found = await rows<OldestWaitingManyRow>(tx, OLDEST_WAITING_MANY_SQL, [p.scheduleIds]);
  return new Map(found.map((r) => [r.schedule_id, r.oldest]));
}

/** DEL-9: runs {@link SET_WATERMARKS_SQL} (may move the watermarks back). */
export async function setWatermarks(
  tx: Queryable,
  p: { marks: readonly SetWatermarkParams[] },
): Promise<void> {
  await execute(tx, SET_WATERMARKS_SQL, [
    p.marks.map((m) => m.scheduleId),
    p.marks.map((m) => m.plannedUntil),
    p.marks.map((m) => m.complete),
  ]);
}

/** A watermark set after a realign, as {@link setWatermarks} takes it. */
export interface SetWatermarkParams {
  scheduleId: string;
  plannedUntil: Date;
  complete: boolean;
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
