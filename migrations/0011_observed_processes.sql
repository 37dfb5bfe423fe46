-- 0011 every process observable, settings that reach running processes (OPS-13, OPS-11),
-- retention of the attempt log on its own clock.
--
--   punctual_gauges            the cluster gauges (due backlog, overdue, retry waiting, oldest
--                              due, in doubt, dead, claimed), one row, computed once per
--                              interval by the process holding the lease `punctual.gauges`
--                              (punctual_leases) and served by every process from here;
--   punctual_settings_version  one row whose version moves whenever a database-held
--                              setting changes: a trigger on punctual_settings bumps it, and
--                              any other settings table hooks in with the same function
--                              (`punctual_bump_settings_version()`, a row-level trigger);
--   punctual_instances.settings_version   the settings version each process runs on;
--   punctual_attempts_ended_at  lets retention delete old attempts apart from their rows.
--
-- Expand only: two new tables, one nullable column, one index, a trigger that writes only
-- the new table. The previous release neither reads nor writes any of them; its writes to
-- punctual_settings bump the version like ours, so a newer process notices them.
--
-- kind: expand
-- min_reader_version: 2
create table if not exists punctual_gauges (
  id smallint primary key default 1 check (id = 1),
  computed_at timestamptz not null,
  computed_by text not null,
  due_backlog bigint not null,
  overdue bigint not null,
  retry_waiting bigint not null,
  in_doubt bigint not null,
  dead bigint not null,
  claimed bigint not null,
  oldest_due_at timestamptz
);

create table if not exists punctual_settings_version (
  id smallint primary key default 1 check (id = 1),
  version bigint not null,
  changed_at timestamptz not null default now()
);
insert into punctual_settings_version (id, version) values (1, 1) on conflict (id) do nothing;

create or replace function punctual_bump_settings_version() returns trigger
language plpgsql as $$
begin
  update punctual_settings_version set version = version + 1, changed_at = now() where id = 1;
  return null;
end
$$;

-- Row-level, so an `insert … on conflict do nothing` that changes nothing bumps nothing.
create or replace trigger punctual_settings_changed_rows
  after insert or delete on punctual_settings
  for each row execute function punctual_bump_settings_version();
create or replace trigger punctual_settings_changed_values
  after update on punctual_settings
  for each row when (old.value is distinct from new.value)
  execute function punctual_bump_settings_version();

alter table punctual_instances add column if not exists settings_version bigint;

create index if not exists punctual_attempts_ended_at on punctual_attempts (ended_at);
