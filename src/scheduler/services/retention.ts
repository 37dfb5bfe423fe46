/**
 * Retention service: deletes finished rows (sent, skipped, cancelled) and their sent or
 * skipped digests (DEL-19) older than
 * `retentionDays`, once per `retentionEveryMs` cluster-wide — whoever holds the database
 * lease `punctual.retention` does it (DEL-8) — with the {@link housekeeping} of stale
 * instances and old attempt-log rows, and vacuums on the embedded engine, which has no
 * autovacuum.
 */
import { acquireLease, vacuumHotTables } from "../../store/operations.js";
import { deleteFinished, deleteFinishedDigests } from "../../store/deliveries/index.js";
import { housekeeping } from "./housekeeping.js";
import { deleteInChunks, type ServiceContext } from "./service.js";

/** Most rows one retention pass deletes. */
const RETENTION_BATCH = 10_000;

/** Runs retention if this instance wins the lease. Returns rows deleted. */
export async function retention(ctx: ServiceContext): Promise<number> {
  const { db, clock, options } = ctx;
  const held = await acquireLease(
    db,
    clock.sqlNow(),
    "punctual.retention",
    ctx.owner,
    options.retentionEveryMs,
  );
  if (!held) return 0;
  const deleted = await deleteInChunks(db, RETENTION_BATCH, (limit) =>
    deleteFinished(db, clock.sqlNow(), options.retentionDays * 86_400_000, limit),
  );
  // DEL-19: the digests of deleted members, at the same age.
  await deleteInChunks(db, RETENTION_BATCH, (limit) =>
    deleteFinishedDigests(db, clock.sqlNow(), options.retentionDays * 86_400_000, limit),
  );
  await housekeeping(ctx);
  if (db.engine === "pglite") await vacuumHotTables(db);
  return deleted;
}
