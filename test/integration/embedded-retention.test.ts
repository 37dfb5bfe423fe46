/**
 * OPS-12 on the embedded engine, whose statements run on the event loop's thread: the
 * retention pass deletes in statements of at most EMBEDDED_DELETE_CHUNK rows (one delete
 * of 10,000 rows held the loop about 90 ms), still up to its whole batch per pass, and its
 * ANALYZE samples with statistics target 10 (about 125 ms at the default target for a
 * table of 200,000 deliveries). Counted from the statements and the statistics they left,
 * never timed. On PostgreSQL one statement deletes the batch (and autovacuum analyzes).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestClock } from "../../src/clock/index.js";
import { schedulerOptionsSchema } from "../../src/config/index.js";
import { createMetrics } from "../../src/observability/metrics.js";
import { silentLogger } from "../../src/observability/logger.js";
import { retention } from "../../src/scheduler/services/retention.js";
import { EMBEDDED_DELETE_CHUNK } from "../../src/scheduler/services/service.js";
import type { Database, Queryable } from "../../src/store/database.js";
import { EMBEDDED_STATISTICS_TARGET } from "../../src/store/operations.js";
import { engineName, openTestDatabase, type TestDatabase } from "../support/db.js";
import { forgingStates } from "../support/transitions.js";

const OLD = 2_500;
const KEPT = 2_000;

/** The database, with the row counts of every DELETE it runs outside a transaction recorded. */
function recordingDeletes(db: Database, counts: number[]): Database {
  return new Proxy(db, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (prop === "query") {
        const query: Queryable["query"] = async <T>(sql: string, params?: readonly unknown[]) => {
          const result = await target.query<T>(sql, params);
          if (/\bdelete\s+from\b/i.test(sql)) counts.push(result.rowCount);
          return result;
        };
        return query;
      }
      return typeof value === "function"
        ? (value as (...a: unknown[]) => unknown).bind(target)
        : value;
    },
  });
}

describe.runIf(engineName() === "pglite")("retention on the embedded engine", () => {
  let t: TestDatabase;
  const clock = new TestClock("2027-03-01T08:00:00Z");

  beforeAll(async () => {
    t = await openTestDatabase();
    const { rows } = await t.db.query<{ id: string }>(
      `insert into punctual_schedules (dtstart, tzid, recurring, misfire, payload)
       values ('2027-01-04T06:00:00', 'UTC', true, 'skip', '{}') returning id`,
    );
    const id = rows[0]!.id;
    // Sent 40 days ago (past the 30 days of retention), and waiting rows that stay.
    // Forged: sent rows inserted as they end up (test/support/transitions.ts).
    await forgingStates(t.db, (tx) =>
      tx.query(
        `insert into punctual_deliveries (delivery_key, schedule_id, reminder_key, occurrence_at,
         due_at, run_at, state, attempt, channel, on_lost_lease, sent_at, updated_at)
       select 'old' || g, $1, 'r1', t, t, t, 'sent', 1, 'log', 'retry', t, t
       from generate_series(1, $2::int) g,
         lateral (select timestamptz '2027-01-01' + g * interval '1 min' as t) x`,
        [id, OLD],
      ),
    );
    await t.db.query(
      `insert into punctual_deliveries (delivery_key, schedule_id, reminder_key, occurrence_at,
         due_at, run_at, channel, on_lost_lease)
       select 'kept' || g, $1, 'r1', t, t, t, 'log', 'retry'
       from generate_series(1, $2::int) g,
         lateral (select timestamptz '2027-04-01' + g * interval '1 min' as t) x`,
      [id, KEPT],
    );
  }, 60_000);

  afterAll(async () => {
    await t?.close();
  });

  it(`OPS-12: a retention pass deletes ${OLD} finished rows in statements of at most ${EMBEDDED_DELETE_CHUNK}, and analyzes with statistics target ${EMBEDDED_STATISTICS_TARGET}`, async () => {
    const counts: number[] = [];
    const deleted = await retention({
      db: recordingDeletes(t.db, counts),
      clock,
      logger: silentLogger(),
      metrics: createMetrics(),
      options: schedulerOptionsSchema.parse({}),
      owner: "test",
      version: "test",
      role: "library",
    });
    expect(deleted).toBe(OLD);
    const deliveryDeletes = counts.filter((n) => n > 0);
    expect(deliveryDeletes.reduce((a, b) => a + b, 0)).toBe(OLD);
    expect(Math.max(...counts)).toBeLessThanOrEqual(EMBEDDED_DELETE_CHUNK);
    const left = await t.db.query<{ n: number }>(
      "select count(*)::int as n from punctual_deliveries",
    );
    expect(left.rows[0]!.n).toBe(KEPT);
    // The target bounds the histogram: at most target + 1 bounds (2,000 distinct due times).
    const stats = await t.db.query<{ bounds: number | null }>(
      `select array_length(histogram_bounds::text::text[], 1) as bounds from pg_stats
       where tablename = 'punctual_deliveries' and attname = 'due_at'`,
    );
    const bounds = stats.rows[0]?.bounds ?? 0;
    expect(bounds).toBeGreaterThan(1);
    expect(bounds).toBeLessThanOrEqual(EMBEDDED_STATISTICS_TARGET + 1);
  });
});
