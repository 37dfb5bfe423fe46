-- 0002 claimable by the row's own state (DEL-3, DEL-10, REC-6).
--
-- Admission used to join the schedule and the reminder of every candidate row; now
-- everything it depends on is on the delivery row, kept there by the statement that
-- changes it, in the same transaction:
--   expires_at  the schedule's expiry, copied (NULL: none);
--   stale_at    for a never-tried row of a recurring schedule that the misfire policy has
--               not judged yet: due_at + grace; past it the row waits for the misfire
--               sweep (NULL: one-offs, rows judged late, rows tried at least once,
--               redriven rows);
--   paused      a waiting state outside the claim index: the waiting rows of a paused or
--               quarantined (invalid) schedule.
--   claimable_at run_at while the row is pending or retry (generated), the claim's key.
-- The claim then reads one table through one partial index, whatever the statistics say.
-- New nullable columns, a wider CHECK, new indexes: each alone an older release could
-- ignore, but see Compatibility below.
--
-- Compatibility (OPS-10): contract. It drops the previous claim index and replaces the
-- state CHECK, and above all admission now reads only the row's own state: a release
-- built for schema 1 pauses a schedule without holding its waiting rows and plans rows
-- without expires_at / stale_at, so a release built for 2 beside it would send a paused
-- schedule's reminders. Releases built for schema 1 may not run on it.
-- kind: contract
-- min_reader_version: 2

alter table punctual_deliveries add column expires_at timestamptz;

alter table punctual_deliveries add column stale_at timestamptz;

alter table punctual_deliveries drop constraint punctual_deliveries_state_check;

alter table punctual_deliveries add constraint punctual_deliveries_state_check check (state in
  ('pending', 'claimed', 'retry', 'paused', 'sent', 'dead', 'in_doubt', 'skipped', 'cancelled'));

-- The claim's key: run_at while the row waits to be claimed (pending, retry), else NULL.
-- Generated, so every statement of every release keeps it right. The claim index holds
-- exactly the non-NULL values: the claim names no state, only `claimable_at <= now`, and
-- the planner's estimate of it never collapses to "one row" the way a state filter's does
-- on stale statistics (so it never prefers sorting the whole due backlog).
alter table punctual_deliveries add column claimable_at timestamptz
  generated always as (case when state in ('pending', 'retry') then run_at end) stored;

-- Backfill the waiting rows (only waiting rows are admitted, so only theirs matter).
update punctual_deliveries d
set expires_at = s.expires_at,
    stale_at = case when s.recurring and d.attempt = 0 and not d.late
                    then d.due_at + make_interval(secs => s.grace_ms::double precision / 1000) end,
    state = case when s.state = 'active' then d.state else 'paused' end
from punctual_schedules s
where s.id = d.schedule_id and d.state in ('pending', 'retry');

-- A waiting row whose reminder is gone could never be sent (the old claim skipped it).
update punctual_deliveries d
set state = 'cancelled', reason = 'reminder_removed', finished_at = now(), updated_at = now()
where d.state in ('pending', 'retry', 'paused')
  and not exists (select 1 from punctual_reminders r
                  where r.schedule_id = d.schedule_id and r.key = d.reminder_key);

-- DEL-2 / DEL-3: the claim index (replaces punctual_deliveries_claim, which only the
-- previous release's claim read).
create index punctual_deliveries_claimable
  on punctual_deliveries (claimable_at, id) where claimable_at is not null;

drop index punctual_deliveries_claim;

-- REC-6: unjudged rows in the order they go stale (the misfire sweep's index).
create index punctual_deliveries_stale
  on punctual_deliveries (stale_at, id) where state = 'pending' and stale_at is not null;

-- REC-6: waiting rows of schedules with an expiry, in expiry order (the expiry sweep's index).
create index punctual_deliveries_expiry
  on punctual_deliveries (expires_at, id) where state in ('pending', 'retry') and expires_at is not null;

-- Open problems for the gauges: in-doubt rows and dead letters nobody acknowledged.
create index punctual_deliveries_open_problems
  on punctual_deliveries (state)
  where state = 'in_doubt' or (state = 'dead' and reason is distinct from 'resolved');

-- Retention deletes finished rows oldest first; finished rows are most of the table.
create index punctual_deliveries_finished_at
  on punctual_deliveries (updated_at, id) where state in ('sent', 'skipped', 'cancelled');

-- A claimed row that goes back to waiting (a retry, a recovered lease, a released claim)
-- lands where its schedule is now: held (`paused`) when the schedule was paused or
-- quarantined meanwhile, `cancelled` when it was cancelled or the reminder removed; its
-- expiry follows the schedule's, and a released never-tried row gets its grace limit back
-- (the claim cleared it). Every such statement gets this, whichever release runs it.
create function punctual_deliveries_rewait() returns trigger language plpgsql as $$
declare
  sched record;
begin
  select s.state, s.expires_at, s.recurring, s.grace_ms into sched
  from punctual_schedules s where s.id = new.schedule_id;
  new.expires_at := sched.expires_at;
  new.stale_at := case when sched.recurring and new.attempt = 0 and not new.late
    then new.due_at + make_interval(secs => sched.grace_ms::double precision / 1000) end;
  if sched.state in ('paused', 'invalid') then
    new.state := 'paused';
  elsif sched.state is null or sched.state = 'cancelled' then
    new.state := 'cancelled';
    new.reason := 'schedule_cancelled';
    new.finished_at := new.updated_at;
  elsif not exists (select 1 from punctual_reminders r
                    where r.schedule_id = new.schedule_id and r.key = new.reminder_key) then
    new.state := 'cancelled';
    new.reason := 'reminder_removed';
    new.finished_at := new.updated_at;
  end if;
  return new;
end
$$;

create trigger punctual_deliveries_rewait
  before update of state on punctual_deliveries
  for each row
  when (old.state = 'claimed' and new.state in ('pending', 'retry'))
  execute function punctual_deliveries_rewait();
