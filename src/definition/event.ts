/**
 * An imported calendar event as a schedule body (REC-6, DEL-10). Pure: the calendar
 * reader (`src/ical/`) builds the event's body; this adds what a schedule needs of it.
 */
import { toInstant } from "../recurrence/index.js";

/** What an imported event's body must carry for {@link bodyOfEvent}. */
export interface EventBodyFields {
  dtstart: string;
  tzid: string;
  rrule?: string | null;
  rdate: readonly string[];
  /** The event's payload; `end` is its DTEND (a date `YYYY-MM-DD` or an instant). */
  payload: { end: string };
}

/**
 * REC-6 for calendars: a one-off event's reminders mean nothing once the event is over,
 * so an imported one-off expires at its end (a past event is recorded as skipped, reason
 * `expired`, not sent late); a zero-length event (DTEND = DTSTART) one second after its
 * start. Series follow their misfire policy instead and are returned as they are.
 * @returns the body, with `expiresAt` (ISO 8601 UTC) for a one-off whose end reads.
 */
export function bodyOfEvent<T extends EventBodyFields>(event: T): T & { expiresAt?: string } {
  if (event.rrule || event.rdate.length > 0) return event;
  const end = event.payload.end;
  const at = /^\d{4}-\d{2}-\d{2}$/.test(end)
    ? toInstant(`${end}T00:00:00`, event.tzid)
    : Date.parse(end);
  if (at === null || !Number.isFinite(at)) return event;
  const start = toInstant(event.dtstart, event.tzid);
  const expires = start !== null && at <= start ? start + 1_000 : at;
  return { ...event, expiresAt: new Date(expires).toISOString() };
}
