/**
 * API-11: the time zones of a schedule's recipients, counted — what the dashboard needs to
 * show a schedule's next occurrence per recipient zone without reading every recipient.
 */
import { firstRowStatement, rowsStatement } from "./statement.js";

/** Most zones one answer lists (the IANA database has about 600). */
export const MAX_RECIPIENT_ZONES = 1_000;

/** A schedule's audience (null when it has none): floating or not, and its size. */
export const SCHEDULE_AUDIENCE_SQL = `
select a.floating,
       (select count(*) from punctual_schedule_recipients m where m.schedule_id = a.schedule_id)
         as recipients
from punctual_schedule_audiences a
join punctual_schedules s on s.id = a.schedule_id
where a.schedule_id = $1 and s.tenant = $2`;

/** The zones of a schedule's recipients, most recipients first, then by zone name. */
export const RECIPIENT_ZONES_SQL = `
select r.tzid, count(*) as recipients
from punctual_schedule_recipients m
join punctual_recipients r on r.tenant = m.tenant and r.id = m.recipient_id
where m.schedule_id = $1 and m.tenant = $2
group by r.tzid
order by count(*) desc, r.tzid collate "C"
limit ${MAX_RECIPIENT_ZONES}`;

/** A row of {@link SCHEDULE_AUDIENCE_SQL}. */
export interface ScheduleAudienceRow {
  floating: boolean;
  /** A bigint: a string on PostgreSQL, a number on PGlite. */
  recipients: string | number;
}

/** A row of {@link RECIPIENT_ZONES_SQL}. */
export interface RecipientZoneRow {
  tzid: string;
  recipients: string | number;
}

/** Runs {@link SCHEDULE_AUDIENCE_SQL}. @returns null for a schedule without recipients. */
export const scheduleAudience = firstRowStatement<
  ScheduleAudienceRow,
  { scheduleId: string; tenant: string }
>(SCHEDULE_AUDIENCE_SQL, (p) => [p.scheduleId, p.tenant]);

/** Runs {@link RECIPIENT_ZONES_SQL}. */
export const recipientZones = rowsStatement<
  RecipientZoneRow,
  { scheduleId: string; tenant: string }
>(RECIPIENT_ZONES_SQL, (p) => [p.scheduleId, p.tenant]);
