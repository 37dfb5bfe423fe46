/**
 * Recover service (DEL-6): moves rows whose lease expired out of `claimed` — back to
 * `retry` with the same delivery key where the channel de-duplicates (or the reminder
 * opted into at-least-once), `in_doubt` otherwise, `dead` when that was the last attempt —
 * and logs each one at the level it deserves. Any worker recovers any row: a crashed
 * worker's claims come back within one lease plus one pass.
 */
import { recoverExpired } from "../../store/deliveries/index.js";
import type { ServiceContext } from "./service.js";

/** Recovers at most `options.recoverBatch` expired leases. Returns how many. */
export async function recover(ctx: ServiceContext): Promise<number> {
  const { db, clock, logger, metrics, options } = ctx;
  const rows = await recoverExpired(db, clock.sqlNow(), options.recoverBatch, 0);
  for (const row of rows) {
    metrics.attempts.inc({ channel: row.channel, outcome: "lease_expired" });
    if (row.state === "in_doubt" || row.state === "dead") {
      metrics.outcomes.inc({ channel: row.channel, outcome: row.state });
    }
    const fields = {
      deliveryId: row.id,
      deliveryKey: row.delivery_key,
      scheduleId: row.schedule_id,
      state: row.state,
    };
    if (row.state === "in_doubt") {
      logger.error(
        fields,
        "lease expired mid-send: delivery is in doubt (it may or may not have been sent); resolve or redrive it",
      );
    } else if (row.state === "dead") {
      logger.error(fields, "lease expired on the last attempt: delivery is dead (SEND_FAILED)");
    } else {
      logger.warn(fields, "lease expired mid-send: retrying with the same delivery key");
    }
  }
  return rows.length;
}
