-- 0013 reminder kinds (DEL-11) and singleton task leases (OPS-7).
--
-- punctual_reminder_kinds: the registry of reminder kinds of a tenant. A reminder that
-- names a kind copies the kind's fields when its schedule is written (its own fields
-- win), so deliveries never read this table: editing or removing a kind changes the
-- reminders written after it, never the ones already stored. The `reminderKinds`
-- library option seeds it at start; `PUT /v1/reminder-kinds/{key}` writes it.
--
-- punctual_task_leases: one row per singleton periodic task. A process runs occurrence
-- `occurrence_at` of a task only after moving the row to that occurrence, which it can do
-- only when the row holds an earlier occurrence and the previous holder's lease has
-- ended (database clock), so one process runs each occurrence and two runs of one task
-- never overlap across the cluster.
--
-- Expand only: two new tables. A release that does not know them never reads them.
--
-- kind: expand
-- min_reader_version: 2

create table if not exists punctual_reminder_kinds (
  tenant text not null,
  key text not null,
  channel text not null,
  offset_duration text not null,
  target jsonb check (target is null or jsonb_typeof(target) = 'object'),
  template jsonb check (template is null or jsonb_typeof(template) = 'object'),
  series_only boolean not null default false,
  enabled boolean not null default true,
  version integer not null default 1,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant, key)
);

create table if not exists punctual_task_leases (
  name text primary key,
  occurrence_at timestamptz not null,
  owner text not null,
  expires_at timestamptz not null
);
