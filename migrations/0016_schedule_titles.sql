-- 0016 schedule titles (API-1, API-3, API-5).
--
--   punctual_schedules.title  what a person calls the schedule (an imported event keeps
--                             its SUMMARY here), shown in lists; at most 500 characters,
--                             checked when the schedule is written; NULL: no title.
-- A title is part of the definition a create's Idempotency-Key and a re-import compare,
-- but plays no part in planning or sending.
-- Expand only: a new nullable column; an older release neither reads nor writes it (an
-- edit by an older release keeps the title as it was).
--
-- kind: expand
-- min_reader_version: 2
alter table punctual_schedules
  add column if not exists title text check (title is null or length(title) <= 500);
