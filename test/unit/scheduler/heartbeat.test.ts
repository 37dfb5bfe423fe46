/**
 * OPS-9: the heartbeat's clock-skew estimate (midpoint of the round trip to the database)
 * warns only on skew it can tell from a slow round trip. A process clock and a database
 * reply are scripted; no database and no real time.
 */
import { describe, expect, it } from "vitest";
import type { Clock } from "../../../src/clock/index.js";
import { resolveConfig } from "../../../src/config/index.js";
import { StreakLogger } from "../../../src/observability/error-log.js";
import { memoryLogger } from "../../../src/observability/logger.js";
import { createMetrics } from "../../../src/observability/metrics.js";
import { heartbeat, type HeartbeatState } from "../../../src/scheduler/services/heartbeat.js";
import type { ServiceContext } from "../../../src/scheduler/services/service.js";
import type { Database } from "../../../src/store/database.js";

/**
 * Runs one heartbeat where the process clock reads `before` then `after` around the
 * statement and the database clock answers `dbClock` (all ms). Returns the state and log.
 */
async function beat(before: number, after: number, dbClock: number, state: HeartbeatState) {
  const readings = [before, after];
  const clock: Clock = {
    now: () => readings.shift() ?? after,
    sqlNow: () => null,
    setTimer: () => () => undefined,
  };
  const reply = {
    last_tick_at: new Date(dbClock),
    db_now: new Date(dbClock),
    db_clock: new Date(dbClock),
  };
  const db = {
    engine: "pglite",
    description: "scripted",
    query: async () => ({ rows: [reply], rowCount: 1, fields: [] }),
  } as unknown as Database;
  const { logger, lines } = memoryLogger("debug");
  const ctx: ServiceContext = {
    db,
    clock,
    logger,
    metrics: createMetrics(),
    options: resolveConfig({ scheduler: { clockSkewWarnMs: 2_000 } }).scheduler,
    owner: "instance",
    version: "0.0.0",
    role: "test",
  };
  await heartbeat(ctx, state, new StreakLogger(logger, "clock-skew"));
  return { state, warned: lines.some((l) => l.level === "error" || l.level === "warn") };
}

describe("heartbeat clock skew", () => {
  it("OPS-9: a fast round trip with the database 3 s ahead is skew: estimated and reported", async () => {
    const { state, warned } = await beat(10_000, 10_010, 13_005, { skewMs: 0 });
    expect(state.skewMs).toBe(3_000);
    expect(warned).toBe(true);
  });

  it("OPS-9: a round trip stretched by a busy event loop is not skew: no warning, estimate kept", async () => {
    // The statement took 5.4 s to come back (the loop was blocked); the database stamped
    // its clock early in that window. Midpoint says −2.7 s, but the clocks agree.
    const { state, warned } = await beat(10_000, 15_400, 10_000, { skewMs: 12 });
    expect(warned).toBe(false);
    expect(state.skewMs).toBe(12);
  });

  it("OPS-9: skew beyond the threshold plus the round trip's uncertainty still warns", async () => {
    // Round trip 1.6 s (uncertainty 0.8 s), midpoint skew 3.2 s: at least 2.4 s > 2 s.
    const { state, warned } = await beat(10_000, 11_600, 14_000, { skewMs: 0 });
    expect(state.skewMs).toBe(3_200);
    expect(warned).toBe(true);
  });
});
