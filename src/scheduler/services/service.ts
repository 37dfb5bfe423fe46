/** What every maintenance service gets (OPS-1): the store, the clock, options, telemetry. */
import type { Clock } from "../../clock/index.js";
import type { SchedulerOptions } from "../../config/index.js";
import type { Logger } from "../../observability/logger.js";
import type { Metrics } from "../../observability/metrics.js";
import type { Database } from "../../store/database.js";

export interface ServiceContext {
  db: Database;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  options: SchedulerOptions;
  /** This instance's lease owner id. */
  owner: string;
  /** Release version, recorded with the heartbeat. */
  version: string;
  /** `start`, `worker` or `library`. */
  role: string;
}

/**
 * Rows per delete on the embedded engine (OPS-12): its statements run on the event loop's
 * thread, and deleting 10,000 delivery rows at once holds it about 90 ms; 1,000 about 10 ms.
 */
export const EMBEDDED_DELETE_CHUNK = 1_000;

/**
 * Deletes up to `max` rows with `remove(limit)` (which answers the rows it deleted): in one
 * statement on PostgreSQL, in statements of at most {@link EMBEDDED_DELETE_CHUNK} rows on
 * the embedded engine, until one deletes fewer than it was allowed. @returns rows deleted.
 */
export async function deleteInChunks(
  db: Database,
  max: number,
  remove: (limit: number) => Promise<number>,
): Promise<number> {
  const chunk = db.engine === "pglite" ? Math.min(EMBEDDED_DELETE_CHUNK, max) : max;
  let deleted = 0;
  while (deleted < max) {
    const limit = Math.min(chunk, max - deleted);
    const n = await remove(limit);
    deleted += n;
    if (n < limit) break;
  }
  return deleted;
}
