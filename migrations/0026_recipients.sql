-- 0026 recipient registry (API-10).
--
--   punctual_recipients  one row per (tenant, id): the people and systems reminders are
--                        for. `tzid` is the recipient's IANA zone; `targets` one target per
--                        channel name (`{ "email": { "to": … }, "webhook": { "url": … } }`),
--                        each checked by its channel when written; `attributes` free JSON
--                        of the caller's; `preferences` `{ optOut?, quietHours? }`.
--                        `version` grows by one on each write that changes the row and
--                        stays put on one that changes nothing.
-- Ids are compared and sorted byte-wise (collation "C") so pages come in the same order
-- on every engine and locale, and the primary key serves the keyset pages of
-- `GET /v1/recipients` in both directions. Nothing reads this table to send yet: it is
-- shaped so that schedules for a recipient and opt-outs at send time can follow.
-- Expand only: a new table; an older release never reads it.
--
-- kind: expand
-- min_reader_version: 2
create table if not exists punctual_recipients (
  tenant text not null,
  id text collate "C" not null
    check (id ~ '^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,199}$'),
  tzid text not null check (char_length(tzid) between 1 and 64),
  targets jsonb not null default '{}'::jsonb check (jsonb_typeof(targets) = 'object'),
  attributes jsonb not null default '{}'::jsonb check (jsonb_typeof(attributes) = 'object'),
  preferences jsonb not null default '{}'::jsonb check (jsonb_typeof(preferences) = 'object'),
  version integer not null default 1 check (version >= 1),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant, id)
);
