/**
 * Reads and schedule writes of the operator actions (API-9): the dry runs of a bulk
 * redrive or resolve, look-ups by delivery key, upsert by external id, missed occurrences.
 * The writes of delivery rows (trigger, backfill, redrive, resolve, purge) are in
 * `deliveries/operator.ts`.
 * Every statement is scoped by tenant (API-2) the way the statements of `schedules.ts` are:
 * a schedule of another tenant is never read, changed or deleted.
 */
import type { Queryable } from "./database.js";
import {
  DELIVERY_ROW_KEYS,
  INSERT_SCHEDULE_SQL,
  SCHEDULE_AT_ROW_KEYS,
  SCHEDULE_ROW_KEYS,
  insertScheduleParams,
  type DeliveryRow,
  type InsertScheduleParams,
  type ScheduleRow,
  type ScheduleRowAt,
} from "./schedules.js";
import {
  filterParams,
  filterSql,
  REDRIVABLE,
  RESOLVABLE,
  type BulkFilter,
} from "./deliveries/operator.js";
import { columnsOf, firstRow, firstRowStatement, rows, rowsStatement } from "./statement.js";

/** Deliveries of a tenant by delivery key. $1 tenant, $2 keys. */
export const DELIVERIES_BY_KEYS_SQL = `
select d.* from punctual_delivery_rows d join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $1 and d.delivery_key = any($2::text[])
order by d.id`;

/** Result columns of {@link DELIVERIES_BY_KEYS_SQL}. */
export const DELIVERIES_BY_KEYS_COLUMNS = DELIVERY_ROW_KEYS;

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

// ---------------------------------------------------------------------------------------
// One typed function per statement.

/** API-9: runs {@link DELIVERIES_BY_KEYS_SQL}. */
export const deliveriesByKeys = rowsStatement<
  DeliveryRow,
  { tenant: string; keys: readonly string[] }
>(DELIVERIES_BY_KEYS_SQL, (p) => [p.tenant, p.keys]);

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

/** API-9: runs {@link SCHEDULE_BY_EXTERNAL_ID_SQL}. */
export const scheduleByExternalId = firstRowStatement<
  ScheduleRow,
  { tenant: string; source: string; externalId: string }
>(SCHEDULE_BY_EXTERNAL_ID_SQL, (p) => [p.tenant, p.source, p.externalId]);

/** API-9: runs {@link INSERT_SCHEDULE_BY_EXTERNAL_ID_SQL}; null when the external id exists. */
export function insertScheduleByExternalId(
  tx: Queryable,
  p: Omit<InsertScheduleParams, "idempotencyKey" | "source" | "externalId"> & {
    source: string;
    externalId: string;
  },
): Promise<ScheduleRowAt | null> {
  return firstRow<ScheduleRowAt>(
    tx,
    INSERT_SCHEDULE_BY_EXTERNAL_ID_SQL,
    insertScheduleParams({ ...p, idempotencyKey: null }),
  );
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
export const missedOccurrences = rowsStatement<
  MissedRow,
  { tenant: string; scheduleId: string; limit: number }
>(MISSED_SQL, (p) => [p.tenant, p.scheduleId, p.limit]);
