-- 0007 the attempt that sent a delivery is kept on the delivery row (DEL-14).
--
-- Most deliveries are sent on their first try. Recording that try as a row of
-- punctual_attempts cost every delivery a heap insert, two index entries and a foreign-key
-- check in the settle statement. The settle now writes the sending attempt's details on
-- the delivery row it updates anyway:
--   sent_by          the worker that sent it (the lease owner of that claim);
--   send_started_at  when the send started (ended_at is sent_at, the attempt is `attempt`);
--   send_status      the channel's status code (HTTP status for webhooks), if any;
--   send_message_id  the channel's message id, if any.
-- Every other attempt (a failure, a rate-limited reply, a timeout, a settle fenced out by
-- a lost lease, a recovered lease) is still a row of punctual_attempts. The view
-- punctual_delivery_attempts is every attempt of every delivery: the rows of
-- punctual_attempts, then the attempt kept on the row.
-- Expand only: new nullable columns, a CHECK that holds for every existing row, a new
-- view. A release that does not know them keeps inserting an attempt row for each send
-- and leaves the columns NULL; the view shows its attempts all the same.
--
-- kind: expand
-- min_reader_version: 2

alter table punctual_deliveries add column sent_by text;

alter table punctual_deliveries add column send_started_at timestamptz;

alter table punctual_deliveries add column send_status integer;

alter table punctual_deliveries add column send_message_id text;

-- Only a sent row holds a sending attempt, and a kept attempt names its worker and start.
alter table punctual_deliveries add constraint punctual_deliveries_sent_by
  check ((sent_by is null or state = 'sent') and (sent_by is null) = (send_started_at is null));

create view punctual_delivery_attempts as
select a.id, a.delivery_id, a.attempt, a.worker, a.started_at, a.ended_at, a.outcome,
       a.settled, a.status, a.message_id, a.error
from punctual_attempts a
union all
select null::bigint, d.id, d.attempt, d.sent_by, d.send_started_at, d.sent_at, 'sent'::text,
       true, d.send_status, d.send_message_id, null::text
from punctual_deliveries d
where d.sent_by is not null;
