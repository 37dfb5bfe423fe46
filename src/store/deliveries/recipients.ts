/**
 * Schedules for recipients (API-11, API-12, API-13): statements over
 * `punctual_schedule_audiences` and `punctual_schedule_recipients` (migration 0035), and
 * the writes they make on the delivery rows of recipients (cancel on removal, clear on a
 * zone change), and the fenced writes of a claimed delivery a recipient's state stops
 * (skipped at send: no target, opted out, no longer on the schedule) or a critical
 * reminder goes past. `$1` is "now" (NULL: the database clock) where present.
 *
 * Invariant: a schedule with an audience row is planned per recipient, through each
 * membership's own watermark ({@link LOCK_MEMBERS_TO_PLAN_SQL}), never by the
 * schedule-level sweep; every statement that reads recipients is scoped by tenant, so a
 * recipient of another tenant is never added, read or changed.
 */
import type { DstPolicy, QuietHours } from "../../recurrence/index.js";
import { PINNED_SETTINGS, type Queryable } from "../database.js";
import type { PlanScheduleRow } from "../planning.js";
import { DELIVERY_ROW_KEYS, SCHEDULE_TIMING_KEYS, type DeliveryRow } from "../schedules.js";
import { columnsOf, execute, firstRow, rows } from "../statement.js";
import { heldBy, NOW } from "./sql.js";
import { staleAtSql } from "./waiting.js";

/**
 * API-11: makes a schedule one for recipients (or changes whether it is floating);
 * nothing for a schedule that does not exist. $1 schedule id, $2 floating.
 */
export const PUT_AUDIENCE_SQL = `
insert into punctual_schedule_audiences (schedule_id, floating)
select s.id, $2 from punctual_schedules s where s.id = $1
on conflict (schedule_id) do update set floating = excluded.floating`;

/** API-11: which of the schedules `$1` (uuid[]) are floating. */
export const FLOATING_OF_SQL = `
select a.schedule_id as id from punctual_schedule_audiences a
where a.schedule_id = any($1::uuid[]) and a.floating`;

/** Result columns of {@link FLOATING_OF_SQL}. */
export const FLOATING_OF_COLUMNS = columnsOf<{ id: string }>()(["id"]);

/** API-11: runs {@link FLOATING_OF_SQL}. @returns the ids of the floating schedules. */
export async function floatingOf(
  db: Queryable,
  p: { scheduleIds: readonly string[] },
): Promise<Set<string>> {
  if (p.scheduleIds.length === 0) return new Set();
  const out = await rows<{ id: string }>(db, FLOATING_OF_SQL, [p.scheduleIds]);
  return new Set(out.map((r) => r.id));
}

/** The audience of a schedule: whether it has one and is floating. $1 schedule id. */
export const AUDIENCE_OF_SQL = `
select a.floating,
       (select count(*) from punctual_schedule_recipients m where m.schedule_id = a.schedule_id)
         as recipients
from punctual_schedule_audiences a where a.schedule_id = $1`;

/** A schedule's audience. */
export interface AudienceRow {
  floating: boolean;
  /** How many recipients the schedule has. */
  recipients: number;
}

/** Result columns of {@link AUDIENCE_OF_SQL}. */
export const AUDIENCE_OF_COLUMNS = columnsOf<AudienceRow>()(["floating", "recipients"]);

/**
 * API-11: the ids of `$2` that are not recipients of tenant `$1` (another tenant's are
 * "not found" too). $1 tenant, $2 ids text[].
 */
export const MISSING_RECIPIENTS_SQL = `
select u.id from unnest($2::text[]) as u(id)
where not exists (select 1 from punctual_recipients r where r.tenant = $1 and r.id = u.id)
order by u.id`;

/** One id of {@link MISSING_RECIPIENTS_SQL}. */
export interface MissingRow {
  id: string;
}

/** Result columns of {@link MISSING_RECIPIENTS_SQL}. */
export const MISSING_RECIPIENTS_COLUMNS = columnsOf<MissingRow>()(["id"]);

/**
 * API-11 / API-12: adds recipients to a schedule; one already there is left as it is.
 * `$5` is the watermark of the new memberships: NULL at the schedule's creation (planned
 * like a new schedule), "now" when added later (planned from now, never backfilled).
 * $1 now, $2 schedule id, $3 tenant, $4 ids text[], $5 watermark. Returns `added`.
 */
export const ADD_MEMBERS_SQL = `
with added as (
  insert into punctual_schedule_recipients (schedule_id, tenant, recipient_id, planned_until, added_at)
  select $2, $3, u.id, $5::timestamptz, ${NOW} from unnest($4::text[]) as u(id)
  on conflict (schedule_id, recipient_id) do nothing
  returning recipient_id
)
select count(*) as added from added`;

/** What {@link ADD_MEMBERS_SQL} added. */
export interface AddedRow {
  added: number;
}

/** Result columns of {@link ADD_MEMBERS_SQL}. */
export const ADD_MEMBERS_COLUMNS = columnsOf<AddedRow>()(["added"]);

/**
 * API-12: removes recipients from a schedule (`$3` the ids; NULL: every recipient not in
 * `$4`, for a replaced list) and cancels their waiting deliveries on it (reason
 * `recipient_removed`); claimed rows are judged at send, where a recipient no longer on
 * the schedule is skipped. $1 now, $2 schedule id, $3 ids text[] or NULL, $4 kept ids
 * text[] (with $3 NULL). Returns `removed` (memberships) and `cancelled` (deliveries).
 */
export const REMOVE_MEMBERS_SQL = `
with gone as (
  delete from punctual_schedule_recipients m
  where m.schedule_id = $2
    and (case when $3::text[] is null then not (m.recipient_id = any($4::text[]))
              else m.recipient_id = any($3::text[]) end)
  returning m.recipient_id
),
cancelled as (
  update punctual_deliveries d
  set state = 'cancelled', reason = 'recipient_removed', finished_at = ${NOW}, updated_at = ${NOW}
  where d.recipient_id = any(array(select recipient_id from gone)) and d.schedule_id = $2
    and d.state in ('pending', 'retry', 'paused')
  returning d.id
)
select (select count(*) from gone) as removed, (select count(*) from cancelled) as cancelled`;

/** What {@link REMOVE_MEMBERS_SQL} and {@link FORGET_RECIPIENT_SQL} changed. */
export interface RemovedMembersRow {
  removed: number;
  cancelled: number;
}

/** Result columns of {@link REMOVE_MEMBERS_SQL}. */
export const REMOVE_MEMBERS_COLUMNS = columnsOf<RemovedMembersRow>()(["removed", "cancelled"]);

/**
 * API-12: a recipient leaves the registry: its waiting deliveries on every schedule of the
 * tenant are cancelled (reason `recipient_removed`) and its memberships deleted (the
 * deletion of the recipient row would cascade to them; done here so the count is known).
 * Run in the transaction that deletes the recipient. $1 now, $2 tenant, $3 recipient id.
 */
export const FORGET_RECIPIENT_SQL = `
with gone as (
  delete from punctual_schedule_recipients m
  where m.tenant = $2 and m.recipient_id = $3
  returning m.schedule_id
),
cancelled as (
  update punctual_deliveries d
  set state = 'cancelled', reason = 'recipient_removed', finished_at = ${NOW}, updated_at = ${NOW}
  from punctual_schedules s
  where d.recipient_id = $3 and d.state in ('pending', 'retry', 'paused')
    and s.id = d.schedule_id and s.tenant = $2
  returning d.id
)
select (select count(*) from gone) as removed, (select count(*) from cancelled) as cancelled`;

/** Result columns of {@link FORGET_RECIPIENT_SQL}. */
export const FORGET_RECIPIENT_COLUMNS = REMOVE_MEMBERS_COLUMNS;

/**
 * API-12 (DEL-9 rules): the future of some memberships is planned again from now — a
 * recipient's zone or quiet hours changed, or the schedule was edited. Waiting rows due
 * from now on that were never tried are deleted (the planner writes them again as they
 * are now: another instant in a new zone, the same key where nothing moved); rows already
 * tried keep their history and their retry. Rows moved in place before, in the same
 * transaction ({@link MOVE_MEMBER_DELIVERIES_SQL}: a floating occurrence kept under its key
 * at its instant in the new zone), are kept (`$5`). Each membership's watermark goes back
 * to now (one never planned stays so). Rows `$6` (never tried, waiting, of those
 * memberships) are deleted whatever their due time: an edit's rows already due whose
 * occurrence left the schedule (DEL-9). $1 now, $2 tenant, $3 recipient ids text[] or NULL
 * (all), $4 schedule id or NULL (all of the tenant's), $5 ids of rows to keep bigint[], $6
 * ids of rows to clear bigint[]. Returns `replanned` (memberships) and `cleared`
 * (deliveries deleted).
 */
export const REPLAN_MEMBERS_SQL = `
with m as (
  update punctual_schedule_recipients m
  set planned_until = least(m.planned_until, ${NOW})
  where m.tenant = $2
    and ($3::text[] is null or m.recipient_id = any($3::text[]))
    and ($4::uuid is null or m.schedule_id = $4::uuid)
  returning m.schedule_id, m.recipient_id
),
cleared as (
  delete from punctual_deliveries d
  using m
  where d.recipient_id = m.recipient_id and d.schedule_id = m.schedule_id
    and d.state in ('pending', 'retry', 'paused') and d.attempt = 0
    and (d.due_at >= ${NOW} or d.id = any($6::bigint[]))
    and not exists (select 1 from punctual_triggers t where t.delivery_id = d.id)
    and not (d.id = any($5::bigint[]))
  returning d.id
)
select (select count(*) from m) as replanned, (select count(*) from cleared) as cleared`;

/** What {@link REPLAN_MEMBERS_SQL} changed. */
export interface ReplannedRow {
  replanned: number;
  cleared: number;
}

/** Result columns of {@link REPLAN_MEMBERS_SQL}. */
export const REPLAN_MEMBERS_COLUMNS = columnsOf<ReplannedRow>()(["replanned", "cleared"]);

/**
 * API-12 / DEL-9: locks the memberships of recipients `$2` of tenant `$1` (in key order),
 * before their rows are read for a realign: a planner that holds one finishes first, so
 * the rows it wrote in the old zone are seen (and moved) by the statements that follow.
 * Returns `locked`.
 */
export const LOCK_RECIPIENT_MEMBERSHIPS_SQL = `
with locked as (
  select m.schedule_id from punctual_schedule_recipients m
  where m.tenant = $1 and m.recipient_id = any($2::text[])
  order by m.schedule_id, m.recipient_id
  for update of m
)
select count(*) as locked from locked`;

/** Result columns of {@link LOCK_RECIPIENT_MEMBERSHIPS_SQL}. */
export const LOCK_RECIPIENT_MEMBERSHIPS_COLUMNS = columnsOf<{ locked: number }>()(["locked"]);

/** The columns of a row {@link MOVABLE_MEMBER_ROWS_SQL} and {@link MOVABLE_SCHEDULE_ROWS_SQL} read. */
const MOVABLE_COLUMNS_SQL = `d.id, d.schedule_id, d.recipient_id, d.reminder_key, d.delivery_key,
       d.occurrence_at, d.due_at, d.attempt, a.floating, s.tzid, s.dtstart, s.rrule, s.rdate, s.exdate,
       s.ends_at, s.dst_gap, s.dst_overlap, r.tzid as recipient_tzid,
       r.preferences -> 'quietHours' as recipient_quiet_hours`;

/**
 * API-12 / DEL-9 / REC-6: the waiting rows a zone change moves rather than clears — the
 * never-tried, untriggered rows due from now on of recipients `$3` of tenant `$2` on
 * floating schedules (the rows {@link REPLAN_MEMBERS_SQL} would clear), locked, each with
 * what its move needs: its key (a floating key names the occurrence's local date-time,
 * whatever the zone), its occurrence instant, the schedule's rule and the recipient's zone
 * and quiet window as they are now. Claimed, tried and finished rows are not read, so
 * never moved. $1 now, $2 tenant, $3 recipient ids text[]. Ordered by schedule,
 * recipient, occurrence.
 */
export const MOVABLE_MEMBER_ROWS_SQL = `
select ${MOVABLE_COLUMNS_SQL}
from punctual_schedule_recipients m
join punctual_schedule_audiences a on a.schedule_id = m.schedule_id and a.floating
join punctual_schedules s on s.id = m.schedule_id
join punctual_recipients r on r.tenant = m.tenant and r.id = m.recipient_id
join punctual_deliveries d on d.recipient_id = m.recipient_id and d.schedule_id = m.schedule_id
where m.tenant = $2 and m.recipient_id = any($3::text[])
  and d.state in ('pending', 'retry', 'paused') and d.attempt = 0 and d.due_at >= ${NOW}
  and not exists (select 1 from punctual_triggers t where t.delivery_id = d.id)
order by d.schedule_id, d.recipient_id, d.occurrence_at, d.id
for update of d`;

/**
 * DEL-9 / REC-6 (API-12): the waiting rows of a schedule for recipients that its edit
 * realigns — never tried or waiting to retry (DEL-4), untriggered, of its current
 * recipients, whatever their due time — locked, each with what its placement in the edited
 * schedule needs: its key, occurrence, due time and attempts, the schedule's rule as
 * edited, whether it is floating, and the recipient's zone and quiet window. Claimed and
 * finished rows are not read, so never moved. $1 schedule id. Ordered by recipient,
 * occurrence.
 */
export const MOVABLE_SCHEDULE_ROWS_SQL = `
select ${MOVABLE_COLUMNS_SQL}
from punctual_deliveries d
join punctual_schedules s on s.id = d.schedule_id
join punctual_schedule_audiences a on a.schedule_id = s.id
join punctual_schedule_recipients m on m.schedule_id = s.id and m.recipient_id = d.recipient_id
join punctual_recipients r on r.tenant = m.tenant and r.id = m.recipient_id
where d.schedule_id = $1 and d.state in ('pending', 'retry', 'paused')
  and not exists (select 1 from punctual_triggers t where t.delivery_id = d.id)
order by d.recipient_id, d.occurrence_at, d.id
for update of d`;

/** One row of {@link MOVABLE_MEMBER_ROWS_SQL} and {@link MOVABLE_SCHEDULE_ROWS_SQL}. */
export interface MovableMemberRow {
  id: number;
  schedule_id: string;
  recipient_id: string;
  reminder_key: string;
  delivery_key: string;
  occurrence_at: Date;
  /** The row's due time as it was planned. */
  due_at: Date;
  /** Attempts spent (0: never tried; more: a `retry` row, or one held while retrying). */
  attempt: number;
  /** The schedule is read in each recipient's zone (the key names the local date-time). */
  floating: boolean;
  /** The schedule's own zone (not read when floating). */
  tzid: string;
  dtstart: string;
  rrule: string | null;
  rdate: string[];
  exdate: string[];
  ends_at: Date | null;
  dst_gap: DstPolicy["gap"];
  dst_overlap: DstPolicy["overlap"];
  /** The recipient's zone, as it is now. */
  recipient_tzid: string;
  /** The recipient's own quiet window (`preferences.quietHours`), or null. */
  recipient_quiet_hours: (Omit<QuietHours, "tzid"> & { tzid?: string }) | null;
}

/** Result columns of {@link MOVABLE_MEMBER_ROWS_SQL}. */
export const MOVABLE_MEMBER_ROWS_COLUMNS = columnsOf<MovableMemberRow>()([
  "id",
  "schedule_id",
  "recipient_id",
  "reminder_key",
  "delivery_key",
  "occurrence_at",
  "due_at",
  "attempt",
  "floating",
  "tzid",
  "dtstart",
  "rrule",
  "rdate",
  "exdate",
  "ends_at",
  "dst_gap",
  "dst_overlap",
  "recipient_tzid",
  "recipient_quiet_hours",
]);

/** Result columns of {@link MOVABLE_SCHEDULE_ROWS_SQL}. */
export const MOVABLE_SCHEDULE_ROWS_COLUMNS = MOVABLE_MEMBER_ROWS_COLUMNS;

/**
 * API-12 / DEL-9 / REC-6: moves waiting rows of recipients in place — same id, same
 * delivery key — to the occurrence, due time and quiet-hours deferral (DEL-15) they have
 * now (a recipient's new zone): `run_at` is the new due time or deferral even when it is
 * already past, and `stale_at` is counted from it, so a row moved into the past is judged
 * by the schedule's misfire policy (sent late, or skipped `stale` and recorded), never
 * dropped. The row takes its reminder's channel, attempt budget and limiter as they are
 * now (an edit may have changed them with the offset), and the lost-lease policy given
 * (NULL: kept). A row already tried (an edit's, DEL-9) keeps its backoff: it waits until
 * the later of its retry time and its new due time or deferral (DEL-4). Only waiting rows
 * move; a row claimed meanwhile is left alone.
 * $1 now, then per row: $2 ids bigint[], $3 occurrence instants timestamptz[], $4 due
 * instants timestamptz[], $5 deferrals timestamptz[] (NULL: none), $6 bypassed text[]
 * (NULL: nothing), $7 lost-lease policies text[] (NULL: kept). Returns `moved`.
 */
export const MOVE_MEMBER_DELIVERIES_SQL = `
with u as (
  select * from unnest($2::bigint[], $3::timestamptz[], $4::timestamptz[], $5::timestamptz[],
                       $6::text[], $7::text[])
    as u(id, occurrence_at, due_at, deferred_until, bypassed, on_lost_lease)
),
moved as (
  update punctual_deliveries d
  set occurrence_at = u.occurrence_at, due_at = u.due_at,
      run_at = case when d.attempt = 0 then coalesce(u.deferred_until, u.due_at)
                    else greatest(d.run_at, coalesce(u.deferred_until, u.due_at)) end,
      deferred_until = u.deferred_until,
      deferred_reason = case when u.deferred_until is not null then 'QUIET_HOURS' end,
      bypassed = u.bypassed,
      stale_at = ${staleAtSql("s", "coalesce(u.deferred_until, u.due_at)")},
      channel = r.channel, max_attempts = r.max_attempts,
      limiter = s.tenant || '/' || coalesce(r.rate_limit_key, r.channel),
      on_lost_lease = coalesce(u.on_lost_lease, d.on_lost_lease),
      updated_at = ${NOW}
  from u, punctual_schedules s, punctual_reminders r
  where d.id = u.id and s.id = d.schedule_id
    and r.schedule_id = d.schedule_id and r.key = d.reminder_key
    and d.state in ('pending', 'retry', 'paused')
  returning d.id
)
select count(*) as moved from moved`;

/** Result columns of {@link MOVE_MEMBER_DELIVERIES_SQL}. */
export const MOVE_MEMBER_DELIVERIES_COLUMNS = columnsOf<{ moved: number }>()(["moved"]);

/**
 * DEL-9 / DEL-14 (API-12): the waiting rows `$2` already tried whose occurrence an edit
 * removed from the schedule are cancelled with reason `realigned`, keeping their attempt
 * history (never-tried ones are deleted by {@link REPLAN_MEMBERS_SQL}), as an ordinary
 * schedule's realign does. A row claimed meanwhile is left alone. $1 now, $2 ids bigint[].
 * Returns `cancelled`.
 */
export const CANCEL_REALIGNED_MEMBER_ROWS_SQL = `
with cancelled as (
  update punctual_deliveries d
  set state = 'cancelled', reason = 'realigned', finished_at = ${NOW}, updated_at = ${NOW}
  where d.id = any($2::bigint[]) and d.state in ('pending', 'retry', 'paused') and d.attempt > 0
  returning d.id
)
select count(*) as cancelled from cancelled`;

/** Result columns of {@link CANCEL_REALIGNED_MEMBER_ROWS_SQL}. */
export const CANCEL_REALIGNED_MEMBER_ROWS_COLUMNS = columnsOf<{ cancelled: number }>()([
  "cancelled",
]);

/** One move for {@link moveMemberDeliveries}. */
export interface MemberDeliveryMove {
  id: number;
  occurrenceAt: Date;
  dueAt: Date;
  /** DEL-15: the end of the quiet window the row waits for; null: none. */
  deferredUntil: Date | null;
  /** API-13: what a critical reminder went past (`QUIET_HOURS`); null: nothing. */
  bypassed: string | null;
  /** DEL-6: the reminder's lost-lease policy as it is now; null or absent: kept. */
  onLostLease?: "retry" | "in_doubt" | null;
}

/** A membership the per-recipient planner reads: its schedule, its recipient's zone. */
export type MemberPlanRow = PlanScheduleRow & {
  /** The schedule's (and the membership's) tenant. */
  tenant: string;
  recipient_id: string;
  /** The recipient's IANA zone. */
  recipient_tzid: string;
  /** The recipient's own quiet window (`preferences.quietHours`), or null. */
  recipient_quiet_hours: (Omit<QuietHours, "tzid"> & { tzid?: string }) | null;
  /** The schedule is read in each recipient's zone. */
  floating: boolean;
};

/** A membership locked for planning ({@link LOCK_MEMBERS_TO_PLAN_SQL}): what differs per recipient. */
export interface LockedMemberRow {
  schedule_id: string;
  /** The schedule's (and the membership's) tenant. */
  tenant: string;
  recipient_id: string;
  /** The membership's watermark; null: never planned. */
  planned_until: Date | null;
  /** The recipient's IANA zone. */
  recipient_tzid: string;
  /** The recipient's own quiet window (`preferences.quietHours`), or null. */
  recipient_quiet_hours: (Omit<QuietHours, "tzid"> & { tzid?: string }) | null;
}

/** Result columns of {@link LOCK_MEMBERS_TO_PLAN_SQL}. */
export const LOCK_MEMBERS_TO_PLAN_COLUMNS = columnsOf<LockedMemberRow>()([
  "schedule_id",
  "tenant",
  "recipient_id",
  "planned_until",
  "recipient_tzid",
  "recipient_quiet_hours",
]);

/**
 * OPS-12: the planner settings of a per-recipient planning transaction, `SET LOCAL` (they
 * end with it): sequential and bitmap heap scans off ({@link PINNED_SETTINGS}, as the claim
 * path runs), so {@link LOCK_MEMBERS_TO_PLAN_SQL} walks the watermark index in order and
 * every other statement of the pass reads rows by key, whatever the statistics — never
 * analyzed, the embedded engine read 20,000 memberships through two bitmap scans and a
 * sort per batch — and JIT off, which the cost of a disabled path would otherwise start.
 * No parameters; returns the settings as set.
 */
export const PIN_MEMBER_PLAN_SQL = `
select ${Object.entries({ ...PINNED_SETTINGS, jit: "off" })
  .map(([name, value]) => `set_config('${name}', '${value}', true) as ${name}`)
  .join(", ")}`;

/** Result columns of {@link PIN_MEMBER_PLAN_SQL}. */
export const PIN_MEMBER_PLAN_COLUMNS = columnsOf<{
  enable_seqscan: string;
  enable_bitmapscan: string;
  jit: string;
}>()(["enable_seqscan", "enable_bitmapscan", "jit"]);

/** OPS-12: runs {@link PIN_MEMBER_PLAN_SQL} in the planning transaction `tx`. */
export async function pinMemberPlan(tx: Queryable): Promise<void> {
  await rows(tx, PIN_MEMBER_PLAN_SQL, []);
}

/**
 * API-11: locks a batch of memberships of active schedules whose watermark is within `$2`
 * ms of now + plan-ahead (`planned_until` is the membership's) and moves each watermark to
 * now + `$4` ms (the plan-ahead): the watermark a pass of a series usually ends with, so the
 * planner writes again only the memberships whose plan ended elsewhere
 * ({@link SET_MEMBER_WATERMARKS_SQL}); the whole is one transaction with the rows planned,
 * so a failed pass moves nothing. Returns each membership with its watermark from before
 * and the recipient's zone and quiet window; the schedules come apart, once each
 * ({@link AUDIENCE_SCHEDULES_SQL}). $1 now, $2 ms ahead, $3 limit, $4 plan-ahead ms.
 *
 * Shape (OPS-12): an ordered walk of `punctual_schedule_recipients_plan` that stops after
 * `$3` rows (SKIP LOCKED, so many planners take different memberships), each locked row
 * then updated through its `ctid` and its recipient read by primary key (`offset 0` keeps
 * that a probe per row). Memberships of schedules that are not active are passed over by a
 * hashed sub-plan over the schedules with an audience, not by a join: with a join in the
 * walk, the planner multiplied the join's default selectivity into its estimate (a few
 * hundred rows for 30,000 due), judged the `LIMIT` to take them all, and chose a
 * sequential scan of every due membership joined with its recipient and sorted, spilled to
 * disk, per batch — 340 ms a batch at 30,000 memberships, growing with the audience (a
 * schedule of 100,000 is planned over 50 and more batches: quadratic). The walk reads
 * about `$3` index entries whatever the audience's size (6 ms for 2,000 of 30,000). The
 * watermark written here replaces a second update of every membership after planning (a
 * join of the batch with the whole membership table, 200 ms a batch at 100,000). Rows are
 * narrow: the schedule's columns are not repeated per recipient (docs/benchmarks.md).
 */
export const LOCK_MEMBERS_TO_PLAN_SQL = `
with m as (
  select m.ctid as tid, m.schedule_id, m.tenant, m.recipient_id, m.planned_until
  from punctual_schedule_recipients m
  where (m.planned_until is null
         or m.planned_until < ${NOW} + make_interval(secs => $2::double precision / 1000))
    and m.schedule_id not in (
      select a.schedule_id from punctual_schedule_audiences a
      join punctual_schedules s on s.id = a.schedule_id
      where s.state <> 'active')
  order by m.planned_until nulls first
  limit $3
  for update of m skip locked
),
marked as (
  update punctual_schedule_recipients x
  set planned_until = greatest(x.planned_until,
                               ${NOW} + make_interval(secs => $4::double precision / 1000))
  from m
  where x.ctid = m.tid
  returning m.schedule_id, m.tenant, m.recipient_id, m.planned_until
)
select m.schedule_id, m.tenant, m.recipient_id, m.planned_until, r.tzid as recipient_tzid,
       r.quiet_hours as recipient_quiet_hours
from marked m
cross join lateral (
  select r.tzid, r.preferences -> 'quietHours' as quiet_hours
  from punctual_recipients r
  where r.tenant = m.tenant and r.id = m.recipient_id
  offset 0
) r`;

/** A schedule for recipients as the planner reads it ({@link AUDIENCE_SCHEDULES_SQL}). */
export type AudienceScheduleRow = Omit<PlanScheduleRow, "planned_until"> & {
  tenant: string;
  /** The schedule is read in each recipient's zone. */
  floating: boolean;
  /** The schedule's state now: only `active` ones are planned. */
  state: string;
};

/** Result columns of {@link AUDIENCE_SCHEDULES_SQL}. */
export const AUDIENCE_SCHEDULES_COLUMNS = columnsOf<AudienceScheduleRow>()([
  "id",
  "version",
  ...SCHEDULE_TIMING_KEYS,
  "grace_ms",
  "perpetual",
  "cap_logged_at",
  "created_at",
  "trace_parent",
  "db_now",
  "tenant",
  "floating",
  "state",
]);

/**
 * API-11: the schedules of a batch of locked memberships, each once, by primary key, with
 * their audience (`floating`) and state. $1 now, $2 schedule ids uuid[].
 */
export const AUDIENCE_SCHEDULES_SQL = `
select s.id, s.version, s.dtstart, s.tzid, s.rrule, s.rdate, s.exdate, s.recurring, s.ends_at,
       s.expires_at, s.dst_gap, s.dst_overlap, s.grace_ms, s.perpetual, s.cap_logged_at,
       s.created_at, s.trace_parent, ${NOW} as db_now, s.tenant, a.floating, s.state
from (select distinct unnest($2::uuid[]) as id) ids
cross join lateral (select * from punctual_schedules x where x.id = ids.id offset 0) s
join punctual_schedule_audiences a on a.schedule_id = s.id`;

/**
 * API-11: sets the watermarks of memberships locked by {@link LOCK_MEMBERS_TO_PLAN_SQL} in
 * this transaction whose plan ended elsewhere than the watermark that statement wrote: a
 * finite series planned to its end, a pass cut short by the expansion's caps, a rule that
 * does not parse in the recipient's zone (its watermark as it was). Each membership by
 * primary key. $1 schedule ids uuid[], $2 recipient ids text[], $3 watermarks
 * timestamptz[] (NULL: never planned).
 */
export const SET_MEMBER_WATERMARKS_SQL = `
update punctual_schedule_recipients m
set planned_until = u.planned_until
from unnest($1::uuid[], $2::text[], $3::timestamptz[]) as u(schedule_id, recipient_id, planned_until)
where m.schedule_id = u.schedule_id and m.recipient_id = u.recipient_id`;

/**
 * API-11 / API-13: what a send to a recipient needs, read at send time so a change made
 * a moment before counts: the recipient (NULL columns when it left the registry) and
 * whether it is still on the schedule, with the reminder's category and priority (read
 * here, not by the claim, so rows without a recipient pay nothing for them).
 * $1 tenant, $2 recipient id, $3 schedule id, $4 reminder key.
 */
export const RECIPIENT_AT_SEND_SQL = `
select r.tzid, r.targets, r.attributes, r.preferences,
       exists (select 1 from punctual_schedule_recipients m
               where m.schedule_id = $3 and m.recipient_id = $2) as member,
       x.category, x.priority
from (select 1) one
left join punctual_recipients r on r.tenant = $1 and r.id = $2
left join punctual_reminders x on x.schedule_id = $3 and x.key = $4`;

/** What {@link RECIPIENT_AT_SEND_SQL} returns. */
export interface RecipientAtSendRow {
  tzid: string | null;
  targets: Record<string, Record<string, unknown>> | null;
  attributes: Record<string, unknown> | null;
  preferences: Record<string, unknown> | null;
  member: boolean;
  /** The reminder's category (API-13), or null. */
  category: string | null;
  /** The reminder's priority; null: normal. */
  priority: "normal" | "critical" | null;
}

/** Result columns of {@link RECIPIENT_AT_SEND_SQL}. */
export const RECIPIENT_AT_SEND_COLUMNS = columnsOf<RecipientAtSendRow>()([
  "tzid",
  "targets",
  "attributes",
  "preferences",
  "member",
  "category",
  "priority",
]);

/**
 * API-11 / API-13: a claimed row that is not sent because of its recipient — no target
 * for the channel (`NO_TARGET`), opted out of the channel or category (`OPTED_OUT`), off
 * the schedule or the registry (`recipient_removed`) — becomes `skipped` with that
 * reason, fenced like the settle (id, attempt, leased, owner: the queue row, which it
 * deletes), the claim's attempt written on the ledger row.
 * $1 now, $2 owner, $3 id, $4 attempt, $5 reason. Returns the id when it applied.
 */
export const SKIP_CLAIMED_SQL = `
with fenced as (
  delete from punctual_queue q
  where q.id = $3 and q.attempt = $4 and ${heldBy("$2")}
  returning q.id, q.attempt
)
update punctual_deliveries d
set state = 'skipped', reason = $5, finished_at = ${NOW}, attempt = f.attempt, stale_at = null,
    updated_at = ${NOW}
from fenced f
where d.id = f.id
returning d.id`;

/** Result columns of {@link SKIP_CLAIMED_SQL}. */
export const SKIP_CLAIMED_COLUMNS = columnsOf<{ id: number }>()(["id"]);

/**
 * API-13: records on a claimed row what its critical reminder went past at send
 * (`OPTED_OUT`), added to what planning recorded (`QUIET_HOURS`), fenced like the settle.
 * $1 now, $2 owner, $3 id, $4 attempt, $5 what.
 */
export const RECORD_BYPASS_SQL = `
update punctual_deliveries d
set bypassed = case when d.bypassed is null then $5::text
                    when strpos(d.bypassed, $5::text) > 0 then d.bypassed
                    else d.bypassed || ',' || $5::text end,
    updated_at = ${NOW}
where d.id = $3
  and exists (select 1 from punctual_queue q where q.id = $3 and q.attempt = $4 and ${heldBy("$2")})`;

/**
 * API-11 / API-9: the one statement that inserts delivery rows for recipients, for one
 * schedule: the planner's rows (`plan`), a trigger's (`trigger`: due now, recorded in
 * `punctual_triggers` so an edit's realign leaves them, no grace) and a backfill's
 * (`backfill`: past occurrences, `late`, run now, no grace limit when past). A row that
 * exists (same delivery key) is left as it is (ON CONFLICT DO NOTHING), so every mode is
 * idempotent and a sent occurrence is never inserted twice.
 *
 * Shape (OPS-12): the schedule is read once (a scalar join), each reminder once (a hash
 * join over `$5`–`$7`, the few reminders of the call with their lost-lease policy); per
 * row only what differs — key, reminder index, recipient, occurrence, due time, deferral,
 * bypass — travels as parallel arrays. Like planning's own insert (DEL-3, DEL-13, DEL-15):
 * held (`paused`) unless the schedule is active, its expiry, `stale_at` from the grace
 * (counted from a deferral), reason `QUIET_HOURS` on a deferred row, the limiter
 * `tenant/key` of the reminder's `rate_limit_key` or channel; nothing for a cancelled
 * schedule (nor, for a trigger, one that is not active) or a reminder that no longer
 * exists.
 *
 * $1 now, $2 tenant, $3 schedule id, $4 mode, $5 reminder keys text[], $6 their lost-lease
 * policies text[], $7 trigger id (mode `trigger`), then per row: $8 keys text[],
 * $9 reminder index int[] (1-based into $5), $10 recipient ids text[], $11 occurrence
 * instants timestamptz[], $12 due instants timestamptz[], $13 deferrals timestamptz[]
 * (NULL: none), $14 bypassed text[] (NULL: nothing). Returns `inserted` and `ids` (the
 * first {@link INSERTED_IDS_RETURNED} new ids, ascending).
 */
export const INSERT_RECIPIENT_DELIVERIES_SQL = `
with rem as (
  select x.key, x.on_lost_lease, x.ord
  from unnest($5::text[], $6::text[]) with ordinality as x(key, on_lost_lease, ord)
),
inserted as (
  insert into punctual_deliveries
    (delivery_key, schedule_id, reminder_key, occurrence_at, due_at, run_at, channel,
     on_lost_lease, max_attempts, state, expires_at, stale_at, late, created_at, updated_at,
     deferred_until, deferred_reason, limiter, recipient_id, bypassed)
  select u.key, s.id, r.key, u.occurrence_at, u.due_at,
         case when $4::text = 'plan' then coalesce(u.deferred_until, u.due_at)
              else greatest(coalesce(u.deferred_until, u.due_at), ${NOW}) end,
         r.channel, rem.on_lost_lease, r.max_attempts,
         case when s.state = 'active' then 'pending' else 'paused' end, s.expires_at,
         case when $4::text = 'trigger' or not s.recurring then null
              when $4::text = 'backfill' and u.due_at < ${NOW} then null
              else coalesce(u.deferred_until, u.due_at)
                   + make_interval(secs => s.grace_ms::double precision / 1000) end,
         $4::text = 'backfill' and u.due_at < ${NOW}, ${NOW}, ${NOW}, u.deferred_until,
         case when u.deferred_until is not null then 'QUIET_HOURS' end,
         s.tenant || '/' || coalesce(r.rate_limit_key, r.channel), u.recipient_id, u.bypassed
  from unnest($8::text[], $9::int[], $10::text[], $11::timestamptz[], $12::timestamptz[],
              $13::timestamptz[], $14::text[])
    as u(key, ord, recipient_id, occurrence_at, due_at, deferred_until, bypassed)
  join rem on rem.ord = u.ord
  join punctual_schedules s on s.tenant = $2 and s.id = $3 and s.state <> 'cancelled'
    and ($4::text <> 'trigger' or s.state = 'active')
  join punctual_reminders r on r.schedule_id = s.id and r.key = rem.key
  on conflict do nothing
  returning id, schedule_id
),
recorded as (
  insert into punctual_triggers (delivery_id, schedule_id, trigger_id, created_at)
  select i.id, i.schedule_id, $7, ${NOW} from inserted i where $4::text = 'trigger'
  returning delivery_id
)
select (select count(*) from inserted) as inserted,
       array(select id from inserted order by id limit 100) as ids,
       (select count(*) from recorded) as recorded`;

/** Most new ids {@link INSERT_RECIPIENT_DELIVERIES_SQL} returns. */
export const INSERTED_IDS_RETURNED = 100;

/** What {@link INSERT_RECIPIENT_DELIVERIES_SQL} inserted. */
export interface InsertedRecipientRow {
  inserted: number;
  ids: Array<number | string>;
  recorded: number;
}

/** Result columns of {@link INSERT_RECIPIENT_DELIVERIES_SQL}. */
export const INSERT_RECIPIENT_DELIVERIES_COLUMNS = columnsOf<InsertedRecipientRow>()([
  "inserted",
  "ids",
  "recorded",
]);

/** One row for {@link insertRecipientDeliveries}. */
export interface RecipientDeliveryToInsert {
  key: string;
  /** 0-based index into the call's `reminders`. */
  reminder: number;
  recipientId: string;
  occurrenceAt: Date;
  dueAt: Date;
  /** DEL-15: the end of the quiet window the row waits for; null: none. */
  deferredUntil: Date | null;
  /** API-13: what a critical reminder went past (`QUIET_HOURS`); null: nothing. */
  bypassed: string | null;
}

/**
 * API-11 / API-9: runs {@link INSERT_RECIPIENT_DELIVERIES_SQL} — every insert of delivery
 * rows for recipients goes through here (the caller chunks: OPS-12).
 * @returns how many rows were created and the first new ids.
 */
export async function insertRecipientDeliveries(
  tx: Queryable,
  p: {
    now: Date | null;
    tenant: string;
    scheduleId: string;
    mode: "plan" | "trigger" | "backfill";
    /** The reminders the rows refer to (by index), each with its lost-lease policy. */
    reminders: ReadonlyArray<{ key: string; onLostLease: string }>;
    /** Mode `trigger`: the trigger id recorded for each row. */
    triggerId?: string;
    rows: readonly RecipientDeliveryToInsert[];
  },
): Promise<{ inserted: number; ids: number[] }> {
  if (p.rows.length === 0) return { inserted: 0, ids: [] };
  const n = p.rows.length;
  const keys = new Array<string>(n);
  const ords = new Array<number>(n);
  const recipients = new Array<string>(n);
  const occurrences = new Array<Date>(n);
  const dues = new Array<Date>(n);
  const deferrals = new Array<Date | null>(n);
  const bypassed = new Array<string | null>(n);
  for (let i = 0; i < n; i++) {
    const r = p.rows[i]!;
    keys[i] = r.key;
    ords[i] = r.reminder + 1;
    recipients[i] = r.recipientId;
    occurrences[i] = r.occurrenceAt;
    dues[i] = r.dueAt;
    deferrals[i] = r.deferredUntil;
    bypassed[i] = r.bypassed;
  }
  const row = await firstRow<InsertedRecipientRow>(tx, INSERT_RECIPIENT_DELIVERIES_SQL, [
    p.now,
    p.tenant,
    p.scheduleId,
    p.mode,
    p.reminders.map((r) => r.key),
    p.reminders.map((r) => r.onLostLease),
    p.triggerId ?? null,
    keys,
    ords,
    recipients,
    occurrences,
    dues,
    deferrals,
    bypassed,
  ]);
  return {
    inserted: Number(row?.inserted ?? 0),
    ids: (row?.ids ?? []).map(Number),
  };
}

/**
 * API-9 / API-11: one keyset page of a schedule's recipients by id with what a trigger or
 * backfill plans with: the recipient's zone and own quiet window.
 * $1 schedule id, $2 the last id of the previous page or NULL, $3 limit.
 */
export const MEMBERS_TO_PLAN_PAGE_SQL = `
select m.recipient_id, r.tzid as recipient_tzid,
       r.preferences -> 'quietHours' as recipient_quiet_hours
from punctual_schedule_recipients m
join punctual_recipients r on r.tenant = m.tenant and r.id = m.recipient_id
where m.schedule_id = $1 and ($2::text is null or m.recipient_id > $2::text)
order by m.recipient_id
limit $3`;

/** One row of {@link MEMBERS_TO_PLAN_PAGE_SQL}. */
export type MemberToPlanRow = Pick<
  MemberPlanRow,
  "recipient_id" | "recipient_tzid" | "recipient_quiet_hours"
>;

/** Result columns of {@link MEMBERS_TO_PLAN_PAGE_SQL}. */
export const MEMBERS_TO_PLAN_PAGE_COLUMNS = columnsOf<MemberToPlanRow>()([
  "recipient_id",
  "recipient_tzid",
  "recipient_quiet_hours",
]);

/** API-9 / API-11: runs {@link MEMBERS_TO_PLAN_PAGE_SQL}. */
export function membersToPlanPage(
  db: Queryable,
  p: { scheduleId: string; afterId: string | null; limit: number },
): Promise<MemberToPlanRow[]> {
  return rows<MemberToPlanRow>(db, MEMBERS_TO_PLAN_PAGE_SQL, [p.scheduleId, p.afterId, p.limit]);
}

/**
 * API-9: the deliveries a trigger id made on a schedule (its replay), the first `$3` by
 * id, each with the count of all of them (`total`). $1 schedule id, $2 trigger id, $3 limit.
 */
export const TRIGGERED_DELIVERIES_SQL = `
select d.*, count(*) over () as total
from punctual_triggers t join punctual_deliveries d on d.id = t.delivery_id
where t.schedule_id = $1 and t.trigger_id = $2
order by d.id
limit $3`;

/** One row of {@link TRIGGERED_DELIVERIES_SQL}. */
export type TriggeredDeliveryRow = DeliveryRow & { total: number | string };

/** Result columns of {@link TRIGGERED_DELIVERIES_SQL}. */
export const TRIGGERED_DELIVERIES_COLUMNS = columnsOf<TriggeredDeliveryRow>()([
  ...DELIVERY_ROW_KEYS,
  "total",
]);

/** API-9: runs {@link TRIGGERED_DELIVERIES_SQL}. */
export async function triggeredDeliveries(
  db: Queryable,
  p: { scheduleId: string; triggerId: string; limit: number },
): Promise<{ rows: DeliveryRow[]; total: number }> {
  const out = await rows<TriggeredDeliveryRow>(db, TRIGGERED_DELIVERIES_SQL, [
    p.scheduleId,
    p.triggerId,
    p.limit,
  ]);
  return { rows: out, total: Number(out[0]?.total ?? 0) };
}

// ---------------------------------------------------------------------------------------
// One typed function per statement.

/** API-11 / API-13: runs {@link SKIP_CLAIMED_SQL}. @returns whether the row was still held. */
export async function skipClaimed(
  db: Queryable,
  p: { now: Date | null; owner: string; id: number; attempt: number; reason: string },
): Promise<boolean> {
  const out = await rows<{ id: number }>(db, SKIP_CLAIMED_SQL, [
    p.now,
    p.owner,
    p.id,
    p.attempt,
    p.reason,
  ]);
  return out.length > 0;
}

/** API-13: runs {@link RECORD_BYPASS_SQL}. */
export async function recordBypass(
  db: Queryable,
  p: { now: Date | null; owner: string; id: number; attempt: number; what: string },
): Promise<void> {
  await execute(db, RECORD_BYPASS_SQL, [p.now, p.owner, p.id, p.attempt, p.what]);
}

/** API-11: runs {@link PUT_AUDIENCE_SQL}. */
export async function putAudience(
  tx: Queryable,
  p: { scheduleId: string; floating: boolean },
): Promise<void> {
  await execute(tx, PUT_AUDIENCE_SQL, [p.scheduleId, p.floating]);
}

/** API-11: runs {@link AUDIENCE_OF_SQL}; null for a schedule without recipients. */
export function audienceOf(db: Queryable, p: { scheduleId: string }): Promise<AudienceRow | null> {
  return firstRow<AudienceRow>(db, AUDIENCE_OF_SQL, [p.scheduleId]);
}

/** API-11: runs {@link MISSING_RECIPIENTS_SQL}. @returns the ids the tenant has no recipient for. */
export async function missingRecipients(
  db: Queryable,
  p: { tenant: string; ids: readonly string[] },
): Promise<string[]> {
  return (await rows<MissingRow>(db, MISSING_RECIPIENTS_SQL, [p.tenant, p.ids])).map((r) => r.id);
}

/** API-11 / API-12: runs {@link ADD_MEMBERS_SQL}. @returns how many were added. */
export async function addMembers(
  tx: Queryable,
  p: {
    now: Date | null;
    scheduleId: string;
    tenant: string;
    ids: readonly string[];
    /** Null: plan like a new schedule; else the watermark (now: never backfilled). */
    plannedUntil: Date | null;
  },
): Promise<number> {
  const row = await firstRow<AddedRow>(tx, ADD_MEMBERS_SQL, [
    p.now,
    p.scheduleId,
    p.tenant,
    p.ids,
    p.plannedUntil,
  ]);
  return Number(row?.added ?? 0);
}

/** API-12: runs {@link REMOVE_MEMBERS_SQL}: `ids` removed, or every one not in `keep`. */
export async function removeMembers(
  tx: Queryable,
  p: { now: Date | null; scheduleId: string } & (
    { ids: readonly string[] } | { keep: readonly string[] }
  ),
): Promise<RemovedMembersRow> {
  const row = await firstRow<RemovedMembersRow>(tx, REMOVE_MEMBERS_SQL, [
    p.now,
    p.scheduleId,
    "ids" in p ? p.ids : null,
    "keep" in p ? p.keep : null,
  ]);
  return { removed: Number(row?.removed ?? 0), cancelled: Number(row?.cancelled ?? 0) };
}

/** API-12: runs {@link FORGET_RECIPIENT_SQL}. */
export async function forgetRecipient(
  tx: Queryable,
  p: { now: Date | null; tenant: string; id: string },
): Promise<RemovedMembersRow> {
  const row = await firstRow<RemovedMembersRow>(tx, FORGET_RECIPIENT_SQL, [p.now, p.tenant, p.id]);
  return { removed: Number(row?.removed ?? 0), cancelled: Number(row?.cancelled ?? 0) };
}

/** API-12: runs {@link REPLAN_MEMBERS_SQL}. */
export async function replanMembers(
  tx: Queryable,
  p: {
    now: Date | null;
    tenant: string;
    /** Null: every recipient (of `scheduleId`). */
    recipientIds: readonly string[] | null;
    /** Null: every schedule of the tenant. */
    scheduleId: string | null;
    /** Rows moved in place ({@link moveMemberDeliveries}): kept. */
    keep?: readonly number[];
    /** Never-tried waiting rows deleted whatever their due time (DEL-9: left the set). */
    clear?: readonly number[];
  },
): Promise<ReplannedRow> {
  const row = await firstRow<ReplannedRow>(tx, REPLAN_MEMBERS_SQL, [
    p.now,
    p.tenant,
    p.recipientIds,
    p.scheduleId,
    p.keep ?? [],
    p.clear ?? [],
  ]);
  return { replanned: Number(row?.replanned ?? 0), cleared: Number(row?.cleared ?? 0) };
}

/**
 * API-11: runs {@link LOCK_MEMBERS_TO_PLAN_SQL}, then {@link AUDIENCE_SCHEDULES_SQL} for the
 * batch's schedules. @returns each locked membership of an active schedule with its
 * schedule's columns (one object per schedule shared by the planner's rows).
 */
export async function lockMembersToPlan(
  tx: Queryable,
  p: {
    now: Date | null;
    aheadMs: number;
    limit: number;
    /** The plan-ahead (ms): each locked watermark becomes now + this. */
    planAheadMs: number;
  },
): Promise<{ members: MemberPlanRow[]; locked: number }> {
  const locked = await rows<LockedMemberRow>(tx, LOCK_MEMBERS_TO_PLAN_SQL, [
    p.now,
    p.aheadMs,
    p.limit,
    p.planAheadMs,
  ]);
  if (locked.length === 0) return { members: [], locked: 0 };
  const schedules = new Map(
    (
      await rows<AudienceScheduleRow>(tx, AUDIENCE_SCHEDULES_SQL, [
        p.now,
        [...new Set(locked.map((m) => m.schedule_id))],
      ])
    ).map((s) => [s.id, s]),
  );
  const members: MemberPlanRow[] = [];
  for (const m of locked) {
    const s = schedules.get(m.schedule_id);
    if (!s || s.state !== "active") continue;
    members.push({
      ...s,
      planned_until: m.planned_until,
      tenant: m.tenant,
      recipient_id: m.recipient_id,
      recipient_tzid: m.recipient_tzid,
      recipient_quiet_hours: m.recipient_quiet_hours,
    });
  }
  return { members, locked: locked.length };
}

/** API-11: runs {@link SET_MEMBER_WATERMARKS_SQL}. */
export async function setMemberWatermarks(
  tx: Queryable,
  p: { marks: ReadonlyArray<{ scheduleId: string; recipientId: string; until: Date | null }> },
): Promise<void> {
  if (p.marks.length === 0) return;
  await execute(tx, SET_MEMBER_WATERMARKS_SQL, [
    p.marks.map((m) => m.scheduleId),
    p.marks.map((m) => m.recipientId),
    p.marks.map((m) => m.until),
  ]);
}

/** API-11 / API-13: runs {@link RECIPIENT_AT_SEND_SQL}. */
export async function recipientAtSend(
  db: Queryable,
  p: { tenant: string; recipientId: string; scheduleId: string; reminderKey: string },
): Promise<RecipientAtSendRow> {
  const row = await firstRow<RecipientAtSendRow>(db, RECIPIENT_AT_SEND_SQL, [
    p.tenant,
    p.recipientId,
    p.scheduleId,
    p.reminderKey,
  ]);
  return row!;
}

/**
 * API-12: one keyset page of a schedule's recipients by id (byte order, collation "C"):
 * a range scan of the primary key (schedule_id, recipient_id).
 * $1 schedule id, $2 the last id of the previous page or NULL from the start, $3 limit.
 */
export const LIST_SCHEDULE_RECIPIENTS_SQL = `
select m.recipient_id as id, m.added_at
from punctual_schedule_recipients m
where m.schedule_id = $1 and ($2::text is null or m.recipient_id > $2::text)
order by m.recipient_id
limit $3`;

/** One row of {@link LIST_SCHEDULE_RECIPIENTS_SQL}. */
export interface ScheduleRecipientRow {
  id: string;
  added_at: Date;
}

/** Result columns of {@link LIST_SCHEDULE_RECIPIENTS_SQL}. */
export const LIST_SCHEDULE_RECIPIENTS_COLUMNS = columnsOf<ScheduleRecipientRow>()([
  "id",
  "added_at",
]);

/** API-12: runs {@link LIST_SCHEDULE_RECIPIENTS_SQL}. */
export function listScheduleRecipientRows(
  db: Queryable,
  p: { scheduleId: string; afterId: string | null; limit: number },
): Promise<ScheduleRecipientRow[]> {
  return rows<ScheduleRecipientRow>(db, LIST_SCHEDULE_RECIPIENTS_SQL, [
    p.scheduleId,
    p.afterId,
    p.limit,
  ]);
}

/** API-12 / DEL-9: runs {@link LOCK_RECIPIENT_MEMBERSHIPS_SQL}. @returns how many were locked. */
export async function lockRecipientMemberships(
  tx: Queryable,
  p: { tenant: string; recipientIds: readonly string[] },
): Promise<number> {
  const row = await firstRow<{ locked: number }>(tx, LOCK_RECIPIENT_MEMBERSHIPS_SQL, [
    p.tenant,
    p.recipientIds,
  ]);
  return Number(row?.locked ?? 0);
}

/** DEL-9 / API-12: runs {@link MOVABLE_SCHEDULE_ROWS_SQL}. */
export function movableScheduleRows(
  tx: Queryable,
  p: { scheduleId: string },
): Promise<MovableMemberRow[]> {
  return rows<MovableMemberRow>(tx, MOVABLE_SCHEDULE_ROWS_SQL, [p.scheduleId]);
}

/** API-12 / DEL-9: runs {@link MOVABLE_MEMBER_ROWS_SQL}. */
export function movableMemberRows(
  tx: Queryable,
  p: { now: Date | null; tenant: string; recipientIds: readonly string[] },
): Promise<MovableMemberRow[]> {
  return rows<MovableMemberRow>(tx, MOVABLE_MEMBER_ROWS_SQL, [p.now, p.tenant, p.recipientIds]);
}

/** DEL-9 / API-12: runs {@link CANCEL_REALIGNED_MEMBER_ROWS_SQL}. @returns how many rows were cancelled. */
export async function cancelRealignedMemberRows(
  tx: Queryable,
  p: { now: Date | null; ids: readonly number[] },
): Promise<number> {
  if (p.ids.length === 0) return 0;
  const row = await firstRow<{ cancelled: number }>(tx, CANCEL_REALIGNED_MEMBER_ROWS_SQL, [
    p.now,
    p.ids,
  ]);
  return Number(row?.cancelled ?? 0);
}

/**
 * API-12 / DEL-9 / REC-6: runs {@link MOVE_MEMBER_DELIVERIES_SQL}.
 * @returns how many rows moved.
 */
export async function moveMemberDeliveries(
  tx: Queryable,
  p: { now: Date | null; moves: readonly MemberDeliveryMove[] },
): Promise<number> {
  if (p.moves.length === 0) return 0;
  const row = await firstRow<{ moved: number }>(tx, MOVE_MEMBER_DELIVERIES_SQL, [
    p.now,
    p.moves.map((m) => m.id),
    p.moves.map((m) => m.occurrenceAt),
    p.moves.map((m) => m.dueAt),
    p.moves.map((m) => m.deferredUntil),
    p.moves.map((m) => m.bypassed),
    p.moves.map((m) => m.onLostLease ?? null),
  ]);
  return Number(row?.moved ?? 0);
}
