/**
 * API-6: what the dashboard's overview shows for one tenant — its delivery counts (the one
 * count of `deliveries/counts.ts`, scoped to the tenant) and, minute by minute over the
 * last hour, how many deliveries were sent and how late they were. Read-only; every statement is scoped by
 * the tenant through the delivery's schedule, as the other delivery reads are.
 */
import type { Queryable } from "./database.js";
import { countDeliveries, type DeliveryCountsRow } from "./deliveries/counts.js";
import { NOW } from "./deliveries/sql.js";
import { columnsOf, rows } from "./statement.js";

/**
 * Deliveries of one tenant sent in the window, by minute of `sent_at`, oldest first; a
 * minute without a send has no row. Lateness is `sent_at - due_at` in ms. $1 pinned now
 * (null: the database clock), $2 tenant, $3 window length in ms.
 */
export const SENT_PER_MINUTE_SQL = `
select date_trunc('minute', d.sent_at) as minute,
       count(*) as sent,
       avg(extract(epoch from (d.sent_at - d.due_at)) * 1000) as avg_lateness_ms,
       max(extract(epoch from (d.sent_at - d.due_at)) * 1000) as max_lateness_ms
from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $2 and d.state = 'sent'
  and d.sent_at > ${NOW} - make_interval(secs => $3::double precision / 1000)
  and d.sent_at <= ${NOW}
group by 1
order by 1`;

/** One row of {@link SENT_PER_MINUTE_SQL}. */
export interface SentPerMinuteRow {
  minute: Date;
  sent: number | string;
  avg_lateness_ms: number | string | null;
  max_lateness_ms: number | string | null;
}

/** Result columns of {@link SENT_PER_MINUTE_SQL}. */
export const SENT_PER_MINUTE_COLUMNS = columnsOf<SentPerMinuteRow>()([
  "minute",
  "sent",
  "avg_lateness_ms",
  "max_lateness_ms",
]);

/** Parameters of {@link readTenantActivity}. */
export interface TenantActivityParams {
  /** Pinned "now" (test clock) or null for the database clock. */
  now: Date | null;
  tenant: string;
  /** A waiting delivery later than this is overdue, ms. */
  overdueMs: number;
  /** Length of the sent-per-minute window, ms. */
  windowMs: number;
}

/** API-6: runs `DELIVERY_COUNTS_SQL` for the tenant and {@link SENT_PER_MINUTE_SQL}. */
export async function readTenantActivity(
  db: Queryable,
  p: TenantActivityParams,
): Promise<{ gauges: DeliveryCountsRow; perMinute: SentPerMinuteRow[] }> {
  const gauges = await countDeliveries(db, {
    now: p.now,
    overdueMs: p.overdueMs,
    tenant: p.tenant,
  });
  const perMinute = await rows<SentPerMinuteRow>(db, SENT_PER_MINUTE_SQL, [
    p.now,
    p.tenant,
    p.windowMs,
  ]);
  return { gauges, perMinute };
}
