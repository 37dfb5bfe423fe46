-- 0028 circuits per tenant and target host (CH-7).
--
--   punctual_tenant_circuits  one circuit per (tenant, target host): one tenant's failing
--                             deliveries to a host open that tenant's circuit only, so they
--                             no longer hold back another tenant's deliveries to the host.
-- Expand only: a new table. An older release still running keeps reading and writing
-- punctual_circuits (per host), which this release no longer touches; a later contract
-- migration drops it. Circuit state is transient (consecutive failures and the wait before
-- a probe), so it is not carried over: a circuit open under the older release starts
-- closed here, and a host that still fails opens it again after `circuitFailures` sends.
--
-- kind: expand
-- min_reader_version: 2

create table if not exists punctual_tenant_circuits (
  tenant text not null,
  host text not null,
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
  primary key (tenant, host),
  constraint punctual_tenant_circuits_open check ((state = 'closed') = (retry_at is null))
);
