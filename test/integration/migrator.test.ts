/**
 * OPS-5: migrations are applied once, recorded, safe with two migrators at once, and a
 * process refuses an unmigrated or newer schema with a message saying what to do.
 */
import { afterEach, describe, expect, it } from "vitest";
import { SchemaMismatchError } from "../../src/errors/index.js";
import { createPunctual } from "../../src/app/punctual.js";
import { silentLogger } from "../../src/observability/logger.js";
import {
  assertSchemaCurrent,
  expectedVersion,
  loadMigrations,
  migrate,
  schemaCompatibility,
  schemaVersion,
} from "../../src/store/migrator.js";
import { openPostgres } from "../../src/store/postgres.js";
import { engineName, openTestDatabase, type TestDatabase } from "../support/db.js";

const engine = engineName();
const latest = expectedVersion();

describe(`migrator on ${engine}`, () => {
  const opened: TestDatabase[] = [];
  async function fresh(migrated: boolean): Promise<TestDatabase> {
    const t = await openTestDatabase({ migrated });
    opened.push(t);
    return t;
  }
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((t) => t.close()));
  });

  /**
   * A database migrated up to the newest migration no older release can read (its
   * `min_reader_version` its own version), and a way to record a scheduler instance that
   * ticked `lastTick` (an interval) ago, stopped at `stopped` (null: running).
   */
  async function beforeLastContract() {
    const t = await fresh(false);
    const contract = loadMigrations().filter(
      (m) => (m.minReaderVersion ?? m.version) === m.version,
    );
    const last = contract[contract.length - 1]!;
    await migrate(
      t.db,
      loadMigrations().filter((m) => m.version < last.version),
    );
    const instance = (lastTick: string, stopped: Date | null) =>
      t.db.query(
        `insert into punctual_instances (id, host, pid, version, role, started_at, last_tick_at, stopped_at)
         values ('old#1', 'h1', 41, '0.2.0', 'all', now() - interval '1 hour', now() - $1::interval, $2::timestamptz)
         on conflict (id) do update set last_tick_at = excluded.last_tick_at, stopped_at = excluded.stopped_at`,
        [lastTick, stopped],
      );
    return { t, last, instance };
  }

  it("OPS-5: migrate applies 0001 and records its version", async () => {
    const { db } = await fresh(false);
    expect(await schemaVersion(db)).toBe(0);
    const applied = await migrate(db);
    expect(applied).toEqual(loadMigrations().map((m) => m.version));
    expect(applied[0]).toBe(1);
    expect(await schemaVersion(db)).toBe(latest);
    const { rows } = await db.query<{ version: number; name: string; applied_at: Date }>(
      "select version, name, applied_at from punctual_migrations order by version",
    );
    expect(rows[0]).toMatchObject({ version: 1, name: "initial" });
    expect(rows[0]?.applied_at).toBeInstanceOf(Date);
    const tables = await db.query<{ n: number }>(
      `select count(*) as n from information_schema.tables
       where table_schema = 'public' and table_name in
         ('punctual_schedules', 'punctual_reminders', 'punctual_deliveries',
          'punctual_attempts', 'punctual_instances', 'punctual_leases')`,
    );
    expect(tables.rows[0]?.n).toBe(6);
    await expect(assertSchemaCurrent(db)).resolves.toBeUndefined();
  });

  it("OPS-5: migrating twice is a no-op", async () => {
    const { db } = await fresh(false);
    await migrate(db);
    expect(await migrate(db)).toEqual([]);
    const { rows } = await db.query<{ n: number }>("select count(*) as n from punctual_migrations");
    expect(rows[0]?.n).toBe(loadMigrations().length);
  });

  it(
    engine === "postgres"
      ? "OPS-5: two migrators at once are safe (separate pools racing on one server)"
      : "OPS-5: two migrators at once are safe (two concurrent calls in one process)",
    async () => {
      const t = await fresh(false);
      let results: number[][];
      if (t.engine === "postgres" && t.url) {
        // Separate pools: separate server sessions, serialized only by the advisory lock.
        const pools = [0, 1, 2].map(() =>
          openPostgres({ url: t.url as string, maxConnections: 2 }),
        );
        try {
          results = await Promise.all(pools.map((db) => migrate(db)));
        } finally {
          await Promise.all(pools.map((db) => db.close()));
        }
      } else {
        results = await Promise.all([migrate(t.db), migrate(t.db)]);
      }
      // Each migration was applied by exactly one of them; the others found nothing to do.
      expect(results.flat().sort((a, b) => a - b)).toEqual(loadMigrations().map((m) => m.version));
      expect(await schemaVersion(t.db)).toBe(latest);
      const { rows } = await t.db.query<{ n: number }>(
        "select count(*) as n from punctual_migrations",
      );
      expect(rows[0]?.n).toBe(loadMigrations().length);
    },
  );

  it("OPS-5: an unmigrated database is refused with a message naming `punctual migrate`", async () => {
    const { db } = await fresh(false);
    const err = await assertSchemaCurrent(db).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SchemaMismatchError);
    expect((err as Error).message).toContain("punctual migrate");
    expect((err as Error).message).toContain(`needs ${latest}`);
  });

  it("OPS-5: a newer schema is refused with a message saying to upgrade", async () => {
    const { db } = await fresh(true);
    await db.query(
      "insert into punctual_migrations (version, name) values (9999, 'from_the_future')",
    );
    const err = await assertSchemaCurrent(db).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SchemaMismatchError);
    expect((err as Error).message).toMatch(/upgrade/i);
    expect((err as Error).message).toContain("9999");
    // migrate refuses too, rather than running old migrations over a newer schema.
    await expect(migrate(db)).rejects.toThrow(/upgrade/i);
  });

  it("OPS-10: each applied migration records its kind and min_reader_version", async () => {
    const { db } = await fresh(false);
    await migrate(db);
    const { rows } = await db.query<{ version: number; kind: string; min_reader_version: number }>(
      "select version, kind, min_reader_version from punctual_migrations order by version",
    );
    expect(rows).toEqual(
      loadMigrations().map((m) => ({
        version: m.version,
        kind: m.kind,
        min_reader_version: m.minReaderVersion,
      })),
    );
  });

  it("OPS-10: rows an older migrator wrote without the columns get them on the next migrate", async () => {
    const { db } = await fresh(true);
    // As an older release's migrator leaves its table: no OPS-10 columns.
    await db.query(
      "alter table punctual_migrations drop column min_reader_version, drop column kind",
    );
    expect(await migrate(db)).toEqual([]);
    const { rows } = await db.query<{ n: number }>(
      "select count(*) as n from punctual_migrations where min_reader_version is not null and kind is not null",
    );
    expect(rows[0]?.n).toBe(loadMigrations().length);
  });

  it("OPS-10: a newer schema inside the window (its migrations keep this release as a reader) is accepted by boot, migrate and readiness", async () => {
    const { db } = await fresh(true);
    await db.query(
      "insert into punctual_migrations (version, name, min_reader_version, kind) values ($1, 'next_expand', $2, 'expand')",
      [latest + 1, latest],
    );
    await expect(assertSchemaCurrent(db)).resolves.toBeUndefined();
    expect(await migrate(db)).toEqual([]);
    expect(await schemaCompatibility(db)).toEqual({
      database: latest + 1,
      release: latest,
      minReaderVersion: latest,
      state: "ahead-compatible",
    });
    const p = await createPunctual({ database: db, logger: silentLogger() });
    try {
      const h = await p.health();
      expect(h.checks.schema).toBe(true);
      // A contract migration that needs a later release puts it out of the window.
      await db.query(
        "insert into punctual_migrations (version, name, min_reader_version, kind) values ($1, 'next_contract', $1, 'contract')",
        [latest + 2],
      );
      const after = await p.health();
      expect(after.checks.schema).toBe(false);
      expect(after.detail.join(" ")).toContain(`needs a release built for ${latest + 2}`);
    } finally {
      await p.close(0);
    }
    const err = await assertSchemaCurrent(db).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SchemaMismatchError);
    expect((err as Error).message).toContain(`built for schema ${latest + 2}`);
    await expect(migrate(db)).rejects.toThrow(/upgrade/i);
  });

  it.skipIf(engine !== "postgres")(
    engine === "postgres"
      ? "OPS-10: a migration rolled back by a deadlock with another session (an older release's worker) is tried again and applied"
      : "OPS-10: a migration rolled back by a deadlock is tried again — skipped on PGlite: one connection, no second session to deadlock with",
    async () => {
      const t = await fresh(false);
      const other = openPostgres({ url: t.url as string, maxConnections: 2 });
      const b = await other.pool.connect();
      try {
        for (const sql of [
          "create table mig_t1 (x int)",
          "create table mig_t2 (x int)",
          "insert into mig_t1 values (1)",
          "insert into mig_t2 values (1)",
        ])
          await t.db.query(sql);
        // The migration takes mig_t1, pauses on an advisory lock the test holds, then wants
        // mig_t2; it checks for deadlocks soon, the other session only after a minute, so
        // the migration is the side PostgreSQL rolls back.
        const migration = {
          version: 1,
          name: "deadlock",
          kind: "expand" as const,
          minReaderVersion: 1,
          sql: `set local deadlock_timeout = '50ms';
lock table mig_t1 in access exclusive mode;
select pg_advisory_xact_lock(424242);
lock table mig_t2 in access exclusive mode;
alter table mig_t2 add column y int;`,
        };
        const gate = await other.pool.connect();
        await gate.query("select pg_advisory_lock(424242)");
        await b.query("set deadlock_timeout = '60s'");
        await b.query("begin");
        await b.query("update mig_t2 set x = 2");
        const retries: Array<{ version: number; code: unknown; attempt: number }> = [];
        const migrating = migrate(t.db, [migration], {
          onRetry: (version, err, attempt) =>
            retries.push({ version, code: (err as { code?: unknown }).code, attempt }),
        });
        // Once the migration holds mig_t1, the other session asks for it: a cycle as soon as
        // the migration asks for mig_t2.
        const holds = async () =>
          (
            await t.db.query<{ n: number }>(
              `select count(*)::int as n from pg_locks
               where relation = 'mig_t1'::regclass and mode = 'AccessExclusiveLock' and granted`,
            )
          ).rows[0]?.n === 1;
        while (!(await holds())) await new Promise((r) => setTimeout(r, 20));
        const bWaits = b.query("select x from mig_t1");
        const waiting = async () =>
          (
            await t.db.query<{ n: number }>(
              `select count(*)::int as n from pg_locks
               where relation = 'mig_t1'::regclass and not granted`,
            )
          ).rows[0]?.n === 1;
        while (!(await waiting())) await new Promise((r) => setTimeout(r, 20));
        await gate.query("select pg_advisory_unlock(424242)");
        gate.release();
        await bWaits;
        await b.query("commit");
        expect(await migrating).toEqual([1]);
        expect(retries).toEqual([{ version: 1, code: "40P01", attempt: 1 }]);
        const cols = await t.db.query<{ n: number }>(
          `select count(*)::int as n from information_schema.columns
           where table_name = 'mig_t2' and column_name = 'y'`,
        );
        expect(cols.rows[0]?.n).toBe(1);
      } finally {
        b.release();
        await other.close();
      }
    },
  );
  // Guards refuseWhileOlderRun (src/store/migrator.ts): a contract migration applied while
  // an older release's workers run leaves them claiming and settling the old way beside it.
  it(
    engine === "postgres"
      ? "OPS-10: a migration no running release can read is refused while a scheduler instance ticked within the last minute, applied once it stopped, its heartbeat went stale, or with the check off"
      : "OPS-10: on PGlite (one process holds the data folder) a recent instance row does not hold back a migration",
    async () => {
      const { t, last, instance } = await beforeLastContract();
      await instance("5 seconds", null);
      if (engine !== "postgres") {
        await migrate(t.db);
        expect(await schemaVersion(t.db)).toBe(latest);
        return;
      }
      const refused = await migrate(t.db).then(
        () => null,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(SchemaMismatchError);
      expect((refused as Error).message).toMatch(/Live scheduler instances.*old#1 \(h1 pid 41/);
      expect(await schemaVersion(t.db)).toBe(last.version - 1);
      // Stale past the window: applied. (Back one version first, to try each way.)
      await instance("2 minutes", null);
      expect(
        await migrate(t.db, undefined, { liveWithinMs: 300_000 }).catch((e: Error) => e.message),
      ).toMatch(/Live scheduler instances/);
      expect(await migrate(t.db)).toContain(last.version);
      expect(await schemaVersion(t.db)).toBe(latest);
    },
  );

  it.skipIf(engine !== "postgres")(
    engine === "postgres"
      ? "OPS-10: a stopped instance, or the check turned off (`punctual migrate --force`), does not hold back a migration no running release can read"
      : "OPS-10: stopped instances and --force — skipped on PGlite: the check is not made there (one process holds the data folder)",
    async () => {
      for (const [stopped, options] of [
        [new Date(), {}],
        [null, { liveWithinMs: 0 }],
      ] as const) {
        const { t, last, instance } = await beforeLastContract();
        await instance("0 seconds", stopped);
        expect(await migrate(t.db, undefined, options)).toContain(last.version);
      }
    },
  );
});
