-- 0042 what explains an occurrence (OPS-16) and the state of a debounced upsert (DEL-18).
--
--   punctual_delivery_actions  one row per operator redrive or resolve of a delivery, written
--                              in the action's transaction: who (`actor`), when, and the
--                              outcome of a resolve. `GET /v1/schedules/{id}/explain` shows
--                              them on the delivery's timeline. Deleted with the delivery.
--   punctual_debounces         the start of a schedule's current debounced burst (DEL-18): an
--                              upsert that carries `debounce` moves the one-off's due time
--                              to now + windowMs, never past this start + maxDelayMs.
-- Expand only: two new tables, which no older release reads. An older release's redrives
-- leave no action row (their timeline shows the state change only); its upserts ignore
-- debounce (a body with `debounce` is refused by its strict schema).
--
-- kind: expand
-- min_reader_version: 2

create table if not exists punctual_delivery_actions (
  id bigint generated always as identity primary key,
  delivery_id bigint not null references punctual_deliveries (id) on delete cascade,
  action text not null check (action in ('redrive', 'resolve')),
  outcome text check ((action = 'resolve') = (outcome is not null) and
                      (outcome is null or outcome in ('sent', 'dead'))),
  actor text not null check (char_length(actor) between 1 and 200),
  at timestamptz not null
);
create index if not exists punctual_delivery_actions_delivery
  on punctual_delivery_actions (delivery_id, id);

create table if not exists punctual_debounces (
  schedule_id uuid primary key references punctual_schedules (id) on delete cascade,
  burst_started_at timestamptz not null
);
