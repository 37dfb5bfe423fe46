-- 0005 reminder templates (CH-6): a reminder may carry { subject?, text?, html? }, Liquid
-- templates its channel renders at send time (validated when the schedule is written).
-- Null = no template: the channel's default body.
--
-- kind: expand
-- min_reader_version: 2
alter table punctual_reminders add column if not exists template jsonb
  check (template is null or jsonb_typeof(template) = 'object');
