-- 0050 the delivery queue (issue 20, item 3): a narrow table of the claimable and leased
-- deliveries beside the ledger, so the hot path writes each index entry once.
--
--   punctual_queue   one row per delivery the claim may take (a `pending` / `retry` ledger
--                    row that is not a digest member: `claimable_at` is not NULL) and per
--                    delivery a worker holds. Its lease (`lease_owner`, `lease_expires_at`,
--                    `claimed_at`) and fencing token (`attempt`, the claim's attempt) live
--                    here only; the ledger row keeps its waiting state and the attempt
--                    before the claim until the settle writes it once with the outcome.
--                    One full index `(run_at, id)`, fillfactor 50: the claim and the lease
--                    renewals change no indexed column and find room on the page, so they
--                    are HOT updates; the claim steps over the leased rows it meets.
--
-- A delivery reads as `claimed` (API, CLI, counts, metrics, dashboard) while its queue row
-- holds a lease: the view `punctual_delivery_rows` overlays the lease on the ledger row.
--
-- Who writes the queue (docs/architecture.md, "The delivery queue"):
-- - the hot path (src/store/deliveries/claim.ts: claim, renewal, settle, release, recovery)
--   writes it directly; a settle or a recovery writes the ledger row once and advances its
--   `attempt` to the claim's, which is how the triggers below tell it from other writes;
-- - every other write of a ledger row (planning inserts, pause, resume, cancel, realign,
--   misfire, quiet-hours and rate-limit deferrals, operator actions, retention) leaves it
--   to the trigger `punctual_deliveries_queue_sync`, which keeps one queue row per
--   claimable ledger row and none for any other;
-- - the trigger `punctual_deliveries_queue_guard` leaves a held delivery's ledger row alone
--   for those other writes, as the `claimed` state did (a statement that pauses, cancels,
--   realigns or deletes waiting rows skips it), and the trigger
--   `punctual_deliveries_rewait` judges a row that comes back to waiting against its
--   schedule as it is now (DEL-10).
--
-- Compatibility (OPS-10): contract. A release built for 48 claims from the ledger's claim
-- index (dropped here) and would take rows a new worker holds in the queue (their ledger
-- row says `pending`); its settle and recovery know no queue. Releases built before 50 may
-- not run on it. Roll: stop every older worker (a graceful stop releases unstarted claims,
-- OPS-6, and settles the sends in flight), migrate, start the new release. A row still
-- `claimed` by a crashed worker moves into the queue with its lease and attempt, so
-- recovery judges it when the lease runs out (DEL-6). docs/production.md (upgrades).
-- kind: contract
-- min_reader_version: 50

create table punctual_queue (
  id bigint primary key,
  run_at timestamptz not null,
  attempt integer not null check (attempt >= 0),
  channel text not null,
  limiter text,
  expires_at timestamptz,
  stale_at timestamptz,
  lease_owner text,
  lease_expires_at timestamptz,
  claimed_at timestamptz,
  constraint punctual_queue_lease
    check ((lease_owner is null) = (lease_expires_at is null)
           and (lease_owner is null) = (claimed_at is null))
) with (fillfactor = 50);

create index punctual_queue_run on punctual_queue (run_at, id) with (fillfactor = 50);

-- The old trigger judged a `claimed` row coming back to waiting; no row is `claimed` after
-- the move below, and the new one (at the end) judges every return to waiting.
drop trigger if exists punctual_deliveries_rewait on punctual_deliveries;

-- The waiting rows the claim may take.
insert into punctual_queue (id, run_at, attempt, channel, limiter, expires_at, stale_at)
select d.id, d.claimable_at, d.attempt, d.channel, d.limiter, d.expires_at, d.stale_at
from punctual_deliveries d
where d.claimable_at is not null;

-- DEL-6: a row still claimed (its worker crashed, or did not drain) moves with its lease
-- and fencing token; its ledger row waits as it did before the claim.
insert into punctual_queue
  (id, run_at, attempt, channel, limiter, expires_at, stale_at, lease_owner, lease_expires_at,
   claimed_at)
select d.id, d.run_at, d.attempt, d.channel, d.limiter, d.expires_at, null, d.lease_owner,
       d.lease_expires_at, d.claimed_at
from punctual_deliveries d
where d.state = 'claimed';

update punctual_deliveries d
set state = case when d.attempt - 1 = 0 then 'pending' else 'retry' end,
    attempt = d.attempt - 1,
    lease_owner = null, lease_expires_at = null, claimed_at = null
where d.state = 'claimed';

-- The ledger's claim and lease indexes: the queue serves both now.
drop index if exists punctual_deliveries_claimable;
drop index if exists punctual_deliveries_lease;

-- A held delivery's ledger row is left alone by every write but its holder's (whose
-- settle or recovery advances `attempt`): the update or delete of that row is skipped, as
-- a `claimed` row was skipped by the state filters of those statements.
--
-- The claim writes only the queue row, so "held" is judged on it, and a claim still in
-- progress must be seen: a row that committed claims do not show as held is locked in the
-- queue (FOR UPDATE waits for a claim of it to commit or roll back) and judged again on
-- its newest version. Without the lock, a pause racing a claim wrote `paused` on a row the
-- claim then held, and its worker sent it although the schedule was paused. The rows
-- committed claims show as held are skipped without a lock (the statements that change
-- waiting rows also leave them out), so a write waits only for a claim in progress, which
-- touches no ledger row.
--
-- A schedule's purge (the cascade of its delete, trigger depth > 1) deletes its held rows
-- too, as it deleted `claimed` rows before 0050: the in-flight send's settle then finds
-- no row and changes nothing, and the queue row goes with the ledger row.
create function punctual_deliveries_queue_guard() returns trigger language plpgsql as $$
declare
  held boolean;
begin
  if tg_op = 'DELETE' and pg_trigger_depth() > 1 then
    return old;
  end if;
  if exists (select 1 from punctual_queue q where q.id = old.id and q.lease_owner is not null) then
    return null;
  end if;
  select q.lease_owner is not null into held from punctual_queue q where q.id = old.id for update;
  if coalesce(held, false) then
    return null;
  end if;
  if tg_op = 'DELETE' then
    return old;
  end if;
  return new;
end
$$;

create trigger punctual_deliveries_queue_guard
  before update on punctual_deliveries
  for each row
  when (old.state in ('pending', 'retry') and new.attempt = old.attempt
        and (old.state, old.run_at, old.due_at, old.expires_at, old.stale_at, old.channel,
             old.limiter, old.late, old.max_attempts, old.on_lost_lease)
            is distinct from
            (new.state, new.run_at, new.due_at, new.expires_at, new.stale_at, new.channel,
             new.limiter, new.late, new.max_attempts, new.on_lost_lease))
  execute function punctual_deliveries_queue_guard();

create trigger punctual_deliveries_queue_guard_delete
  before delete on punctual_deliveries
  for each row
  when (old.state in ('pending', 'retry'))
  execute function punctual_deliveries_queue_guard();

-- One queue row per claimable ledger row, none for any other, for every write but the
-- holder's (which writes the queue itself).
create function punctual_deliveries_queue_sync() returns trigger language plpgsql as $$
begin
  if new.claimable_at is null then
    delete from punctual_queue q where q.id = new.id and q.lease_owner is null;
  else
    insert into punctual_queue as q (id, run_at, attempt, channel, limiter, expires_at, stale_at)
    values (new.id, new.claimable_at, new.attempt, new.channel, new.limiter, new.expires_at,
            new.stale_at)
    on conflict (id) do update
      set run_at = excluded.run_at, attempt = excluded.attempt, channel = excluded.channel,
          limiter = excluded.limiter, expires_at = excluded.expires_at,
          stale_at = excluded.stale_at
      where q.lease_owner is null;
  end if;
  return null;
end
$$;

-- Inserts and deletes come in bulk (planning, imports, retention): one call per statement,
-- over the statement's rows (a transition table), not one per row.
create function punctual_deliveries_queue_insert() returns trigger language plpgsql as $$
begin
  insert into punctual_queue (id, run_at, attempt, channel, limiter, expires_at, stale_at)
  select n.id, n.claimable_at, n.attempt, n.channel, n.limiter, n.expires_at, n.stale_at
  from inserted_rows n
  where n.claimable_at is not null
  on conflict (id) do nothing;
  return null;
end
$$;

create trigger punctual_deliveries_queue_sync_insert
  after insert on punctual_deliveries
  referencing new table as inserted_rows
  for each statement
  execute function punctual_deliveries_queue_insert();

create trigger punctual_deliveries_queue_sync
  after update on punctual_deliveries
  for each row
  when (new.attempt = old.attempt
        and (old.claimable_at, old.channel, old.limiter, old.expires_at, old.stale_at)
            is distinct from
            (new.claimable_at, new.channel, new.limiter, new.expires_at, new.stale_at))
  execute function punctual_deliveries_queue_sync();

create function punctual_deliveries_queue_delete() returns trigger language plpgsql as $$
begin
  delete from punctual_queue q
  where q.id in (select o.id from deleted_rows o where o.claimable_at is not null);
  return null;
end
$$;

create trigger punctual_deliveries_queue_sync_delete
  after delete on punctual_deliveries
  referencing old table as deleted_rows
  for each statement
  execute function punctual_deliveries_queue_delete();

-- DEL-10: a row that stays or comes back waiting (a retry's settle, a recovered lease, a
-- released claim, a moved row) lands where its schedule is now; the function is 0009's.
create trigger punctual_deliveries_rewait
  before update on punctual_deliveries
  for each row
  when (old.state in ('pending', 'retry') and new.state in ('pending', 'retry'))
  execute function punctual_deliveries_rewait();

-- The ledger as readers see it: a delivery whose queue row holds a lease is `claimed`, at
-- the claim's attempt, with the lease's owner and times; not claimable, and judged by the
-- misfire policy (`stale_at` NULL), as the claim made the row before 0050.
create view punctual_delivery_rows as
select d.id, d.delivery_key, d.schedule_id, d.reminder_key, d.occurrence_at, d.due_at,
       d.run_at,
       case when q.lease_owner is not null then 'claimed' else d.state end as state,
       case when q.lease_owner is not null then q.attempt else d.attempt end as attempt,
       d.failures, d.max_attempts, d.channel, d.on_lost_lease,
       q.lease_owner, q.lease_expires_at, q.claimed_at,
       d.sent_at, d.finished_at, d.reason, d.last_error, d.late, d.created_at, d.updated_at,
       d.expires_at,
       case when q.lease_owner is null then d.stale_at end as stale_at,
       case when q.lease_owner is null then d.claimable_at end as claimable_at,
       d.deferrals, d.first_attempt_at, d.sent_by, d.send_started_at, d.send_status,
       d.send_message_id, d.deferred_until, d.deferred_reason, d.limiter, d.recipient_id,
       d.bypassed, d.round, d.round_base, d.digest_tenant, d.digest_key, d.digest_window_ms,
       d.digest_max_items, d.digest_id
from punctual_deliveries d
left join punctual_queue q on q.id = d.id and q.lease_owner is not null;
