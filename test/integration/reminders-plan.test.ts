/**
 * OPS-12: reading the reminders of a batch of schedules (the planner's read after each
 * bulk create of an import, the plan sweep's batch, the API's schedule pages) costs one
 * primary-key lookup per id, whatever the size of the table and whether it was ever
 * analyzed. Written as `schedule_id = any($1)`, a table that grew faster than ANALYZE ran
 * (PGlite has no autovacuum: a 50,000-event import) was read whole for every batch of 20
 * schedules, so each batch of the import cost more than the one before. Checked with
 * EXPLAIN (FORMAT JSON) on both engines, before and after ANALYZE; the statements'
 * answers (order, repeated and unknown ids) are checked beside.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { REMINDERS_OF_SQL } from "../../src/store/planning.js";
import { REMINDERS_SQL } from "../../src/store/schedules.js";
import { engineName, useTestDatabase } from "../support/db.js";
import { explain, nodes, outline, tableScans } from "../support/plans.js";

const engine = engineName();
/** Schedules in the table, two reminders each: far more rows than a batch reads. */
const SCHEDULES = 30_000;

describe(`reading the reminders of a batch on ${engine}`, () => {
  const t = useTestDatabase();
  let ids: string[] = [];

  beforeAll(async () => {
    const { db } = t();
    for (const table of ["punctual_schedules", "punctual_reminders"]) {
      await db.query(`alter table ${table} set (autovacuum_enabled = false)`);
    }
    await db.query(
      `insert into punctual_schedules (dtstart, tzid, recurring, misfire, payload, source, external_id)
       select '2027-01-04T06:00:00', 'UTC', true, 'skip', '{}', 'plan-test', 'ev-' || g
       from generate_series(1, $1::int) g`,
      [SCHEDULES],
    );
    await db.query(
      `insert into punctual_reminders (schedule_id, key, offset_duration, channel, target)
       select s.id, k.key, 'PT0S', 'log', '{}'
       from punctual_schedules s, (values ('a'), ('b')) as k(key)`,
    );
    const { rows } = await db.query<{ id: string }>(
      "select id from punctual_schedules order by external_id limit 1000",
    );
    ids = rows.map((r) => r.id);
  }, 120_000);

  it("OPS-12: each id's reminders once, by schedule and key; repeated ids read once, unknown ids read nothing", async () => {
    const { db } = t();
    const wanted = [ids[7]!, ids[3]!, ids[7]!, "00000000-0000-4000-8000-000000000000"];
    const expected = [ids[3]!, ids[7]!].sort().flatMap((id) => [`${id}/a`, `${id}/b`]);
    for (const sql of [REMINDERS_OF_SQL, REMINDERS_SQL]) {
      const { rows } = await db.query<{ schedule_id: string; key: string }>(sql, [wanted]);
      expect(rows.map((r) => `${r.schedule_id}/${r.key}`)).toEqual(expected);
    }
  });

  for (const phase of ["before ANALYZE", "after ANALYZE"] as const) {
    describe(phase, () => {
      beforeAll(async () => {
        if (phase === "after ANALYZE") await t().db.query("analyze");
      });

      const statements: Array<[string, string]> = [
        ["the planner's read (REMINDERS_OF_SQL)", REMINDERS_OF_SQL],
        ["the API's read (REMINDERS_SQL)", REMINDERS_SQL],
      ];
      for (const [name, sql] of statements) {
        // 20: an import's bulk create; 1,000: the plan sweep's default batch.
        for (const batch of [20, 1_000]) {
          it(`OPS-12: ${name} of ${batch} schedules looks each up by primary key, never reading the table of ${2 * SCHEDULES} reminders`, async () => {
            const plan = await explain(t().db, sql, [ids.slice(0, batch)]);
            const shape = outline(plan);
            expect(tableScans(plan, "punctual_reminders"), shape).toEqual([]);
            expect(
              nodes(plan).some(
                (n) =>
                  n["Index Name"] === "punctual_reminders_pkey" &&
                  ["Index Scan", "Index Only Scan", "Bitmap Index Scan"].includes(n["Node Type"]),
              ),
              shape,
            ).toBe(true);
          });
        }
      }
    });
  }
});
