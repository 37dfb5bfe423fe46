/**
 * Heartbeat service (OPS-3, OPS-9): registers this instance, records the duration of its
 * last pass, and estimates the skew between the process clock and the database clock
 * (midpoint of the round trip), warning when it exceeds `clockSkewWarnMs`.
 */
import { hostname } from "node:os";
import type { StreakLogger } from "../../observability/error-log.js";
import { recordHeartbeat } from "../../store/operations.js";
import type { ServiceContext } from "./service.js";

export interface HeartbeatState {
  /** Estimated database clock minus process clock, ms. */
  skewMs: number;
}

/** Runs one heartbeat; updates `state.skewMs` on the real clock. */
export async function heartbeat(
  ctx: ServiceContext,
  state: HeartbeatState,
  lastTickMs: number | null,
  skewStreak: StreakLogger,
): Promise<void> {
  const { db, clock, metrics, options } = ctx;
  const before = clock.now();
  const row = await recordHeartbeat(
    db,
    clock.sqlNow(),
    { id: ctx.owner, host: hostname(), pid: process.pid, version: ctx.version, role: ctx.role },
    lastTickMs,
  );
  const after = clock.now();
  if (!row || clock.sqlNow() !== null) return;
  state.skewMs = row.db_clock.getTime() - (before + after) / 2;
  metrics.clockSkew.set(Math.abs(state.skewMs) / 1000);
  if (Math.abs(state.skewMs) > options.clockSkewWarnMs) {
    skewStreak.failure(
      new Error(`process clock differs from the database clock by ${Math.round(state.skewMs)} ms`),
    );
  } else {
    skewStreak.success();
  }
}
