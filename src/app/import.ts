/**
 * iCalendar import into the store (API-5, DEL-9, DEL-10): each VEVENT UID of a source is
 * one schedule (`source`, `externalId` = UID). Importing the same file again changes
 * nothing; an edited file updates the changed schedules (each in one transaction, with
 * its waiting deliveries realigned), and events gone from the file are cancelled.
 * Lenient with files: an event that fails strict validation is skipped with its UID and
 * reason while the rest import.
 */
import {
  dryRunDeliveriesAsync,
  IMPORT_SLICE_MS,
  parseCalendarAsync,
  yieldToEventLoop,
  type DryRunDelivery,
  type IcalImportOptions,
  type SkippedEvent,
} from "../ical/index.js";
import { ValidationError } from "../errors/index.js";
import { toInstant } from "../recurrence/index.js";
import type { CalendarImport, ImportedEvent } from "../ical/index.js";
import { lendRuleWork, type RuleWork } from "../recurrence/recurrence.js";
import { withImportLock } from "../store/import-lock.js";
import { recordImport } from "../store/imports.js";
import { schedulesOfSource } from "../store/schedules.js";
import { DEFAULT_TENANT } from "./context.js";
import type { Punctual } from "./punctual.js";
import { definitionHash } from "./schedules.js";

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

/** Schedules created per bulk insert of an import (OPS-12). */
const IMPORT_BATCH = 20;

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
}

/**
 * Imports a calendar. Safe to repeat: the same file is a no-op. Imports of one (tenant,
 * source) run one at a time, across processes on PostgreSQL (an advisory lock, see
 * store/import-lock.ts): the reading runs outside the lock, the comparison and the
 * writes inside it. Reading and validating
 * run in slices of about {@link IMPORT_SLICE_MS} with a turn of the event loop between
 * them (OPS-12), so a large file does not hold up health checks or other requests.
 * @throws ValidationError when the file is not iCalendar at all or breaks a limit.
 */
export async function importCalendar(
  punctual: Punctual,
  text: string,
  options: ImportOptions,
): Promise<ImportSummary> {
  const tenant = options.tenant ?? DEFAULT_TENANT;
  const yieldNow = options.yieldNow ?? yieldToEventLoop;
  let release = (): void => {};
  let parsed: CalendarImport;
  if (options.readCalendar !== undefined) {
    const { onProgress: _p, yieldNow: _y, readCalendar, tenant: _t, ...ical } = options;
    const read = await readCalendar(text, ical);
    parsed = read.parsed;
    release = lendRuleWork(read.work);
  } else {
    parsed = await parseCalendarAsync(text, {
      ...options,
      defaultTzid: options.defaultTzid,
      yieldNow,
    });
  }
  try {
    // The comparison with what is stored and the writes run under the source's import
    // lock, so two processes importing one source at once cannot both create an event.
    const summary = await withImportLock(punctual.db, tenant, options.source, () =>
      writeImport(punctual, parsed, options, tenant, yieldNow),
    );
    // API-5: the record `GET /v1/imports` lists.
    await recordImport(punctual.db, {
      now: punctual.clock.sqlNow(),
      tenant,
      source: options.source,
      events: parsed.events.length,
      created: summary.created,
      updated: summary.updated,
      unchanged: summary.unchanged,
      cancelled: summary.cancelled,
      skipped: summary.skipped.length,
      warnings: summary.warnings.length,
    });
    return summary;
  } finally {
    release();
  }
}

async function writeImport(
  punctual: Punctual,
  parsed: CalendarImport,
  options: ImportOptions,
  tenant: string,
  yieldNow: () => Promise<void>,
): Promise<ImportSummary> {
  let sliceStart = performance.now();
  const rows = await schedulesOfSource(punctual.db, { tenant, source: options.source });
  const existing = new Map(rows.map((r) => [r.external_id ?? "", r]));
  const summary: ImportSummary = {
    source: options.source,
    created: 0,
    updated: 0,
    unchanged: 0,
    cancelled: 0,
    skipped: [...parsed.skipped],
    warnings: [...parsed.warnings],
    calendarTzid: parsed.calendarTzid,
    floatingTzid: parsed.floatingTzid,
    schedules: [],
  };
  const seen = new Set<string>();
  let done = 0;
  const toCreate: Array<{
    event: ImportedEvent;
    value: ReturnType<Punctual["validateSchedule"]>["value"];
    result: ImportedScheduleResult;
  }> = [];
  const flush = async () => {
    const batch = toCreate.splice(0);
    const ids = await punctual.createSchedulesBulk(
      batch.map((b) => b.value),
      { tenant },
    );
    for (const b of batch) {
      b.result.scheduleId = ids.get(b.event.schedule.externalId) ?? null;
      b.result.action = "created";
      summary.created++;
    }
  };
  for (const event of parsed.events) {
    const externalId = event.schedule.externalId;
    seen.add(externalId);
    const result: ImportedScheduleResult = {
      uid: event.uid,
      externalId,
      scheduleId: null,
      action: "skipped",
    };
    summary.schedules.push(result);
    try {
      const { value } = punctual.validateSchedule(withExpiry(event), { tenant });
      const hash = definitionHash(value, punctual.config.scheduler.maxAttempts);
      const current = existing.get(externalId);
      if (!current) {
        toCreate.push({ event, value, result });
        // Small batches: one bulk insert is one call into the database, which (embedded)
        // runs on this thread, so its size bounds how long the event loop waits.
        if (toCreate.length >= IMPORT_BATCH) await flush();
      } else if (current.state === "cancelled" && current.cancelled_by !== "import") {
        // Cancelled by a person: a re-import never overrules that.
        result.scheduleId = current.id;
        summary.skipped.push({
          uid: event.uid,
          line: null,
          reason: `schedule ${current.id} was cancelled by a user; it is not revived by an import`,
        });
      } else if (current.state === "cancelled") {
        // The event came back to the calendar: the same schedule (and keys) again.
        // The whole definition, defaults spelled out: the calendar is the source of truth
        // for an imported schedule, and the stored hash then equals the import's.
        const { source: _s, externalId: _e, ...definition } = value;
        await punctual.updateSchedule(current.id, definition, {
          tenant,
          version: current.version,
          revive: true,
        });
        result.scheduleId = current.id;
        result.action = "updated";
        summary.updated++;
      } else if (current.request_hash === hash) {
        result.scheduleId = current.id;
        result.action = "unchanged";
        summary.unchanged++;
      } else {
        // The whole definition, defaults spelled out: the calendar is the source of truth
        // for an imported schedule, and the stored hash then equals the import's.
        const { source: _s, externalId: _e, ...definition } = value;
        await punctual.updateSchedule(current.id, definition, { tenant, version: current.version });
        result.scheduleId = current.id;
        result.action = "updated";
        summary.updated++;
      }
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      summary.skipped.push({ uid: event.uid, line: null, reason: err.message });
    }
    done++;
    if (done % 200 === 0) options.onProgress?.(done, parsed.events.length);
    if (performance.now() - sliceStart >= IMPORT_SLICE_MS) {
      await yieldNow();
      sliceStart = performance.now();
    }
  }
  await flush();
  // DEL-10: events gone from the file stop their reminders, unless the file was cut off:
  // then "missing" means "not received", and nothing is cancelled.
  if (!parsed.complete) {
    summary.warnings.push(
      "the file ends before END:VCALENDAR (cut off?): events missing from it were not cancelled",
    );
  }
  // An event skipped as unreadable is still in the file: its schedule (and those of its
  // overrides, `${uid}#…`) is kept as it was, not cancelled as gone; the skip says why.
  const unreadable = new Set(parsed.skipped.flatMap((e) => (e.uid === null ? [] : [e.uid])));
  const keptUnreadable = (externalId: string) =>
    unreadable.has(externalId) || unreadable.has(externalId.split("#")[0]!);
  for (const row of parsed.complete ? rows : []) {
    if (row.state === "cancelled" || seen.has(row.external_id ?? "")) continue;
    if (keptUnreadable(row.external_id ?? "")) {
      summary.warnings.push(
        `event ${row.external_id} could not be read this time: schedule ${row.id} is kept as it was (not cancelled)`,
      );
      continue;
    }
    await punctual.cancelSchedule(row.id, { tenant, by: "import" });
    summary.cancelled++;
    summary.schedules.push({
      uid: String((row.payload as { uid?: unknown } | null)?.uid ?? row.external_id),
      externalId: row.external_id ?? "",
      scheduleId: row.id,
      action: "cancelled",
    });
  }
  options.onProgress?.(parsed.events.length, parsed.events.length);
  return summary;
}

/**
 * REC-6 for calendars: a one-off event's reminders mean nothing once the event is over,
 * so an imported one-off expires at its end (a past event is recorded as skipped,
 * reason `expired`, not sent late). Series follow their misfire policy instead.
 */
function withExpiry(event: ImportedEvent): ImportedEvent["schedule"] & { expiresAt?: string } {
  const s = event.schedule;
  if (s.rrule || s.rdate.length > 0) return s;
  const end = s.payload.end;
  const at = /^\d{4}-\d{2}-\d{2}$/.test(end)
    ? toInstant(`${end}T00:00:00`, s.tzid)
    : Date.parse(end);
  if (at === null || !Number.isFinite(at)) return s;
  // A zero-length event (DTEND = DTSTART) still expires after its start, not at it.
  const start = toInstant(s.dtstart, s.tzid);
  const expires = start !== null && at <= start ? start + 1_000 : at;
  return { ...s, expiresAt: new Date(expires).toISOString() };
}

/**
 * `--dry-run`: every delivery whose occurrence falls in [from, to), computed as the
 * scheduler would plan it with its clock at `from`. Touches no database. Runs in slices
 * with turns of the event loop between them, and refuses a window that may hold too many
 * deliveries before computing any (OPS-12).
 * @throws ValidationError when the file is not iCalendar at all or breaks a limit, or
 *   field `window` when the window may hold more than `MAX_DRY_RUN_DELIVERIES`.
 */
export async function dryRunImport(
  text: string,
  options: IcalImportOptions & {
    fromMs: number;
    toMs: number;
    yieldNow?: () => Promise<void>;
  },
): Promise<{
  deliveries: DryRunDelivery[];
  skipped: SkippedEvent[];
  warnings: string[];
  events: number;
  floatingTzid: string;
}> {
  const parsed = await parseCalendarAsync(text, options);
  return {
    deliveries: await dryRunDeliveriesAsync(
      parsed,
      { fromMs: options.fromMs, toMs: options.toMs },
      options.yieldNow,
    ),
    skipped: parsed.skipped,
    warnings: parsed.warnings,
    events: parsed.events.length,
    floatingTzid: parsed.floatingTzid,
  };
}
