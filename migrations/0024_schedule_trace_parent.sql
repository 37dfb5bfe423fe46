-- 0024 trace context of a schedule (OPS-15).
--
--   punctual_schedules.trace_parent  the W3C traceparent (version 00) of the API request
--                                    span that created the schedule, when an
--                                    OpenTelemetry SDK was recording; NULL otherwise.
-- Each delivery's claim, send and settle spans are children of it, so one reminder is one
-- trace from the request that created it to the send that delivered it. Not part of the
-- definition: an idempotent retry or a re-import never compares it.
-- Expand only: a new nullable column; an older release neither reads nor writes it.
--
-- kind: expand
-- min_reader_version: 2
alter table punctual_schedules
  add column if not exists trace_parent text
    check (trace_parent is null or trace_parent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
