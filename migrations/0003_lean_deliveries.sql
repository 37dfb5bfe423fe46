-- 0003 fewer indexes on the due-date table's hot path.
--
-- Every claim and every settle updates a delivery's state, so each such update writes an
-- entry into every full index of punctual_deliveries (no HOT update is possible: state is
-- indexed). Two full indexes add nothing the others do not:
--   punctual_deliveries_state (state, updated_at): its readers now use the partial indexes
--     of 0002 (finished rows, open problems, claimable, stale, expiry, lease);
--   the unique (schedule_id, reminder_key, occurrence_at): the delivery key is a hash of
--     exactly these three, and is unique itself, so the second unique index enforces
--     nothing more (planning's ON CONFLICT DO NOTHING names no constraint).
-- Contract only: no release reads either index by name.
--
-- Compatibility (OPS-10): contract, yet no reader loses anything it uses: releases built
-- for schema 2 plan with a bare ON CONFLICT DO NOTHING (the unique delivery key still
-- holds) and name neither index, so they still run on it.
-- kind: contract
-- min_reader_version: 2
drop index if exists punctual_deliveries_state;
alter table punctual_deliveries
  drop constraint if exists punctual_deliveries_schedule_id_reminder_key_occurrence_at_key;
