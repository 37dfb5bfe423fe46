/**
 * Schedules and their reminders: create (idempotent by key), read, list, cancel, pause,
 * resume. Parameters are listed per statement; `$1` is "now" where present.
 */
import type {
  AttemptView,
  DeliveryView,
  ReminderView,
  SCHEDULE_STATE_VALUES,
  ScheduleView,
} from "../contracts/index.js";
import type { ReminderTemplate } from "../channels/template.js";
import { dtstartInZone, type CatchUp, type QuietHours } from "../recurrence/index.js";
import type { Database, Queryable } from "./database.js";
import { NOW } from "./deliveries/sql.js";
import { cancelWaitingSql, reviveCancelledSql, syncWaitingSql } from "./deliveries/waiting.js";
import {
  columnsOf,
  execute,
  firstRow,
  firstRowStatement,
  orderedRowsStatement,
  rows,
  rowsStatement,
} from "./statement.js";
import {
  idPastSql,
  instantCursorSql,
  instantIdKeysetSql,
  type WithInstantCursor,
} from "./keyset.js";
import {
  reminderView,
  type DefinitionColumns,
  type ReminderColumns,
  type StoredReminderColumns,
  type StoredRuleColumns,
} from "../definition/index.js";

export { redactTarget } from "../definition/index.js";

/** A row of `punctual_schedules`, every column (what `select *` returns). */
export interface ScheduleRow extends StoredRuleColumns {
  id: string;
  tenant: string;
  source: string | null;
  external_id: string | null;
  idempotency_key: string | null;
  request_hash: string | null;
  state: (typeof SCHEDULE_STATE_VALUES)[number];
  invalid_reason: string | null;
  version: number;
  recurring: boolean;
  expires_at: Date | null;
  misfire: "skip" | "latest" | "all";
  grace_ms: number;
  perpetual: boolean;
  payload: unknown;
  /** Planning watermark: deliveries due before it exist (DEL-7). */
  planned_until: Date | null;
  /** No occurrence left after the watermark. */
  plan_complete: boolean;
  /** REC-5: when the expansion cap was logged. */
  cap_logged_at: Date | null;
  created_at: Date;
  updated_at: Date;
  cancelled_at: Date | null;
  cancelled_by: "user" | "import" | null;
  /** DEL-17: catch-up bounds under misfire `all` (migration 0009), or null. */
  catch_up: CatchUp | null;
  /** What a person calls it, at most 500 characters (migration 0016), or null. */
  title: string | null;
  /** OPS-15: W3C traceparent of the request that created it (migration 0024), or null. */
  trace_parent: string | null;
}

/**
 * The columns of `punctual_schedules` that say when a schedule occurs (its rule, bounds and
 * DST policy), in table order: the part of a row the planner and the explainer read with
 * the row's id and version.
 */
export const SCHEDULE_TIMING_KEYS = [
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
] as const satisfies readonly (keyof ScheduleRow)[];

/** One of {@link SCHEDULE_TIMING_KEYS}. */
export type ScheduleTimingKey = (typeof SCHEDULE_TIMING_KEYS)[number];

/** The keys of {@link ScheduleRow}: the columns of `punctual_schedules`, for statements that return its rows whole. */
export const SCHEDULE_ROW_KEYS = columnsOf<ScheduleRow>()([
  "id",
  "tenant",
  "source",
  "external_id",
  "idempotency_key",
  "request_hash",
  "state",
  "invalid_reason",
  "version",
  ...SCHEDULE_TIMING_KEYS,
  "misfire",
  "grace_ms",
  "perpetual",
  "payload",
  "planned_until",
  "plan_complete",
  "cap_logged_at",
  "created_at",
  "updated_at",
  "cancelled_at",
  "cancelled_by",
  "catch_up",
  "title",
  "trace_parent",
]);

/** A schedule row with the "now" of the statement that wrote or locked it (ready to plan). */
export type ScheduleRowAt = ScheduleRow & { db_now: Date };

/** The keys of {@link ScheduleRowAt}. */
export const SCHEDULE_AT_ROW_KEYS = columnsOf<ScheduleRowAt>()([...SCHEDULE_ROW_KEYS, "db_now"]);

/**
 * A row of `punctual_reminders`, every column: the stored reminder columns the definition
 * reads back ({@link StoredReminderColumns}: `rate_limit_key` (DEL-13), `quiet_hours` and
 * `priority` (DEL-15), …), with the columns every row of this release has.
 */
export interface ReminderRow extends Omit<
  StoredReminderColumns,
  "template" | "quiet_hours" | "category" | "digest"
> {
  schedule_id: string;
  /** CH-6: the reminder's template, or null. */
  template: ReminderTemplate | null;
  /** DEL-15: the reminder's quiet window (migration 0009), or null. */
  quiet_hours: QuietHours | null;
  /** API-13: the reminder's category (migration 0035), or null. */
  category: string | null;
  /** DEL-19: the reminder's digest settings (migration 0048), or null. */
  digest: { windowMs: number; key?: string; maxItems?: number } | null;
}

/** Result columns of {@link REMINDERS_SQL}. */
export const REMINDERS_COLUMNS = columnsOf<ReminderRow>()([
  "schedule_id",
  "key",
  "offset_duration",
  "channel",
  "target",
  "on_lost_lease",
  "max_attempts",
  "template",
  "rate_limit_key",
  "quiet_hours",
  "priority",
  "category",
  "digest",
]);

/**
 * Inserts a schedule unless one with the same (tenant, idempotency key) exists.
 * Parameters: $1 now, $2 tenant, $3 idempotency key, $4 request hash, $5 dtstart, $6 tzid,
 * $7 rrule, $8 rdate, $9 exdate, $10 recurring, $11 ends_at, $12 expires_at, $13 dst gap,
 * $14 dst overlap, $15 misfire, $16 grace ms, $17 perpetual, $18 payload (json text),
 * $19 source, $20 external id, $21 catch-up (json text or null, DEL-17), $22 title or null.
 * Returns the new row (with `db_now`, ready to plan), or nothing when the key was already
 * used (the caller reads it).
 */
export const INSERT_SCHEDULE_SQL = `
insert into punctual_schedules
  (tenant, idempotency_key, request_hash, dtstart, tzid, rrule, rdate, exdate, recurring,
   ends_at, expires_at, dst_gap, dst_overlap, misfire, grace_ms, perpetual, payload, source,
   external_id, created_at, updated_at, catch_up, title, trace_parent)
values ($2, $3, $4, $5, $6, $7, $8::text[], $9::text[], $10, $11, $12, $13, $14, $15, $16, $17,
        $18::jsonb, $19, $20, ${NOW}, ${NOW}, $21::jsonb, $22::text, $23::text)
on conflict (tenant, idempotency_key) where idempotency_key is not null do nothing
returning *, ${NOW} as db_now`;

/** Parameters: $1 schedule id, then parallel arrays $2 keys, $3 offsets, $4 channels, $5 targets (json text), $6 lost-lease policies, $7 max attempts, $8 templates (json text or null), $9 rate-limit keys (or null, DEL-13), $10 quiet hours (json text or null, DEL-15), $11 priorities (or null), $12 categories (or null, API-13), $13 digest settings (json text or null, DEL-19). */
export const INSERT_REMINDERS_SQL = `
insert into punctual_reminders (schedule_id, key, offset_duration, channel, target, on_lost_lease, max_attempts, template, rate_limit_key, quiet_hours, priority, category, digest)
select $1, u.key, u.offset_duration, u.channel, u.target::jsonb, u.on_lost_lease, u.max_attempts, u.template::jsonb, u.rate_limit_key, u.quiet_hours::jsonb, u.priority, u.category, u.digest::jsonb
from unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[])
  as u(key, offset_duration, channel, target, on_lost_lease, max_attempts, template, rate_limit_key, quiet_hours, priority, category, digest)`;

/** $1 tenant, $2 idempotency key */
export const SCHEDULE_BY_IDEMPOTENCY_KEY_SQL = `
select * from punctual_schedules where tenant = $1 and idempotency_key = $2`;

/** $1 tenant, $2 id */
export const SCHEDULE_BY_ID_SQL = `select * from punctual_schedules where tenant = $1 and id = $2`;

/**
 * OPS-12: the FROM items that read the reminders of the schedule ids in the uuid array
 * `ids` (SQL, e.g. `$1`) as relation `r`: one primary-key lookup per distinct id. The
 * lateral subquery runs once per id; `offset 0` keeps the planner from merging it into a
 * join, which it would plan from estimates: on a table never analyzed (PGlite does not
 * analyze on its own) it takes `schedule_id = any(<20 ids>)` to match a tenth of the rows
 * and reads the whole table instead, for every batch of an import.
 */
export function remindersOfIdsSql(ids: string): string {
  return `(select distinct unnest(${ids}::uuid[]) as id) ids
  cross join lateral (
    select * from punctual_reminders x where x.schedule_id = ids.id offset 0
  ) r`;
}

/** $1 schedule ids (repeats read once); by primary key whatever the statistics (OPS-12). */
export const REMINDERS_SQL = `
select r.* from ${remindersOfIdsSql("$1")} order by r.schedule_id, r.key`;

/**
/**
 * API-3: the reminders of the schedule ids $1 for a list, each template and target larger
 * than $2 bytes (JSON text) left out and marked: a page holds a bounded amount whatever was
 * stored.
 */
export const LIST_REMINDERS_SQL = `
select ${REMINDERS_COLUMNS.filter((c) => c !== "template" && c !== "target")
  .map((c) => `r.${c}`)
  .join(", ")},
       case when octet_length(r.template::text) <= $2 then r.template end as template,
       coalesce(octet_length(r.template::text) > $2, false) as template_truncated,
       case when octet_length(r.target::text) <= $2 then r.target else '{}'::jsonb end as target,
       coalesce(octet_length(r.target::text) > $2, false) as target_truncated
from ${remindersOfIdsSql("$1")} order by r.schedule_id, r.key`;

/**
 * API-3: the `LIKE` pattern that matches the text of placeholder `q` as a plain,
 * lower-cased substring: `\`, `%` and `_` escaped (backslash is `LIKE`'s default escape).
 */
function containsPatternSql(q: string): string {
  return `('%' || replace(replace(replace(lower(${q}::text), '\\', '\\\\'), '%', '\\%'), '_', '\\_') || '%')`;
}

/**
 * API-3: an `active` row of `punctual_schedules` (not aliased) that views show as
 * `finished`: nothing left to plan (a one-off, or a series whose plan is complete), a
 * delivery for each of a one-off's reminders, and none of its deliveries waiting or in
 * flight. The same rule as {@link finishedScheduleIds}, for the list's `state` filter.
 */
export const FINISHED_SCHEDULE_PREDICATE = `((not punctual_schedules.recurring or punctual_schedules.plan_complete)
  and not exists (select 1 from punctual_deliveries d
                  where d.schedule_id = punctual_schedules.id
                    and d.state in ('pending', 'claimed', 'retry', 'paused', 'grouped'))
  and (punctual_schedules.recurring or not exists (
         select 1 from punctual_reminders r
         where r.schedule_id = punctual_schedules.id
           and not exists (select 1 from punctual_deliveries d
                           where d.schedule_id = punctual_schedules.id
                             and d.reminder_key = r.key))))`;

/**
 * API-3: the filter of a schedule list, one home for the list and its count: tenant,
 * state or NULL, source or NULL, search text or NULL (a case-insensitive substring of the
 * title or the external id, matched as plain text). The arguments are placeholders.
 * The search is `lower(title) like '%…%'` (not `strpos`) so that PostgreSQL can answer it
 * from the trigram indexes of migration 0029 (`punctual_schedules_title_trgm`,
 * `punctual_schedules_external_id_trgm`) where pg_trgm exists; without them the same
 * condition filters the rows the page walks. Terms under three characters have no trigram
 * to look up and always walk.
 */
function scheduleFilterSql(n: { tenant: string; state: string; source: string; q: string }) {
  return `tenant = ${n.tenant}
  and (${n.state}::text is null
       or (${n.state} not in ('active', 'finished') and state = ${n.state})
       or (${n.state} = 'active' and state = 'active' and not ${FINISHED_SCHEDULE_PREDICATE})
       or (${n.state} = 'finished' and state = 'active' and ${FINISHED_SCHEDULE_PREDICATE}))
  and (${n.source}::text is null or source = ${n.source})
  and (${n.q}::text is null
       or lower(title) like ${containsPatternSql(n.q)}
       or lower(external_id) like ${containsPatternSql(n.q)})`;
}

const SCHEDULE_COUNT_FILTER = scheduleFilterSql({
  tenant: "$1",
  state: "$2",
  source: "$3",
  q: "$4",
});

/**
 * API-3: how many schedules a list's filter matches, counting at most $5 of them (the
 * count stops there: its cost is bounded by $5 index entries, not by the table).
 * Parameters: $1 tenant, $2 state or NULL, $3 source or NULL, $4 search text or NULL.
 */
export const COUNT_SCHEDULES_SQL = `
select count(*)::int as n from (
  select 1 from punctual_schedules where ${SCHEDULE_COUNT_FILTER} limit $5
) x`;

/**
 * API-3: the planner's estimate (`EXPLAIN`, from the table's statistics; no row is read)
 * of how many schedules a list's filter matches, for a total too large to count.
 * Parameters as {@link COUNT_SCHEDULES_SQL} without the cap.
 */
export const ESTIMATE_SCHEDULES_SQL = `
explain (format json) select 1 from punctual_schedules where ${SCHEDULE_COUNT_FILTER}`;

/**
 * API-3: one keyset page of schedules by (created_at, id), in `dir` order. Parameters: $1
 * tenant, $2 state or NULL, $3 the last row's created_at (full precision) or NULL from the
 * start, $4 its id, $5 limit, $6 source or NULL, $7 search text or NULL (a case-insensitive
 * substring of the title or the external id), $8 largest payload kept (bytes of JSON text;
 * larger: NULL and `payload_truncated`), $9 most RDATEs/EXDATEs kept (more: empty and
 * `rdate_truncated`/`exdate_truncated`). The bound is a row comparison with an infinite
 * default, so even a generic plan is a range scan of `punctual_schedules_tenant_created`
 * (tenant, created_at, id), forward or backward.
 */
function listSchedulesSql(dir: "asc" | "desc"): string {
  const keyset = instantIdKeysetSql("created_at", "uuid", ["$3", "$4"], dir);
  return `
select ${SCHEDULE_ROW_KEYS.filter((c) => c !== "payload" && c !== "rdate" && c !== "exdate").join(", ")},
       case when octet_length(payload::text) <= $8 then payload end as payload,
       coalesce(octet_length(payload::text) > $8, false) as payload_truncated,
       case when cardinality(rdate) <= $9 then rdate else '{}'::text[] end as rdate,
       coalesce(cardinality(rdate) > $9, false) as rdate_truncated,
       case when cardinality(exdate) <= $9 then exdate else '{}'::text[] end as exdate,
       coalesce(cardinality(exdate) > $9, false) as exdate_truncated,
       ${instantCursorSql("created_at")}
from punctual_schedules
where ${scheduleFilterSql({ tenant: "$1", state: "$2", source: "$6", q: "$7" })}
  and ${keyset.bound}
${keyset.orderBy}
limit $5`;
}

/** API-3: {@link listSchedulesSql} oldest first. */
export const LIST_SCHEDULES_SQL = listSchedulesSql("asc");

/** API-3: {@link listSchedulesSql} newest first. */
export const LIST_SCHEDULES_DESC_SQL = listSchedulesSql("desc");

/**
 * DEL-10: cancel, in one statement with its deliveries: the schedule becomes `cancelled`
 * and every waiting delivery (`pending`, `retry`, `paused`) becomes `cancelled`. A
 * `claimed` delivery is in flight: its send finishes and is recorded; nothing new starts:
 * a retry of it ends `cancelled` (SETTLE_SQL, trigger `punctual_deliveries_rewait`).
 * Parameters: $1 now, $2 tenant, $3 id, $4 who ('user' | 'import').
 * Returns the schedule row (absent: not found).
 */
export const CANCEL_SCHEDULE_SQL = `
with cancelled as (
  update punctual_schedules
  set state = 'cancelled', invalid_reason = null, cancelled_at = coalesce(cancelled_at, ${NOW}),
      cancelled_by = case when state = 'cancelled' then cancelled_by else $4 end,
      version = version + case when state = 'cancelled' then 0 else 1 end, updated_at = ${NOW}
  where tenant = $2 and id = $3
  returning *
),
stopped as (
  ${cancelWaitingSql("c", "cancelled c")}
  returning d.id, d.channel
)
select c.*, (select count(*) from stopped) as cancelled_deliveries,
  (select coalesce(jsonb_object_agg(x.channel, x.n), '{}'::jsonb)
     from (select channel, count(*) as n from stopped group by channel) x) as cancelled_by_channel
from cancelled c`;

/**
 * DEL-10 / API-5: {@link CANCEL_SCHEDULE_SQL} for many schedules in one statement (an
 * import's chunk of events gone from its calendar): the schedules $3 of tenant $2 are
 * locked in id order (as an import's updates are), become `cancelled`, and their waiting
 * deliveries `cancelled` with them. An id the tenant no longer has is left out of the
 * answer. Parameters: $1 now, $2 tenant, $3 schedule ids, $4 who ('user' | 'import').
 * Returns one row per cancelled schedule: `id` and the deliveries it cancelled by channel.
 */
export const CANCEL_SCHEDULES_MANY_SQL = `
with locked as (
  select s.id
  from (select distinct unnest($3::uuid[]) as id) ids
  cross join lateral (
    select x.id from punctual_schedules x where x.id = ids.id and x.tenant = $2 offset 0
  ) s
  order by s.id
  for update of s
),
cancelled as (
  update punctual_schedules s
  set state = 'cancelled', invalid_reason = null, cancelled_at = coalesce(s.cancelled_at, ${NOW}),
      cancelled_by = case when s.state = 'cancelled' then s.cancelled_by else $4 end,
      version = s.version + case when s.state = 'cancelled' then 0 else 1 end, updated_at = ${NOW}
  from locked l
  where s.id = l.id
  returning s.id
),
stopped as (
  ${cancelWaitingSql("c", "cancelled c")}
  returning d.schedule_id, d.channel
)
select c.id, coalesce(b.by_channel, '{}'::jsonb) as cancelled_by_channel
from cancelled c
left join (
  select x.schedule_id, jsonb_object_agg(x.channel, x.n) as by_channel
  from (select schedule_id, channel, count(*) as n from stopped group by schedule_id, channel) x
  group by x.schedule_id
) b on b.schedule_id = c.id`;

/**
 * DEL-10: pause or resume, in one statement with the waiting deliveries. Pausing holds
 * every `pending`/`retry` row (state `paused`: out of the claim index, never claimed);
 * resuming puts them back (`pending` when never tried, else `retry`), with their
 * `stale_at`, so the misfire sweep judges what was missed meanwhile (REC-6) before any of
 * it is claimed. A `claimed` row finishes its send; if it must retry it comes back held
 * (trigger `punctual_deliveries_rewait`).
 * Parameters: $1 now, $2 tenant, $3 id, $4 from state, $5 to state.
 * Returns the row when the transition happened.
 */
export const SET_SCHEDULE_STATE_SQL = `
with changed as (
  update punctual_schedules
  set state = $5, version = version + 1, updated_at = ${NOW}
  where tenant = $2 and id = $3 and state = $4
  returning *
),
held as (
  ${syncWaitingSql("c", "changed c")}
  returning d.id
)
select c.*, (select count(*) from held) as moved_deliveries from changed c`;

/**
 * API-3: the filter of a delivery list (`d` joined to its schedule `s`), one home for the
 * list and its count. Placeholders, in order: tenant, schedule id, state, the schedules'
 * source, channel, due at or after (inclusive), due before (exclusive); each but the
 * tenant NULL for any.
 */
function deliveryFilterSql([tenant, scheduleId, state, source, channel, dueFrom, dueTo]: readonly [
  string,
  string,
  string,
  string,
  string,
  string,
  string,
]): string {
  return `s.tenant = ${tenant} and (${scheduleId}::uuid is null or d.schedule_id = ${scheduleId})
  and (${state}::text is null or d.state = ${state})
  and (${source}::text is null or s.source = ${source})
  and (${channel}::text is null or d.channel = ${channel})
  and (${dueFrom}::timestamptz is null or d.due_at >= ${dueFrom})
  and (${dueTo}::timestamptz is null or d.due_at < ${dueTo})`;
}

const DELIVERY_COUNT_FILTER = deliveryFilterSql(["$1", "$2", "$3", "$4", "$5", "$6", "$7"]);

/**
 * API-3: how many deliveries a list's filter matches, counting at most $8 of them.
 * Parameters: $1 tenant, $2 schedule id, $3 state, $4 source, $5 channel, $6 due from,
 * $7 due to (each but the tenant NULL for any).
 */
export const COUNT_DELIVERIES_SQL = `
select count(*)::int as n from (
  select 1 from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
  where ${DELIVERY_COUNT_FILTER} limit $8
) x`;

/**
 * API-3: the planner's estimate (`EXPLAIN`; no row is read) of how many deliveries a
 * list's filter matches. Parameters as {@link COUNT_DELIVERIES_SQL} without the cap.
 */
export const ESTIMATE_DELIVERIES_SQL = `
explain (format json) select 1 from punctual_deliveries d
join punctual_schedules s on s.id = d.schedule_id where ${DELIVERY_COUNT_FILTER}`;

/** Result columns of {@link COUNT_SCHEDULES_SQL} and {@link COUNT_DELIVERIES_SQL}. */
export const COUNT_SCHEDULES_COLUMNS = columnsOf<{ n: number }>()(["n"]);
export const COUNT_DELIVERIES_COLUMNS = COUNT_SCHEDULES_COLUMNS;
/** Result columns of an `EXPLAIN (FORMAT JSON)`. */
export const ESTIMATE_SCHEDULES_COLUMNS = columnsOf<{ "QUERY PLAN": unknown }>()(["QUERY PLAN"]);
export const ESTIMATE_DELIVERIES_COLUMNS = ESTIMATE_SCHEDULES_COLUMNS;

/** How many rows a list matches (API-3): exact, or an estimate when counting would be slow. */
export interface ListTotal {
  value: number;
  /** False: `value` is the planner's estimate (at least the rows counted). */
  exact: boolean;
}

/** Rows a total counts before it turns to the estimate (API-3). */
export const LIST_COUNT_CAP = 10_000;
/** Longest a count may run on PostgreSQL before it turns to the estimate, ms (API-3). */
export const LIST_COUNT_TIMEOUT_MS = 200;

/**
 * API-3: the total of a list: counted exactly when at most {@link LIST_COUNT_CAP} rows
 * match (on PostgreSQL also within {@link LIST_COUNT_TIMEOUT_MS}), else the planner's
 * estimate, never below what was counted. Read-only.
 */
async function listTotal(
  db: Database,
  count: { sql: string; estimateSql: string; params: readonly unknown[] },
): Promise<ListTotal> {
  let counted: number | null = null;
  try {
    counted = await db.transaction(async (tx) => {
      if (db.engine === "postgres") {
        await tx.query(`set local statement_timeout = ${LIST_COUNT_TIMEOUT_MS}`);
      }
      const row = await firstRow<{ n: number }>(tx, count.sql, [
        ...count.params,
        LIST_COUNT_CAP + 1,
      ]);
      return Number(row?.n ?? 0);
    });
  } catch (err) {
    // 57014: the count ran out of time (statement_timeout); estimate instead.
    if ((err as { code?: unknown }).code !== "57014") throw err;
  }
  if (counted !== null && counted <= LIST_COUNT_CAP) return { value: counted, exact: true };
  const plan = await firstRow<{ "QUERY PLAN": unknown }>(db, count.estimateSql, count.params);
  const text = plan?.["QUERY PLAN"];
  const parsed = (typeof text === "string" ? JSON.parse(text) : text) as Array<{
    Plan?: { "Plan Rows"?: number };
  }>;
  const estimate = Math.round(Number(parsed?.[0]?.Plan?.["Plan Rows"] ?? 0));
  return { value: Math.max(estimate, counted ?? 0), exact: false };
}

/** API-3: the total of a schedule list's filter ({@link listTotal}). */
export function countScheduleRows(
  db: Database,
  p: { tenant: string; state: string | null; source: string | null; q: string | null },
): Promise<ListTotal> {
  return listTotal(db, {
    sql: COUNT_SCHEDULES_SQL,
    estimateSql: ESTIMATE_SCHEDULES_SQL,
    params: [p.tenant, p.state, p.source, p.q],
  });
}

/** API-3: the total of a delivery list's filter ({@link listTotal}). */
export function countDeliveryRows(
  db: Database,
  p: {
    tenant: string;
    scheduleId: string | null;
    state: string | null;
    source: string | null;
    channel: string | null;
    dueFrom: string | null;
    dueTo: string | null;
  },
): Promise<ListTotal> {
  return listTotal(db, {
    sql: COUNT_DELIVERIES_SQL,
    estimateSql: ESTIMATE_DELIVERIES_SQL,
    params: [p.tenant, p.scheduleId, p.state, p.source, p.channel, p.dueFrom, p.dueTo],
  });
}

/**
 * API-3, DEL-1: one keyset page of deliveries by id, in `dir` order. Parameters: $1
 * tenant, $2 schedule id or NULL, $3 state or NULL, $4 the last id seen or NULL from the
 * start, $5 limit, $6 the schedules' source or NULL, $7 channel or NULL, $8 due at or
 * after (inclusive) or NULL, $9 due before (exclusive) or NULL, $10 most characters of
 * `last_error` kept (longer: cut there and `last_error_truncated`). The id bound has a finite
 * default, so even a generic plan is a range scan of the primary key (or of
 * `punctual_deliveries_state_id` with a state), forward or backward.
 */
function listDeliveriesSql(dir: "asc" | "desc"): string {
  return `
select ${DELIVERY_ROW_KEYS.filter((c) => c !== "last_error")
    .map((c) => `d.${c}`)
    .join(", ")},
       left(d.last_error, $10) as last_error,
       coalesce(char_length(d.last_error) > $10, false) as last_error_truncated
from punctual_delivery_rows d
join punctual_schedules s on s.id = d.schedule_id
where ${deliveryFilterSql(["$1", "$2", "$3", "$6", "$7", "$8", "$9"])}
  and ${idPastSql("d.id", "$4", dir)}
order by d.id ${dir}
limit $5`;
}

/** $1 tenant, $2 delivery id */
export const DELIVERY_BY_ID_SQL = `
select d.* from punctual_delivery_rows d join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $1 and d.id = $2`;

/**
 * DEL-14: every attempt of a delivery, oldest first: the rows of `punctual_attempts` in
 * the order they were recorded, then the attempt that sent it when the settle kept that
 * one on the delivery row (view `punctual_delivery_attempts`, migration 0007).
 * $1 delivery id.
 */
export const ATTEMPTS_SQL = `
select id, delivery_id, attempt, worker, started_at, ended_at, outcome, settled, status,
       message_id, error
from punctual_delivery_attempts where delivery_id = $1 order by id nulls last`;

/**
 * The attempt budget of a delivery (columns of `punctual_deliveries`): what the claim
 * counts, the settle fences on and the retry policy spends (DEL-2, DEL-3, DEL-13).
 */
export interface DeliveryAttemptColumns {
  /** Claims so far: the settle's fencing token (DEL-2). Attempts spent: `attempt − deferrals`. */
  attempt: number;
  failures: number;
  max_attempts: number;
  /** Claims that ended deferred by a Retry-After (DEL-13, migration 0004). */
  deferrals: number;
  /** When the first try began; the deferral budget's age counts from it (DEL-13). */
  first_attempt_at: Date | null;
}

/** A row of `punctual_deliveries`, every column. */
export interface DeliveryRow extends DeliveryAttemptColumns {
  id: number;
  delivery_key: string;
  schedule_id: string;
  reminder_key: string;
  occurrence_at: Date;
  due_at: Date;
  run_at: Date;
  state: DeliveryView["state"];
  channel: string;
  on_lost_lease: string;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  claimed_at: Date | null;
  sent_at: Date | null;
  finished_at: Date | null;
  reason: string | null;
  last_error: string | null;
  late: boolean;
  /** The schedule's expiry, copied for admission (DEL-3); meaningful on waiting rows. */
  expires_at: Date | null;
  /** REC-6: past it a never-tried recurring row waits for the misfire sweep; NULL: no limit. */
  stale_at: Date | null;
  /** `run_at` while `pending` or `retry`, else NULL (generated): the claim index's key. */
  claimable_at: Date | null;
  /** DEL-14: the worker whose attempt sent this row, when the settle kept it on the row. */
  sent_by: string | null;
  /** When that attempt's send started. */
  send_started_at: Date | null;
  /** That attempt's channel status code (HTTP status for webhooks), if any. */
  send_status: number | null;
  /** That attempt's channel message id, if any. */
  send_message_id: string | null;
  /** DEL-13: the row's limiter, `tenant/key` (null: planned by a release before 0010, not limited). */
  limiter: string | null;
  /** DEL-15: the instant a delivery due in a quiet window was deferred to (migration 0009). */
  deferred_until: Date | null;
  /** DEL-15: why it was deferred (`QUIET_HOURS`); null when not deferred. */
  deferred_reason: string | null;
  /** DEL-12: 1, then one more per redrive (migration 0040). */
  round: number;
  /** DEL-12: attempts spent (`attempt − deferrals`) before the current round began. */
  round_base: number;
  /** API-11: the recipient the delivery is for (migration 0035), or null. */
  recipient_id: string | null;
  /** API-13: what its critical reminder went past (`QUIET_HOURS`, `OPTED_OUT`), or null. */
  bypassed: string | null;
  /** DEL-19: a digest member's scope (its schedule's tenant) and key (migration 0048), or null. */
  digest_tenant: string | null;
  digest_key: string | null;
  /** DEL-19: the member's window and most items, copied from its reminder, or null. */
  digest_window_ms: number | null;
  digest_max_items: number | null;
  /** DEL-19: the digest the member was (or is being) sent in, or null. */
  digest_id: string | null;
  created_at: Date;
  updated_at: Date;
}

/** An attempt (DEL-14): a row of `punctual_attempts` or the sending attempt kept on the delivery row. */
export interface AttemptRow {
  /** The `punctual_attempts` row id; NULL for the attempt kept on the delivery row. */
  id: number | null;
  delivery_id: number;
  attempt: number;
  worker: string;
  started_at: Date;
  ended_at: Date;
  outcome: string;
  settled: boolean;
  status: number | null;
  message_id: string | null;
  error: string | null;
}

/**
 * The columns that name a delivery and its occurrence, in table order: what every read of a
 * delivery to send it (a claim, a digest's items) starts with.
 */
export const DELIVERY_IDENTITY_KEYS = [
  "id",
  "delivery_key",
  "schedule_id",
  "reminder_key",
  "occurrence_at",
  "due_at",
] as const satisfies readonly (keyof DeliveryRow)[];

/** The part of a {@link DeliveryRow} that {@link DELIVERY_IDENTITY_KEYS} names. */
export type DeliveryIdentity = Pick<DeliveryRow, (typeof DELIVERY_IDENTITY_KEYS)[number]>;

/** The keys of {@link DeliveryRow}: the columns of `punctual_deliveries`. */
export const DELIVERY_ROW_KEYS = columnsOf<DeliveryRow>()([
  ...DELIVERY_IDENTITY_KEYS,
  "run_at",
  "state",
  "attempt",
  "failures",
  "max_attempts",
  "channel",
  "on_lost_lease",
  "lease_owner",
  "lease_expires_at",
  "claimed_at",
  "sent_at",
  "finished_at",
  "reason",
  "last_error",
  "late",
  "created_at",
  "updated_at",
  "expires_at",
  "stale_at",
  "claimable_at",
  "deferrals",
  "first_attempt_at",
  "sent_by",
  "send_started_at",
  "send_status",
  "send_message_id",
  "limiter",
  "deferred_until",
  "deferred_reason",
  "round",
  "round_base",
  "recipient_id",
  "bypassed",
  "digest_tenant",
  "digest_key",
  "digest_window_ms",
  "digest_max_items",
  "digest_id",
]);

/** API-3: {@link listDeliveriesSql} oldest first. */
export const LIST_DELIVERIES_SQL = listDeliveriesSql("asc");

/** API-3: {@link listDeliveriesSql} newest first. */
export const LIST_DELIVERIES_DESC_SQL = listDeliveriesSql("desc");

/** Result columns of {@link ATTEMPTS_SQL}. */
export const ATTEMPTS_COLUMNS = columnsOf<AttemptRow>()([
  "id",
  "delivery_id",
  "attempt",
  "worker",
  "started_at",
  "ended_at",
  "outcome",
  "settled",
  "status",
  "message_id",
  "error",
]);

/** Result columns of {@link SCHEDULE_BY_IDEMPOTENCY_KEY_SQL}. */
export const SCHEDULE_BY_IDEMPOTENCY_KEY_COLUMNS = SCHEDULE_ROW_KEYS;
/** Result columns of {@link SCHEDULE_BY_ID_SQL}. */
export const SCHEDULE_BY_ID_COLUMNS = SCHEDULE_ROW_KEYS;
/** What an import compares of a stored schedule ({@link SOURCE_SCHEDULES_PAGE_SQL}). */
export interface SourceScheduleRow {
  id: string;
  external_id: string | null;
  state: ScheduleRow["state"];
  cancelled_by: ScheduleRow["cancelled_by"];
  request_hash: string;
  version: number;
  /** The payload's `uid` (an imported event's UID), or null. */
  uid: string | null;
}

/** Result columns of {@link SOURCE_SCHEDULES_PAGE_SQL}. */
export const SOURCE_SCHEDULES_PAGE_COLUMNS = columnsOf<SourceScheduleRow>()([
  "id",
  "external_id",
  "state",
  "cancelled_by",
  "request_hash",
  "version",
  "uid",
]);

/** Result columns of {@link SOURCE_SCHEDULES_UNKEYED_SQL}. */
export const SOURCE_SCHEDULES_UNKEYED_COLUMNS = SOURCE_SCHEDULES_PAGE_COLUMNS;
/** Result columns of {@link INSERT_SCHEDULE_SQL}. */
export const INSERT_SCHEDULE_COLUMNS = SCHEDULE_AT_ROW_KEYS;
/** Result columns of {@link UPDATE_SCHEDULE_SQL}. */
export const UPDATE_SCHEDULE_COLUMNS = SCHEDULE_AT_ROW_KEYS;
/** Result columns of {@link INSERT_SCHEDULES_BULK_SQL}. */
export const INSERT_SCHEDULES_BULK_COLUMNS = SCHEDULE_AT_ROW_KEYS;
/** A delivery of a {@link LIST_DELIVERIES_SQL} page: `last_error` cut to the list's bound. */
export type ListedDeliveryRow = DeliveryRow & { last_error_truncated: boolean };
/** Result columns of {@link LIST_DELIVERIES_SQL}. */
export const LIST_DELIVERIES_COLUMNS = columnsOf<ListedDeliveryRow>()([
  ...DELIVERY_ROW_KEYS,
  "last_error_truncated",
]);
/** Result columns of {@link LIST_DELIVERIES_DESC_SQL}. */
export const LIST_DELIVERIES_DESC_COLUMNS = LIST_DELIVERIES_COLUMNS;
/** Result columns of {@link DELIVERY_BY_ID_SQL}. */
export const DELIVERY_BY_ID_COLUMNS = DELIVERY_ROW_KEYS;
/** A schedule of a {@link LIST_SCHEDULES_SQL} page, with its keyset cursor. */
export type ListedScheduleRow = WithInstantCursor<ScheduleRow, "created_at"> & {
  /** The payload was larger than the list keeps: `payload` is NULL (API-3). */
  payload_truncated: boolean;
  /** More RDATEs than the list keeps: `rdate` is empty (API-3). */
  rdate_truncated: boolean;
  /** More EXDATEs than the list keeps: `exdate` is empty (API-3). */
  exdate_truncated: boolean;
};

/** Result columns of {@link LIST_SCHEDULES_SQL}. */
export const LIST_SCHEDULES_COLUMNS = columnsOf<ListedScheduleRow>()([
  ...SCHEDULE_ROW_KEYS,
  "created_at_cursor",
  "payload_truncated",
  "rdate_truncated",
  "exdate_truncated",
]);

/** A reminder of a {@link LIST_REMINDERS_SQL} answer: large template and target left out. */
export type ListedReminderRow = ReminderRow & {
  template_truncated: boolean;
  target_truncated: boolean;
};

/** Result columns of {@link LIST_REMINDERS_SQL}. */
export const LIST_REMINDERS_COLUMNS = columnsOf<ListedReminderRow>()([
  ...REMINDERS_COLUMNS,
  "template_truncated",
  "target_truncated",
]);

/** Result columns of {@link LIST_SCHEDULES_DESC_SQL}. */
export const LIST_SCHEDULES_DESC_COLUMNS = LIST_SCHEDULES_COLUMNS;

/** What {@link CANCEL_SCHEDULE_SQL} returns: the schedule and how many waiting rows it cancelled. */
export type CancelledScheduleRow = ScheduleRow & {
  cancelled_deliveries: number;
  /** Deliveries this statement cancelled, by channel (OPS-13 counts them). */
  cancelled_by_channel: Record<string, number>;
};

/** Result columns of {@link CANCEL_SCHEDULE_SQL}. */
export const CANCEL_SCHEDULE_COLUMNS = columnsOf<CancelledScheduleRow>()([
  ...SCHEDULE_ROW_KEYS,
  "cancelled_deliveries",
  "cancelled_by_channel",
]);

/** One schedule {@link CANCEL_SCHEDULES_MANY_SQL} cancelled. */
export interface CancelledManyRow {
  id: string;
  /** Deliveries this statement cancelled for it, by channel (OPS-13 counts them). */
  cancelled_by_channel: Record<string, number>;
}

/** Result columns of {@link CANCEL_SCHEDULES_MANY_SQL}. */
export const CANCEL_SCHEDULES_MANY_COLUMNS = columnsOf<CancelledManyRow>()([
  "id",
  "cancelled_by_channel",
]);

/** What {@link SET_SCHEDULE_STATE_SQL} returns: the schedule and how many waiting rows it moved. */
export type TransitionedScheduleRow = ScheduleRow & { moved_deliveries: number };

/** Result columns of {@link SET_SCHEDULE_STATE_SQL}. */
export const SET_SCHEDULE_STATE_COLUMNS = columnsOf<TransitionedScheduleRow>()([
  ...SCHEDULE_ROW_KEYS,
  "moved_deliveries",
]);

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** Channels whose target URL is itself the credential (an incoming-webhook URL, CH-3). */

/** A stored reminder as the API shows it, target redacted (see {@link reminderView}). */
export function toReminderView(row: ReminderRow | ListedReminderRow): ReminderView {
  return reminderView(row);
}

export function toScheduleView(
  row: ScheduleRow,
  reminders: ReminderRow[],
  finished: ReadonlySet<string> = new Set(),
): ScheduleView {
  return {
    id: row.id,
    version: row.version,
    state: row.state === "active" && finished.has(row.id) ? "finished" : row.state,
    invalidReason: row.invalid_reason,
    dtstart: row.dtstart,
    dtstartLocal: dtstartInZone(row.dtstart, row.tzid, {
      gap: row.dst_gap,
      overlap: row.dst_overlap,
    }),
    tzid: row.tzid,
    rrule: row.rrule,
    rdate: row.rdate,
    exdate: row.exdate,
    endsAt: iso(row.ends_at),
    expiresAt: iso(row.expires_at),
    dst: { gap: row.dst_gap, overlap: row.dst_overlap },
    misfire: row.misfire,
    graceMs: row.grace_ms,
    catchUp: row.catch_up ?? null,
    perpetual: row.perpetual,
    payload: row.payload,
    ...((row as Partial<ListedScheduleRow>).payload_truncated === true
      ? { payloadTruncated: true as const }
      : {}),
    ...((row as Partial<ListedScheduleRow>).rdate_truncated === true
      ? { rdateTruncated: true as const }
      : {}),
    ...((row as Partial<ListedScheduleRow>).exdate_truncated === true
      ? { exdateTruncated: true as const }
      : {}),
    reminders: reminders.filter((r) => r.schedule_id === row.id).map(toReminderView),
    title: row.title ?? null,
    source: row.source,
    externalId: row.external_id,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    cancelledAt: iso(row.cancelled_at),
  };
}

export function toDeliveryView(row: DeliveryRow): DeliveryView {
  return {
    id: row.id,
    deliveryKey: row.delivery_key,
    scheduleId: row.schedule_id,
    reminderKey: row.reminder_key,
    occurrenceAt: row.occurrence_at.toISOString(),
    dueAt: row.due_at.toISOString(),
    runAt: row.run_at.toISOString(),
    state: row.state,
    attempt: row.attempt - row.deferrals - row.round_base,
    round: row.round,
    failures: row.failures,
    maxAttempts: row.max_attempts,
    deferrals: row.deferrals,
    channel: row.channel,
    leaseOwner: row.lease_owner,
    leaseExpiresAt: iso(row.lease_expires_at),
    sentAt: iso(row.sent_at),
    finishedAt: iso(row.finished_at),
    reason: row.reason,
    // A sent delivery shows no error: the failures of its earlier attempts stay in the
    // attempt history (DEL-14), not on the delivery as if it had failed.
    lastError: row.state === "sent" ? null : row.last_error,
    ...(row.state !== "sent" && (row as Partial<ListedDeliveryRow>).last_error_truncated === true
      ? { lastErrorTruncated: true as const }
      : {}),
    late: row.late,
    deferredUntil: iso(row.deferred_until),
    deferredReason: row.deferred_reason,
    // API-11 / API-13: only on deliveries for a recipient.
    ...(row.recipient_id ? { recipientId: row.recipient_id } : {}),
    ...(row.bypassed ? { bypassed: row.bypassed.split(",") } : {}),
    // DEL-19: only on digest members.
    ...(row.digest_key ? { digestKey: row.digest_key } : {}),
    ...(row.digest_id ? { digestId: row.digest_id } : {}),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

export function toAttemptView(row: AttemptRow): AttemptView {
  return {
    attempt: row.attempt,
    worker: row.worker,
    startedAt: row.started_at.toISOString(),
    endedAt: row.ended_at.toISOString(),
    outcome: row.outcome,
    settled: row.settled,
    status: row.status,
    messageId: row.message_id,
    error: row.error,
  };
}

/**
 * DEL-9: writes an edited definition and bumps the version (optimistic concurrency:
 * the caller checked the version under the row lock).
 * Parameters: $1 now, $2 id, $3 dtstart, $4 tzid, $5 rrule, $6 rdate, $7 exdate,
 * $8 recurring, $9 ends_at, $10 expires_at, $11 dst gap, $12 dst overlap, $13 misfire,
 * $14 grace ms, $15 perpetual, $16 payload (json text), $17 request hash, $18 catch-up
 * (json text or null, DEL-17), $19 title or null.
 */
export const UPDATE_SCHEDULE_SQL = `
update punctual_schedules
set dtstart = $3, tzid = $4, rrule = $5, rdate = $6::text[], exdate = $7::text[], recurring = $8,
    ends_at = $9, expires_at = $10, dst_gap = $11, dst_overlap = $12, misfire = $13,
    grace_ms = $14, perpetual = $15, payload = $16::jsonb, request_hash = $17,
    catch_up = $18::jsonb, title = $19::text, plan_complete = false, cap_logged_at = null,
    version = version + 1, updated_at = ${NOW}
where id = $2
returning *, ${NOW} as db_now`;

/**
 * DEL-9 / API-5: rewrites the definitions of many schedules at once (an import's chunk),
 * as {@link UPDATE_SCHEDULE_SQL} does for one. Parameters: $1 now, then parallel arrays
 * $2 ids, $3 dtstart, $4 tzid, $5 rrule, $6 rdate (json text arrays), $7 exdate (json
 * text arrays), $8 recurring, $9 ends_at, $10 expires_at, $11 dst gap, $12 dst overlap,
 * $13 misfire, $14 grace ms, $15 perpetual, $16 payload (json text), $17 request hashes,
 * $18 catch-up (json text or null), $19 titles (or null). Returns the updated rows (with
 * `db_now`, ready to realign).
 */
export const UPDATE_SCHEDULES_BULK_SQL = `
update punctual_schedules s
set dtstart = u.dtstart, tzid = u.tzid, rrule = u.rrule,
    rdate = array(select jsonb_array_elements_text(u.rdate::jsonb)),
    exdate = array(select jsonb_array_elements_text(u.exdate::jsonb)),
    recurring = u.recurring, ends_at = u.ends_at, expires_at = u.expires_at,
    dst_gap = u.gap, dst_overlap = u.overlap, misfire = u.misfire, grace_ms = u.grace_ms,
    perpetual = u.perpetual, payload = u.payload::jsonb, request_hash = u.hash,
    catch_up = u.catch_up::jsonb, title = u.title, plan_complete = false, cap_logged_at = null,
    version = s.version + 1, updated_at = ${NOW}
from unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::boolean[],
            $9::timestamptz[], $10::timestamptz[], $11::text[], $12::text[], $13::text[],
            $14::int[], $15::boolean[], $16::text[], $17::text[], $18::text[], $19::text[])
  as u(id, dtstart, tzid, rrule, rdate, exdate, recurring, ends_at, expires_at, gap, overlap,
       misfire, grace_ms, perpetual, payload, hash, catch_up, title)
where s.id = u.id
returning s.*, ${NOW} as db_now`;

/** Result columns of {@link UPDATE_SCHEDULES_BULK_SQL}. */
export const UPDATE_SCHEDULES_BULK_COLUMNS = SCHEDULE_AT_ROW_KEYS;

/** DEL-9 / API-5: every reminder of the schedules $1 (repeats read once). */
export const DELETE_REMINDERS_MANY_SQL = `
delete from punctual_reminders r
using (select distinct unnest($1::uuid[]) as id) ids
where r.schedule_id = ids.id`;

/** $1 schedule id */
export const DELETE_REMINDERS_SQL = `delete from punctual_reminders where schedule_id = $1`;

/**
 * API-5 / OPS-12: one page of the schedules of an import source that have an external id,
 * in external id order, only the columns an import compares (its payload's `uid` names a
 * cancelled event): an import of 50,000 events reads them a page at a time, so no single
 * answer is parsed on the event loop in one piece. Reads the unique index on
 * (tenant, source, external_id). Parameters: $1 tenant, $2 source, $3 the last external
 * id of the page before ('' for the first: an external id is never empty), $4 page size.
 */
export const SOURCE_SCHEDULES_PAGE_SQL = `
select id, external_id, state, cancelled_by, request_hash, version, payload->>'uid' as uid
from punctual_schedules
where tenant = $1 and source = $2 and external_id is not null and external_id > $3
order by external_id
limit $4`;

/**
 * API-5: the schedules of an import source without an external id (made through the API
 * with a `source` only), the columns of {@link SOURCE_SCHEDULES_PAGE_SQL}: an import
 * cancels them, as it cancels every stored schedule whose event is not in the file.
 * Parameters: $1 tenant, $2 source.
 */
export const SOURCE_SCHEDULES_UNKEYED_SQL = `
select id, external_id, state, cancelled_by, request_hash, version, payload->>'uid' as uid
from punctual_schedules
where tenant = $1 and source = $2 and external_id is null`;

/**
 * Bulk create for imports: many schedules in one statement.
 * Parameters: $1 now, $2 tenant, then parallel arrays $3 request hashes, $4 dtstart,
 * $5 tzid, $6 rrule, $7 rdate (json text arrays), $8 exdate (json text arrays),
 * $9 recurring, $10 ends_at, $11 expires_at, $12 dst gap, $13 dst overlap, $14 misfire,
 * $15 grace ms, $16 perpetual, $17 payload (json text), $18 source, $19 external id,
 * $20 titles (or null).
 * Returns the new rows (with `db_now`, ready to plan).
 */
export const INSERT_SCHEDULES_BULK_SQL = `
insert into punctual_schedules
  (tenant, request_hash, dtstart, tzid, rrule, rdate, exdate, recurring, ends_at, expires_at,
   dst_gap, dst_overlap, misfire, grace_ms, perpetual, payload, source, external_id,
   created_at, updated_at, title)
select $2, u.hash, u.dtstart, u.tzid, u.rrule,
       array(select jsonb_array_elements_text(u.rdate::jsonb)),
       array(select jsonb_array_elements_text(u.exdate::jsonb)),
       u.recurring, u.ends_at, u.expires_at, u.gap, u.overlap, u.misfire, u.grace_ms, u.perpetual,
       u.payload::jsonb, u.source, u.external_id, ${NOW}, ${NOW}, u.title
from unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::boolean[],
            $10::timestamptz[], $11::timestamptz[], $12::text[], $13::text[], $14::text[],
            $15::int[], $16::boolean[], $17::text[], $18::text[], $19::text[], $20::text[])
  as u(hash, dtstart, tzid, rrule, rdate, exdate, recurring, ends_at, expires_at, gap, overlap,
       misfire, grace_ms, perpetual, payload, source, external_id, title)
returning *, ${NOW} as db_now`;

/**
 * Bulk reminders. Parameters: parallel arrays $1 schedule ids, $2 keys, $3 offsets,
 * $4 channels, $5 targets (json text), $6 lost-lease policies, $7 max attempts,
 * $8 templates (json text or null), $9 rate-limit keys (or null).
 */
export const INSERT_REMINDERS_BULK_SQL = `
insert into punctual_reminders (schedule_id, key, offset_duration, channel, target, on_lost_lease, max_attempts, template, rate_limit_key)
select u.schedule_id, u.key, u.offset_duration, u.channel, u.target::jsonb, u.on_lost_lease, u.max_attempts, u.template::jsonb, u.rate_limit_key
from unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[], $9::text[])
  as u(schedule_id, key, offset_duration, channel, target, on_lost_lease, max_attempts, template, rate_limit_key)`;

/**
 * Brings a cancelled schedule back (an event that reappears in an imported calendar).
 * $1 now, $2 id. Its deliveries cancelled with it and not yet past the grace period
 * become pending again (same keys); realign then drops those no longer in the set.
 */
export const REVIVE_SCHEDULE_SQL = `
with revived as (
  update punctual_schedules
  set state = 'active', cancelled_at = null, cancelled_by = null, updated_at = ${NOW}
  where id = $2 and state = 'cancelled' and cancelled_by = 'import'
  returning id, grace_ms, recurring, expires_at
)
${reviveCancelledSql("r", "revived r")}`;

// ---------------------------------------------------------------------------------------
// One typed function per statement.

/** The definition columns of a schedule, as {@link insertSchedule} and {@link updateScheduleDefinition} write them. */
/** The definition columns a statement writes (see {@link DefinitionColumns}). */
export type ScheduleDefinition = DefinitionColumns;

/**
 * The fields of a definition in the order the statements take them ($n … $n+13), each as
 * `read` gives it.
 */
function inParamOrder<T>(read: (field: keyof ScheduleDefinition) => T): T[] {
  return [
    read("dtstart"),
    read("tzid"),
    read("rrule"),
    read("rdate"),
    read("exdate"),
    read("recurring"),
    read("endsAt"),
    read("expiresAt"),
    read("dstGap"),
    read("dstOverlap"),
    read("misfire"),
    read("graceMs"),
    read("perpetual"),
    read("payloadJson"),
  ];
}

/** The definition in the order the statements take it ($n … $n+13). */
export function definitionParams(d: ScheduleDefinition): unknown[] {
  return inParamOrder((f) => d[f]);
}

/**
 * The definitions of many schedules as the bulk statements take them: the fields of
 * {@link definitionParams}, each a parallel array; RDATE and EXDATE lists as JSON text
 * (an array of arrays is not a parameter type).
 */
export function definitionArrays(defs: readonly ScheduleDefinition[]): unknown[][] {
  return inParamOrder((f) =>
    defs.map((d) => (f === "rdate" || f === "exdate" ? JSON.stringify(d[f]) : d[f])),
  );
}

/**
 * The parameters of {@link INSERT_SCHEDULE_SQL} and of the statements shaped like it
 * ($1 now … $23 traceparent).
 */
export function insertScheduleParams(p: InsertScheduleParams): unknown[] {
  return [
    p.now,
    p.tenant,
    p.idempotencyKey,
    p.requestHash,
    ...definitionParams(p.definition),
    p.source,
    p.externalId,
    p.definition.catchUpJson ?? null,
    p.definition.title ?? null,
    p.traceParent ?? null,
  ];
}

/** Parameters of {@link insertSchedule}. */
export interface InsertScheduleParams {
  /** Pinned "now" (tests) or null for the database clock. */
  now: Date | null;
  tenant: string;
  idempotencyKey: string | null;
  /** Hash of the validated definition (idempotent replays compare it). */
  requestHash: string;
  definition: ScheduleDefinition;
  source: string | null;
  externalId: string | null;
  /** OPS-15: the creating request's W3C traceparent (null or absent: none). */
  traceParent?: string | null;
}

/**
 * API-1: runs {@link INSERT_SCHEDULE_SQL}. Returns the new row, or `null` when the
 * idempotency key was already used by this tenant.
 */
export function insertSchedule(
  tx: Queryable,
  p: InsertScheduleParams,
): Promise<ScheduleRowAt | null> {
  return firstRow<ScheduleRowAt>(tx, INSERT_SCHEDULE_SQL, insertScheduleParams(p));
}

/** A reminder to insert, as {@link insertReminders} and {@link insertRemindersBulk} take it. */
/** A reminder row to write (see {@link ReminderColumns}). */
export type ReminderToInsert = ReminderColumns;

/**
 * The columns both reminder inserts write, each a parallel array: key, offset, channel,
 * target, lost-lease policy, max attempts, template and rate-limit key.
 */
function reminderArrays(r: readonly ReminderToInsert[]): unknown[][] {
  return [
    r.map((x) => x.key),
    r.map((x) => x.offset),
    r.map((x) => x.channel),
    r.map((x) => x.targetJson),
    r.map((x) => x.onLostLease),
    r.map((x) => x.maxAttempts),
    r.map((x) => x.templateJson ?? null),
    r.map((x) => x.rateLimitKey ?? null),
  ];
}

/** API-1 / DEL-9: runs {@link INSERT_REMINDERS_SQL}: the reminders of one schedule. */
export async function insertReminders(
  tx: Queryable,
  p: { scheduleId: string; reminders: readonly ReminderToInsert[] },
): Promise<void> {
  const r = p.reminders;
  await execute(tx, INSERT_REMINDERS_SQL, [
    p.scheduleId,
    ...reminderArrays(r),
    r.map((x) => x.quietHoursJson ?? null),
    r.map((x) => x.priority ?? null),
    r.map((x) => x.category ?? null),
    r.map((x) => x.digestJson ?? null),
  ]);
}

/** API-1: runs {@link SCHEDULE_BY_IDEMPOTENCY_KEY_SQL}; null when the key is unused. */
export const scheduleByIdempotencyKey = firstRowStatement<
  ScheduleRow,
  { tenant: string; idempotencyKey: string | null }
>(SCHEDULE_BY_IDEMPOTENCY_KEY_SQL, (p) => [p.tenant, p.idempotencyKey]);

/** API-2: runs {@link SCHEDULE_BY_ID_SQL}; null when the tenant has no such schedule. */
export const scheduleById = firstRowStatement<ScheduleRow, { tenant: string; id: string }>(
  SCHEDULE_BY_ID_SQL,
  (p) => [p.tenant, p.id],
);

/** API-1: runs {@link REMINDERS_SQL}: the reminders of `scheduleIds`, by schedule and key. */
export const remindersOfSchedules = rowsStatement<ReminderRow, { scheduleIds: readonly string[] }>(
  REMINDERS_SQL,
  (p) => [p.scheduleIds],
);

/** Parameters of {@link listScheduleRows}. */
export interface ListSchedulesParams {
  tenant: string;
  state: string | null;
  /** Only the schedules of this source (an import's calendar, an upsert's system), or null. */
  source?: string | null;
  /** Keyset cursor: `created_at` (full precision, ISO) and id of the last row seen, or null. */
  afterCreatedAt: string | null;
  afterId: string | null;
  limit: number;
  /** API-3: newest first (`desc`); else oldest first. */
  order?: "asc" | "desc";
  /** API-3: a case-insensitive substring of the title or the external id; null: any. */
  q?: string | null;
  /** Largest payload kept, bytes of JSON text (API-3). */
  payloadMaxBytes: number;
  /** Most RDATEs/EXDATEs kept (API-3). */
  maxDates: number;
}

/**
 * API-3: runs {@link LIST_REMINDERS_SQL}: the reminders of a list page, templates and
 * targets over `fieldMaxBytes` left out (marked).
 */
export const listedRemindersOfSchedules = rowsStatement<
  ListedReminderRow,
  { scheduleIds: readonly string[]; fieldMaxBytes: number }
>(LIST_REMINDERS_SQL, (p) => [p.scheduleIds, p.fieldMaxBytes]);

/** API-1, API-3: runs {@link LIST_SCHEDULES_SQL} (or its newest-first twin): one page. */
export const listScheduleRows = orderedRowsStatement<ListedScheduleRow, ListSchedulesParams>(
  { asc: LIST_SCHEDULES_SQL, desc: LIST_SCHEDULES_DESC_SQL },
  (p) => [
    p.tenant,
    p.state,
    p.afterCreatedAt,
    p.afterId,
    p.limit,
    p.source ?? null,
    p.q ?? null,
    p.payloadMaxBytes,
    p.maxDates,
  ],
);

/**
 * DEL-10 / API-5: runs {@link CANCEL_SCHEDULES_MANY_SQL}.
 * @returns the schedules cancelled (those of `ids` the tenant still has), in id order.
 */
export const cancelSchedulesMany = rowsStatement<
  CancelledManyRow,
  { now: Date | null; tenant: string; ids: readonly string[]; by: "user" | "import" }
>(CANCEL_SCHEDULES_MANY_SQL, (p) => [p.now, p.tenant, p.ids, p.by]);

/** A schedule of a tenant, changed at `now` (null: the database clock, OPS-9). */
export interface ScheduleAt {
  now: Date | null;
  tenant: string;
  id: string;
}

/** Parameters of {@link cancelScheduleRow}. */
export interface CancelScheduleParams extends ScheduleAt {
  by: "user" | "import";
}

/** DEL-10: runs {@link CANCEL_SCHEDULE_SQL}; null when the tenant has no such schedule. */
export const cancelScheduleRow = firstRowStatement<CancelledScheduleRow, CancelScheduleParams>(
  CANCEL_SCHEDULE_SQL,
  (p) => [p.now, p.tenant, p.id, p.by],
);

/** Parameters of {@link setScheduleState}. */
export interface SetScheduleStateParams extends ScheduleAt {
  from: string;
  to: string;
}

/** DEL-10: runs {@link SET_SCHEDULE_STATE_SQL}; null when the schedule was not in state `from`. */
export const setScheduleState = firstRowStatement<TransitionedScheduleRow, SetScheduleStateParams>(
  SET_SCHEDULE_STATE_SQL,
  (p) => [p.now, p.tenant, p.id, p.from, p.to],
);

/** Parameters of {@link listDeliveryRows}. */
export interface ListDeliveriesParams {
  tenant: string;
  scheduleId: string | null;
  state: string | null;
  /** Keyset: only ids past it in the listing order; null from the start. */
  afterId: number | null;
  limit: number;
  /** API-3: newest first (ids descending); else oldest first. */
  newest: boolean;
  /** API-3: only deliveries of schedules with this source; null: any. */
  source: string | null;
  /** API-3: only deliveries through this channel; null: any. */
  channel?: string | null;
  /** API-3: only deliveries due at or after this instant (ISO); null: no lower bound. */
  dueFrom?: string | null;
  /** API-3: only deliveries due before this instant (ISO); null: no upper bound. */
  dueTo?: string | null;
  /** API-3: most characters of `last_error` kept; longer: cut and `last_error_truncated`. */
  errorMaxChars: number;
}

/** DEL-1, API-3: runs {@link LIST_DELIVERIES_SQL} (or its newest-first twin): one page. */
export function listDeliveryRows(
  db: Queryable,
  p: ListDeliveriesParams,
): Promise<ListedDeliveryRow[]> {
  return rows<ListedDeliveryRow>(db, p.newest ? LIST_DELIVERIES_DESC_SQL : LIST_DELIVERIES_SQL, [
    p.tenant,
    p.scheduleId,
    p.state,
    p.afterId,
    p.limit,
    p.source,
    p.channel ?? null,
    p.dueFrom ?? null,
    p.dueTo ?? null,
    p.errorMaxChars,
  ]);
}

/** DEL-12: runs {@link DELIVERY_BY_ID_SQL}; null when the tenant has no such delivery. */
export const deliveryById = firstRowStatement<DeliveryRow, { tenant: string; id: number }>(
  DELIVERY_BY_ID_SQL,
  (p) => [p.tenant, p.id],
);

/** DEL-14: runs {@link ATTEMPTS_SQL}: a delivery's attempts, oldest first. */
export const attemptsOf = rowsStatement<AttemptRow, { deliveryId: number }>(ATTEMPTS_SQL, (p) => [
  p.deliveryId,
]);

/** Parameters of {@link updateScheduleDefinition}. */
export interface UpdateScheduleParams {
  now: Date | null;
  id: string;
  definition: ScheduleDefinition;
  requestHash: string;
}

/** DEL-9: runs {@link UPDATE_SCHEDULE_SQL}; null when there is no such schedule. */
export const updateScheduleDefinition = firstRowStatement<ScheduleRowAt, UpdateScheduleParams>(
  UPDATE_SCHEDULE_SQL,
  (p) => [
    p.now,
    p.id,
    ...definitionParams(p.definition),
    p.requestHash,
    p.definition.catchUpJson ?? null,
    p.definition.title ?? null,
  ],
);

/** A definition to write, as {@link updateSchedulesBulk} takes it. */
export interface ScheduleToUpdate {
  id: string;
  definition: ScheduleDefinition;
  requestHash: string;
}

/** DEL-9 / API-5: runs {@link UPDATE_SCHEDULES_BULK_SQL}: the updated rows (missing ids left out). */
export function updateSchedulesBulk(
  tx: Queryable,
  p: { now: Date | null; schedules: readonly ScheduleToUpdate[] },
): Promise<ScheduleRowAt[]> {
  const s = p.schedules;
  return rows<ScheduleRowAt>(tx, UPDATE_SCHEDULES_BULK_SQL, [
    p.now,
    s.map((x) => x.id),
    ...definitionArrays(s.map((x) => x.definition)),
    s.map((x) => x.requestHash),
    s.map((x) => x.definition.catchUpJson ?? null),
    s.map((x) => x.definition.title ?? null),
  ]);
}

/** DEL-9 / API-5: runs {@link DELETE_REMINDERS_MANY_SQL}. */
export async function deleteRemindersMany(
  tx: Queryable,
  p: { scheduleIds: readonly string[] },
): Promise<void> {
  await execute(tx, DELETE_REMINDERS_MANY_SQL, [p.scheduleIds]);
}

/** DEL-9: runs {@link DELETE_REMINDERS_SQL}: every reminder of the schedule. */
export async function deleteReminders(tx: Queryable, p: { scheduleId: string }): Promise<void> {
  await execute(tx, DELETE_REMINDERS_SQL, [p.scheduleId]);
}

/**
 * API-5: runs {@link SOURCE_SCHEDULES_PAGE_SQL}: at most `limit` schedules of the source
 * whose external id sorts after `after` ('' for the first page), in that order.
 */
export const sourceSchedulesPage = rowsStatement<
  SourceScheduleRow,
  { tenant: string; source: string; after: string; limit: number }
>(SOURCE_SCHEDULES_PAGE_SQL, (p) => [p.tenant, p.source, p.after, p.limit]);

/** API-5: runs {@link SOURCE_SCHEDULES_UNKEYED_SQL}: the source's schedules without an external id. */
export const sourceSchedulesUnkeyed = rowsStatement<
  SourceScheduleRow,
  { tenant: string; source: string }
>(SOURCE_SCHEDULES_UNKEYED_SQL, (p) => [p.tenant, p.source]);

/** A schedule to create in bulk, as {@link insertSchedulesBulk} takes it. */
export interface ScheduleToInsert {
  requestHash: string;
  definition: ScheduleDefinition;
  source: string | null;
  externalId: string | null;
}

/** API-5: runs {@link INSERT_SCHEDULES_BULK_SQL}: many schedules in one statement. */
export function insertSchedulesBulk(
  tx: Queryable,
  p: { now: Date | null; tenant: string; schedules: readonly ScheduleToInsert[] },
): Promise<ScheduleRowAt[]> {
  const s = p.schedules;
  return rows<ScheduleRowAt>(tx, INSERT_SCHEDULES_BULK_SQL, [
    p.now,
    p.tenant,
    s.map((x) => x.requestHash),
    ...definitionArrays(s.map((x) => x.definition)),
    s.map((x) => x.source),
    s.map((x) => x.externalId),
    s.map((x) => x.definition.title ?? null),
  ]);
}

/** API-5: runs {@link INSERT_REMINDERS_BULK_SQL}: the reminders of many schedules. */
export async function insertRemindersBulk(
  tx: Queryable,
  p: { reminders: ReadonlyArray<ReminderToInsert & { scheduleId: string }> },
): Promise<void> {
  const r = p.reminders;
  await execute(tx, INSERT_REMINDERS_BULK_SQL, [r.map((x) => x.scheduleId), ...reminderArrays(r)]);
}

/** API-5 / DEL-10: runs {@link REVIVE_SCHEDULE_SQL}: a schedule cancelled by an import becomes active again. */
export async function reviveSchedule(
  tx: Queryable,
  p: { now: Date | null; id: string },
): Promise<void> {
  await execute(tx, REVIVE_SCHEDULE_SQL, [p.now, p.id]);
}

/**
 * $1 schedule ids. Those of them that are not done: a delivery still not final (pending,
 * claimed, retry or paused), or, for a one-off, a reminder with no delivery planned yet
 * (due beyond the planning horizon). The others, once planned to the end, show as
 * `finished`.
 */
export const SCHEDULES_WITH_OPEN_DELIVERIES_SQL = `
select s.id as schedule_id
from punctual_schedules s
where s.id = any($1::uuid[])
  and (exists (select 1 from punctual_deliveries d
               where d.schedule_id = s.id and d.state in ('pending', 'claimed', 'retry', 'paused', 'grouped'))
       or (not s.recurring and exists (
             select 1 from punctual_reminders r
             where r.schedule_id = s.id
               and not exists (select 1 from punctual_deliveries d
                               where d.schedule_id = s.id and d.reminder_key = r.key))))`;
export const SCHEDULES_WITH_OPEN_DELIVERIES_COLUMNS = columnsOf<{ schedule_id: string }>()([
  "schedule_id",
]);

/**
 * The ids of the rows that show as `finished`: `active`, planned to the end (a one-off
 * with a delivery for each reminder, a series with no occurrence left after the
 * watermark), and no delivery still waiting or in flight. A one-off due beyond the
 * planning horizon has no delivery yet and is not finished.
 */
export async function finishedScheduleIds(
  db: Queryable,
  schedules: readonly ScheduleRow[],
): Promise<Set<string>> {
  const candidates = schedules.filter(
    (s) => s.state === "active" && (!s.recurring || s.plan_complete),
  );
  if (candidates.length === 0) return new Set();
  const open = await rows<{ schedule_id: string }>(db, SCHEDULES_WITH_OPEN_DELIVERIES_SQL, [
    candidates.map((s) => s.id),
  ]);
  const busy = new Set(open.map((r) => r.schedule_id));
  return new Set(candidates.filter((s) => !busy.has(s.id)).map((s) => s.id));
}
