-- 0048 digests (DEL-19): deliveries of one digest key sent as one message.
--
--   punctual_reminders.digest          `{ windowMs, key?, maxItems? }` or NULL.
--   punctual_deliveries.digest_tenant  the digest's scope: its schedule's tenant (NULL: not a
--   punctual_deliveries.digest_key     digest member); the key (the reminder's `key`, else
--                                      `recipient:<id>`, else `target:<md5 of channel and
--                                      target>`), filled by the trigger below on insert;
--   punctual_deliveries.digest_window_ms, digest_max_items  the reminder's settings, copied;
--   punctual_deliveries.digest_id      the digest the member was sent in (`dg_…`), kept.
--   punctual_digests                   one row per digest message: its members are frozen
--                                      when it is formed (at the first member's due time +
--                                      window, or when maxItems are due), then it is
--                                      claimed, leased, sent and settled as one unit.
-- A new delivery state `grouped`: a member frozen into a digest that is being sent or
-- waits to retry; it leaves it only with the digest's outcome (sent, dead, in_doubt).
--
-- Members wait as `pending` rows outside the claim index: `claimable_at` is NULL for a
-- member (the digest sweep takes them through `punctual_deliveries_digest_waiting`), so no
-- worker of any release claims a member alone. Their grace limit (`stale_at`) counts from
-- the end of their window, so the misfire sweep does not skip a member that waits for its
-- digest.
--
-- Compatibility (OPS-10): expand. A release built for 47 reads `claimable_at` by name and
-- so never claims a member alone either; it recovers, cancels and pauses only the states it
-- knows (a `grouped` row is left to the digest's settle or recovery); a reminder it writes
-- has no `digest` (its rows are ordinary). The rebuild of `claimable_at` rewrites the table
-- once: run it in a quiet hour on a large table.
-- kind: expand
-- min_reader_version: 2

alter table punctual_reminders add column digest jsonb;

alter table punctual_deliveries
  add column digest_tenant text,
  add column digest_key text,
  add column digest_window_ms integer check (digest_window_ms between 1000 and 86400000),
  add column digest_max_items integer check (digest_max_items between 1 and 1000),
  add column digest_id text;

alter table punctual_deliveries drop constraint punctual_deliveries_state_check;

alter table punctual_deliveries add constraint punctual_deliveries_state_check check (state in
  ('pending', 'claimed', 'retry', 'paused', 'grouped', 'sent', 'dead', 'in_doubt', 'skipped',
   'cancelled'));

alter table punctual_deliveries add constraint punctual_deliveries_grouped
  check (state <> 'grouped' or digest_id is not null);

alter table punctual_deliveries add constraint punctual_deliveries_digest
  check ((digest_key is null) = (digest_tenant is null)
         and (digest_key is null) = (digest_window_ms is null)
         and (digest_key is null) = (digest_max_items is null));

-- The claim's key, redefined: NULL for a digest member (the digest sweep sends it).
drop index punctual_deliveries_claimable;

alter table punctual_deliveries drop column claimable_at;

alter table punctual_deliveries add column claimable_at timestamptz
  generated always as (case when state in ('pending', 'retry') and digest_key is null
                            then run_at end) stored;

create index punctual_deliveries_claimable
  on punctual_deliveries (claimable_at, id) where claimable_at is not null;

-- DEL-19: the members waiting for a digest, in due order (the digest sweep's index).
create index punctual_deliveries_digest_waiting
  on punctual_deliveries (run_at, id)
  where digest_key is not null and state in ('pending', 'retry');

-- DEL-19: the members of a digest.
create index punctual_deliveries_digest_members
  on punctual_deliveries (digest_id) where digest_id is not null;

create table punctual_digests (
  id text primary key,
  tenant text not null,
  digest_key text not null,
  channel text not null,
  state text not null check (state in ('claimed', 'retry', 'sent', 'dead', 'in_doubt', 'skipped')),
  -- the first member's due time; the digest was formed at opened_at + window or earlier
  -- when maxItems were due.
  opened_at timestamptz not null,
  window_ms integer not null,
  max_items integer not null,
  member_count integer not null check (member_count >= 1),
  attempt integer not null default 0 check (attempt >= 0),
  failures integer not null default 0 check (failures >= 0 and failures <= attempt),
  max_attempts integer not null check (max_attempts >= 1),
  on_lost_lease text not null check (on_lost_lease in ('retry', 'in_doubt')),
  run_at timestamptz not null,
  lease_owner text,
  lease_expires_at timestamptz,
  claimed_at timestamptz,
  sent_at timestamptz,
  sent_by text,
  send_status integer,
  send_message_id text,
  finished_at timestamptz,
  reason text,
  last_error text,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  constraint punctual_digests_lease
    check ((state = 'claimed') = (lease_owner is not null and lease_expires_at is not null
                                  and claimed_at is not null)),
  constraint punctual_digests_sent_at check ((state = 'sent') = (sent_at is not null)),
  constraint punctual_digests_finished
    check ((state in ('dead', 'in_doubt', 'skipped')) = (finished_at is not null and reason is not null))
);

-- Retries in due order; expired leases (recovery).
create index punctual_digests_retry on punctual_digests (run_at, id) where state = 'retry';
create index punctual_digests_lease_expiry
  on punctual_digests (lease_expires_at, id) where state = 'claimed';
-- Retention deletes sent and skipped digests oldest first, as it does their members.
create index punctual_digests_finished
  on punctual_digests (updated_at, id) where state in ('sent', 'skipped');

-- The digest key of a delivery of a reminder with `digest` (NULL: none): the reminder's
-- `key`, else the recipient's id, else the channel and target hashed.
create function punctual_digest_key(digest jsonb, channel text, target jsonb, recipient_id text)
returns text language sql immutable as $$
  select case when digest is null then null
    when digest ? 'key' then digest ->> 'key'
    when recipient_id is not null then 'recipient:' || recipient_id
    else 'target:' || md5(channel || chr(31) || coalesce(target::text, '{}')) end
$$;

-- Every planned, triggered or backfilled row of a reminder with `digest` becomes a member,
-- whichever statement (or release) inserts it; its grace limit counts from its window's end.
-- The reminders with `digest`: the insert trigger below probes this (mostly empty) index,
-- so a row of a reminder without digest costs one probe of it and nothing more.
create index punctual_reminders_digest on punctual_reminders (schedule_id, key)
  where digest is not null;

create function punctual_deliveries_digest() returns trigger language plpgsql as $$
declare
  rem record;
begin
  select r.digest, r.target into rem
  from punctual_reminders r
  where r.schedule_id = new.schedule_id and r.key = new.reminder_key and r.digest is not null;
  if rem.digest is null then
    return new;
  end if;
  new.digest_tenant := (select s.tenant from punctual_schedules s where s.id = new.schedule_id);
  new.digest_key := punctual_digest_key(rem.digest, new.channel, rem.target, new.recipient_id);
  new.digest_window_ms := (rem.digest ->> 'windowMs')::integer;
  new.digest_max_items := coalesce((rem.digest ->> 'maxItems')::integer, 50);
  if new.stale_at is not null then
    new.stale_at := new.stale_at + make_interval(secs => new.digest_window_ms::double precision / 1000);
  end if;
  return new;
end
$$;

create trigger punctual_deliveries_digest
  before insert on punctual_deliveries
  for each row execute function punctual_deliveries_digest();

-- A statement that rewrites a member's grace limit (pause, resume, an edit) writes it from
-- the due time; the member's counts from its window's end.
create function punctual_deliveries_digest_stale() returns trigger language plpgsql as $$
begin
  new.stale_at := new.stale_at + make_interval(secs => new.digest_window_ms::double precision / 1000);
  return new;
end
$$;

create trigger punctual_deliveries_digest_stale
  before update of stale_at on punctual_deliveries
  for each row
  when (new.digest_window_ms is not null and new.stale_at is not null
        and new.stale_at is distinct from old.stale_at)
  execute function punctual_deliveries_digest_stale();

-- An edit writes a schedule's reminders anew: its waiting rows follow the reminder's digest
-- settings (a member whose reminder lost `digest` is sent alone again, and the other way).
create function punctual_reminders_digest_sync() returns trigger language plpgsql as $$
begin
  update punctual_deliveries d
  set digest_tenant = case when n.digest is null then null else s.tenant end,
      digest_key = punctual_digest_key(n.digest, d.channel, n.target, d.recipient_id),
      digest_window_ms = (n.digest ->> 'windowMs')::integer,
      digest_max_items = case when n.digest is null then null
                              else coalesce((n.digest ->> 'maxItems')::integer, 50) end,
      updated_at = now()
  from new_reminders n
  join punctual_schedules s on s.id = n.schedule_id
  where d.schedule_id = n.schedule_id and d.reminder_key = n.key
    and d.state in ('pending', 'retry', 'paused')
    and (d.digest_key, d.digest_window_ms, d.digest_max_items) is distinct from
        (punctual_digest_key(n.digest, d.channel, n.target, d.recipient_id),
         (n.digest ->> 'windowMs')::integer,
         case when n.digest is null then null
              else coalesce((n.digest ->> 'maxItems')::integer, 50) end);
  return null;
end
$$;

create trigger punctual_reminders_digest_sync
  after insert on punctual_reminders
  referencing new table as new_reminders
  for each statement execute function punctual_reminders_digest_sync();
