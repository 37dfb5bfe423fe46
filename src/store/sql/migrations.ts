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
  /**
   * OPS-10: the columns this migrator records beside each version (added by its own
   * bootstrap, expand-only: an older migrator inserts (version, name) and leaves them NULL).
   * No parameters; one row per column present.
   */
  compatColumns: `select attname as name from pg_attribute
    where attrelid = to_regclass('punctual_migrations')
      and attname in ('min_reader_version', 'kind') and not attisdropped`,
  addMinReaderColumn: `alter table punctual_migrations add column if not exists min_reader_version integer`,
  addKindColumn: `alter table punctual_migrations add column if not exists kind text`,
  /**
   * Fills what a migrator without the columns left NULL, from this release's files.
   * $1 int[] versions, $2 int[] min reader versions, $3 text[] kinds (same length).
   */
  backfillCompat: `update punctual_migrations m
    set min_reader_version = v.min_reader, kind = v.kind
    from unnest($1::int[], $2::int[], $3::text[]) as v(version, min_reader, kind)
    where m.version = v.version and m.min_reader_version is null`,
  /**
   * OPS-10: the oldest release version that may run against this database: the highest
   * min_reader_version recorded, a row without one counting as its own version (an
   * unknown migration is assumed to break every older reader). Needs the columns above.
   */
  minReaderVersion: `select max(coalesce(min_reader_version, version)) as min_reader
    from punctual_migrations`,
  /** $1 version, $2 name */
  insertVersion: `insert into punctual_migrations (version, name) values ($1, $2)`,
  /** $1 version, $2 name, $3 min reader version (NULL: not declared), $4 kind (NULL: not declared) */
  insertVersionCompat: `insert into punctual_migrations (version, name, min_reader_version, kind)
    values ($1, $2, $3, $4)`,
} as const;
