-- 0035 schedules for recipients (API-11, API-12): a schedule sent to each of a list of
-- recipients, optionally in each one's own zone (floating), with a category per reminder.
--
--   punctual_schedule_audiences   one row per schedule that is sent to recipients; its
--                                 presence takes the schedule out of the schedule-level
--                                 plan sweep (it is planned per recipient instead).
--                                 `floating`: DTSTART and RRULE are read in each
--                                 recipient's own zone (RFC 5545 floating time).
--   punctual_schedule_recipients  the recipients of such a schedule, each with its own
--                                 planning watermark (`planned_until`; NULL: never
--                                 planned, so planned like a new schedule; 'infinity':
--                                 nothing left). A recipient removed from the registry
--                                 leaves every schedule with it (ON DELETE CASCADE).
--   punctual_deliveries.recipient_id  whom a delivery is for (NULL: a schedule without
--                                 recipients); the delivery key includes it.
--   punctual_deliveries.bypassed  what a critical reminder went past for this delivery
--                                 (`OPTED_OUT`, `QUIET_HOURS`), written when it did.
--   punctual_reminders.category   the reminder's category, which recipients may opt out of.
-- Expand only: new tables and nullable columns; an older release never reads them (and
-- plans every schedule itself: run audiences only once every process is at this release).
--
-- kind: expand
-- min_reader_version: 2

create table if not exists punctual_schedule_audiences (
  schedule_id uuid primary key references punctual_schedules (id) on delete cascade,
  floating boolean not null default false
);

create table if not exists punctual_schedule_recipients (
  schedule_id uuid not null references punctual_schedule_audiences (schedule_id) on delete cascade,
  tenant text not null,
  recipient_id text collate "C" not null,
  planned_until timestamptz,
  added_at timestamptz not null default now(),
  primary key (schedule_id, recipient_id),
  foreign key (tenant, recipient_id) references punctual_recipients (tenant, id) on delete cascade
);
-- The per-recipient plan sweep: memberships whose watermark is near, oldest first.
create index if not exists punctual_schedule_recipients_plan
  on punctual_schedule_recipients (planned_until nulls first);
-- A recipient's schedules (zone change, removal from the registry).
create index if not exists punctual_schedule_recipients_recipient
  on punctual_schedule_recipients (tenant, recipient_id);

alter table punctual_deliveries add column if not exists recipient_id text collate "C";
alter table punctual_deliveries add column if not exists bypassed text;
alter table punctual_reminders add column if not exists category text;
-- A recipient's waiting rows (realign on a zone change, removal): only rows for recipients.
create index if not exists punctual_deliveries_recipient_waiting
  on punctual_deliveries (recipient_id, schedule_id)
  where recipient_id is not null and state in ('pending', 'retry', 'paused');
