-- 0015 API keys per tenant (API-2).
--
-- `PUNCTUAL_API_KEY` stays the operator's key (every tenant, every route). Keys created
-- through `POST /v1/api-keys` each belong to one tenant and carry scopes:
--   read   GET routes of that tenant's schedules, deliveries, attempts;
--   write  read, plus creating, editing, cancelling, pausing, resuming, importing,
--          redriving and resolving;
--   admin  write, plus creating, listing and revoking that tenant's keys.
-- Only a SHA-256 of the key is stored (the key is shown once, at creation); `prefix` is
-- its first characters, shown in lists so a person can tell keys apart.
-- Expand only: a new table no earlier release reads.
--
-- kind: expand
-- min_reader_version: 2
create table if not exists punctual_api_keys (
  id uuid primary key default gen_random_uuid(),
  tenant text not null check (length(tenant) between 1 and 64),
  name text not null check (length(name) between 1 and 200),
  scopes text[] not null check (scopes <@ array['read', 'write', 'admin']::text[] and cardinality(scopes) > 0),
  key_hash text not null unique,
  prefix text not null,
  created_at timestamptz not null default now(),
  revoked_at timestamptz,
  last_used_at timestamptz
);

create index if not exists punctual_api_keys_tenant on punctual_api_keys (tenant, created_at);
