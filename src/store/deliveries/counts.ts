/**
 * OPS-3 / OPS-13 / API-6: the one count of delivery rows by state, read by `GET /v1/status`
 * (and so `punctual status`), stored for `/metrics` by the gauges' lease holder
 * (`STORE_GAUGES_SQL` in `../observe.ts` selects from it) and read per tenant by
 * `GET /v1/overview` (the dashboard's first page). One text, so the figures the four show
 * for the same rows at the same instant are the same.
 */
import type { Queryable } from "../database.js";
import { columnsOf, firstRow } from "../statement.js";
import { ADMISSION_PREDICATE, msBeforeNow, NOW } from "./sql.js";

/** The row of {@link DELIVERY_COUNTS_SQL}. Counts are int8: a number on both engines. */
export interface DeliveryCountsRow {
  /** Rows the claim may take now ({@link ADMISSION_PREDICATE}, DEL-3). */
  due_backlog: number;
  /**
   * Due more than the overdue threshold ago and not settled: `pending` rows whose
   * `run_at` (their due time, or the end of a quiet-hours deferral, or a paced catch-up
   * slot) is that old, and `retry` and `claimed` rows whose due time is. Rows held by a
   * paused schedule are not overdue.
   */
  overdue: number;
  /** Rows in state `retry`: failed at least once, waiting for their next try. */
  retry_waiting: number;
  in_doubt: number;
  /** Open dead letters (not resolved by hand). */
  dead: number;
  claimed: number;
  /** Due time of the oldest row the claim may take now; NULL when none is due. */
  oldest_due_at: Date | null;
}

/** Result columns of {@link DELIVERY_COUNTS_SQL}. */
export const DELIVERY_COUNTS_COLUMNS = columnsOf<DeliveryCountsRow>()([
  "due_backlog",
  "overdue",
  "retry_waiting",
  "in_doubt",
  "dead",
  "claimed",
  "oldest_due_at",
]);

/** Scope of a count: every row, or the rows of tenant `$3`'s schedules when `$3` is set. */
const SCOPE = `($3::text is null
    or d.schedule_id in (select s.id from punctual_schedules s where s.tenant = $3::text))`;

/** {@link SCOPE} for a queue row `q`: its ledger row's schedule, read by primary key. */
const QUEUE_SCOPE = `($3::text is null
    or (select d.schedule_id from punctual_deliveries d where d.id = q.id)
       in (select s.id from punctual_schedules s where s.tenant = $3::text))`;

/** A queue row `q` held by a worker (it was due when claimed, so among the due rows). */
const HELD = `q.run_at <= ${NOW} and q.lease_owner is not null`;

/**
 * The delivery counts ({@link DeliveryCountsRow}). $1 now, $2 overdue threshold ms, $3
 * tenant (NULL: the whole cluster). Each count reads only the rows it counts: the due
 * part of the queue's index (migration 0050) for the backlog, the overdue pending rows and
 * the held (`claimed`) rows, the ledger's state index for retries, doubts and dead
 * letters, never the finished history; a tenant's count keeps to those rows and checks
 * their schedule by primary key. A `retry` row a worker holds counts as `claimed`, not as
 * waiting to retry.
 */
export const DELIVERY_COUNTS_SQL = `
select
  (select count(*) from punctual_queue q where ${ADMISSION_PREDICATE} and ${QUEUE_SCOPE})
    as due_backlog,
  (select count(*) from punctual_queue q
    where q.run_at < ${msBeforeNow("$2")} and q.lease_owner is null and q.attempt = 0
      and ${QUEUE_SCOPE})
  + (select count(*) from punctual_deliveries d
      where d.state = 'retry' and d.due_at < ${msBeforeNow("$2")}
        and not exists (select 1 from punctual_queue q where q.id = d.id and ${HELD})
        and ${SCOPE})
  + (select count(*) from punctual_queue q
      where ${HELD}
        and (select d.due_at from punctual_deliveries d where d.id = q.id) < ${msBeforeNow("$2")}
        and ${QUEUE_SCOPE}) as overdue,
  (select count(*) from punctual_deliveries d
    where d.state = 'retry'
      and not exists (select 1 from punctual_queue q where q.id = d.id and ${HELD})
      and ${SCOPE}) as retry_waiting,
  (select count(*) from punctual_deliveries d where d.state = 'in_doubt' and ${SCOPE})
    as in_doubt,
  (select count(*) from punctual_deliveries d
    where d.state = 'dead' and d.reason is distinct from 'resolved' and ${SCOPE}) as dead,
  (select count(*) from punctual_queue q where ${HELD} and ${QUEUE_SCOPE}) as claimed,
  (select min((select d.due_at from punctual_deliveries d where d.id = q.id))
    from punctual_queue q where ${ADMISSION_PREDICATE} and ${QUEUE_SCOPE}) as oldest_due_at`;

/** Parameters of {@link countDeliveries}. */
export interface CountDeliveriesParams {
  /** Pinned "now" (test clock) or null for the database clock. */
  now: Date | null;
  /** A waiting or claimed row due longer ago than this is overdue, ms. */
  overdueMs: number;
  /** Count only this tenant's rows; null or absent: the whole cluster. */
  tenant?: string | null;
}

/** OPS-3 / API-6: runs {@link DELIVERY_COUNTS_SQL}. Always one row. */
export async function countDeliveries(
  db: Queryable,
  p: CountDeliveriesParams,
): Promise<DeliveryCountsRow> {
  const row = await firstRow<DeliveryCountsRow>(db, DELIVERY_COUNTS_SQL, [
    p.now,
    p.overdueMs,
    p.tenant ?? null,
  ]);
  return {
    due_backlog: Number(row?.due_backlog ?? 0),
    overdue: Number(row?.overdue ?? 0),
    retry_waiting: Number(row?.retry_waiting ?? 0),
    in_doubt: Number(row?.in_doubt ?? 0),
    dead: Number(row?.dead ?? 0),
    claimed: Number(row?.claimed ?? 0),
    oldest_due_at: row?.oldest_due_at ?? null,
  };
}
