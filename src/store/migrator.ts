/**
 * Forward-only migrations (OPS-5): numbered SQL files `migrations/NNNN_name.sql`,
 * each applied in its own transaction under a transaction-scoped advisory lock, with its
 * version row inserted first, so two migrators at once serialize and the second finds
 * nothing left to do. Migrations are expand-then-contract (OPS-10): a release only adds
 * what the previous release can ignore; removals come one release later.
 */
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { SchemaMismatchError } from "../errors/index.js";
import type { Database, Queryable } from "./database.js";
import { MIGRATION_SQL } from "./sql/migrations.js";

/** One migration file. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The folder of migration files, shipped with the package (src/ and dist/ alike). */
export const MIGRATIONS_DIR = fileURLToPath(new URL("../../migrations/", import.meta.url));

/** Reads `NNNN_name.sql` files in version order. */
export function loadMigrations(dir: string = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((file) => ({
      version: Number(file.slice(0, 4)),
      name: file.slice(5, -4),
      sql: readFileSync(`${dir}/${file}`, "utf8"),
    }));
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

/**
 * Applies pending migrations. Safe to run from many processes at once.
 * @returns the versions this call applied (empty when up to date).
 * @throws SchemaMismatchError when the database is newer than this release.
 */
export async function migrate(
  db: Database,
  migrations: Migration[] = loadMigrations(),
): Promise<number[]> {
  const target = expectedVersion(migrations);
  const applied: number[] = [];
  for (const migration of migrations) {
    const did = await db.transaction(async (tx) => {
      await tx.query(MIGRATION_SQL.lock);
      await tx.query(MIGRATION_SQL.createTable);
      const current = await appliedVersion(tx);
      if (current > target) {
        throw new SchemaMismatchError(
          `The database schema is at version ${current}, newer than this release (${target}). Upgrade punctual.`,
        );
      }
      if (current >= migration.version) return false;
      // Version row first: a concurrent migrator that got past the lock would collide here.
      await tx.query(MIGRATION_SQL.insertVersion, [migration.version, migration.name]);
      for (const statement of splitStatements(migration.sql)) await tx.query(statement);
      return true;
    });
    if (did) applied.push(migration.version);
  }
  return applied;
}

/**
 * Refuses to run against an unmigrated or newer schema (OPS-5).
 * @throws SchemaMismatchError saying what to run.
 */
export async function assertSchemaCurrent(
  db: Database,
  migrations: Migration[] = loadMigrations(),
): Promise<void> {
  const current = await appliedVersion(db);
  const target = expectedVersion(migrations);
  if (current < target) {
    throw new SchemaMismatchError(
      `The database schema is at version ${current}; this release needs ${target}. ` +
        `Run \`punctual migrate\` (with the same DATABASE_URL), or start with --migrate.`,
    );
  }
  if (current > target) {
    throw new SchemaMismatchError(
      `The database schema is at version ${current}, newer than this release (${target}). Upgrade punctual.`,
    );
  }
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
