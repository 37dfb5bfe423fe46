/**
 * OPS-16: the reads of an explanation (src/app/explain.ts): a schedule's delivery rows due
 * in a window, in keyset pages by (occurrence, reminder key, id), and the attempts of a
 * page of rows. Read-only; scoped by tenant (API-2): a schedule of another tenant yields
 * nothing.
 */
import type { Queryable } from "./database.js";
import type { AttemptRow, DeliveryRow } from "./schedules.js";
import { NOW } from "./deliveries/sql.js";
import { columnsOf, rows } from "./statement.js";

/** The columns of a delivery row an explanation reads (OPS-16): fewer to fetch and parse. */
const EXPLAIN_ROW_KEYS = [
  "id",
  "schedule_id",
  "reminder_key",
  "occurrence_at",
  "due_at",
  "run_at",
  "state",
  "attempt",
  "lease_owner",
  "lease_expires_at",
  "claimed_at",
  "sent_at",
  "sent_by",
  "finished_at",
  "reason",
  "deferred_until",
  "deferred_reason",
  "created_at",
  "updated_at",
] as const satisfies ReadonlyArray<keyof DeliveryRow>;

/** A delivery row of an explanation, with whether an operator triggered it (API-9). */
export interface ExplainDeliveryRow extends Pick<DeliveryRow, (typeof EXPLAIN_ROW_KEYS)[number]> {
  /** True when `punctual_triggers` records it (an extra send, not an occurrence of the rule). */
  triggered: boolean;
}

/** The select list of {@link EXPLAIN_ROW_KEYS} on alias `d`. */
const EXPLAIN_SELECT = EXPLAIN_ROW_KEYS.map((k) => `d.${k}`).join(", ");

/**
 * OPS-16: one keyset page of the delivery rows of a schedule of the tenant due in
 * `[$3, $4)`, past the cursor `($5, $6, $7)` in the order (occurrence_at to the
 * millisecond, reminder_key by code point, id) — the order src/app/explain.ts merges the
 * rule's expected occurrences in — at most `$8` rows. `$5` NULL: from the start. The rows
 * of one schedule are found by `punctual_deliveries_schedule` (schedule_id, state) and
 * sorted: a schedule holds at most its window's rows (≤ 366 days), so the sort is bounded
 * (see docs/benchmarks.md). Only the columns an explanation reads are returned.
 * $1 tenant, $2 schedule id, $3 due from, $4 due to, $5 occurrence after, $6 reminder key
 * after, $7 id after, $8 limit.
 */
export const EXPLAIN_DELIVERIES_SQL = `
select ${EXPLAIN_SELECT},
       exists (select 1 from punctual_triggers t where t.delivery_id = d.id) as triggered
from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $1 and d.schedule_id = $2::uuid
  and d.due_at >= $3::timestamptz and d.due_at < $4::timestamptz
  and ($5::timestamptz is null
       or (date_trunc('milliseconds', d.occurrence_at), d.reminder_key collate "C", d.id)
          > ($5::timestamptz, $6::text collate "C", $7::bigint))
order by date_trunc('milliseconds', d.occurrence_at), d.reminder_key collate "C", d.id
limit $8`;

/** Result columns of {@link EXPLAIN_DELIVERIES_SQL}. */
export const EXPLAIN_DELIVERIES_COLUMNS = columnsOf<ExplainDeliveryRow>()([
  ...EXPLAIN_ROW_KEYS,
  "triggered",
]);

/** Runs {@link EXPLAIN_DELIVERIES_SQL}. */
export function explainDeliveryRows(
  db: Queryable,
  p: {
    tenant: string;
    scheduleId: string;
    dueFrom: Date;
    dueTo: Date;
    after: { occurrenceAt: Date; reminderKey: string; id: number } | null;
    limit: number;
  },
): Promise<ExplainDeliveryRow[]> {
  return rows<ExplainDeliveryRow>(db, EXPLAIN_DELIVERIES_SQL, [
    p.tenant,
    p.scheduleId,
    p.dueFrom,
    p.dueTo,
    p.after?.occurrenceAt ?? null,
    p.after?.reminderKey ?? null,
    p.after?.id ?? null,
    p.limit,
  ]);
}

/**
 * OPS-16: one delivery row of the tenant by id, with whether it was triggered.
 * $1 tenant, $2 delivery id.
 */
export const EXPLAIN_DELIVERY_SQL = `
select ${EXPLAIN_SELECT},
       exists (select 1 from punctual_triggers t where t.delivery_id = d.id) as triggered
from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $1 and d.id = $2`;

/** Result columns of {@link EXPLAIN_DELIVERY_SQL}. */
export const EXPLAIN_DELIVERY_COLUMNS = EXPLAIN_DELIVERIES_COLUMNS;

/** Runs {@link EXPLAIN_DELIVERY_SQL}; null when the tenant has no such delivery. */
export async function explainDeliveryRow(
  db: Queryable,
  p: { tenant: string; id: number },
): Promise<ExplainDeliveryRow | null> {
  const found = await rows<ExplainDeliveryRow>(db, EXPLAIN_DELIVERY_SQL, [p.tenant, p.id]);
  return found[0] ?? null;
}

/**
 * OPS-16 / DEL-14: the attempts of many deliveries (view `punctual_delivery_attempts`,
 * migration 0007: the recorded attempts, then the sending attempt kept on the row), by
 * delivery and in the order they were recorded. $1 delivery ids (bigint[]).
 */
export const EXPLAIN_ATTEMPTS_SQL = `
select id, delivery_id, attempt, worker, started_at, ended_at, outcome, settled, status,
       message_id, error
from punctual_delivery_attempts where delivery_id = any($1::bigint[])
order by delivery_id, id nulls last`;

/** Result columns of {@link EXPLAIN_ATTEMPTS_SQL}. */
export const EXPLAIN_ATTEMPTS_COLUMNS = columnsOf<AttemptRow>()([
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

/** Runs {@link EXPLAIN_ATTEMPTS_SQL}. */
export function explainAttempts(
  db: Queryable,
  p: { deliveryIds: readonly number[] },
): Promise<AttemptRow[]> {
  if (p.deliveryIds.length === 0) return Promise.resolve([]);
  return rows<AttemptRow>(db, EXPLAIN_ATTEMPTS_SQL, [p.deliveryIds]);
}

/** An operator's action on a delivery (migration 0042). */
export interface DeliveryActionRow {
  delivery_id: number;
  /** `redrive` or `resolve`. */
  action: string;
  /** Of a resolve: `sent` or `dead`; null for a redrive. */
  outcome: string | null;
  /** Who: `api-key:<id>`, `operator`, `library`. */
  actor: string;
  at: Date;
}

/**
 * OPS-16 / DEL-12: the recorded operator actions of many deliveries, oldest first.
 * $1 delivery ids (bigint[]).
 */
export const EXPLAIN_ACTIONS_SQL = `
select delivery_id, action, outcome, actor, at
from punctual_delivery_actions where delivery_id = any($1::bigint[])
order by delivery_id, id`;

/** Result columns of {@link EXPLAIN_ACTIONS_SQL}. */
export const EXPLAIN_ACTIONS_COLUMNS = columnsOf<DeliveryActionRow>()([
  "delivery_id",
  "action",
  "outcome",
  "actor",
  "at",
]);

/** Runs {@link EXPLAIN_ACTIONS_SQL}. */
export function explainActions(
  db: Queryable,
  p: { deliveryIds: readonly number[] },
): Promise<DeliveryActionRow[]> {
  if (p.deliveryIds.length === 0) return Promise.resolve([]);
  return rows<DeliveryActionRow>(db, EXPLAIN_ACTIONS_SQL, [p.deliveryIds]);
}

/**
 * DEL-12 / OPS-16: records an operator's redrive or resolve of deliveries, in the
 * transaction of the action (one row per delivery). $1 now (NULL: the database clock),
 * $2 delivery ids (bigint[]), $3 action, $4 outcome (NULL for a redrive), $5 actor.
 */
export const RECORD_DELIVERY_ACTIONS_SQL = `
insert into punctual_delivery_actions (delivery_id, action, outcome, actor, at)
select u.id, $3, $4, $5, ${NOW}
from unnest($2::bigint[]) as u(id)`;

/** Runs {@link RECORD_DELIVERY_ACTIONS_SQL}. */
export async function recordDeliveryActions(
  db: Queryable,
  p: {
    now: Date | null;
    deliveryIds: readonly number[];
    action: "redrive" | "resolve";
    outcome: "sent" | "dead" | null;
    actor: string;
  },
): Promise<void> {
  if (p.deliveryIds.length === 0) return;
  await db.query(RECORD_DELIVERY_ACTIONS_SQL, [p.now, p.deliveryIds, p.action, p.outcome, p.actor]);
}

/** Debounce state of a schedule (migration 0042, API-9): when its current burst began. */
export interface DebounceRow {
  schedule_id: string;
  burst_started_at: Date;
}

/**
 * DEL-18: the debounce state of a schedule. $1 schedule id.
 */
export const DEBOUNCE_STATE_SQL = `
select schedule_id, burst_started_at from punctual_debounces where schedule_id = $1::uuid`;

/** Result columns of {@link DEBOUNCE_STATE_SQL}. */
export const DEBOUNCE_STATE_COLUMNS = columnsOf<DebounceRow>()(["schedule_id", "burst_started_at"]);

/** Runs {@link DEBOUNCE_STATE_SQL}; null when no burst was recorded. */
export async function debounceState(
  db: Queryable,
  p: { scheduleId: string },
): Promise<DebounceRow | null> {
  const found = await rows<DebounceRow>(db, DEBOUNCE_STATE_SQL, [p.scheduleId]);
  return found[0] ?? null;
}

/**
 * DEL-18: records that a new debounced burst of a schedule began at `$2` (nothing when
 * the schedule is gone: a purge between the read and this write).
 * $1 schedule id, $2 burst start.
 */
export const START_DEBOUNCE_BURST_SQL = `
insert into punctual_debounces (schedule_id, burst_started_at)
select s.id, $2::timestamptz from punctual_schedules s where s.id = $1::uuid
on conflict (schedule_id) do update set burst_started_at = excluded.burst_started_at`;

/** Runs {@link START_DEBOUNCE_BURST_SQL}. */
export async function startDebounceBurst(
  db: Queryable,
  p: { scheduleId: string; startedAt: Date },
): Promise<void> {
  await db.query(START_DEBOUNCE_BURST_SQL, [p.scheduleId, p.startedAt]);
}
