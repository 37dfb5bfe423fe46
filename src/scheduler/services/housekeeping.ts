/**
 * Housekeeping beside retention (run by the holder of the retention lease, on its cadence):
 * prunes instance rows whose heartbeat stopped longer ago than `instancePruneAfterMs`
 * (killed processes never mark themselves stopped), and deletes attempt-log rows older than
 * `attemptRetentionDays` (the log of a delivery also goes with its row, after
 * `retentionDays`; for an audit trail of a year, keep both at 366 days or more), and
 * deletes expired dashboard sessions (API-6; an expired session is refused before this
 * pass, so the pass only keeps the table small).
 */
import { pruneInstances } from "../../store/observe.js";
import { deleteOldAttempts } from "../../store/deliveries/index.js";
import { deleteExpiredSessions } from "../../store/sessions.js";
import { deleteInChunks, type ServiceContext } from "./service.js";

/** Most attempt rows one pass deletes. */
const ATTEMPT_BATCH = 10_000;
/** Most expired sessions one pass deletes. */
const SESSION_BATCH = 10_000;

/** Runs both; returns what each deleted. */
export async function housekeeping(
  ctx: ServiceContext,
): Promise<{ instances: number; attempts: number; sessions: number }> {
  const { db, clock, options, metrics, logger } = ctx;
  const now = clock.sqlNow();
  const instances = await pruneInstances(db, { now, olderThanMs: options.instancePruneAfterMs });
  if (instances > 0) {
    metrics.instancesPruned.inc(instances);
    logger.info(
      { pruned: instances, olderThanMs: options.instancePruneAfterMs },
      "pruned instances whose heartbeat stopped",
    );
  }
  const days = options.attemptRetentionDays;
  const attempts =
    days === null
      ? 0
      : await deleteInChunks(db, ATTEMPT_BATCH, (limit) =>
          deleteOldAttempts(db, { now, retentionMs: days * 86_400_000, limit }),
        );
  const sessions = await deleteInChunks(db, SESSION_BATCH, (limit) =>
    deleteExpiredSessions(db, { now, limit }),
  );
  return { instances, attempts, sessions };
}
