/**
 * Public shapes of the iCalendar import (API-5).
 */
import type { CreateScheduleInput } from "../contracts/index.js";

/** Options of {@link parseCalendar}. */
export interface IcalImportOptions {
  /** Calendar/source id the schedules are scoped to (becomes `schedule.source`). */
  source: string;
  /** IANA zone for floating times and all-day dates when the file names none (no X-WR-TIMEZONE). Default `UTC`. */
  defaultTzid?: string;
  /** Offsets such as `-PT15M` or `-P1D` added as reminders to every event (keys `remind-<offset>`). */
  remind?: string[];
  /** Turn the events' VALARMs into reminders (keys `alarm-<offset>`). Default false. */
  useAlarms?: boolean;
  /** Channel of every reminder. Default `webhook`. */
  channel?: string;
  /** Channel target of every reminder, e.g. `{ url }` for `webhook`. */
  target?: Record<string, unknown>;
  /** Largest accepted file, in bytes (UTF-8). Default 20 MiB. */
  maxBytes?: number;
  /** Most VEVENTs accepted in one file. Default 50,000. */
  maxEvents?: number;
  /** Called now and then with events processed so far and the total number of VEVENTs. */
  onProgress?: (done: number, total: number) => void;
}

/** What an imported event keeps in `schedule.payload`. */
export interface ImportedPayload {
  uid: string;
  summary: string | null;
  location: string | null;
  /** At most 1,000 characters. */
  description: string | null;
  /** DTSTART as given to the schedule (date, local date-time or instant). */
  start: string;
  /** End of the first instance: a date for all-day events, else an ISO instant with `Z`. */
  end: string;
  /** Event length as an ISO 8601 duration (`PT1H`, `P1D`). */
  duration: string;
  allDay: boolean;
  /** Original TZID text when the file gave one. */
  timeZone: string | null;
  /** RECURRENCE-ID this schedule starts at, for a split series or an override without its series. */
  recurrenceId?: string;
}

/** One reminder of an imported schedule. */
export interface ImportedReminder {
  key: string;
  offset: string;
  channel: string;
  target?: Record<string, unknown>;
}

/** A schedule ready for the create contract (`createScheduleSchema`). */
export interface ImportedSchedule {
  dtstart: string;
  tzid: string;
  rrule: string | null;
  rdate: string[];
  exdate: string[];
  /** True for a series with no COUNT/UNTIL: a calendar's endless series is meant to go on (REC-5). */
  perpetual: boolean;
  payload: ImportedPayload;
  /** The event's SUMMARY, cut to the longest title a schedule takes; null without one. */
  title: string | null;
  reminders: ImportedReminder[];
  source: string;
  /** The UID, or `${uid}#${recurrenceId}` for the later part of a split series or an orphan override. */
  externalId: string;
}

/** One VEVENT UID (or one part of it) turned into a schedule. */
export interface ImportedEvent {
  uid: string;
  schedule: ImportedSchedule;
  /** Moved instances: occurrence instant (ISO, `Z`) → RECURRENCE-ID value. */
  recurrenceIds: Record<string, string>;
  summary: string | null;
}

/** An event not imported, with why. */
export interface SkippedEvent {
  uid: string | null;
  /** 1-based line of its BEGIN:VEVENT. */
  line: number | null;
  reason: string;
}

/** Result of {@link parseCalendar}. */
export interface CalendarImport {
  events: ImportedEvent[];
  skipped: SkippedEvent[];
  warnings: string[];
  /** The calendar's own zone (X-WR-TIMEZONE), resolved to IANA, or null. */
  calendarTzid: string | null;
  /** Zone in which floating times and all-day dates were read. */
  floatingTzid: string;
  /**
   * False when the file ends inside a component (no END:VCALENDAR): probably cut off in
   * transfer, so its missing events must not be read as deleted.
   */
  complete: boolean;
}

/** One line of the dry run: a delivery the scheduler would plan. */
export interface DryRunDelivery {
  uid: string;
  recurrenceId: string | null;
  /** ISO instant with `Z`, or `YYYY-MM-DD` for an all-day occurrence. */
  occurrenceAt: string;
  /** ISO instant with `Z`. */
  dueAt: string;
  reminderKey: string;
}

type Compatible = ImportedSchedule extends CreateScheduleInput ? true : never;
/** Compile-time proof that an imported schedule fits the create contract. */
export const SCHEDULE_FITS_CONTRACT: Compatible = true;
