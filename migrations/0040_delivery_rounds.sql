-- 0040 rounds of a delivery's attempts (DEL-12, DEL-14).
--
--   punctual_deliveries.round        1 for a delivery's first attempts; a redrive starts
--                                    the next round (2, 3, …) with `maxAttempts` attempts.
--   punctual_deliveries.round_base   attempts spent (`attempt − deferrals`) before the
--                                    current round began: 0 in round 1.
-- The attempt number stays the fencing token and keeps counting across rounds; the view
-- reads "attempt 1 of 3, round 2" as `attempt − deferrals − round_base` of `max_attempts`,
-- never "6 of 3". Rows redriven before this migration read as round 1 with every attempt
-- counted, as before.
-- Expand only: new columns with defaults; an older release neither reads nor writes them
-- (its redrive leaves the round as it was, so such a row reads as the earlier round).
--
-- kind: expand
-- min_reader_version: 2
alter table punctual_deliveries
  add column if not exists round integer not null default 1 check (round >= 1),
  add column if not exists round_base integer not null default 0 check (round_base >= 0);
