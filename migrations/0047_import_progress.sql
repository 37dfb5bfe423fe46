-- 0047 an import's progress (API-5, OPS-12): `punctual_imports` gets a row when an import
-- starts, not only when it finished, so `GET /v1/imports/{id}` can follow an asynchronous
-- import chunk by chunk.
--
--   status            running, succeeded or failed (rows written before this migration
--                     finished: succeeded)
--   started_at        when the import started (NULL on older rows)
--   chunks_done/_total  chunks of changes committed, of how many (0 until compared)
--   changes_done/_total changes (creates, updates, cancels) written, of how many
--   error             why a failed import failed
--   details           the summary's lists once read: skipped events, warning texts, the
--                     calendar's zone and the zone floating times were read in (jsonb)
--   lease_owner       the process that runs a running import
--   lease_expires_at  it renews this while it runs; a running row past it is marked failed
--                     (abandoned) by the next reader or process start, never left running
-- Expand only: new nullable or defaulted columns and an index, which an older release
-- ignores; its imports still insert finished rows (status defaults to succeeded).
--
-- kind: expand
-- min_reader_version: 2

alter table punctual_imports
  add column if not exists status text not null default 'succeeded'
    check (status in ('running', 'succeeded', 'failed')),
  add column if not exists started_at timestamptz,
  add column if not exists chunks_done integer not null default 0 check (chunks_done >= 0),
  add column if not exists chunks_total integer not null default 0 check (chunks_total >= 0),
  add column if not exists changes_done integer not null default 0 check (changes_done >= 0),
  add column if not exists changes_total integer not null default 0 check (changes_total >= 0),
  add column if not exists error text,
  add column if not exists details jsonb,
  add column if not exists lease_owner text,
  add column if not exists lease_expires_at timestamptz;

create index if not exists punctual_imports_running
  on punctual_imports (lease_expires_at) where status = 'running';
