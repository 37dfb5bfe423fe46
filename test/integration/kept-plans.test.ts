/**
 * OPS-12: the foreign-key checks the embedded engine runs for each inserted row (a
 * reminder's schedule, a delivery's schedule) read `punctual_schedules` by primary key
 * even after the table grew from a few rows, with no ANALYZE between. The engine keeps
 * the plans of those checks; kept as one generic plan made while the table held a few
 * rows and analyzed by the retention sweep (a sequential scan is then the cheaper read),
 * each check went on reading the whole table: a 50,000-event import cost more per batch
 * the further it got. Counted
 * with the transaction's own scan statistics (`pg_stat_xact_user_tables`), not timed.
 * PGlite only: PostgreSQL's autovacuum analyzes a growing table, which remakes kept plans.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Queryable } from "../../src/store/database.js";
import { vacuumHotTables } from "../../src/store/operations.js";
import { INSERT_REMINDERS_BULK_SQL } from "../../src/store/schedules.js";
import { engineName, openTestDatabase, type TestDatabase } from "../support/db.js";

/** Schedules the table grows to after the checks' plans were first made. */
const GROWN = 20_000;

/** Inserts reminder `key` (channel `log`) of each schedule in `ids` with the store's statement. */
async function insertReminders(q: Queryable, ids: string[], key: string): Promise<void> {
  await q.query(INSERT_REMINDERS_BULK_SQL, [
    ids,
    ids.map(() => key),
    ids.map(() => "PT0S"),
    ids.map(() => "log"),
    ids.map(() => "{}"),
    ids.map(() => null),
    ids.map(() => 3),
    ids.map(() => null),
    ids.map(() => null),
  ]);
}

/** Sequential and index scans of `punctual_schedules` so far in this transaction. */
async function scans(q: Queryable): Promise<{ seq: number; idx: number }> {
  const { rows } = await q.query<{ seq: number; idx: number }>(
    `select coalesce(seq_scan, 0)::int as seq, coalesce(idx_scan, 0)::int as idx
     from pg_stat_xact_user_tables where relname = 'punctual_schedules'`,
  );
  return rows[0] ?? { seq: 0, idx: 0 };
}

describe.runIf(engineName() === "pglite")("kept plans of the embedded engine", () => {
  let t: TestDatabase;

  beforeAll(async () => {
    t = await openTestDatabase();
    const { db } = t;
    const insert = (n: number) =>
      db.query(
        `insert into punctual_schedules (dtstart, tzid, recurring, misfire, payload)
         select '2027-01-04T06:00:00', 'UTC', false, 'skip', '{}' from generate_series(1, $1::int)`,
        [n],
      );
    // A young install: a few schedules, vacuumed and analyzed by the retention sweep (the
    // table's size is then known: one page), their reminders created one statement at a
    // time, more than the five executions after which a kept plan may turn generic.
    await insert(3);
    await vacuumHotTables(db);
    const { rows } = await db.query<{ id: string }>("select id from punctual_schedules");
    for (let i = 0; i < 10; i++) await insertReminders(db, [rows[i % rows.length]!.id], `k${i}`);
    // Then the table grows (an import), with no ANALYZE in between.
    await insert(GROWN);
  }, 120_000);

  afterAll(async () => {
    await t?.close();
  });

  it(`OPS-12: after the schedules table grew from 3 to ${GROWN} rows, the foreign-key check of each inserted reminder still reads its schedule by primary key, never the whole table`, async () => {
    const { db } = t;
    const { rows } = await db.query<{ id: string }>(
      "select id from punctual_schedules order by id limit 20",
    );
    const ids = rows.map((r) => r.id);
    await db.transaction(async (tx) => {
      const before = await scans(tx);
      await insertReminders(tx, ids, "grown");
      const after = await scans(tx);
      expect(after.seq - before.seq).toBe(0);
      expect(after.idx - before.idx).toBeGreaterThanOrEqual(ids.length);
    });
  });
});
