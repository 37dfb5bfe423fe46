/**
 * OPS-13 / API-9: what became of a schedule's occurrences in a window, for the missed
 * occurrences of `GET /v1/schedules/{id}` (src/app/missed.ts compares it with what the
 * rule calls for). Scoped by tenant (API-2) like every schedule statement: a schedule of
 * another tenant counts nothing.
 */
import { columnsOf, rowsStatement } from "./statement.js";

/** One (state, reason) group of a schedule's deliveries in a window. */
export interface OccurrenceCountRow {
  state: string;
  /** The row's reason (`stale`, `expired` for skipped rows; null for most others). */
  reason: string | null;
  count: number;
}

/**
 * Deliveries of one schedule of the tenant due in `[$3, $4]`, counted by state and reason. Triggered deliveries (an extra send, not
 * an occurrence of the rule; `punctual_triggers`) are left out; backfilled ones count.
 * $1 tenant, $2 schedule id, $3 window start, $4 window end (now).
 */
export const OCCURRENCE_COUNTS_SQL = `
select d.state, d.reason, count(*)::int as count
from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $1 and d.schedule_id = $2::uuid
  and d.due_at >= $3::timestamptz and d.due_at <= $4::timestamptz
  and not exists (select 1 from punctual_triggers t where t.delivery_id = d.id)
group by d.state, d.reason
order by d.state, d.reason`;

/** Result columns of {@link OCCURRENCE_COUNTS_SQL}. */
export const OCCURRENCE_COUNTS_COLUMNS = columnsOf<OccurrenceCountRow>()([
  "state",
  "reason",
  "count",
]);

/** Runs {@link OCCURRENCE_COUNTS_SQL}. */
export const occurrenceCounts = rowsStatement<
  OccurrenceCountRow,
  { tenant: string; scheduleId: string; from: Date; to: Date }
>(OCCURRENCE_COUNTS_SQL, (p) => [p.tenant, p.scheduleId, p.from, p.to]);
