-- 0010 rate limits shared by every process (DEL-13) and a circuit per target host (CH-7).
--
--   punctual_rate_limits   one token bucket and concurrency cap per (tenant, key), refilled
--                          on the database clock: `tokens` as of `refilled_at`, at most
--                          `burst`, `rate_per_second` more each second;
--   punctual_reminders.rate_limit_key  the reminder's limiter (NULL: its channel name);
--   punctual_deliveries.limiter        the row's limiter, `tenant/key`, written when the row
--                          is planned (NULL on rows an older release planned: not limited);
--   punctual_circuits      one circuit per target host: consecutive transient failures,
--                          state, and when the next probe may go.
-- Expand only: new tables, new nullable columns; an older release ignores all of them
-- (and plans rows with a NULL limiter, which no limit applies to).
--
-- kind: expand
-- min_reader_version: 2

create table punctual_rate_limits (
  tenant text not null default 'default',
  key text not null,
  rate_per_second double precision not null check (rate_per_second > 0),
  burst integer not null check (burst >= 1),
  concurrency integer check (concurrency is null or concurrency >= 1),
  tokens double precision not null check (tokens >= 0),
  refilled_at timestamptz not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant, key)
);

alter table punctual_reminders add column rate_limit_key text;

alter table punctual_deliveries add column limiter text;

-- Waiting rows get their limiter (their channel name: no reminder had a key before).
update punctual_deliveries d
set limiter = s.tenant || '/' || d.channel
from punctual_schedules s
where s.id = d.schedule_id and d.state in ('pending', 'retry', 'paused');

create table punctual_circuits (
  host text primary key,
  state text not null default 'closed' check (state in ('closed', 'open', 'half_open')),
  -- Transient failures in a row (any process); a success sets it back to 0.
  failures integer not null default 0 check (failures >= 0),
  -- The backoff of the current opening, ms (doubles each failed probe).
  backoff_ms integer check (backoff_ms is null or backoff_ms > 0),
  -- When the next probe may go (open), or when the probe's turn lapses (half_open).
  retry_at timestamptz,
  probe_owner text,
  opened_at timestamptz,
  updated_at timestamptz not null default now(),
  constraint punctual_circuits_open check ((state = 'closed') = (retry_at is null))
);
