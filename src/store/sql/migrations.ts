/**
 * Statements of the migrator. Parameters are listed per statement.
 * Invariant: schema changes happen only under the advisory lock below, one transaction
 * per migration, version row first.
 */
export const MIGRATION_SQL = {
  /** Transaction-scoped advisory lock shared by every migrator (key: hashtext('punctual.migrate')). */
  lock: `select pg_advisory_xact_lock(hashtext('punctual.migrate'))`,
  createTable: `create table if not exists punctual_migrations (
    version integer primary key,
    name text not null,
    applied_at timestamptz not null default now()
  )`,
  tableExists: `select to_regclass('punctual_migrations') is not null as present`,
  currentVersion: `select max(version) as version from punctual_migrations`,
  /** $1 version, $2 name */
  insertVersion: `insert into punctual_migrations (version, name) values ($1, $2)`,
} as const;
