/**
 * The shapes of a calendar import (API-5): the options a caller gives, what happened to
 * each event, the summary, and the progress reported per chunk written.
 */
import type { CalendarImport, IcalImportOptions, SkippedEvent } from "../../ical/index.js";
import type { RuleWork } from "../../recurrence/recurrence.js";

/** What happened to one event. */
export interface ImportedScheduleResult {
  uid: string;
  externalId: string;
  scheduleId: string | null;
  action: "created" | "updated" | "unchanged" | "cancelled" | "skipped";
}

/** Summary of an import. */
export interface ImportSummary {
  source: string;
  created: number;
  updated: number;
  unchanged: number;
  cancelled: number;
  skipped: SkippedEvent[];
  warnings: string[];
  /** The calendar's own zone (X-WR-TIMEZONE), or null. */
  calendarTzid: string | null;
  /** Zone in which floating times and all-day dates were read. */
  floatingTzid: string;
  schedules: ImportedScheduleResult[];
}

/**
 * Progress of the writing, reported once per chunk committed (API-5, OPS-12): `done` of
 * `total` changes written (creates, updates and cancels; unchanged events are no change),
 * in chunk `chunk` of `chunks`, with the counts so far.
 */
export interface ImportProgress {
  chunk: number;
  chunks: number;
  done: number;
  total: number;
  created: number;
  updated: number;
  cancelled: number;
}

export interface ImportOptions extends IcalImportOptions {
  tenant?: string;
  /**
   * How the import gives the event loop a turn between slices of about 10 ms of work
   * (OPS-12); default one `setImmediate`.
   */
  yieldNow?: () => Promise<void>;
  /**
   * Reads the calendar elsewhere (OPS-12; the API passes a worker thread's
   * `parseCalendar`): it must answer what `parseCalendar` answers, with the rule work
   * its validation did, which this thread's validation of each event then borrows
   * instead of walking the rules again. `onProgress` then reports the writing only.
   * Default: read here, in slices.
   */
  readCalendar?: (
    text: string,
    options: Omit<IcalImportOptions, "onProgress">,
  ) => Promise<{ parsed: CalendarImport; work: RuleWork }>;
  /**
   * Called after each chunk of changes is committed (see {@link ImportProgress}); the
   * next chunk waits for a promise it returns.
   */
  onChunk?: (progress: ImportProgress) => void | Promise<void>;
  /**
   * Changes (creates, updates, cancels) written per transaction; default
   * {@link IMPORT_CHUNK}. A failed chunk rolls back alone: the chunks before it stay, and
   * importing the file again finishes the work (an import is idempotent).
   */
  chunkSize?: number;
}

/** Default {@link ImportOptions.chunkSize} on PostgreSQL: changes per transaction. */
export const IMPORT_CHUNK = 250;

/**
 * Default {@link ImportOptions.chunkSize} on the embedded engine: its one connection is held
 * for a whole chunk, so the scheduler's claims wait behind it; smaller chunks keep that wait
 * short (DEL-3: lateness while an import runs).
 */
export const IMPORT_CHUNK_EMBEDDED = 25;
