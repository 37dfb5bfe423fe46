-- 0009 quiet hours (DEL-15) and a bounded, paced catch-up (DEL-17).
--
--   punctual_reminders.quiet_hours   { tzid, start, end, days? } (validated when the
--                                    schedule is written); NULL: no quiet window;
--   punctual_reminders.priority      'critical' bypasses the quiet window; NULL: normal;
--   punctual_schedules.catch_up      { windowMs?, paceMs? } for misfire 'all': missed
--                                    occurrences older than windowMs are skipped as stale,
--                                    the rest spread paceMs apart; NULL: no window, no pacing;
--   punctual_deliveries.deferred_until  the instant a delivery due inside a quiet window
--                                    was deferred to (run_at starts there; due_at is kept);
--   punctual_deliveries.deferred_reason why ('QUIET_HOURS'); both NULL: not deferred.
-- The misfire grace of a deferred row counts from deferred_until, so the trigger that
-- gives a released row its grace limit back reads it too.
-- Expand only: new nullable columns and a trigger function that reads the same as before
-- for every row without a deferral; an older release ignores the columns (a row it plans
-- is never deferred).
--
-- kind: expand
-- min_reader_version: 2

alter table punctual_reminders add column quiet_hours jsonb
  check (quiet_hours is null or jsonb_typeof(quiet_hours) = 'object');

alter table punctual_reminders add column priority text
  check (priority is null or priority in ('normal', 'critical'));

alter table punctual_schedules add column catch_up jsonb
  check (catch_up is null or jsonb_typeof(catch_up) = 'object');

alter table punctual_deliveries add column deferred_until timestamptz;

alter table punctual_deliveries add column deferred_reason text;

alter table punctual_deliveries add constraint punctual_deliveries_deferred
  check ((deferred_until is null) = (deferred_reason is null));

create or replace function punctual_deliveries_rewait() returns trigger language plpgsql as $$
declare
  sched record;
begin
  select s.state, s.expires_at, s.recurring, s.grace_ms into sched
  from punctual_schedules s where s.id = new.schedule_id;
  new.expires_at := sched.expires_at;
  new.stale_at := case when sched.recurring and new.attempt = 0 and not new.late
    then coalesce(new.deferred_until, new.due_at)
         + make_interval(secs => sched.grace_ms::double precision / 1000) end;
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
