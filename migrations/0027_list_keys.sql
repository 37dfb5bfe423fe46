-- 0027 list keys (API-3): the sort keys of the lists paged since 0025.
--
--   punctual_instances_started  (started_at, id): a page of `GET /v1/instances`, either
--                               direction, is a range scan of it.
--   punctual_imports            one row per calendar import that was written (not dry
--                               runs): `GET /v1/imports` pages it by id; its
--                               (tenant, source, id) index serves the source filter.
-- Expand only: a new index and a new table, which no older release reads; an older
-- release's imports simply leave no row.
--
-- kind: expand
-- min_reader_version: 2
create index if not exists punctual_instances_started on punctual_instances (started_at, id);

create table if not exists punctual_imports (
  id bigint generated always as identity primary key,
  tenant text not null,
  source text not null,
  -- When the import's writes finished (the database clock, or the pinned test clock).
  imported_at timestamptz not null default now(),
  events integer not null check (events >= 0),
  created integer not null check (created >= 0),
  updated integer not null check (updated >= 0),
  unchanged integer not null check (unchanged >= 0),
  cancelled integer not null check (cancelled >= 0),
  skipped integer not null check (skipped >= 0),
  warnings integer not null check (warnings >= 0)
);
create index if not exists punctual_imports_tenant on punctual_imports (tenant, id);
create index if not exists punctual_imports_source on punctual_imports (tenant, source, id);
