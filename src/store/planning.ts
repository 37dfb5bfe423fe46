/**
 * Planning statements (DEL-7, REC-5, REC-6): which schedules need planning, how planned
 * deliveries are inserted, how the watermark advances, and how stale rows are found.
 * Parameters are listed per statement; `$1` is always "now" (NULL = database clock).
 */
import type { ScheduleRow } from "./schedules.js";
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
}

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

/** Reminders of the given schedules. $1 schedule ids. */
export const REMINDERS_OF_SQL = `
select schedule_id, key, offset_duration, channel, on_lost_lease, max_attempts
from punctual_reminders where schedule_id = any($1::uuid[])
order by schedule_id, key`;

/**
 * Inserts planned deliveries; a row that exists (same delivery key, or same schedule,
 * reminder and occurrence) is left as it is, so planning is idempotent and safe with many
 * planners. Parameters: $1 now, then parallel arrays $2 keys, $3 schedule ids,
 * $4 reminder keys, $5 occurrence instants, $6 due instants, $7 channels,
 * $8 lost-lease policies, $9 max attempts.
 * The admission columns come from the schedule row in the same statement (DEL-3): held
 * (`paused`) unless the schedule is active, its expiry, and `stale_at` (REC-6). Nothing is
 * inserted for a cancelled schedule.
 */
export const INSERT_DELIVERIES_SQL = `
insert into punctual_deliveries
  (delivery_key, schedule_id, reminder_key, occurrence_at, due_at, run_at, channel,
   on_lost_lease, max_attempts, state, expires_at, stale_at, created_at, updated_at)
select u.key, u.schedule_id, u.reminder_key, u.occurrence_at, u.due_at, u.due_at, u.channel,
       u.on_lost_lease, u.max_attempts,
       case when s.state = 'active' then 'pending' else 'paused' end,
       s.expires_at, ${staleAtSql("s", "u.due_at", "0", "false")}, ${NOW}, ${NOW}
from unnest($2::text[], $3::uuid[], $4::text[], $5::timestamptz[], $6::timestamptz[],
            $7::text[], $8::text[], $9::int[])
  as u(key, schedule_id, reminder_key, occurrence_at, due_at, channel, on_lost_lease, max_attempts)
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
  occurrence_at: Date;
  due_at: Date;
  misfire: "skip" | "latest" | "all";
  grace_ms: number;
  recurring: boolean;
  expires_at: Date | null;
}

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
select x.id, x.schedule_id, x.reminder_key, x.occurrence_at, x.due_at, s.misfire, s.grace_ms,
       s.recurring, x.expires_at, ${NOW} as db_now
from grp g
join punctual_schedules s on s.id = g.schedule_id
cross join lateral (
  select d.id, d.schedule_id, d.reminder_key, d.occurrence_at, d.due_at, d.expires_at
  from punctual_deliveries d
  where d.schedule_id = g.schedule_id and d.state in ('pending', 'retry')
    and d.reminder_key = g.reminder_key
    and (d.expires_at <= ${NOW}
         or (d.state = 'pending' and d.stale_at <= ${NOW})
         -- 'latest' must also see what is due inside the grace period.
         or (s.misfire = 'latest' and d.state = 'pending' and d.stale_at is not null
             and d.due_at <= ${NOW}))
) x
order by x.schedule_id, x.reminder_key, x.due_at, x.id`;

/**
 * Applies misfire decisions. Parameters: $1 now, $2 ids to skip, $3 their reasons,
 * $4 ids to send late. Only touches rows still waiting; a row kept and late is judged:
 * `stale_at` is cleared, so it is admissible again (DEL-3).
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
  update punctual_deliveries d set late = true, stale_at = null, updated_at = ${NOW}
  where d.id = any($4::bigint[]) and d.state = 'pending'
  returning d.id
)
select (select count(*) from skipped) as skipped, (select count(*) from late) as late`;

/** Locks one schedule for an edit. $1 now, $2 tenant, $3 id. */
export const LOCK_SCHEDULE_FOR_EDIT_SQL = `
select s.*, ${NOW} as db_now
from punctual_schedules s
where s.tenant = $2 and s.id = $3
for update`;

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

/**
 * DEL-9: brings waiting rows of the new set in line with it: due time (a changed
 * offset), channel, lost-lease policy and attempt budget (a changed reminder). A `retry`
 * row keeps its retry time unless the new due time is later. Rows an earlier realign
 * cancelled (reason `realigned`, they had attempts) that are back in the set reopen as
 * `retry`, with their history. $1 now, then parallel arrays $2 keys, $3 due instants,
 * $4 channels, $5 lost-lease policies, $6 max attempts, and $7 the earliest due instant
 * a reopened row may have (older ones stay cancelled; NULL: no limit).
 * Admission columns (held state, expiry, `stale_at` of a moved row) are rewritten by
 * {@link SYNC_WAITING_SQL} afterwards, in the same transaction.
 */
export const REALIGN_MOVE_SQL = `
with u as (
  select * from unnest($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::int[])
    as u(key, due_at, channel, on_lost_lease, max_attempts)
),
reopened as (
  update punctual_deliveries d
  set state = 'retry', finished_at = null, reason = null, due_at = u.due_at,
      run_at = greatest(u.due_at, ${NOW}), channel = u.channel,
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
      run_at = case when d.state = 'pending' then u.due_at else greatest(d.run_at, u.due_at) end,
      channel = u.channel, on_lost_lease = u.on_lost_lease, max_attempts = u.max_attempts,
      updated_at = ${NOW}
  from u
  where d.delivery_key = u.key and d.state in ('pending', 'retry', 'paused')
    and (d.due_at, d.channel, d.on_lost_lease, d.max_attempts)
        is distinct from (u.due_at, u.channel, u.on_lost_lease, u.max_attempts)
  returning d.id
)
select (select count(*) from reopened) + (select count(*) from moved) as moved`;

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
