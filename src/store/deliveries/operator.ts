/**
 * The operator's writes on delivery rows (DEL-12, API-9): trigger a schedule now,
 * backfill a past range, redrive and resolve (one row, or in bulk by filter), and the
 * purge of a schedule with its rows. Every statement is scoped by tenant (API-2): a row of
 * another tenant's schedule is never changed or deleted. The reads of the same actions
 * (dry runs, look-ups) are in `../operator.ts` and `../schedules.ts`.
 */
import type { Queryable } from "../database.js";
import { DELIVERY_ROW_KEYS, type DeliveryRow } from "../schedules.js";
import { columnsOf, firstRow, rows } from "../statement.js";
import { NOW } from "./sql.js";

/**
 * DEL-12: the SET list of a redrive (single or bulk; `s` the row's schedule): back to
 * waiting with the same key — `pending`, or `paused` while the schedule is not active —
 * due now, failures reset, the Retry-After age budget started over, no grace; the next
 * round of attempts begins (`round` + 1, `round_base` the attempts spent so far).
 */
const REDRIVE_SET = `state = case when s.state = 'active' then 'pending' else 'paused' end,
    run_at = ${NOW}, failures = 0, first_attempt_at = null,
    round = d.round + 1, round_base = d.attempt - d.deferrals,
    finished_at = null, reason = null,
    sent_at = null, expires_at = s.expires_at, stale_at = null, updated_at = ${NOW}`;

/**
 * DEL-12: the SET list of a resolve (single or bulk) to `outcome` (the SQL of the
 * `'sent' | 'dead'` parameter): `sent` stamps `sent_at`, `dead` is reason `resolved`.
 */
function resolveSet(outcome: string): string {
  return `state = ${outcome}, sent_at = case when ${outcome} = 'sent' then ${NOW} end,
    finished_at = case when ${outcome} = 'dead' then ${NOW} end,
    reason = case when ${outcome} = 'dead' then 'resolved' end, updated_at = ${NOW}`;
}

/**
 * The filter of a bulk action, from parameter `$first` on: states (text[]), reason,
 * channel, schedule id, schedule source, due from (inclusive), due to (exclusive); each
 * NULL means "any". Aliases `d` (delivery) and `s` (its schedule).
 */
export function filterSql(first: number): string {
  const p = (i: number) => `$${first + i}`;
  return `d.state = any(${p(0)}::text[])
    and (${p(1)}::text is null or d.reason = ${p(1)})
    and (${p(2)}::text is null or d.channel = ${p(2)})
    and (${p(3)}::uuid is null or d.schedule_id = ${p(3)})
    and (${p(4)}::text is null or s.source = ${p(4)})
    and (${p(5)}::timestamptz is null or d.due_at >= ${p(5)})
    and (${p(6)}::timestamptz is null or d.due_at < ${p(6)})`;
}

/** DEL-12: what a redrive can take: dead or in doubt, schedule not cancelled, reminder still there. */
export const REDRIVABLE = `d.state in ('dead', 'in_doubt') and s.state <> 'cancelled'
    and exists (select 1 from punctual_reminders r
                where r.schedule_id = d.schedule_id and r.key = d.reminder_key)`;

/** DEL-12: what a resolve can take: in doubt, or a dead letter not yet acknowledged. */
export const RESOLVABLE = `(d.state = 'in_doubt' or (d.state = 'dead' and d.reason is distinct from 'resolved'))`;

/**
 * DEL-12: redrive a dead or in-doubt delivery with the same key: back to `pending`, due now,
 * failures reset (attempt keeps counting: it is the fencing token). The Retry-After age
 * budget starts over (`first_attempt_at` cleared); `deferrals` is kept, so the attempts
 * spent (`attempt − deferrals`) stay true, and a row that died `RATE_LIMITED` gets one
 * more try before a rate limit is dead again (DEL-13). Only while its
 * schedule is not cancelled and its reminder still exists (else nothing could send it).
 * Of a paused schedule it is held (`paused`) until the schedule resumes. A redrive is an
 * operator's decision: no grace applies (`stale_at` NULL), the expiry does.
 * Parameters: $1 now, $2 tenant, $3 delivery id.
 */
export const REDRIVE_SQL = `
update punctual_deliveries d
set ${REDRIVE_SET}
from punctual_schedules s
where s.id = d.schedule_id and s.tenant = $2 and d.id = $3 and ${REDRIVABLE}
returning d.*`;

/**
 * DEL-12: an operator resolves an in-doubt delivery — `sent` (it did arrive) or `dead` —
 * or acknowledges a dead letter (`dead`: reason `resolved`, no longer counted as an open
 * dead letter; `sent`: it arrived after all).
 * Parameters: $1 now, $2 tenant, $3 delivery id, $4 'sent' | 'dead'.
 */
export const RESOLVE_SQL = `
update punctual_deliveries d
set ${resolveSet("$4")}
from punctual_schedules s
where s.id = d.schedule_id and s.tenant = $2 and d.id = $3
  and ${RESOLVABLE}
returning d.*`;

/** Result columns of {@link REDRIVE_SQL}. */
export const REDRIVE_COLUMNS = DELIVERY_ROW_KEYS;
/** Result columns of {@link RESOLVE_SQL}. */
export const RESOLVE_COLUMNS = DELIVERY_ROW_KEYS;

/**
 * DEL-13: the limiter of a row inserted for reminder `r` of schedule `s`, as planning
 * writes it (`INSERT_DELIVERIES_SQL`): `tenant/key`, the key being the reminder's
 * `rate_limit_key` or else its channel name. Triggered and backfilled rows carry it too,
 * so they wait for the same bucket as planned ones.
 */
const LIMITER = "s.tenant || '/' || coalesce(r.rate_limit_key, r.channel)";

/**
 * API-9: inserts one delivery per named reminder of an active schedule, due now, with the
 * given keys (derived from the trigger id, so a replay of one trigger inserts nothing),
 * and records each in `punctual_triggers` (migration 0014) so an edit's realign leaves it.
 * No grace applies (`stale_at` NULL): the operator asked for it now. A paused, cancelled
 * or invalid schedule gets nothing. Parameters: $1 now, $2 tenant, $3 schedule id,
 * $4 trigger id, then parallel arrays $5 delivery keys, $6 reminder keys, $7 lost-lease
 * policies. Returns the inserted rows. DEL-13: each row carries the reminder's limiter.
 */
export const INSERT_TRIGGERED_SQL = `
with inserted as (
  insert into punctual_deliveries
    (delivery_key, schedule_id, reminder_key, occurrence_at, due_at, run_at, channel,
     on_lost_lease, max_attempts, state, expires_at, stale_at, created_at, updated_at, limiter)
  select u.key, s.id, r.key, ${NOW}, ${NOW}, ${NOW}, r.channel, u.on_lost_lease,
         r.max_attempts, 'pending', s.expires_at, null, ${NOW}, ${NOW}, ${LIMITER}
  from unnest($5::text[], $6::text[], $7::text[]) as u(key, reminder_key, on_lost_lease)
  join punctual_schedules s on s.tenant = $2 and s.id = $3 and s.state = 'active'
  join punctual_reminders r on r.schedule_id = s.id and r.key = u.reminder_key
  on conflict do nothing
  returning *
),
recorded as (
  insert into punctual_triggers (delivery_id, schedule_id, trigger_id, created_at)
  select i.id, i.schedule_id, $4, ${NOW} from inserted i
  returning delivery_id
)
select i.* from inserted i`;

/** Result columns of {@link INSERT_TRIGGERED_SQL}. */
export const INSERT_TRIGGERED_COLUMNS = DELIVERY_ROW_KEYS;

/**
 * API-9: backfill: inserts the deliveries of past occurrences with their deterministic
 * keys; an occurrence that has a row in any state (sent, skipped, dead …) keeps it
 * (ON CONFLICT DO NOTHING), so a sent occurrence is never sent twice. Rows due in the past
 * are `late` and have no grace limit (`stale_at` NULL: the misfire sweep does not skip what
 * the operator asked for); they run now. Held (`paused`) while the schedule is paused;
 * nothing for a cancelled schedule, nor for a reminder that no longer exists.
 * Parameters: $1 now, $2 tenant, $3 schedule id, then parallel arrays $4 keys,
 * $5 reminder keys, $6 occurrence instants, $7 due instants, $8 lost-lease policies.
 * Returns the inserted rows. DEL-13: each row carries the reminder's limiter, so a backfill
 * is paced by its bucket like planned rows.
 */
export const INSERT_BACKFILL_SQL = `
insert into punctual_deliveries
  (delivery_key, schedule_id, reminder_key, occurrence_at, due_at, run_at, channel,
   on_lost_lease, max_attempts, state, expires_at, stale_at, late, created_at, updated_at,
   limiter)
select u.key, s.id, r.key, u.occurrence_at, u.due_at, greatest(u.due_at, ${NOW}), r.channel,
       u.on_lost_lease, r.max_attempts,
       case when s.state = 'active' then 'pending' else 'paused' end, s.expires_at,
       case when s.recurring and u.due_at >= ${NOW}
            then u.due_at + make_interval(secs => s.grace_ms::double precision / 1000) end,
       u.due_at < ${NOW}, ${NOW}, ${NOW}, ${LIMITER}
from unnest($4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::text[])
  as u(key, reminder_key, occurrence_at, due_at, on_lost_lease)
join punctual_schedules s on s.tenant = $2 and s.id = $3 and s.state <> 'cancelled'
join punctual_reminders r on r.schedule_id = s.id and r.key = u.reminder_key
on conflict do nothing
returning *`;

/** Result columns of {@link INSERT_BACKFILL_SQL}. */
export const INSERT_BACKFILL_COLUMNS = DELIVERY_ROW_KEYS;

/**
 * API-9: the CTE `picked` of a bulk action: the ids of tenant `$2`'s deliveries that match
 * the filter `$3` … `$9` and `state` (SQL over `d`), at most `limit` (SQL), lowest ids
 * first, locked; rows another statement holds are skipped (left for the next call).
 */
function pickedSql(state: string, limit: string): string {
  return `picked as (
  select d.id from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
  where s.tenant = $2 and ${filterSql(3)} and ${state}
  order by d.id limit ${limit}
  for update of d skip locked
)`;
}

/**
 * API-9 / DEL-12: bulk redrive: the matching dead or in-doubt deliveries of the tenant, at
 * most `$10`, lowest ids first, go back to waiting with the same delivery key, exactly as a
 * single redrive does ({@link REDRIVE_SQL}). Rows locked by another statement are
 * left for the next call. $1 now, $2 tenant, $3 … $9 the filter, $10 limit.
 * Returns the redriven rows.
 */
export const BULK_REDRIVE_SQL = `
with ${pickedSql(REDRIVABLE, "$10")}
update punctual_deliveries d
set ${REDRIVE_SET}
from picked p, punctual_schedules s
where d.id = p.id and s.id = d.schedule_id and d.state in ('dead', 'in_doubt')
returning d.*`;

/** Result columns of {@link BULK_REDRIVE_SQL}. */
export const BULK_REDRIVE_COLUMNS = DELIVERY_ROW_KEYS;

/**
 * API-9 / DEL-12: bulk resolve: the matching in-doubt deliveries and open dead letters of
 * the tenant, at most `$11`, become `sent` (they did arrive) or `dead` (reason `resolved`),
 * as a single resolve does. $1 now, $2 tenant, $3 … $9 the filter, $10 outcome, $11 limit.
 * Returns the resolved rows.
 */
export const BULK_RESOLVE_SQL = `
with ${pickedSql(RESOLVABLE, "$11")}
update punctual_deliveries d
set ${resolveSet("$10")}
from picked p
where d.id = p.id and ${RESOLVABLE}
returning d.*`;

/** Result columns of {@link BULK_RESOLVE_SQL}. */
export const BULK_RESOLVE_COLUMNS = DELIVERY_ROW_KEYS;

/** What {@link PURGE_SCHEDULE_SQL} deleted. */
export interface PurgedRow {
  schedules: number;
  deliveries: number;
  attempts: number;
}

/**
 * API-9: hard delete of one schedule of the tenant with its reminders, deliveries and
 * attempts (the foreign keys cascade), for a data-protection request. The counts are of
 * the rows as they were when the statement began. A send in flight finishes; its settle
 * finds no row and changes nothing. $1 tenant, $2 schedule id.
 */
export const PURGE_SCHEDULE_SQL = `
with target as (
  select id from punctual_schedules where tenant = $1 and id = $2 for update
),
counted as (
  select (select count(*) from punctual_deliveries d where d.schedule_id in (select id from target))
           as deliveries,
         (select count(*) from punctual_attempts a join punctual_deliveries d on d.id = a.delivery_id
          where d.schedule_id in (select id from target))
           + (select count(*) from punctual_deliveries d
              where d.schedule_id in (select id from target) and d.sent_by is not null)
           as attempts
),
gone as (
  delete from punctual_schedules p using target t where p.id = t.id returning p.id
)
select (select count(*) from gone) as schedules, c.deliveries, c.attempts from counted c`;

/** Result columns of {@link PURGE_SCHEDULE_SQL}. */
export const PURGE_SCHEDULE_COLUMNS = columnsOf<PurgedRow>()([
  "schedules",
  "deliveries",
  "attempts",
]);

// ---------------------------------------------------------------------------------------
// One typed function per statement.

/** The filter of a bulk redrive or resolve; each field absent or null means "any". */
export interface BulkFilter {
  /** Delivery states to consider (the action narrows further to what it can take). */
  states: readonly string[];
  reason: string | null;
  channel: string | null;
  scheduleId: string | null;
  /** The schedule's `source` (e.g. an import's calendar name). */
  source: string | null;
  /** Due at or after (inclusive). */
  from: Date | null;
  /** Due before (exclusive). */
  to: Date | null;
}

export function filterParams(f: BulkFilter): unknown[] {
  return [f.states, f.reason, f.channel, f.scheduleId, f.source, f.from, f.to];
}

/** API-9: runs {@link INSERT_TRIGGERED_SQL}. */
export function insertTriggered(
  tx: Queryable,
  p: {
    now: Date | null;
    tenant: string;
    scheduleId: string;
    triggerId: string;
    deliveries: ReadonlyArray<{ key: string; reminderKey: string; onLostLease: string }>;
  },
): Promise<DeliveryRow[]> {
  return rows<DeliveryRow>(tx, INSERT_TRIGGERED_SQL, [
    p.now,
    p.tenant,
    p.scheduleId,
    p.triggerId,
    p.deliveries.map((d) => d.key),
    p.deliveries.map((d) => d.reminderKey),
    p.deliveries.map((d) => d.onLostLease),
  ]);
}

/** A backfilled delivery, as {@link insertBackfill} takes it. */
export interface BackfillDelivery {
  key: string;
  reminderKey: string;
  occurrenceAt: Date;
  dueAt: Date;
  onLostLease: string;
}

/** API-9: runs {@link INSERT_BACKFILL_SQL}. */
export function insertBackfill(
  tx: Queryable,
  p: {
    now: Date | null;
    tenant: string;
    scheduleId: string;
    deliveries: readonly BackfillDelivery[];
  },
): Promise<DeliveryRow[]> {
  return rows<DeliveryRow>(tx, INSERT_BACKFILL_SQL, [
    p.now,
    p.tenant,
    p.scheduleId,
    p.deliveries.map((d) => d.key),
    p.deliveries.map((d) => d.reminderKey),
    p.deliveries.map((d) => d.occurrenceAt),
    p.deliveries.map((d) => d.dueAt),
    p.deliveries.map((d) => d.onLostLease),
  ]);
}

/** API-9: runs {@link BULK_REDRIVE_SQL}. */
export function bulkRedrive(
  db: Queryable,
  p: { now: Date | null; tenant: string; filter: BulkFilter; limit: number },
): Promise<DeliveryRow[]> {
  return rows<DeliveryRow>(db, BULK_REDRIVE_SQL, [
    p.now,
    p.tenant,
    ...filterParams(p.filter),
    p.limit,
  ]);
}

/** API-9: runs {@link BULK_RESOLVE_SQL}. */
export function bulkResolve(
  db: Queryable,
  p: {
    now: Date | null;
    tenant: string;
    filter: BulkFilter;
    outcome: "sent" | "dead";
    limit: number;
  },
): Promise<DeliveryRow[]> {
  return rows<DeliveryRow>(db, BULK_RESOLVE_SQL, [
    p.now,
    p.tenant,
    ...filterParams(p.filter),
    p.outcome,
    p.limit,
  ]);
}

/** DEL-12: runs {@link REDRIVE_SQL}; null when the delivery cannot be redriven. */
export function redriveDeliveryRow(
  db: Queryable,
  p: { now: Date | null; tenant: string; id: number },
): Promise<DeliveryRow | null> {
  return firstRow<DeliveryRow>(db, REDRIVE_SQL, [p.now, p.tenant, p.id]);
}

/** DEL-12: runs {@link RESOLVE_SQL}; null when the delivery is not in doubt nor an open dead letter. */
export function resolveDeliveryRow(
  db: Queryable,
  p: { now: Date | null; tenant: string; id: number; outcome: "sent" | "dead" },
): Promise<DeliveryRow | null> {
  return firstRow<DeliveryRow>(db, RESOLVE_SQL, [p.now, p.tenant, p.id, p.outcome]);
}

/** API-9: runs {@link PURGE_SCHEDULE_SQL}. */
export async function purgeScheduleRow(
  db: Queryable,
  p: { tenant: string; id: string },
): Promise<PurgedRow> {
  const row = await firstRow<PurgedRow>(db, PURGE_SCHEDULE_SQL, [p.tenant, p.id]);
  return {
    schedules: Number(row?.schedules ?? 0),
    deliveries: Number(row?.deliveries ?? 0),
    attempts: Number(row?.attempts ?? 0),
  };
}
