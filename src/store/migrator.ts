/**
 * Forward-only migrations (OPS-5): numbered SQL files `migrations/NNNN_name.sql`,
 * each applied in its own transaction under a transaction-scoped advisory lock, with its
 * version row inserted first, so two migrators at once serialize and the second finds
 * nothing left to do. Migrations are expand-then-contract (OPS-10): a release only adds
 * what the previous release can ignore; removals come one release later.
 *
 * Compatibility window (OPS-10). Each file declares in its header
 * ```sql
 * -- kind: expand            (or contract)
 * -- min_reader_version: N
 * ```
 * `min_reader_version` is the oldest schema version a release may have been built for and
 * still run against a database at this migration: an expand migration keeps the previous
 * file's value, a contract one may raise it. The migrator records both beside the version.
 * A release built for schema R runs against a database at D when D = R, or D > R and every
 * migration above R declared a min_reader_version ≤ R; a database behind R is migrated
 * (or refused when migrations are off).
 */
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { SchemaMismatchError } from "../errors/index.js";
import type { Database, Queryable } from "./database.js";
import { MIGRATION_SQL } from "./sql/migrations.js";

/** What a migration does to the schema's readers (OPS-10). */
export type MigrationKind = "expand" | "contract";

/** One migration file. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** `-- kind:` header; undefined when the file has none (a test requires it). */
  kind?: MigrationKind;
  /** `-- min_reader_version:` header; undefined when the file has none (recorded as NULL). */
  minReaderVersion?: number;
}

/**
 * Reads the `-- kind: expand|contract` and `-- min_reader_version: N` header lines of a
 * migration file (anywhere in its comment lines; absent headers give undefined).
 * @throws Error when a header is present but malformed, naming `file`.
 */
export function parseMigrationHeaders(
  sql: string,
  file = "migration",
): { kind?: MigrationKind; minReaderVersion?: number } {
  const out: { kind?: MigrationKind; minReaderVersion?: number } = {};
  for (const line of sql.split("\n")) {
    const m = /^--\s*(kind|min_reader_version)\s*:\s*(.*?)\s*$/.exec(line);
    if (!m) continue;
    const [, key, value = ""] = m;
    if (key === "kind") {
      if (value !== "expand" && value !== "contract") {
        throw new Error(`${file}: "-- kind:" must be expand or contract, not "${value}"`);
      }
      out.kind = value;
    } else {
      if (!/^\d+$/.test(value)) {
        throw new Error(
          `${file}: "-- min_reader_version:" must be a schema version, not "${value}"`,
        );
      }
      out.minReaderVersion = Number(value);
    }
  }
  return out;
}

/** The folder of migration files, shipped with the package (src/ and dist/ alike). */
export const MIGRATIONS_DIR = fileURLToPath(new URL("../../migrations/", import.meta.url));

/** Reads `NNNN_name.sql` files in version order. */
export function loadMigrations(dir: string = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((file) => {
      const sql = readFileSync(`${dir}/${file}`, "utf8");
      return {
        version: Number(file.slice(0, 4)),
        name: file.slice(5, -4),
        sql,
        ...parseMigrationHeaders(sql, file),
      };
    });
}

/** The schema version this release needs. */
export function expectedVersion(migrations: Migration[] = loadMigrations()): number {
  return migrations.reduce((max, m) => Math.max(max, m.version), 0);
}

async function appliedVersion(db: Queryable): Promise<number> {
  const exists = await db.query<{ present: boolean }>(MIGRATION_SQL.tableExists);
  if (!exists.rows[0]?.present) return 0;
  const { rows } = await db.query<{ version: number | null }>(MIGRATION_SQL.currentVersion);
  return rows[0]?.version ?? 0;
}

/** Where a database's schema stands for this release (OPS-10). */
export type SchemaState =
  /** At exactly this release's version. */
  | "current"
  /** Older: migrate first. */
  | "behind"
  /** Newer, and every newer migration keeps this release as a reader: run. */
  | "ahead-compatible"
  /** Newer, and a newer migration needs a later release (or declared nothing): refuse. */
  | "ahead-incompatible";

/** A database's schema against this release's (OPS-10). */
export interface SchemaCompatibility {
  /** Schema version of the database (0: never migrated). */
  database: number;
  /** Schema version this release is built for. */
  release: number;
  /**
   * Oldest release schema version the database accepts as a reader; null when not known
   * (the database is not ahead, or its migrator recorded none).
   */
  minReaderVersion: number | null;
  state: SchemaState;
}

/**
 * OPS-10: the window rule, pure. `minReaderVersion` is the database's (null: unknown,
 * which refuses a newer schema).
 */
export function schemaState(
  database: number,
  release: number,
  minReaderVersion: number | null,
): SchemaState {
  if (database === release) return "current";
  if (database < release) return "behind";
  return minReaderVersion !== null && minReaderVersion <= release
    ? "ahead-compatible"
    : "ahead-incompatible";
}

async function hasCompatColumns(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ name: string }>(MIGRATION_SQL.compatColumns);
  return rows.length === 2;
}

/**
 * OPS-10: the database's schema version and whether this release may run against it.
 * One query when the database is not ahead, three when it is.
 */
export async function schemaCompatibility(
  db: Queryable,
  migrations: Migration[] = loadMigrations(),
): Promise<SchemaCompatibility> {
  const database = await appliedVersion(db);
  const release = expectedVersion(migrations);
  let minReaderVersion: number | null = null;
  if (database > release && (await hasCompatColumns(db))) {
    const { rows } = await db.query<{ min_reader: number | null }>(MIGRATION_SQL.minReaderVersion);
    minReaderVersion = rows[0]?.min_reader ?? null;
  }
  return {
    database,
    release,
    minReaderVersion,
    state: schemaState(database, release, minReaderVersion),
  };
}

function newerMessage(c: SchemaCompatibility): string {
  const needs =
    c.minReaderVersion === null
      ? "it records no oldest compatible release"
      : `it needs a release built for schema ${c.minReaderVersion} or later`;
  return (
    `The database schema is at version ${c.database}, newer than this release (${c.release}), ` +
    `and ${needs}. Upgrade punctual.`
  );
}

/**
 * The migrator's own bootstrap (expand-only): its table, the OPS-10 columns when missing,
 * and their values for versions an older migrator recorded without them.
 */
async function bootstrap(tx: Queryable, migrations: Migration[]): Promise<void> {
  await tx.query(MIGRATION_SQL.createTable);
  if (!(await hasCompatColumns(tx))) {
    await tx.query(MIGRATION_SQL.addMinReaderColumn);
    await tx.query(MIGRATION_SQL.addKindColumn);
  }
  const known = migrations.filter((m) => m.minReaderVersion !== undefined);
  if (known.length === 0) return;
  await tx.query(MIGRATION_SQL.backfillCompat, [
    known.map((m) => m.version),
    known.map((m) => m.minReaderVersion),
    known.map((m) => m.kind ?? null),
  ]);
}

/** Tries of one migration that loses a deadlock or a serialization conflict (OPS-10). */
export const MIGRATION_RETRIES = 5;

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /**
   * How many times a migration whose transaction was rolled back by a deadlock (SQLSTATE
   * 40P01) or a serialization failure (40001) is tried again (default
   * {@link MIGRATION_RETRIES}); other errors are thrown at once.
   */
  retries?: number;
  /**
   * Told of each such conflict before the retry: the migration's version, the error, the
   * try that failed (from 1) and the wait before the next, ms. Use it to log the retry.
   */
  onRetry?: (version: number, err: unknown, attempt: number, waitMs: number) => void;
  /**
   * OPS-10: a migration that no running process can read — its `min_reader_version` (its
   * own version when it declares none) is above the database's schema version, so every
   * release running now, built for that version or an earlier one, is left out — is not
   * applied while a scheduler instance has ticked within this many ms and not stopped
   * (`punctual_instances`): its workers would go on claiming and settling the old way and
   * send deliveries twice. Stop them (a graceful stop records it), or wait until their
   * heartbeat is older than this, first. Default {@link LIVE_INSTANCE_MS} (the heartbeat's
   * default staleness, `scheduler.heartbeatStaleMs`); 0 does not look (`punctual migrate
   * --force`). Not looked at on PGlite: one process holds its data folder.
   */
  liveWithinMs?: number;
}

/** Default of {@link MigrateOptions.liveWithinMs}, ms. */
export const LIVE_INSTANCE_MS = 60_000;

/** A scheduler instance that ticked lately, as {@link migrate}'s refusal names it. */
interface LiveInstanceRow {
  id: string;
  host: string;
  pid: number;
  version: string;
  seen_ms: number;
}

/**
 * Instances that ticked within $1 ms and did not stop, newest first, at most 20: what a
 * migration no running release can read waits for (OPS-10).
 */
const LIVE_INSTANCES_STATEMENT = `
with seen as (
  select i.id, i.host, i.pid, i.version,
         -- last_tick_at came with migration 0006: read through jsonb, so older schemas pass.
         greatest((to_jsonb(i) ->> 'last_tick_at')::timestamptz, i.last_pass_at, i.started_at)
           as seen_at
  from punctual_instances i
  where i.stopped_at is null
)
select id, host, pid, version,
       (extract(epoch from (now() - seen_at)) * 1000)::float8 as seen_ms
from seen
where seen_at > now() - make_interval(secs => $1::float8 / 1000)
order by seen_at desc
limit 20`;

/**
 * OPS-10: refuses `migration` while a live instance may be of a release it leaves out
 * (see {@link MigrateOptions.liveWithinMs}).
 * @throws SchemaMismatchError naming the live instances and what to do.
 */
async function refuseWhileOlderRun(
  tx: Queryable,
  migration: Migration,
  current: number,
  liveWithinMs: number,
): Promise<void> {
  const minReader = migration.minReaderVersion ?? migration.version;
  if (current === 0 || minReader <= current || liveWithinMs <= 0) return;
  const { rows } = await tx.query<LiveInstanceRow>(LIVE_INSTANCES_STATEMENT, [liveWithinMs]);
  if (rows.length === 0) return;
  const named = rows
    .map(
      (r) =>
        `${r.id} (${r.host} pid ${r.pid}, ${r.version}, seen ${Math.round(r.seen_ms / 1000)} s ago)`,
    )
    .join(", ");
  throw new SchemaMismatchError(
    `Migration ${migration.version} (${migration.name}) needs releases built for schema ` +
      `${minReader} or later, and the database is at ${current}: every process running now ` +
      `would go on the old way beside it. Live scheduler instances (a tick within ` +
      `${liveWithinMs / 1000} s): ${named}. Stop them (a graceful stop, SIGTERM, gives back ` +
      `their claims), then migrate; a process that was killed counts as live until its ` +
      `heartbeat is ${liveWithinMs / 1000} s old. \`punctual migrate --force\` skips this ` +
      `check once you know they are gone (docs/production.md, upgrades).`,
  );
}

/** Whether `err` is a conflict PostgreSQL resolved by rolling this transaction back. */
function isConflict(err: unknown): boolean {
  const code = typeof err === "object" && err !== null ? (err as { code?: unknown }).code : null;
  return code === "40P01" || code === "40001";
}

/**
 * Runs one migration's transaction, again after a deadlock or serialization failure: an
 * older release still running beside the migration (OPS-10) takes row and table locks in
 * its own order, and PostgreSQL may roll back either side of a cycle. The whole
 * migration was rolled back with it (one transaction, version row first), so trying it
 * again is safe. Waits 200 ms, doubling, between tries.
 */
async function withConflictRetry<T>(
  version: number,
  retries: number,
  onRetry: MigrateOptions["onRetry"],
  run: () => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (!isConflict(err) || attempt > retries) throw err;
      const waitMs = 200 * 2 ** (attempt - 1);
      onRetry?.(version, err, attempt, waitMs);
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
}

/**
 * Applies pending migrations. Safe to run from many processes at once, and beside an
 * older release's migrator. A database already ahead of this release inside its
 * compatibility window (OPS-10) is left as it is.
 * A migration rolled back by a deadlock or serialization failure (an older release's
 * workers running beside it) is tried again, up to `options.retries` times.
 * @returns the versions this call applied (empty when up to date or ahead).
 * @throws SchemaMismatchError when the database is newer than this release and outside
 *   its window; the database's error when a migration fails otherwise, or still conflicts
 *   after its retries.
 */
export async function migrate(
  db: Database,
  migrations: Migration[] = loadMigrations(),
  options: MigrateOptions = {},
): Promise<number[]> {
  const retries = options.retries ?? MIGRATION_RETRIES;
  const target = expectedVersion(migrations);
  const applied: number[] = [];
  // The advisory lock waits as long as another migrator holds it, by design: a second
  // process starting during a deploy must wait for the first one's migration, not fail
  // (OPS-5). Hence no lock timeout here (unlike the request path, ./lock-timeout.ts); the
  // migrator runs at boot on the process's own database, never on a request's connection,
  // and a frozen migrator's session is still ended by the idle limit (OPS-8).
  await db.transaction(async (tx) => {
    await tx.query(MIGRATION_SQL.lock);
    await bootstrap(tx, migrations);
  });
  for (const migration of migrations) {
    const did = await withConflictRetry(migration.version, retries, options.onRetry, () =>
      db.transaction(async (tx) => {
        await tx.query(MIGRATION_SQL.lock);
        const current = await appliedVersion(tx);
        if (current > target) {
          const compatibility = await schemaCompatibility(tx, migrations);
          if (compatibility.state === "ahead-compatible") return "ahead";
          throw new SchemaMismatchError(newerMessage(compatibility));
        }
        if (current >= migration.version) return false;
        if (db.engine !== "pglite") {
          await refuseWhileOlderRun(
            tx,
            migration,
            current,
            options.liveWithinMs ?? LIVE_INSTANCE_MS,
          );
        }
        // Version row first: a concurrent migrator that got past the lock would collide here.
        await tx.query(MIGRATION_SQL.insertVersionCompat, [
          migration.version,
          migration.name,
          migration.minReaderVersion ?? null,
          migration.kind ?? null,
        ]);
        for (const statement of splitStatements(migration.sql)) await tx.query(statement);
        return true;
      }),
    );
    if (did === "ahead") break;
    if (did) applied.push(migration.version);
  }
  return applied;
}

/**
 * Refuses to run against an unmigrated schema, or a newer one outside this release's
 * compatibility window (OPS-5, OPS-10). A newer schema inside the window passes.
 * @throws SchemaMismatchError saying what to run.
 */
export async function assertSchemaCurrent(
  db: Database,
  migrations: Migration[] = loadMigrations(),
): Promise<void> {
  const c = await schemaCompatibility(db, migrations);
  if (c.state === "behind") {
    throw new SchemaMismatchError(
      `The database schema is at version ${c.database}; this release needs ${c.release}. ` +
        `Run \`punctual migrate\` (with the same DATABASE_URL), or start with --migrate.`,
    );
  }
  if (c.state === "ahead-incompatible") throw new SchemaMismatchError(newerMessage(c));
}

/** Current schema version (0 when never migrated). */
export function schemaVersion(db: Queryable): Promise<number> {
  return appliedVersion(db);
}

/**
 * Splits a migration file into statements on `;` at line ends, outside dollar quotes.
 * Migration files keep one statement per `;`-terminated block.
 */
export function splitStatements(sql: string): string[] {
  const out: string[] = [];
  let current = "";
  let inDollar = false;
  for (const line of sql.split("\n")) {
    const stripped = line.replace(/--.*$/, "");
    if ((stripped.match(/\$\$/g)?.length ?? 0) % 2 === 1) inDollar = !inDollar;
    current += line + "\n";
    if (!inDollar && /;\s*$/.test(stripped)) {
      if (current.trim()) out.push(current.trim());
      current = "";
    }
  }
  if (current.replace(/--.*$/gm, "").trim()) out.push(current.trim());
  return out;
}
