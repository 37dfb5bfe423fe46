-- 0029 trigram indexes for the schedule search (API-3).
--
--   punctual_schedules_title_trgm        GIN (lower(title) gin_trgm_ops)
--   punctual_schedules_external_id_trgm  GIN (lower(external_id) gin_trgm_ops)
--
-- `GET /v1/schedules?q=` matches a case-insensitive substring of the title or the external
-- id (`lower(title) like '%…%'`). Without an index that walks the tenant's schedules until
-- it has a page (linear in the table); with these, a search term of three or more
-- characters reads only the rows holding its trigrams (pg_trgm, a PostgreSQL contrib
-- module).
--
-- Only where pg_trgm can be had: the extension must be available on the server
-- (`pg_available_extensions`; Debian's postgresql package ships it) and this role must be
-- allowed to create it (pg_trgm is a trusted extension since PostgreSQL 13: the CREATE
-- privilege on the database suffices). Otherwise this migration records itself and does
-- nothing, with a NOTICE; the search gives the same answers, reading without an index.
-- The embedded engine (PGlite) does not load the extension, so it takes that path: an
-- index of an extension the engine has not loaded would stop an older release, which
-- never loads it, from writing schedules in the same data folder (OPS-10).
--
-- On a large table, or when the migrating role may not create the extension, run before
-- (or after) this migration, as a role that may:
--   create extension if not exists pg_trgm;
--   create index concurrently if not exists punctual_schedules_title_trgm
--     on punctual_schedules using gin (lower(title) gin_trgm_ops);
--   create index concurrently if not exists punctual_schedules_external_id_trgm
--     on punctual_schedules using gin (lower(external_id) gin_trgm_ops);
-- this migration then finds them and does nothing.
--
-- Expand only: new indexes; an older release is unaffected (it searches with strpos,
-- which reads without them).
--
-- kind: expand
-- min_reader_version: 2
do $$
declare
  ops text;
begin
  if not exists (select 1 from pg_available_extensions where name = 'pg_trgm') then
    raise notice 'pg_trgm is not available here: the schedule search reads without an index';
    return;
  end if;
  begin
    create extension if not exists pg_trgm;
  exception when insufficient_privilege then
    raise notice 'may not create the extension pg_trgm (%): the schedule search reads without an index', sqlerrm;
    return;
  end;
  -- The operator class in whichever schema holds the extension (not always on the path).
  select format('%I.gin_trgm_ops', n.nspname) into ops
  from pg_extension e join pg_namespace n on n.oid = e.extnamespace
  where e.extname = 'pg_trgm';
  execute format('create index if not exists punctual_schedules_title_trgm
                    on punctual_schedules using gin (lower(title) %s)', ops);
  execute format('create index if not exists punctual_schedules_external_id_trgm
                    on punctual_schedules using gin (lower(external_id) %s)', ops);
end $$;
