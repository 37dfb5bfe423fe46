-- 0014 operator actions (API-9): the deliveries a "trigger now" created.
--
-- A triggered delivery is one extra send of a schedule, outside its recurrence, with its
-- own delivery key (derived from the trigger id, never equal to an occurrence's key). It
-- is recorded here so that an edit's realign (DEL-9), which removes waiting rows that the
-- new definition does not produce, leaves it alone, and so an operator can tell it apart.
-- Rows go with their delivery and their schedule (purge, retention).
-- Expand only: a new table; an older release never reads it (its realign would remove a
-- triggered row still waiting, as if it were an occurrence gone from the rule).
--
-- kind: expand
-- min_reader_version: 2
create table if not exists punctual_triggers (
  delivery_id bigint primary key references punctual_deliveries (id) on delete cascade,
  schedule_id uuid not null references punctual_schedules (id) on delete cascade,
  trigger_id text not null,
  created_at timestamptz not null default now()
);
create index if not exists punctual_triggers_schedule on punctual_triggers (schedule_id, trigger_id);
