/**
 * One part of a series becomes an imported schedule (API-5): its dates deduplicated, its
 * recurrence validated (`validateRule`), its reminders, payload and title; an event over a
 * limit is skipped with its reason.
 */
import { jsonBytes, MAX_PAYLOAD_BYTES } from "../contracts/index.js";
import { ValidationError } from "../errors/index.js";
import { validateRule, type Recurrence } from "../recurrence/index.js";
import type { ImportedEvent, ImportedReminder, ImportedSchedule } from "./types.js";
import { addDays, formatOffset, isoZ } from "./values.js";
import { EventError, titleOf, type ParsedEvent, type When } from "./reading.js";
import { MAX_DATES, SeriesBuilder } from "./series.js";

/** Recurrences validated during the import, reused by the dry run. */
export const validated = new WeakMap<ImportedSchedule, Recurrence>();

/** The importer's layer that writes each part of a series as a schedule. */
export abstract class Emitter extends SeriesBuilder {
  protected readonly events: ImportedEvent[] = [];
  protected floatingCount = 0;
  protected utcInCalendarZone = 0;

  protected emit(
    head: ParsedEvent,
    part: ParsedEvent,
    externalId: string,
    recurrenceId: string | undefined,
    recurrenceIds: Record<string, string>,
    master: ParsedEvent = head,
  ): void {
    const uid = master.uid;
    const dateOnly = part.start.dateOnly;
    const tzid = part.tzid;
    if (part.start.floating) this.floatingCount++;
    if (
      !dateOnly &&
      part.start.tzid === null &&
      !part.start.floating &&
      this.calendarTzid !== null &&
      part.rrule !== null
    ) {
      this.utcInCalendarZone++;
    }
    const dedupe = (list: When[]): string[] => {
      const seen = new Set<string>();
      const out: string[] = [];
      for (const w of list) {
        const key = w.dateOnly ? w.text : String(w.ms);
        if (!seen.has(key)) {
          seen.add(key);
          out.push(w.text);
        }
      }
      return out;
    };
    const rdate = dedupe(part.rdate);
    const exdate = dedupe(part.exdate);
    if (rdate.length > MAX_DATES || exdate.length > MAX_DATES) {
      this.skip(uid, head.line, `more than ${MAX_DATES} RDATE or EXDATE values`);
      return;
    }
    let recurrence: Recurrence;
    try {
      recurrence = validateRule({
        dtstart: part.start.text,
        tzid,
        rrule: part.rrule,
        rdate,
        exdate,
      });
    } catch (err) {
      const message = err instanceof ValidationError ? err.message : String(err);
      this.skip(
        uid,
        head.line,
        /excludes every occurrence/.test(message)
          ? "every occurrence is cancelled or excluded"
          : message,
      );
      return;
    }
    // Reminders: `remind` offsets, then the VALARMs (§3.6.6) of the part's head (else the series').
    let reminders: ImportedReminder[];
    try {
      reminders = this.reminders(head.alarms.length > 0 ? head : master, part, recurrence);
    } catch (err) {
      if (!(err instanceof EventError)) throw err;
      this.skip(uid, head.line, err.message);
      return;
    }
    if (reminders.length === 0) {
      this.skip(
        uid,
        head.line,
        this.opts.useAlarms
          ? "no reminder: no remind offsets and no usable VALARM"
          : "no reminder: no remind offsets given (and VALARMs not used)",
      );
      return;
    }
    const d = part.duration;
    const end = dateOnly
      ? addDays(part.start.text, d.days)
      : isoZ(part.start.ms + d.days * 86_400_000 + d.exactMs);
    const schedule: ImportedSchedule = {
      dtstart: part.start.text,
      tzid,
      rrule: part.rrule,
      rdate,
      exdate,
      perpetual: !recurrence.bounded,
      payload: {
        uid,
        summary: part.summary,
        location: part.location,
        description: part.description,
        start: part.start.text,
        end,
        duration: formatOffset(d),
        allDay: dateOnly,
        timeZone: part.tzidText,
        ...(recurrenceId === undefined ? {} : { recurrenceId }),
      },
      title: titleOf(part.summary),
      reminders,
      source: this.opts.source,
      externalId,
    };
    const bytes = jsonBytes(schedule.payload);
    if (bytes > MAX_PAYLOAD_BYTES) {
      const reason = `payload is ${bytes} bytes as JSON, over the limit of ${MAX_PAYLOAD_BYTES}: event not imported`;
      this.warn(`event "${uid.slice(0, 80)}" (line ${head.line}): ${reason}`);
      this.skip(uid, head.line, reason);
      return;
    }
    validated.set(schedule, recurrence);
    this.events.push({ uid, schedule, recurrenceIds, summary: part.summary });
  }
}
