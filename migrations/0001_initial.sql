-- 0001 initial schema: schedules, reminders, deliveries (the due-date table), attempts,
-- scheduler instances, cluster-wide leases. PostgreSQL 15 SQL only (also runs on PGlite).
-- Invariants are CHECK constraints, so no code path can store an impossible row.
--
-- Compatibility (OPS-10): the first schema; no older release exists.
-- kind: expand
-- min_reader_version: 1

create table punctual_schedules (
  id uuid primary key default gen_random_uuid(),
  tenant text not null default 'default',
  source text,
  external_id text,
  idempotency_key text,
  request_hash text,
  state text not null default 'active'
    check (state in ('active', 'paused', 'cancelled', 'invalid')),
  invalid_reason text,
  version integer not null default 1 check (version >= 1),
  dtstart text not null,
  tzid text not null default 'UTC',
  rrule text,
  rdate text[] not null default '{}',
  exdate text[] not null default '{}',
  recurring boolean not null,
  ends_at timestamptz,
  expires_at timestamptz,
  dst_gap text not null default 'shift' check (dst_gap in ('shift', 'skip')),
  dst_overlap text not null default 'earlier' check (dst_overlap in ('earlier', 'later')),
  misfire text not null default 'skip' check (misfire in ('skip', 'latest', 'all')),
  grace_ms integer not null default 900000 check (grace_ms >= 0),
  perpetual boolean not null default false,
  payload jsonb not null default 'null'::jsonb,
  -- Planning watermark (DEL-7): deliveries due before it have been materialized.
  planned_until timestamptz,
  -- The recurrence has no occurrence left to plan.
  plan_complete boolean not null default false,
  -- REC-5: when the 366-day cap of an unbounded, non-perpetual series was first logged.
  cap_logged_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  cancelled_at timestamptz,
  -- Who cancelled: a person (API, CLI) or an import that no longer found the event.
  -- Only the latter is undone when the event comes back.
  cancelled_by text check (cancelled_by in ('user', 'import')),
  constraint punctual_schedules_invalid_reason
    check ((state = 'invalid') = (invalid_reason is not null)),
  constraint punctual_schedules_cancelled_at
    check ((state = 'cancelled') = (cancelled_at is not null))
);
create unique index punctual_schedules_idempotency
  on punctual_schedules (tenant, idempotency_key) where idempotency_key is not null;
create unique index punctual_schedules_external
  on punctual_schedules (tenant, source, external_id) where external_id is not null;
create index punctual_schedules_plan
  on punctual_schedules (planned_until nulls first) where state = 'active' and not plan_complete;
create index punctual_schedules_tenant_created on punctual_schedules (tenant, created_at, id);

create table punctual_reminders (
  schedule_id uuid not null references punctual_schedules (id) on delete cascade,
  key text not null,
  offset_duration text not null,
  channel text not null,
  target jsonb not null default '{}'::jsonb,
  -- DEL-6: what recovery does after a lost lease; null = the channel's default.
  on_lost_lease text check (on_lost_lease in ('retry', 'in_doubt')),
  max_attempts integer not null default 5 check (max_attempts between 1 and 100),
  primary key (schedule_id, key)
);

create table punctual_deliveries (
  id bigint generated always as identity primary key,
  delivery_key text not null unique,
  schedule_id uuid not null references punctual_schedules (id) on delete cascade,
  reminder_key text not null,
  occurrence_at timestamptz not null,
  due_at timestamptz not null,
  -- When the row is next eligible: due_at, then the retry time.
  run_at timestamptz not null,
  state text not null default 'pending' check (state in
    ('pending', 'claimed', 'retry', 'sent', 'dead', 'in_doubt', 'skipped', 'cancelled')),
  -- Number of claims so far; the current claim's number is the fencing token (DEL-2).
  attempt integer not null default 0 check (attempt >= 0),
  -- Real failures so far (DEL-4); rate-limited replies do not count.
  failures integer not null default 0 check (failures >= 0 and failures <= attempt),
  max_attempts integer not null default 5 check (max_attempts >= 1),
  channel text not null,
  on_lost_lease text not null check (on_lost_lease in ('retry', 'in_doubt')),
  lease_owner text,
  lease_expires_at timestamptz,
  claimed_at timestamptz,
  sent_at timestamptz,
  finished_at timestamptz,
  reason text,
  last_error text,
  late boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (schedule_id, reminder_key, occurrence_at),
  constraint punctual_deliveries_lease
    check ((state = 'claimed') = (lease_owner is not null and lease_expires_at is not null and claimed_at is not null)),
  constraint punctual_deliveries_sent_at check ((state = 'sent') = (sent_at is not null)),
  constraint punctual_deliveries_finished
    check ((state in ('dead', 'in_doubt', 'skipped', 'cancelled')) = (finished_at is not null)),
  constraint punctual_deliveries_reason
    check (state not in ('dead', 'in_doubt', 'skipped', 'cancelled') or reason is not null)
);
-- The claim's index: admissible rows in claim order (docs/architecture.md, decision 3).
create index punctual_deliveries_claim
  on punctual_deliveries (run_at, id) where state in ('pending', 'retry');
create index punctual_deliveries_lease
  on punctual_deliveries (lease_expires_at) where state = 'claimed';
create index punctual_deliveries_schedule on punctual_deliveries (schedule_id, state);
create index punctual_deliveries_state on punctual_deliveries (state, updated_at);

create table punctual_attempts (
  id bigint generated always as identity primary key,
  delivery_id bigint not null references punctual_deliveries (id) on delete cascade,
  attempt integer not null,
  worker text not null,
  started_at timestamptz not null,
  ended_at timestamptz not null,
  outcome text not null check (outcome in
    ('sent', 'transient', 'permanent', 'rate_limited', 'lease_expired', 'timeout')),
  -- False when the settle found the lease lost: the try happened, it changed nothing.
  settled boolean not null default true,
  status integer,
  message_id text,
  error text
);
create index punctual_attempts_delivery on punctual_attempts (delivery_id, attempt);

create table punctual_instances (
  id text primary key,
  host text not null,
  pid integer not null,
  version text not null,
  role text not null,
  started_at timestamptz not null default now(),
  last_pass_at timestamptz,
  last_tick_ms double precision,
  stopped_at timestamptz
);

-- Cluster-wide singleton leases (DEL-8): one holder per name until expires_at.
create table punctual_leases (
  name text primary key,
  owner text not null,
  expires_at timestamptz not null
);

-- Settings kept in the database and shared by every process (e.g. the generated default
-- webhook signing secret).
create table punctual_settings (
  key text primary key,
  value jsonb not null,
  updated_at timestamptz not null default now()
);
