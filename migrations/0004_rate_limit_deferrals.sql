-- 0004 Retry-After deferrals counted apart from attempts (DEL-13).
--
-- A receiver's "try again later" (429 / 503 with Retry-After) spends no attempt, but it
-- has a budget, so a receiver that always answers so cannot keep a delivery forever:
--   deferrals         claims of this row that ended deferred by a Retry-After. `attempt`
--                     still counts every claim (it is the settle's fencing token, DEL-2);
--                     the attempts spent are `attempt - deferrals`;
--   first_attempt_at  when the row's first try began (set by the first settle or lease
--                     recovery; NULL: never tried to the end); the deferral budget's age
--                     counts from it.
-- A redrive starts both over. Expand only: new columns with a constant default or NULL
-- (no table rewrite); an older release ignores them.
--
-- kind: expand
-- min_reader_version: 2

alter table punctual_deliveries
  add column deferrals integer not null default 0
    constraint punctual_deliveries_deferrals check (deferrals >= 0);

alter table punctual_deliveries add column first_attempt_at timestamptz;
