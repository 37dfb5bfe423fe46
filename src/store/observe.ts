/**
 * Statements of observability and live settings (OPS-13, OPS-11; migration 0011):
 *
 * - the cluster gauges, computed once per interval by the holder of the lease
 *   `punctual.gauges` ({@link STORE_GAUGES_SQL}) and read by every process
 *   ({@link READ_STORED_GAUGES_SQL}), so a scrape never counts rows;
 * - the settings version ({@link READ_SETTINGS_VERSION_SQL}), moved by a trigger whenever a
 *   database-held setting changes, and the version each instance runs on;
 * - pruning of instances whose heartbeat stopped long ago (the retention of the attempt
 *   log is in `deliveries/retention.ts`).
 *
 * `$1` is "now" (NULL = database clock) where present.
 */
import type { Queryable } from "./database.js";
import {
  DELIVERY_COUNTS_COLUMNS,
  DELIVERY_COUNTS_SQL,
  type DeliveryCountsRow,
} from "./deliveries/counts.js";
import { msBeforeNow as AGO, NOW } from "./deliveries/sql.js";
import { columnsOf, execute, firstRow, firstRowStatement, rows } from "./statement.js";

/**
 * The stored cluster gauges, as {@link STORE_GAUGES_SQL} and {@link READ_STORED_GAUGES_SQL}
 * return them: the delivery counts of `DELIVERY_COUNTS_SQL` (deliveries/counts.ts) as of
 * `computed_at`.
 */
export type StoredGaugesRow = DeliveryCountsRow & {
  /** When they were computed (database clock). */
  computed_at: Date;
  /** Instance that computed them. */
  computed_by: string;
  /** Database "now" of the statement, to age `oldest_due_at` and `computed_at`. */
  db_now: Date;
};

/** Result columns of {@link STORE_GAUGES_SQL}. */
export const STORE_GAUGES_COLUMNS = columnsOf<StoredGaugesRow>()([
  "computed_at",
  "computed_by",
  ...DELIVERY_COUNTS_COLUMNS,
  "db_now",
]);

/**
 * OPS-13: computes the cluster gauges and stores them in the one row of `punctual_gauges`.
 * Run only by the holder of the lease `punctual.gauges`. The counts are those of
 * `DELIVERY_COUNTS_SQL` over the whole cluster (the one count `GET /v1/status` and
 * `GET /v1/overview` read too), each reading only the rows it counts.
 * $1 now, $2 overdue threshold ms, $3 NULL (the counts' tenant: all), $4 instance id.
 */
export const STORE_GAUGES_SQL = `
insert into punctual_gauges as g (id, computed_at, computed_by, due_backlog, overdue,
  retry_waiting, in_doubt, dead, claimed, oldest_due_at)
select 1, ${NOW}, $4, c.due_backlog, c.overdue, c.retry_waiting, c.in_doubt, c.dead,
  c.claimed, c.oldest_due_at
from (${DELIVERY_COUNTS_SQL}) c
on conflict (id) do update set
  computed_at = excluded.computed_at, computed_by = excluded.computed_by,
  due_backlog = excluded.due_backlog, overdue = excluded.overdue,
  retry_waiting = excluded.retry_waiting, in_doubt = excluded.in_doubt, dead = excluded.dead,
  claimed = excluded.claimed, oldest_due_at = excluded.oldest_due_at
returning g.computed_at, g.computed_by, g.due_backlog, g.overdue, g.retry_waiting, g.in_doubt,
  g.dead, g.claimed, g.oldest_due_at, ${NOW} as db_now`;

/** Result columns of {@link READ_STORED_GAUGES_SQL}: those of {@link STORE_GAUGES_SQL}. */
export const READ_STORED_GAUGES_COLUMNS = STORE_GAUGES_COLUMNS;

/** OPS-13: the last stored gauges (no row before the first computation). $1 now */
export const READ_STORED_GAUGES_SQL = `
select computed_at, computed_by, due_backlog, overdue, retry_waiting, in_doubt, dead, claimed,
  oldest_due_at, ${NOW} as db_now
from punctual_gauges where id = 1`;

/** The settings version ({@link READ_SETTINGS_VERSION_SQL}). */
export interface SettingsVersionRow {
  version: number;
  changed_at: Date;
}

/** Result columns of {@link READ_SETTINGS_VERSION_SQL}. */
export const READ_SETTINGS_VERSION_COLUMNS = columnsOf<SettingsVersionRow>()([
  "version",
  "changed_at",
]);

/**
 * OPS-11: the version of the database-held settings; every change to `punctual_settings`
 * (and to any table that hooks `punctual_bump_settings_version()` as a row trigger) moves
 * it by at least one. No parameters.
 */
export const READ_SETTINGS_VERSION_SQL = `
select version, changed_at from punctual_settings_version where id = 1`;

/** OPS-11: records the settings version an instance runs on. $1 id, $2 version */
export const RECORD_SETTINGS_VERSION_SQL = `
update punctual_instances set settings_version = $2 where id = $1`;

/**
 * OPS-11: writes one setting (insert or replace); the trigger bumps the version when the
 * value changed. $1 key, $2 value (json text)
 */
export const PUT_SETTING_SQL = `
insert into punctual_settings (key, value, updated_at) values ($1, $2::jsonb, now())
on conflict (key) do update set value = excluded.value, updated_at = excluded.updated_at
  where punctual_settings.value is distinct from excluded.value`;

/**
 * OPS-11: the settings whose key begins with $1 (matched as plain text, not a pattern),
 * e.g. every tenant's webhook secret (`webhook_secret:tenant:`). $1 key prefix
 */
export const READ_SETTINGS_PREFIXED_SQL = `
select key, value from punctual_settings where left(key, char_length($1::text)) = $1::text order by key`;

/** OPS-11: deletes one setting; the trigger bumps the version when a row went. $1 key */
export const DELETE_SETTING_SQL = `delete from punctual_settings where key = $1`;

/** One stored setting ({@link READ_SETTINGS_SQL}). */
export interface StoredSettingRow {
  key: string;
  value: unknown;
}

/** Result columns of {@link READ_SETTINGS_SQL}. */
export const READ_SETTINGS_COLUMNS = columnsOf<StoredSettingRow>()(["key", "value"]);
/** Result columns of {@link READ_SETTINGS_PREFIXED_SQL}. */
export const READ_SETTINGS_PREFIXED_COLUMNS = READ_SETTINGS_COLUMNS;

/** OPS-11: the settings of the given keys. $1 keys (text[]) */
export const READ_SETTINGS_SQL = `
select key, value from punctual_settings where key = any($1::text[]) order by key`;

/**
 * Status: deletes instances whose last sign of life (tick start, pass, or stop) is older
 * than $2 ms, at most 1,000 per run. A running process whose row was pruned registers
 * again at its next heartbeat (the heartbeat upserts). $1 now, $2 age ms
 */
export const PRUNE_INSTANCES_SQL = `
delete from punctual_instances where id = any(array(
  select id from punctual_instances
  where greatest(last_tick_at, last_pass_at, stopped_at, started_at) < ${AGO("$2")}
  limit 1000))`;

/** OPS-13: runs {@link STORE_GAUGES_SQL}. `overdueMs` is the overdue threshold, ms. */
export const storeGauges = firstRowStatement<
  StoredGaugesRow,
  { now: Date | null; instance: string; overdueMs: number }
>(STORE_GAUGES_SQL, (p) => [p.now, p.overdueMs, null, p.instance]);

/** OPS-13: runs {@link READ_STORED_GAUGES_SQL}; null before the first computation. */
export const readStoredGauges = firstRowStatement<StoredGaugesRow, { now: Date | null }>(
  READ_STORED_GAUGES_SQL,
  (p) => [p.now],
);

/** OPS-11: runs {@link READ_SETTINGS_VERSION_SQL}; null on a schema without the table's row. */
export async function readSettingsVersion(db: Queryable): Promise<SettingsVersionRow | null> {
  const row = await firstRow<SettingsVersionRow>(db, READ_SETTINGS_VERSION_SQL);
  return row ? { version: Number(row.version), changed_at: row.changed_at } : null;
}

/** OPS-11: runs {@link RECORD_SETTINGS_VERSION_SQL}. */
export async function recordSettingsVersion(
  db: Queryable,
  p: { instance: string; version: number },
): Promise<void> {
  await execute(db, RECORD_SETTINGS_VERSION_SQL, [p.instance, p.version]);
}

/** OPS-11: runs {@link PUT_SETTING_SQL}; `value` is stored as JSON. */
export async function putSetting(db: Queryable, p: { key: string; value: unknown }): Promise<void> {
  await execute(db, PUT_SETTING_SQL, [p.key, JSON.stringify(p.value)]);
}

/** OPS-11: runs {@link READ_SETTINGS_SQL}: the stored values of `keys` (absent keys are left out). */
export async function readSettings(
  db: Queryable,
  p: { keys: readonly string[] },
): Promise<Map<string, unknown>> {
  const found = await rows<StoredSettingRow>(db, READ_SETTINGS_SQL, [p.keys]);
  return new Map(found.map((r) => [r.key, r.value]));
}

/** Runs {@link PRUNE_INSTANCES_SQL}; returns how many instance rows it deleted. */
export function pruneInstances(
  db: Queryable,
  p: { now: Date | null; olderThanMs: number },
): Promise<number> {
  return execute(db, PRUNE_INSTANCES_SQL, [p.now, p.olderThanMs]);
}

/** OPS-11: runs {@link READ_SETTINGS_PREFIXED_SQL}: the settings whose key begins with `prefix`. */
export async function readSettingsPrefixed(
  db: Queryable,
  p: { prefix: string },
): Promise<Map<string, unknown>> {
  const found = await rows<StoredSettingRow>(db, READ_SETTINGS_PREFIXED_SQL, [p.prefix]);
  return new Map(found.map((r) => [r.key, r.value]));
}

/** OPS-11: runs {@link DELETE_SETTING_SQL}; resolves to the rows deleted (0 or 1). */
export function deleteSetting(db: Queryable, p: { key: string }): Promise<number> {
  return execute(db, DELETE_SETTING_SQL, [p.key]);
}
