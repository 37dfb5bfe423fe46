-- 0050 digests obey rate limits and circuits (DEL-13, CH-7, DEL-19).
--
--   punctual_digests.limiter          the members' limiter (`tenant/key`, the first
--                                     member's), copied when the digest is formed; NULL: none.
--   punctual_digests.holds_slot       true while a claimed digest holds one of its limiter's
--                                     concurrency slots (it took its token and is being
--                                     sent); the cap counts such digests with the claimed
--                                     deliveries of the limiter. Reset by every claim.
--   punctual_digests.slot_at          a token the digest paid for ahead of time: its send
--                                     instant (it waits in `retry` until then and takes no
--                                     further token); NULL: none paid.
--   punctual_digests.deferrals        Retry-After deferrals (as a delivery's: no attempt spent).
--   punctual_digests.first_attempt_at when its first try began (the deferral budget's age).
--   punctual_digests.deferred_reason  why a digest in `retry` waits: RATE_LIMITED,
--   punctual_digests.deferred_until   CIRCUIT_OPEN or RETRY_AFTER, and until when (explain).
--
-- Compatibility (OPS-10): expand. A release built for 48 ignores the new columns: it sends
-- digests without limits, as it did; their defaults keep its inserts valid.
-- kind: expand
-- min_reader_version: 2

alter table punctual_digests
  add column limiter text,
  add column holds_slot boolean not null default false,
  add column slot_at timestamptz,
  add column deferrals integer not null default 0 check (deferrals >= 0),
  add column first_attempt_at timestamptz,
  add column deferred_reason text
    check (deferred_reason in ('RATE_LIMITED', 'CIRCUIT_OPEN', 'RETRY_AFTER')),
  add column deferred_until timestamptz;

-- DEL-13: the digests holding a concurrency slot of a limiter (the cap's count).
create index punctual_digests_slots on punctual_digests (limiter)
  where state = 'claimed' and holds_slot;
