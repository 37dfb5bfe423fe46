/**
 * Reminders of an imported event (API-5, RFC 5545 §3.6.6): the `remind` offsets, then the
 * VALARMs (with `useAlarms`) as offsets from each occurrence's start — RELATED=END,
 * absolute triggers of one-off events, REPEAT/DURATION — one bad alarm costing only itself.
 */
import { type Recurrence } from "../recurrence/index.js";
import { prop, type IcalComponent } from "./lexer.js";
import type { ImportedReminder } from "./types.js";
import { formatOffset, parseDuration, parseIcalTime, type Duration } from "./values.js";
import { EventError, EventReader, fail, text, type ParsedEvent } from "./reading.js";

/** Most reminders of one schedule (the create contract's limit). */
const MAX_REMINDERS = 50;
/** Most extra reminders taken from one VALARM's REPEAT. */
const MAX_REPEAT = 10;

/** The importer's layer that turns an event's alarms into reminders. */
export abstract class AlarmReader extends EventReader {
  protected reminders(
    owner: ParsedEvent,
    part: ParsedEvent,
    recurrence: Recurrence,
  ): ImportedReminder[] {
    const out: ImportedReminder[] = this.opts.remind.map((r) => this.withTarget({ ...r }));
    const offsets = new Set(out.map((r) => r.offset));
    if (this.opts.useAlarms) {
      const recurring = part.rrule !== null || part.rdate.length > 0;
      owner.alarms.forEach((alarm, i) => {
        let durations: Duration[];
        try {
          durations = this.alarmOffsets(alarm, i, part, recurring, recurrence);
        } catch (err) {
          if (!(err instanceof EventError)) throw err;
          // One bad VALARM costs only itself: the event and its other reminders stay.
          this.warn(
            `event "${owner.uid}" (line ${owner.line}): ${err.message}; that alarm skipped`,
          );
          return;
        }
        for (const d of durations) {
          const offset = formatOffset(d);
          if (offsets.has(offset)) continue;
          offsets.add(offset);
          out.push(this.withTarget({ key: `alarm-${offset}`, offset, channel: this.opts.channel }));
        }
      });
    }
    if (out.length > MAX_REMINDERS) {
      this.warn(
        `event(s) with more than ${MAX_REMINDERS} reminders: the first ${MAX_REMINDERS} are kept`,
      );
      out.length = MAX_REMINDERS;
    }
    return out;
  }

  protected withTarget(r: ImportedReminder): ImportedReminder {
    return this.opts.target === undefined ? r : { ...r, target: { ...this.opts.target } };
  }

  /** Offsets of one VALARM from the occurrence start (§3.8.6.3, §3.8.6.2 REPEAT/DURATION). */
  protected alarmOffsets(
    alarm: IcalComponent,
    index: number,
    part: ParsedEvent,
    recurring: boolean,
    recurrence: Recurrence,
  ): Duration[] {
    const where = `VALARM ${index + 1} (line ${alarm.line})`;
    const action = (text(alarm, "ACTION") ?? "").toUpperCase();
    if (action === "NONE") return [];
    const trigger = prop(alarm, "TRIGGER");
    if (trigger === undefined || trigger.value.trim() === "")
      fail(`${where}: invalid trigger: no TRIGGER`);
    const valueType = (trigger.params.VALUE ?? "DURATION").toUpperCase();
    let base: Duration;
    if (valueType === "DATE-TIME") {
      const t = parseIcalTime(trigger.value);
      if (t === null || t.kind === "date")
        fail(`${where}: invalid trigger: "${trigger.value.slice(0, 40)}" is not a date-time`);
      if (recurring) {
        this.warn(
          "absolute VALARM TRIGGER (VALUE=DATE-TIME) on a recurring event ignored: it names one instant, not one per occurrence",
        );
        return [];
      }
      const at = this.when(t, trigger.params.TZID, part.tzid, "TRIGGER").ms;
      base = { days: 0, exactMs: at - recurrence.first.instant };
    } else if (valueType === "DURATION") {
      const related = (trigger.params.RELATED ?? "START").toUpperCase();
      if (related !== "START" && related !== "END")
        fail(`${where}: invalid trigger: RELATED=${trigger.params.RELATED}`);
      const d = parseDuration(trigger.value);
      if (d === null)
        fail(`${where}: invalid trigger: "${trigger.value.slice(0, 40)}" is not a duration`);
      base =
        related === "END"
          ? { days: d.days + part.duration.days, exactMs: d.exactMs + part.duration.exactMs }
          : d;
    } else {
      fail(`${where}: invalid trigger: VALUE=${trigger.params.VALUE}`);
    }
    const out = [base];
    const repeatText = text(alarm, "REPEAT");
    if (repeatText !== null) {
      const repeat = Number(repeatText);
      const step = parseDuration(text(alarm, "DURATION") ?? "");
      if (
        !Number.isInteger(repeat) ||
        repeat < 0 ||
        step === null ||
        step.days < 0 ||
        step.exactMs < 0
      ) {
        this.warn("VALARM REPEAT without a valid DURATION ignored");
      } else {
        if (repeat > MAX_REPEAT) this.warn(`VALARM REPEAT above ${MAX_REPEAT} capped`);
        for (let k = 1; k <= Math.min(repeat, MAX_REPEAT); k++) {
          out.push({ days: base.days + k * step.days, exactMs: base.exactMs + k * step.exactMs });
        }
      }
    }
    return out;
  }
}
