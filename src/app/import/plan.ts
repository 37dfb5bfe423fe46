/**
 * The changes an import makes (API-5, DEL-9, DEL-10): the events read from a calendar
 * compared with the schedules stored for the same (tenant, source). Each event is
 * validated as a create would be; then it is a create (no schedule yet), an update (its
 * definition hash differs, or an import cancelled it and it came back), unchanged, or
 * skipped (a person cancelled its schedule; or it breaks a rule). A stored schedule whose
 * event is gone from a complete file is a cancel. Writes nothing.
 */
import { ValidationError } from "../../errors/index.js";
import { IMPORT_SLICE_MS, type CalendarImport } from "../../ical/index.js";
import { bodyOfEvent } from "../../definition/index.js";
import type { SourceScheduleRow } from "../../store/schedules.js";
import type { AppContext } from "../context.js";
import { definitionHash, validateSchedule } from "../schedules.js";
import type { ImportedScheduleResult, ImportSummary } from "./types.js";

/** A schedule definition validated as a create (source and external id included). */
export type ImportedValue = ReturnType<typeof validateSchedule>["value"];

/** One change an import writes. `result` is the summary's line for it, filled once written. */
export type ImportChange =
  | { kind: "create"; value: ImportedValue; result: ImportedScheduleResult }
  | {
      kind: "update";
      value: ImportedValue;
      hash: string;
      id: string;
      /** The version the comparison saw: a schedule edited since is left alone. */
      version: number;
      /** The schedule was cancelled by an import and its event came back. */
      revive: boolean;
      result: ImportedScheduleResult;
    }
  | { kind: "cancel"; id: string; version: number; result: ImportedScheduleResult };

/** What {@link planImport} answers: the changes in order, and the summary so far. */
export interface ImportPlan {
  changes: ImportChange[];
  /** Unchanged and skipped events counted, warnings of the reading and comparison. */
  summary: ImportSummary;
}

/**
 * Compares the events of `parsed` with `stored` (the schedules of the source, any state)
 * and answers the changes to write: creates and updates in the file's order, then the
 * cancels. Validation runs here, in slices of about {@link IMPORT_SLICE_MS} with a turn of
 * the event loop between them (OPS-12).
 */
export async function planImport(
  app: AppContext,
  parsed: CalendarImport,
  stored: readonly SourceScheduleRow[],
  options: { source: string; tenant: string; yieldNow: () => Promise<void> },
): Promise<ImportPlan> {
  const { tenant } = options;
  const existing = new Map(stored.map((r) => [r.external_id ?? "", r]));
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
  const changes: ImportChange[] = [];
  const seen = new Set<string>();
  let sliceStart = performance.now();
  const turn = async (): Promise<void> => {
    if (performance.now() - sliceStart >= IMPORT_SLICE_MS) {
      await options.yieldNow();
      sliceStart = performance.now();
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
      const { value } = validateSchedule(app, bodyOfEvent(event.schedule), { tenant });
      const current = existing.get(externalId);
      if (current === undefined) {
        changes.push({ kind: "create", value, result });
      } else if (current.state === "cancelled" && current.cancelled_by !== "import") {
        // Cancelled by a person: a re-import never overrules that.
        result.scheduleId = current.id;
        summary.skipped.push({
          uid: event.uid,
          line: null,
          reason: `schedule ${current.id} was cancelled by a user; it is not revived by an import`,
        });
      } else {
        const hash = definitionHash(value, app.config.scheduler.maxAttempts);
        result.scheduleId = current.id;
        if (current.state !== "cancelled" && current.request_hash === hash) {
          result.action = "unchanged";
          summary.unchanged++;
        } else {
          // The event came back to the calendar (the same schedule and keys again), or it
          // changed. The whole definition, defaults spelled out: the calendar is the source
          // of truth for an imported schedule, and the stored hash then equals the import's.
          changes.push({
            kind: "update",
            value,
            hash,
            id: current.id,
            version: current.version,
            revive: current.state === "cancelled",
            result,
          });
        }
      }
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      summary.skipped.push({ uid: event.uid, line: null, reason: err.message });
    }
    await turn();
  }
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
  for (const row of parsed.complete ? stored : []) {
    await turn();
    if (row.state === "cancelled" || seen.has(row.external_id ?? "")) continue;
    if (keptUnreadable(row.external_id ?? "")) {
      summary.warnings.push(
        `event ${row.external_id} could not be read this time: schedule ${row.id} is kept as it was (not cancelled)`,
      );
      continue;
    }
    const result: ImportedScheduleResult = {
      uid: row.uid ?? row.external_id ?? "",
      externalId: row.external_id ?? "",
      scheduleId: row.id,
      action: "skipped",
    };
    changes.push({ kind: "cancel", id: row.id, version: row.version, result });
  }
  return { changes, summary };
}
