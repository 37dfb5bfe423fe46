/**
 * Statements of the operator actions (API-9): trigger a schedule now, backfill a past
 * range, bulk redrive and resolve with filters, upsert by external id, purge.
 * Every statement is scoped by tenant (API-2) the way the statements of `schedules.ts` are:
 * a schedule of another tenant is never read, changed or deleted.
 */
import type { Queryable } from "./database.js";
import {
  DELIVERY_ROW_KEYS,
  INSERT_SCHEDULE_SQL,
  SCHEDULE_AT_ROW_KEYS,
  SCHEDULE_ROW_KEYS,
  definitionParams,
  type DeliveryRow,
  type InsertScheduleParams,
  type ScheduleRow,
  type ScheduleRowAt,
} from "./schedules.js";
import { columnsOf, firstRow, rows } from "./statement.js";

const NOW = "coalesce($1::timestamptz, now())";

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

/** Deliveries of a tenant by delivery key. $1 tenant, $2 keys. */
export const DELIVERIES_BY_KEYS_SQL = `
select d.* from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $1 and d.delivery_key = any($2::text[])
order by d.id`;

/** Result columns of {@link DELIVERIES_BY_KEYS_SQL}. */
export const DELIVERIES_BY_KEYS_COLUMNS = DELIVERY_ROW_KEYS;

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
 * The filter of a bulk action, from parameter `$first` on: states (text[]), reason,
 * channel, schedule id, schedule source, due from (inclusive), due to (exclusive); each
 * NULL means "any". Aliases `d` (delivery) and `s` (its schedule).
 */
function filterSql(first: number): string {
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
const REDRIVABLE = `d.state in ('dead', 'in_doubt') and s.state <> 'cancelled'
    and exists (select 1 from punctual_reminders r
                where r.schedule_id = d.schedule_id and r.key = d.reminder_key)`;

/** DEL-12: what a resolve can take: in doubt, or a dead letter not yet acknowledged. */
const RESOLVABLE = `(d.state = 'in_doubt' or (d.state = 'dead' and d.reason is distinct from 'resolved'))`;

/** A delivery of a dry run's sample, with how many rows matched in all. */
export type MatchedDeliveryRow = DeliveryRow & { total: number };

/**
 * API-9 dry run of a bulk redrive: how many deliveries of the tenant it would redrive, and
 * the first `$9` of them by id. $1 tenant, $2 … $8 the filter, $9 sample size.
 */
export const MATCH_REDRIVE_SQL = `
select d.*, count(*) over () as total
from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $1 and ${filterSql(2)} and ${REDRIVABLE}
order by d.id limit $9`;

/** Result columns of {@link MATCH_REDRIVE_SQL}. */
export const MATCH_REDRIVE_COLUMNS = columnsOf<MatchedDeliveryRow>()([
  ...DELIVERY_ROW_KEYS,
  "total",
]);

/** API-9 dry run of a bulk resolve: as {@link MATCH_REDRIVE_SQL}, for resolvable rows. */
export const MATCH_RESOLVE_SQL = `
select d.*, count(*) over () as total
from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $1 and ${filterSql(2)} and ${RESOLVABLE}
order by d.id limit $9`;

/** Result columns of {@link MATCH_RESOLVE_SQL}. */
export const MATCH_RESOLVE_COLUMNS = MATCH_REDRIVE_COLUMNS;

/**
 * API-9 / DEL-12: bulk redrive: the matching dead or in-doubt deliveries of the tenant, at
 * most `$10`, lowest ids first, go back to waiting with the same delivery key, exactly as a
 * single redrive does (REDRIVE_SQL in `schedules.ts`). Rows locked by another statement are
 * left for the next call. $1 now, $2 tenant, $3 … $9 the filter, $10 limit.
 * Returns the redriven rows.
 */
export const BULK_REDRIVE_SQL = `
with picked as (
  select d.id from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
  where s.tenant = $2 and ${filterSql(3)} and ${REDRIVABLE}
  order by d.id limit $10
  for update of d skip locked
)
update punctual_deliveries d
set state = case when s.state = 'active' then 'pending' else 'paused' end,
    run_at = ${NOW}, failures = 0, first_attempt_at = null,
    finished_at = null, reason = null,
    sent_at = null, expires_at = s.expires_at, stale_at = null, updated_at = ${NOW}
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
with picked as (
  select d.id from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
  where s.tenant = $2 and ${filterSql(3)} and ${RESOLVABLE}
  order by d.id limit $11
  for update of d skip locked
)
update punctual_deliveries d
set state = $10, sent_at = case when $10 = 'sent' then ${NOW} end,
    finished_at = case when $10 = 'dead' then ${NOW} end,
    reason = case when $10 = 'dead' then 'resolved' end, updated_at = ${NOW}
from picked p
where d.id = p.id and ${RESOLVABLE}
returning d.*`;

/** Result columns of {@link BULK_RESOLVE_SQL}. */
export const BULK_RESOLVE_COLUMNS = DELIVERY_ROW_KEYS;

/** A schedule by its external id. $1 tenant, $2 source, $3 external id. */
export const SCHEDULE_BY_EXTERNAL_ID_SQL = `
select * from punctual_schedules where tenant = $1 and source = $2 and external_id = $3`;

/** Result columns of {@link SCHEDULE_BY_EXTERNAL_ID_SQL}. */
export const SCHEDULE_BY_EXTERNAL_ID_COLUMNS = SCHEDULE_ROW_KEYS;

const IDEMPOTENCY_CONFLICT =
  "on conflict (tenant, idempotency_key) where idempotency_key is not null do nothing";

/**
 * API-9: upsert's create: INSERT_SCHEDULE_SQL of `schedules.ts` (same parameters), except
 * that an existing schedule with the same (tenant, source, external id) makes it insert
 * nothing (unique index `punctual_schedules_external`): of two concurrent creates of one
 * external id, one inserts and the other, once the first commits, returns no row.
 */
export const INSERT_SCHEDULE_BY_EXTERNAL_ID_SQL = (() => {
  if (!INSERT_SCHEDULE_SQL.includes(IDEMPOTENCY_CONFLICT))
    throw new Error("INSERT_SCHEDULE_SQL changed: update INSERT_SCHEDULE_BY_EXTERNAL_ID_SQL");
  return INSERT_SCHEDULE_SQL.replace(
    IDEMPOTENCY_CONFLICT,
    "on conflict (tenant, source, external_id) where external_id is not null do nothing",
  );
})();

/** Result columns of {@link INSERT_SCHEDULE_BY_EXTERNAL_ID_SQL}. */
export const INSERT_SCHEDULE_BY_EXTERNAL_ID_COLUMNS = SCHEDULE_AT_ROW_KEYS;

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

function filterParams(f: BulkFilter): unknown[] {
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

/** API-9: runs {@link DELIVERIES_BY_KEYS_SQL}. */
export function deliveriesByKeys(
  db: Queryable,
  p: { tenant: string; keys: readonly string[] },
): Promise<DeliveryRow[]> {
  return rows<DeliveryRow>(db, DELIVERIES_BY_KEYS_SQL, [p.tenant, p.keys]);
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

/** API-9: runs {@link MATCH_REDRIVE_SQL} or {@link MATCH_RESOLVE_SQL}. */
export function matchBulk(
  db: Queryable,
  p: { action: "redrive" | "resolve"; tenant: string; filter: BulkFilter; sample: number },
): Promise<MatchedDeliveryRow[]> {
  return rows<MatchedDeliveryRow>(
    db,
    p.action === "redrive" ? MATCH_REDRIVE_SQL : MATCH_RESOLVE_SQL,
    [p.tenant, ...filterParams(p.filter), p.sample],
  );
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

/** API-9: runs {@link SCHEDULE_BY_EXTERNAL_ID_SQL}. */
export function scheduleByExternalId(
  db: Queryable,
  p: { tenant: string; source: string; externalId: string },
): Promise<ScheduleRow | null> {
  return firstRow<ScheduleRow>(db, SCHEDULE_BY_EXTERNAL_ID_SQL, [p.tenant, p.source, p.externalId]);
}

/** API-9: runs {@link INSERT_SCHEDULE_BY_EXTERNAL_ID_SQL}; null when the external id exists. */
export function insertScheduleByExternalId(
  tx: Queryable,
  p: Omit<InsertScheduleParams, "idempotencyKey" | "source" | "externalId"> & {
    source: string;
    externalId: string;
  },
): Promise<ScheduleRowAt | null> {
  return firstRow<ScheduleRowAt>(tx, INSERT_SCHEDULE_BY_EXTERNAL_ID_SQL, [
    p.now,
    p.tenant,
    null,
    p.requestHash,
    ...definitionParams(p.definition),
    p.source,
    p.externalId,
    p.definition.catchUpJson ?? null,
    p.definition.title ?? null,
  ]);
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

/** A missed occurrence of a schedule: a delivery the misfire policy or the expiry skipped. */
export interface MissedRow {
  id: number;
  reminder_key: string;
  occurrence_at: Date;
  due_at: Date;
  reason: string;
}

/**
 * REC-6 / API-9: the most recent missed occurrences of a schedule of the tenant: skipped
 * deliveries (reason `stale` or `expired`), newest occurrence first. $1 tenant,
 * $2 schedule id, $3 most rows.
 */
export const MISSED_SQL = `
select d.id, d.reminder_key, d.occurrence_at, d.due_at, d.reason
from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $1 and d.schedule_id = $2 and d.state = 'skipped'
  and d.reason in ('stale', 'expired')
order by d.occurrence_at desc, d.id desc
limit $3`;

/** Result columns of {@link MISSED_SQL}. */
export const MISSED_COLUMNS = columnsOf<MissedRow>()([
  "id",
  "reminder_key",
  "occurrence_at",
  "due_at",
  "reason",
]);

/** API-9: runs {@link MISSED_SQL}. */
export function missedOccurrences(
  db: Queryable,
  p: { tenant: string; scheduleId: string; limit: number },
): Promise<MissedRow[]> {
  return rows<MissedRow>(db, MISSED_SQL, [p.tenant, p.scheduleId, p.limit]);
}
