/**
 * DEL-13: the rate limiter's wake-up hint (src/scheduler/limiter.ts) against a scripted
 * database: when a bucket holds due rows back, the hint names the instant the next token
 * is due on the database clock, so the time the claim's commit and the wake-up query took
 * is not added on top of it.
 */
import { describe, expect, it } from "vitest";
import { TestClock } from "../../../src/clock/index.js";
import { createMetrics } from "../../../src/observability/metrics.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { Limiter } from "../../../src/scheduler/limiter.js";
import type { Database, QueryResult, Queryable } from "../../../src/store/database.js";
import { ALL_RATE_LIMITS_SQL, LOCK_BUCKET_SQL } from "../../../src/store/rate-limits.js";

const T = Date.parse("2027-01-04T08:00:00Z");

function result<T>(rows: T[]): QueryResult<T> {
  return { rows, rowCount: rows.length, fields: [] };
}

/** A database that answers the limiter's statements: one bucket of 0.4 tokens read at T. */
function scriptedDb(): Database {
  const query = (sql: string): Promise<QueryResult<never>> => {
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
          { tokens: 0.4, tokens_at: new Date(T), rate_per_second: 10, concurrency: null, busy: 0 },
        ]) as QueryResult<never>,
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

describe("rate limiter wake-up hint (DEL-13)", () => {
  it("DEL-13: a bucket holding rows back names when its next token is due, counted from the bucket's read on the database clock", async () => {
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
    expect(rows).toEqual([]);
    // 0.4 tokens at 10/s: the next whole token is due 60 ms after the read.
    expect(limiter.wakeHintMs()).toBeCloseTo(60, 6);
    // Looked at 25 ms later (the claim's commit and the wake-up query took that long):
    // 35 ms are left, not 60.
    expect(limiter.wakeHintMs(T + 25)).toBeCloseTo(35, 6);
    // Past the instant: the shortest wait, never a negative one.
    expect(limiter.wakeHintMs(T + 500)).toBe(5);
  });
});
