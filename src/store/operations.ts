/**
 * Operational statements: heartbeat of scheduler instances (OPS-3, OPS-4), cluster-wide
 * leases for singleton tasks (DEL-8), schedule counts, vacuum and analyze. The delivery
 * counts and the retention of delivery rows are in `deliveries/` (`counts.ts`,
 * `retention.ts`). `$1` is "now" (NULL = database clock) where present.
 */

import type { Database, Queryable } from "./database.js";
import { NOW } from "./deliveries/sql.js";
import {
  instantCursorSql,
  instantIdKeysetSql,
  type KeysetPageParams,
  type WithInstantCursor,
} from "./keyset.js";
import {
  columnsOf,
  execute,
  firstRow,
  orderedRowsStatement,
  rows,
  rowsStatement,
} from "./statement.js";
import { FINISHED_SCHEDULE_PREDICATE } from "./schedules.js";

/**
 * Registers or refreshes an instance at the start of a tick: `last_tick_at` only, never
 * `last_pass_at`, which waits until the pass has succeeded ({@link PASS_SQL}), so a worker
 * whose sweeps fail goes stale (OPS-4). $1 now, $2 id, $3 host, $4 pid, $5 version, $6 role
 */
export const HEARTBEAT_SQL = `
insert into punctual_instances (id, host, pid, version, role, started_at, last_tick_at)
values ($2, $3, $4, $5, $6, ${NOW}, ${NOW})
on conflict (id) do update set last_tick_at = ${NOW}, stopped_at = null
returning last_tick_at, ${NOW} as db_now, clock_timestamp() as db_clock`;

/** Records a pass whose sweeps all succeeded. $1 now, $2 id, $3 its duration ms */
export const PASS_SQL = `
update punctual_instances set last_pass_at = ${NOW}, last_tick_ms = $3 where id = $2`;

/** $1 now, $2 id */
export const INSTANCE_STOPPED_SQL = `update punctual_instances set stopped_at = ${NOW} where id = $2`;

/** Instances seen recently: $1 now, $2 window ms */
export const LIST_INSTANCES_SQL = `
select id, host, pid, version, role, started_at, last_tick_at, last_pass_at, last_tick_ms, stopped_at,
  settings_version
from punctual_instances
where stopped_at is null or stopped_at > ${NOW} - make_interval(secs => $2::double precision / 1000)
order by started_at`;

/** A scheduler instance as {@link LIST_INSTANCES_SQL} returns it. */
export interface InstanceRow {
  id: string;
  host: string;
  pid: number;
  version: string;
  role: string;
  started_at: Date;
  /** Start of its last tick, successful or not (null: an older release's row). */
  last_tick_at: Date | null;
  /** End of its last successful pass (older releases: start of its last tick). */
  last_pass_at: Date | null;
  /** Duration of its last pass, ms. */
  last_tick_ms: number | null;
  stopped_at: Date | null;
  /** Settings version the instance runs on (OPS-11; null before its first settings read). */
  settings_version: number | string | null;
}

/** Result columns of {@link LIST_INSTANCES_SQL}. */
export const LIST_INSTANCES_COLUMNS = columnsOf<InstanceRow>()([
  "id",
  "host",
  "pid",
  "version",
  "role",
  "started_at",
  "last_tick_at",
  "last_pass_at",
  "last_tick_ms",
  "stopped_at",
  "settings_version",
]);

const INSTANCE_COLUMNS_LIST = `id, host, pid, version, role, started_at, last_tick_at, last_pass_at,
  last_tick_ms, stopped_at, settings_version`;

/**
 * OPS-3, API-3: the instances `GET /v1/status` summarizes, bounded: of those running or
 * stopped within the window, the `$3` most relevant (running first, then the latest
 * started), oldest start first, each with `window_total`, how many the window holds.
 * $1 now, $2 window ms, $3 most rows.
 */
export const STATUS_INSTANCES_SQL = `
select * from (
  select ${INSTANCE_COLUMNS_LIST}, count(*) over () as window_total
  from punctual_instances
  where stopped_at is null or stopped_at > ${NOW} - make_interval(secs => $2::double precision / 1000)
  order by (stopped_at is null) desc, started_at desc, id desc
  limit $3
) x
order by started_at, id`;

/** An instance of {@link STATUS_INSTANCES_SQL}, with the count of the window. */
export type StatusInstanceRow = InstanceRow & { window_total: number | string };

/** Result columns of {@link STATUS_INSTANCES_SQL}. */
export const STATUS_INSTANCES_COLUMNS = columnsOf<StatusInstanceRow>()([
  ...LIST_INSTANCES_COLUMNS,
  "window_total",
]);

/**
 * OPS-3, API-3: one keyset page of every stored instance (`GET /v1/instances`) by
 * (started_at, id), in `dir` order. Parameters: $1 state (`running`: not stopped,
 * `stopped`) or NULL, $2 role or NULL, $3 the last row's started_at (full precision) or
 * NULL from the start, $4 its id, $5 limit. The start bound is infinite by default, so
 * the page is a range scan of `punctual_instances_started` (migration 0027).
 */
function listInstancePageSql(dir: "asc" | "desc"): string {
  const keyset = instantIdKeysetSql("started_at", "text", ["$3", "$4"], dir);
  return `
select ${INSTANCE_COLUMNS_LIST}, ${instantCursorSql("started_at")}
from punctual_instances
where ($1::text is null or ($1::text = 'running') = (stopped_at is null))
  and ($2::text is null or role = $2)
  and ${keyset.bound}
${keyset.orderBy}
limit $5`;
}

/** An instance of a {@link LIST_INSTANCE_PAGE_SQL} page, with its keyset cursor. */
export type ListedInstanceRow = WithInstantCursor<InstanceRow, "started_at">;

const LISTED_INSTANCE_KEYS = columnsOf<ListedInstanceRow>()([
  ...LIST_INSTANCES_COLUMNS,
  "started_at_cursor",
]);

/** {@link listInstancePageSql} oldest start first. */
export const LIST_INSTANCE_PAGE_SQL = listInstancePageSql("asc");
export const LIST_INSTANCE_PAGE_COLUMNS = LISTED_INSTANCE_KEYS;
/** {@link listInstancePageSql} latest start first. */
export const LIST_INSTANCE_PAGE_DESC_SQL = listInstancePageSql("desc");
export const LIST_INSTANCE_PAGE_DESC_COLUMNS = LISTED_INSTANCE_KEYS;

/**
 * Takes or renews a named lease if it is free, expired, or already ours.
 * $1 now, $2 name, $3 owner, $4 ttl ms. Returns a row when the caller holds the lease.
 */
export const ACQUIRE_LEASE_SQL = `
insert into punctual_leases (name, owner, expires_at)
values ($2, $3, ${NOW} + make_interval(secs => $4::double precision / 1000))
on conflict (name) do update
  set owner = excluded.owner, expires_at = excluded.expires_at
  where punctual_leases.expires_at <= ${NOW} or punctual_leases.owner = excluded.owner
returning name, owner, expires_at`;

/** A cluster-wide lease as {@link ACQUIRE_LEASE_SQL} returns it (to its holder only). */
export interface LeaseRow {
  name: string;
  owner: string;
  expires_at: Date;
}

/** Result columns of {@link ACQUIRE_LEASE_SQL}. */
export const ACQUIRE_LEASE_COLUMNS = columnsOf<LeaseRow>()(["name", "owner", "expires_at"]);

/**
 * OPS-3: schedules by state as views and lists show them (API-3): an `active` schedule with
 * nothing left to send counts as `finished` ({@link FINISHED_SCHEDULE_PREDICATE}, the rule of the list's
 * `state` filter), so `GET /v1/status` agrees with `GET /v1/schedules?state=…&total=true`.
 * The rule's probes run only for `active` rows that have nothing left to plan.
 */
export const SCHEDULE_COUNTS_SQL = `
select case when state = 'active' and ${FINISHED_SCHEDULE_PREDICATE} then 'finished' else state end as state,
       count(*) as count
from punctual_schedules
group by 1`;

/** One line of {@link SCHEDULE_COUNTS_SQL}. */
export interface ScheduleCountRow {
  state: string;
  count: number;
}

/** Result columns of {@link SCHEDULE_COUNTS_SQL}. */
export const SCHEDULE_COUNTS_COLUMNS = columnsOf<ScheduleCountRow>()(["state", "count"]);

/** PGlite has no autovacuum: the retention sweep runs this on the hot tables. */
export const VACUUM_SQL = [
  "vacuum punctual_deliveries",
  "vacuum punctual_queue",
  "vacuum punctual_attempts",
  "vacuum punctual_schedules",
];

/**
 * The statistics target of the embedded engine's ANALYZE (OPS-12). At PostgreSQL's
 * default (100) ANALYZE samples 30,000 rows: about 125 ms of the event loop's thread for a
 * table of 200,000 deliveries, where a statement must stay well under 100 ms; at 10 it
 * samples 3,000 (about 16 ms), still enough for the few values of `state` and the
 * ranges of the time columns the planner reads. The claim path does not depend on them
 * (it runs pinned to its indexes, `Database.pinned`).
 */
export const EMBEDDED_STATISTICS_TARGET = 10;

/** ANALYZE of the hot tables (embedded engine), run with {@link EMBEDDED_STATISTICS_TARGET}. */
export const ANALYZE_SQL = [
  "analyze punctual_deliveries",
  "analyze punctual_queue",
  "analyze punctual_attempts",
  "analyze punctual_schedules",
];

/** Readiness probe: no parameters. */
export const PING_SQL = `select 1 as ok`;

/** What {@link PING_SQL} returns. */
export interface PingRow {
  ok: number;
}

/** Result columns of {@link PING_SQL}. */
export const PING_COLUMNS = columnsOf<PingRow>()(["ok"]);

/** Wakes every scheduler listening on `punctual_wake` (PostgreSQL); $1 payload. */
export const NOTIFY_WAKE_SQL = `select pg_notify('punctual_wake', $1)`;

/** What {@link NOTIFY_WAKE_SQL} returns: one column, the void result of `pg_notify`. */
export interface NotifyRow {
  pg_notify: unknown;
}

/** Result columns of {@link NOTIFY_WAKE_SQL}. */
export const NOTIFY_WAKE_COLUMNS = columnsOf<NotifyRow>()(["pg_notify"]);

/** Sets a setting only if absent; returns the stored value either way. $1 key, $2 value (json text) */
export const INIT_SETTING_SQL = `
with ins as (
  insert into punctual_settings (key, value) values ($1, $2::jsonb)
  on conflict (key) do nothing
  returning value
)
select value from ins
union all
select value from punctual_settings where key = $1 and not exists (select 1 from ins)`;

/** A stored setting's value (jsonb, parsed). */
export interface SettingRow {
  value: unknown;
}

/** Result columns of {@link INIT_SETTING_SQL}. */
export const INIT_SETTING_COLUMNS = columnsOf<SettingRow>()(["value"]);

/** What {@link recordHeartbeat} reads back: the statement's "now" and the live database clock. */
export interface HeartbeatRow {
  last_tick_at: Date;
  db_now: Date;
  db_clock: Date;
}

/** Result columns of {@link HEARTBEAT_SQL}. */
export const HEARTBEAT_COLUMNS = columnsOf<HeartbeatRow>()(["last_tick_at", "db_now", "db_clock"]);

/** Identity of a scheduler instance as {@link HEARTBEAT_SQL} records it. */
export interface InstanceIdentity {
  id: string;
  host: string;
  pid: number;
  version: string;
  role: string;
}

/** OPS-3: runs {@link HEARTBEAT_SQL} at the start of a tick. */
export async function recordHeartbeat(
  db: Queryable,
  now: Date | null,
  instance: InstanceIdentity,
): Promise<HeartbeatRow | null> {
  return firstRow<HeartbeatRow>(db, HEARTBEAT_SQL, [
    now,
    instance.id,
    instance.host,
    instance.pid,
    instance.version,
    instance.role,
  ]);
}

/** OPS-3, OPS-4: runs {@link PASS_SQL}; `durationMs` is the pass's duration, ms. */
export async function recordPass(
  db: Queryable,
  now: Date | null,
  id: string,
  durationMs: number,
): Promise<void> {
  await execute(db, PASS_SQL, [now, id, durationMs]);
}

/** OPS-6: runs {@link INSTANCE_STOPPED_SQL}. */
export async function markInstanceStopped(
  db: Queryable,
  now: Date | null,
  id: string,
): Promise<void> {
  await execute(db, INSTANCE_STOPPED_SQL, [now, id]);
}

/** DEL-8: runs {@link ACQUIRE_LEASE_SQL}; true when `owner` holds `name` for `ttlMs` from now. */
export async function acquireLease(
  db: Queryable,
  now: Date | null,
  name: string,
  owner: string,
  ttlMs: number,
): Promise<boolean> {
  return (await rows<LeaseRow>(db, ACQUIRE_LEASE_SQL, [now, name, owner, ttlMs])).length > 0;
}

/**
 * Runs {@link VACUUM_SQL}, then {@link ANALYZE_SQL} with the statistics target set to
 * {@link EMBEDDED_STATISTICS_TARGET} for that transaction only (embedded engine only: it
 * has no autovacuum). One statement at a time, each short (OPS-12).
 */
export async function vacuumHotTables(db: Database): Promise<void> {
  for (const sql of VACUUM_SQL) await execute(db, sql);
  for (const sql of ANALYZE_SQL) {
    await db.transaction(async (tx) => {
      await execute(tx, `set local default_statistics_target = ${EMBEDDED_STATISTICS_TARGET}`);
      await execute(tx, sql);
    });
  }
}

/** Parameters of {@link listInstances}. */
export interface ListInstancesParams {
  /** Pinned "now" (tests) or null for the database clock. */
  now: Date | null;
  /** Instances stopped longer ago than this are left out, ms. */
  windowMs: number;
}

/** OPS-3 / OPS-4: runs {@link LIST_INSTANCES_SQL}: running instances and those stopped within the window, oldest start first. */
export const listInstances = rowsStatement<InstanceRow, ListInstancesParams>(
  LIST_INSTANCES_SQL,
  (p) => [p.now, p.windowMs],
);

/** OPS-3: runs {@link STATUS_INSTANCES_SQL}: at most `limit` instances of the window. */
export const statusInstances = rowsStatement<
  StatusInstanceRow,
  ListInstancesParams & { limit: number }
>(STATUS_INSTANCES_SQL, (p) => [p.now, p.windowMs, p.limit]);

/** Parameters of {@link listInstancePage}. */
export interface ListInstancePageParams extends KeysetPageParams<string> {
  /** `running` (not stopped) or `stopped`; null: both. */
  state: "running" | "stopped" | null;
  role: string | null;
  /** Keyset cursor: `started_at` (full precision, ISO) and id of the last row seen, or null. */
  afterStartedAt: string | null;
}

/** OPS-3, API-3: runs {@link LIST_INSTANCE_PAGE_SQL} (or its latest-first twin): one page. */
export const listInstancePage = orderedRowsStatement<ListedInstanceRow, ListInstancePageParams>(
  { asc: LIST_INSTANCE_PAGE_SQL, desc: LIST_INSTANCE_PAGE_DESC_SQL },
  (p) => [p.state, p.role, p.afterStartedAt, p.afterId, p.limit],
);

/** OPS-3: runs {@link SCHEDULE_COUNTS_SQL}: how many schedules are in each state. */
export function countSchedulesByState(db: Queryable): Promise<ScheduleCountRow[]> {
  return rows<ScheduleCountRow>(db, SCHEDULE_COUNTS_SQL);
}

/** OPS-4: runs {@link PING_SQL}; rejects when the database is unreachable. */
export async function ping(db: Queryable): Promise<void> {
  await rows<PingRow>(db, PING_SQL);
}

/** Parameters of {@link notifyWake}. */
export interface NotifyWakeParams {
  /** Payload of the notification (listeners ignore it today). */
  payload: string;
}

/** DEL-2: runs {@link NOTIFY_WAKE_SQL}: wakes the schedulers listening on `punctual_wake` (PostgreSQL). */
export async function notifyWake(db: Queryable, p: NotifyWakeParams): Promise<void> {
  await rows<NotifyRow>(db, NOTIFY_WAKE_SQL, [p.payload]);
}

/** Parameters of {@link initSetting}. */
export interface InitSettingParams {
  key: string;
  /** The value to store when the key is absent, as JSON text. */
  valueJson: string;
}

/**
 * Runs {@link INIT_SETTING_SQL}: stores the setting unless present. Returns the stored
 * value either way (parsed JSON), or `undefined` when the statement returned no row.
 */
export async function initSetting(db: Queryable, p: InitSettingParams): Promise<unknown> {
  return (await firstRow<SettingRow>(db, INIT_SETTING_SQL, [p.key, p.valueJson]))?.value;
}
