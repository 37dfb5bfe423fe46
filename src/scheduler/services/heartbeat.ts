/**
 * Heartbeat service (OPS-3, OPS-4, OPS-9): registers this instance and stamps the start of
 * each tick, estimates the skew between the process clock and the database clock
 * (midpoint of the round trip), warning when it exceeds `clockSkewWarnMs`, and, apart,
 * records each pass that succeeded: health reads that one, so a worker whose sweeps fail
 * goes stale even though its ticks keep starting.
 */
import { hostname } from "node:os";
import type { StreakLogger } from "../../observability/error-log.js";
import { recordHeartbeat, recordPass } from "../../store/operations.js";
import type { ServiceContext } from "./service.js";

export interface HeartbeatState {
  /** Estimated database clock minus process clock, ms. */
  skewMs: number;
}

/** Runs the heartbeat at the start of a tick; updates `state.skewMs` on the real clock. */
export async function heartbeat(
  ctx: ServiceContext,
  state: HeartbeatState,
  skewStreak: StreakLogger,
): Promise<void> {
  const { db, clock, metrics, options } = ctx;
  const before = clock.now();
  const row = await recordHeartbeat(db, clock.sqlNow(), {
    id: ctx.owner,
    host: hostname(),
    pid: process.pid,
    version: ctx.version,
    role: ctx.role,
  });
  const after = clock.now();
  if (!row || clock.sqlNow() !== null) return;
  const skewMs = row.db_clock.getTime() - (before + after) / 2;
  // The midpoint estimate is off by at most half the round trip. A busy event loop (e.g.
  // a large import on the embedded engine) stretches the round trip, not the clocks:
  // such a sample neither replaces the estimate nor counts as skew; only skew beyond the
  // threshold after taking off that uncertainty warns (OPS-9).
  const uncertaintyMs = (after - before) / 2;
  if (uncertaintyMs > options.clockSkewWarnMs / 2) return;
  state.skewMs = skewMs;
  metrics.clockSkew.set(Math.abs(state.skewMs) / 1000);
  if (Math.abs(state.skewMs) - uncertaintyMs > options.clockSkewWarnMs) {
    skewStreak.failure(
      new Error(`process clock differs from the database clock by ${Math.round(state.skewMs)} ms`),
    );
  } else {
    skewStreak.success();
  }
}

/** Records a pass whose sweeps all succeeded (`durationMs` long, ms): what health reads. */
export async function passSucceeded(ctx: ServiceContext, durationMs: number): Promise<void> {
  await recordPass(ctx.db, ctx.clock.sqlNow(), ctx.owner, durationMs);
}
