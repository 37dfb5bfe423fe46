/**
 * API-3: the schedule search (`q`) and the trigram indexes of migration 0029. Where
 * pg_trgm exists (PostgreSQL with the contrib module, a role that may create it) a rare
 * term is answered from `punctual_schedules_title_trgm` / `_external_id_trgm`; where it
 * does not (the embedded engine, a role without the CREATE privilege) the migration does
 * nothing and the same search answers without them. Runs on the engine of this run.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import type { Punctual } from "../../src/app/punctual.js";
import { createPunctual } from "../../src/app/punctual.js";
import { memoryLogger } from "../../src/observability/logger.js";
import { migrate } from "../../src/store/migrator.js";
import { openPostgres } from "../../src/store/postgres.js";
import { LIST_SCHEDULES_SQL } from "../../src/store/schedules.js";
import { engineName, itIfPostgres, withDatabase } from "../support/db.js";
import { testPunctual, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;
afterEach(async () => {
  await t?.close();
  t = null;
});

const TRGM_INDEXES = ["punctual_schedules_external_id_trgm", "punctual_schedules_title_trgm"];

/** The trigram indexes present on punctual_schedules, by name. */
async function trigramIndexes(punctual: Punctual): Promise<string[]> {
  const { rows } = await punctual.db.query<{ name: string }>(
    `select indexname as name from pg_indexes
     where tablename = 'punctual_schedules' and indexname like '%\\_trgm' order by 1`,
  );
  return rows.map((r) => r.name);
}

/** Titles whose search must treat `_`, `%` and `\` as the characters they are. */
const TITLES = ["a_c rota", "abc rota", "50% off", "500 off", "back\\slash", "backXslash"];

async function seedTitles(punctual: Punctual): Promise<void> {
  await punctual.createSchedulesBulk(
    TITLES.map(
      (title, i) =>
        punctual.validateSchedule({
          dtstart: "2027-01-04T08:30:00Z",
          title,
          reminders: [{ key: "r", offset: "PT0S", channel: "log" }],
          source: "titles",
          externalId: `ID_${i}`,
        }).value,
    ),
  );
}

/** Titles (or external ids) the search `q` finds, sorted. */
async function found(punctual: Punctual, q: string, field: "title" | "externalId" = "title") {
  const { items } = await punctual.listSchedules({ q, limit: 100 });
  return items.map((s) => s[field]).sort();
}

async function expectPlainText(punctual: Punctual): Promise<void> {
  expect(await found(punctual, "A_C")).toEqual(["a_c rota"]);
  expect(await found(punctual, "0%")).toEqual(["50% off"]);
  expect(await found(punctual, "k\\s")).toEqual(["back\\slash"]);
  expect(await found(punctual, "ROTA")).toEqual(["a_c rota", "abc rota"]);
  expect(await found(punctual, "id_1", "externalId")).toEqual(["ID_1"]);
  expect(await found(punctual, "no such title")).toEqual([]);
  expect((await punctual.listSchedules({ q: "0%", total: true })).total).toEqual({
    value: 1,
    exact: true,
  });
}

describe("schedule search", () => {
  it("API-3: q matches `_`, `%` and `\\` as plain characters, with the trigram indexes where the engine has pg_trgm and without them where it has not", async () => {
    t = await testPunctual();
    const { punctual } = t;
    await seedTitles(punctual);
    // The embedded engine does not load pg_trgm (0029 does nothing there); the
    // PostgreSQL of the tests ships it.
    expect(await trigramIndexes(punctual)).toEqual(engineName() === "postgres" ? TRGM_INDEXES : []);
    await expectPlainText(punctual);
    if (engineName() === "postgres") {
      // The same answers once the indexes are gone (a server without pg_trgm).
      for (const name of TRGM_INDEXES) await punctual.db.query(`drop index ${name}`);
      await expectPlainText(punctual);
    }
  });

  itIfPostgres(
    "API-3: on PostgreSQL with pg_trgm a rare search term is read from the trigram indexes, not by walking the schedules",
    async () => {
      t = await testPunctual();
      const { punctual } = t;
      await punctual.db.query(
        `insert into punctual_schedules (tenant, dtstart, recurring, title, external_id, plan_complete, created_at)
         select 'default', '2027-01-04T09:00:00', false, 'Schedule ' || g, 'ext-' || g, true,
                '2027-01-01T00:00:00Z'::timestamptz + g * interval '1 second'
         from generate_series(1, 20000) g`,
      );
      // VACUUM also moves the GIN indexes' pending entries into the index proper.
      await punctual.db.query("vacuum analyze punctual_schedules");
      const { rows } = await punctual.db.query<{ "QUERY PLAN": unknown }>(
        `explain (format json) ${LIST_SCHEDULES_SQL}`,
        ["default", null, null, null, 50, null, "schedule 19876", 2048, 100],
      );
      const plan = JSON.stringify(rows[0]!["QUERY PLAN"]);
      for (const name of TRGM_INDEXES) expect(plan).toContain(`"Index Name":"${name}"`);
      const page = await punctual.listSchedules({ q: "schedule 19876", total: true });
      expect(page.items.map((s) => s.title)).toEqual(["Schedule 19876"]);
      expect(page.total).toEqual({ value: 1, exact: true });
    },
  );

  itIfPostgres(
    "API-3 OPS-5: a role that may not create pg_trgm still migrates (0029 leaves the indexes out) and searches",
    async () => {
      const adminUrl = process.env.DATABASE_URL!;
      const suffix = randomBytes(5).toString("hex");
      const role = `punctual_t_role_${suffix}`;
      const name = `punctual_t_norole_${suffix}`;
      const admin = new pg.Client({ connectionString: adminUrl });
      await admin.connect();
      let punctual: Punctual | null = null;
      let db: ReturnType<typeof openPostgres> | null = null;
      try {
        // Not the owner, no CREATE on the database: a trusted extension is refused.
        await admin.query(`create role ${role} login`);
        await admin.query(`create database ${name}`);
        const inDb = new pg.Client({ connectionString: withDatabase(adminUrl, name) });
        await inDb.connect();
        await inDb.query(`grant usage, create on schema public to ${role}`);
        await inDb.end();
        const url = new URL(withDatabase(adminUrl, name));
        url.username = role;
        url.password = "";
        db = openPostgres({ url: url.toString() });
        await migrate(db);
        punctual = await createPunctual({
          database: db,
          logger: memoryLogger("warn").logger,
          migrate: false,
        });
        const { rows } = await db.query<{ n: number }>(
          `select count(*)::int as n from pg_extension where extname = 'pg_trgm'`,
        );
        expect(rows[0]!.n).toBe(0);
        expect(await trigramIndexes(punctual)).toEqual([]);
        await seedTitles(punctual);
        await expectPlainText(punctual);
      } finally {
        await punctual?.close(0);
        await db?.close();
        await admin.query(`drop database if exists ${name} with (force)`);
        await admin.query(`drop role if exists ${role}`);
        await admin.end();
      }
    },
  );
});
