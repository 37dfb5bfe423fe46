/**
 * iCalendar import (API-5): a pure reader of RFC 5545 files into schedule inputs, and the
 * dry run of the deliveries they would produce. No database: the store, API and CLI wire it.
 */
export {
  DEFAULT_MAX_BYTES,
  DEFAULT_MAX_EVENTS,
  IMPORT_SLICE_MS,
  MAX_DESCRIPTION,
  parseCalendar,
  parseCalendarAsync,
  yieldToEventLoop,
} from "./import.js";
export {
  dryRunDeliveries,
  dryRunDeliveriesAsync,
  dryRunUpperBound,
  MAX_DRY_RUN_DELIVERIES,
} from "./dry-run.js";
export type {
  CalendarImport,
  DryRunDelivery,
  IcalImportOptions,
  ImportedEvent,
  ImportedPayload,
  ImportedReminder,
  ImportedSchedule,
  SkippedEvent,
} from "./types.js";
