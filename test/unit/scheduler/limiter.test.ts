/**
 * DEL-13: the rate limiter (src/scheduler/limiter.ts) against a scripted database: each
 * row it claims carries its own slot, one token interval after the previous, up to the
 * lookahead; when the bucket holds due rows back, the wake-up hint names an instant a
 * fixed lead before the key's next slot on the database clock, so the time the claim's
 * commit and the wake-up query took is not added on top of it. And the slot arithmetic
 * itself (src/store/rate-limits.ts).
 */
import { describe, expect, it } from "vitest";
import { TestClock } from "../../../src/clock/index.js";
import { createMetrics } from "../../../src/observability/metrics.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { Limiter } from "../../../src/scheduler/limiter.js";
import type { Database, QueryResult, Queryable } from "../../../src/store/database.js";
import {
  ALL_RATE_LIMITS_SQL,
  DUE_LIMITERS_SQL,
  CLAIM_LIMITED_SQL,
  LOCK_BUCKET_SQL,
  paceAllowance,
  paceSlots,
} from "../../../src/store/rate-limits.js";

const T = Date.parse("2027-01-04T08:00:00Z");

function result<T>(rows: T[]): QueryResult<T> {
  return { rows, rowCount: rows.length, fields: [] };
}

/** A database that answers the limiter's statements: one bucket of 0.4 tokens read at T. */
function scriptedDb(): Database {
  const query = (sql: string, params?: unknown[]): Promise<QueryResult<never>> => {
    if (sql === ALL_RATE_LIMITS_SQL) {
      return Promise.resolve(
        result([
          {
            tenant: "default",
            key: "test",
            limiter: "default/test",
            rate_per_second: 10,
            burst: 2,
            concurrency: null,
            tokens: 0.4,
            created_at: new Date(T),
            updated_at: new Date(T),
          },
        ]) as QueryResult<never>,
      );
    }
    if (sql === LOCK_BUCKET_SQL) {
      return Promise.resolve(
        result([
          {
            tokens: 0.4,
            tokens_at: new Date(T),
            read_at: new Date(T),
            rate_per_second: 10,
            concurrency: null,
          },
        ]) as QueryResult<never>,
      );
    }
    if (sql === DUE_LIMITERS_SQL) {
      // The one limit has due rows.
      return Promise.resolve(result([{ limiter: "default/test" }]) as QueryResult<never>);
    }
    if (sql === CLAIM_LIMITED_SQL) {
      // Every row asked for is due: the claim returns as many as the limiter allows ($4).
      const n = Number((params ?? [])[3]);
      return Promise.resolve(
        result(Array.from({ length: n }, (_, k) => ({ id: k + 1 }))) as QueryResult<never>,
      );
    }
    throw new Error(`unexpected statement: ${sql.slice(0, 40)}`);
  };
  const tx: Queryable = { query: query as Queryable["query"] };
  return {
    engine: "pglite",
    description: "scripted",
    query: query as Database["query"],
    transaction: (fn) => fn(tx),
    listen: () => Promise.resolve(() => Promise.resolve()),
    close: () => Promise.resolve(),
  };
}

describe("rate limiter pacing and wake-up hint (DEL-13)", () => {
  it("DEL-13: rows claimed ahead get slots one token interval apart; the hint names a fixed lead before the next slot, counted from the bucket's read on the database clock", async () => {
    const limiter = new Limiter({
      db: scriptedDb(),
      clock: new TestClock(T),
      logger: silentLogger(),
      metrics: createMetrics(),
      owner: "owner",
      channels: ["test"],
    });
    await limiter.refresh();
    const rows = await limiter.claim({ limit: 10, leaseMs: 60_000 });
    // 0.4 tokens at 10/s, 600 ms of lookahead: 6 slots, the first when the next whole
    // token is due (60 ms after the read), then every 100 ms; never all at once.
    expect(rows.map((r) => r.send_at.getTime() - T)).toEqual([60, 160, 260, 360, 460, 560]);
    // The next slot is at 660 ms; the worker asks again 400 ms before it.
    expect(limiter.wakeHintMs()).toBeCloseTo(260, 6);
    // Looked at 25 ms later (the claim's commit and the wake-up query took that long):
    // 235 ms are left, not 260.
    expect(limiter.wakeHintMs(T + 25)).toBeCloseTo(235, 6);
    // Past the instant: the shortest wait, never a negative one.
    expect(limiter.wakeHintMs(T + 500)).toBe(5);
  });

  it("DEL-13: a full bucket's burst goes at once, every further row at its token's instant, and a bucket that owes tokens admits only what accrues within the lookahead", () => {
    const bucket = { tokens: 2, tokens_at: new Date(T), read_at: new Date(T), rate_per_second: 10 };
    expect(paceSlots(bucket, 5).map((at) => at - T)).toEqual([0, 0, 100, 200, 300]);
    expect(paceAllowance(bucket, 600)).toBe(8);
    expect(paceAllowance(bucket, 0)).toBe(2);
    // Owes tokens up to T + 300 ms (the last slot given out), read at T.
    const owing = {
      tokens: 0,
      tokens_at: new Date(T + 300),
      read_at: new Date(T),
      rate_per_second: 10,
    };
    expect(paceAllowance(owing, 600)).toBe(3);
    expect(paceSlots(owing, 3).map((at) => at - T)).toEqual([400, 500, 600]);
    expect(paceAllowance({ ...owing, tokens_at: new Date(T + 700) }, 600)).toBe(0);
  });
});
