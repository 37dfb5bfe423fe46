/**
 * Cluster gauges (OPS-13): due backlog, overdue, retry waiting, oldest due age, in doubt,
 * dead. Counting them reads indexes of the deliveries table, so it is done once per
 * `gaugesEveryMs` by one process of the cluster — whoever holds the database lease
 * `punctual.gauges` (a row of `punctual_leases` that expires on the database clock) — and
 * stored in `punctual_gauges`. Every process reads the stored row on the same cadence and
 * serves it on `/metrics`; a scrape never touches the database.
 */
import type { Metrics } from "../../observability/metrics.js";
import { acquireLease } from "../../store/operations.js";
import { readStoredGauges, storeGauges, type StoredGaugesRow } from "../../store/observe.js";
import type { ServiceContext } from "./service.js";

/** Name of the database lease whose holder computes the gauges. */
export const GAUGES_LEASE = "punctual.gauges";

/** A delivery more than this late is overdue (OPS-3), ms. */
export const OVERDUE_MS = 15 * 60_000;

/** Whether this process computed the gauges (`computed`) or read another's (`read`). */
export type GaugesOutcome = "computed" | "read" | "none";

/**
 * Computes and stores the gauges when this instance wins the lease, else reads the stored
 * ones; sets the metrics either way. Returns what it did.
 */
export async function clusterGauges(ctx: ServiceContext): Promise<GaugesOutcome> {
  const { db, clock, metrics, options } = ctx;
  const now = clock.sqlNow();
  // The holder renews on its next turn; once its lease expired unrenewed (it stopped or
  // stalled), the first process to ask takes over. Either way one process per interval.
  const held = await acquireLease(db, now, GAUGES_LEASE, ctx.owner, options.gaugesEveryMs);
  const row = held
    ? await storeGauges(db, { now, instance: ctx.owner, overdueMs: OVERDUE_MS })
    : await readStoredGauges(db, { now });
  if (!row) return "none";
  setGauges(metrics, row);
  return held ? "computed" : "read";
}

/** Sets the cluster gauges of `metrics` from a stored row. */
export function setGauges(metrics: Metrics, row: StoredGaugesRow): void {
  metrics.dueBacklog.set(Number(row.due_backlog));
  metrics.overdue.set(Number(row.overdue));
  metrics.retryWaiting.set(Number(row.retry_waiting));
  metrics.inDoubt.set(Number(row.in_doubt));
  metrics.dead.set(Number(row.dead));
  const computedAt = row.computed_at.getTime();
  metrics.oldestDueAge.set(
    row.oldest_due_at ? Math.max(0, computedAt - row.oldest_due_at.getTime()) / 1000 : 0,
  );
  metrics.gaugesComputed.set(computedAt / 1000);
}
