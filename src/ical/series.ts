/**
 * A series with its overrides (API-5, RFC 5545 §3.8.4.4): moved and cancelled instances
 * become EXDATE/RDATE pairs; each `RANGE=THISANDFUTURE` override ends one part of the
 * series and starts the next, its rule bounded, split by COUNT and moved with it (the
 * RRULE text edited in `recurrence/rule-text.ts`), or listed as dates when no rule can
 * follow the move. Each part is handed to {@link SeriesBuilder.emit}.
 */
import {
  formatRuleParts,
  ruleParts,
  shiftRuleParts,
  validateRule,
  type Recurrence,
  type RuleParts,
} from "../recurrence/index.js";
import {
  addDays,
  addWallSeconds,
  compactLocal,
  daysBetween,
  isoZ,
  parseIcalTime,
  wallSecondsBetween,
} from "./values.js";
import { wallOf } from "./zones.js";
import { AlarmReader } from "./alarms.js";
import { EventError, fail, type ParsedEvent, type When } from "./reading.js";

/** Most RDATE/EXDATE values of one schedule (the engine's limit). */
export const MAX_DATES = 1_000;

/** The importer's layer that combines a series with its overrides into parts. */
export abstract class SeriesBuilder extends AlarmReader {
  /** Turns one part of a series into a schedule (emitting.ts). */
  protected abstract emit(
    head: ParsedEvent,
    part: ParsedEvent,
    externalId: string,
    recurrenceId: string | undefined,
    recurrenceIds: Record<string, string>,
    master?: ParsedEvent,
  ): void;

  /** Combines a series with its overrides (§3.8.4.4) and emits one schedule per part. */
  protected buildSeries(master: ParsedEvent, overrides: ParsedEvent[]): void {
    const tz = master.tzid;
    const dateOnly = master.start.dateOnly;
    const isInstance = overrides.length === 0 ? null : this.instanceTest(master);
    const ridMemo = new Map<ParsedEvent, When>();
    const ridOf = (o: ParsedEvent): When => {
      const hit = ridMemo.get(o);
      if (hit !== undefined) return hit;
      const rid = o.rid as NonNullable<ParsedEvent["rid"]>;
      const w = this.overrideTarget(rid.when, dateOnly, tz, isInstance);
      if (isInstance !== null && !isInstance(w.ms)) {
        this.warn(
          `event "${master.uid}" (line ${o.line}): RECURRENCE-ID ${rid.raw} names no instance of its series; the override is added as an extra occurrence`,
        );
      }
      ridMemo.set(o, w);
      return w;
    };
    // Latest SEQUENCE wins among overrides of the same instance.
    const byRid = new Map<number, ParsedEvent>();
    for (const o of overrides) {
      const key = ridOf(o).ms;
      const prev = byRid.get(key);
      if (prev === undefined || o.sequence >= prev.sequence) byRid.set(key, o);
    }
    const all = [...byRid.values()];
    const future = all
      .filter((o) => o.rid?.future === true)
      .sort((a, b) => ridOf(a).ms - ridOf(b).ms);
    const single = all.filter((o) => o.rid?.future !== true);

    // Segment k covers the original instances in [bounds[k], bounds[k+1]).
    const bounds = [-Infinity, ...future.map((o) => ridOf(o).ms), Infinity];
    const ruleOnly = this.ruleInstantsBefore(master);
    for (let k = 0; k < bounds.length - 1; k++) {
      const lo = bounds[k] as number;
      const hi = bounds[k + 1] as number;
      const head = k === 0 ? master : (future[k - 1] as ParsedEvent);
      if (head.cancelled) {
        this.skip(
          master.uid,
          head.line,
          `STATUS:CANCELLED from ${head.rid?.raw} on (RANGE=THISANDFUTURE): the rest of the series is not reminded`,
        );
        break;
      }
      const ridWhen = k === 0 ? null : ridOf(head);
      // Shift of this part relative to the original series: whole days and wall seconds.
      const shift =
        ridWhen === null
          ? { days: 0, seconds: 0 }
          : this.shiftOf(ridWhen, this.inSeries(head.start, dateOnly, tz), dateOnly, tz);
      const move = (w: When): When => this.shifted(w, shift, dateOnly, tz);
      const inPart = (w: When): boolean => w.ms >= lo && w.ms < hi;
      let part: ParsedEvent;
      try {
        part = this.partOf(master, head, k, lo, hi, shift, ruleOnly, dateOnly, tz);
      } catch (err) {
        if (!(err instanceof EventError)) throw err;
        this.skip(master.uid, head.line, err.message);
        continue;
      }
      part.rdate = [...part.rdate, ...master.rdate.filter(inPart).map(move)];
      part.exdate = [...part.exdate, ...master.exdate.filter(inPart).map(move)];
      const recurrenceIds: Record<string, string> = {};
      if (ridWhen !== null) recurrenceIds[isoZ(part.start.ms)] = head.rid?.raw ?? "";
      const added: When[] = [];
      for (const o of single) {
        const r = ridOf(o);
        if (!inPart(r)) continue;
        part.exdate.push(move(r));
        if (o.cancelled) continue;
        const at = this.inSeries(o.start, dateOnly, tz);
        added.push(at);
        recurrenceIds[isoZ(at.ms)] = o.rid?.raw ?? "";
      }
      part.rdate.push(...added);
      // An override's new start wins over an EXDATE of the same instant.
      const addedMs = new Set(added.map((w) => w.ms));
      part.exdate = part.exdate.filter((w) => !addedMs.has(w.ms));
      const externalId = k === 0 ? master.uid : `${master.uid}#${head.rid?.raw}`;
      this.emit(head, part, externalId, k === 0 ? undefined : head.rid?.raw, recurrenceIds, master);
    }
  }

  /**
   * Whether an instant is an instance of the series as written (DTSTART, RRULE, RDATE; before
   * EXDATE), or null when the series cannot be expanded here (the check is then skipped).
   */
  protected instanceTest(master: ParsedEvent): ((ms: number) => boolean) | null {
    let rec: Recurrence;
    try {
      rec = validateRule({
        dtstart: master.start.text,
        tzid: master.tzid,
        rrule: master.rrule,
        rdate: master.rdate.map((w) => w.text),
      });
    } catch {
      return null;
    }
    return (ms) => rec.between(ms, ms + 1, 1).length > 0;
  }

  /**
   * The original instance an override's RECURRENCE-ID names (§3.8.4.4), in the series'
   * notation. For an all-day series whose RECURRENCE-ID is a date-time (Exchange writes the
   * local midnight of the day, `TZID=W. Europe Standard Time:20260226T000000`, others the
   * same midnight in UTC), the DATE instance of that day: the day as written, else the
   * nearest local midnight, whichever is an instance of the series.
   */
  protected overrideTarget(
    rid: When,
    dateOnly: boolean,
    tz: string,
    isInstance: ((ms: number) => boolean) | null,
  ): When {
    const plain = this.inSeries(rid, dateOnly, tz);
    if (!dateOnly || rid.dateOnly || isInstance === null || isInstance(plain.ms)) return plain;
    const walls =
      rid.floating || rid.tzid !== null
        ? [rid.text]
        : [wallOf(this.allDayHint, rid.ms), wallOf(tz, rid.ms), isoZ(rid.ms).slice(0, 19)];
    const dates: string[] = [];
    for (const wall of walls) {
      // The wall time's own day, then the day of the nearest midnight.
      dates.push(wall.slice(0, 10), addWallSeconds(wall, 12 * 3600).slice(0, 10));
    }
    for (const date of dates) {
      const ms = this.instant(date, tz, "RECURRENCE-ID");
      if (isInstance(ms)) return { text: date, ms, dateOnly: true, tzid: null, floating: false };
    }
    return plain;
  }

  /** Number of RRULE instances (before RDATE/EXDATE) of the master before each instant, for COUNT. */
  protected ruleInstantsBefore(master: ParsedEvent): (ms: number) => number {
    const rrule = master.rrule;
    if (rrule === null || !/(^|;)COUNT=/.test(rrule)) return () => 0;
    // Read the rule only when a part of a split series asks (most series have no split).
    let rec: Recurrence | null | undefined;
    return (ms) => {
      if (ms === -Infinity) return 0;
      if (rec === undefined) {
        try {
          rec = validateRule({ dtstart: master.start.text, tzid: master.tzid, rrule });
        } catch {
          rec = null;
        }
      }
      return rec === null ? 0 : rec.between(-8.64e15, ms, 1_000_000).length;
    };
  }

  protected shiftOf(
    from: When,
    to: When,
    dateOnly: boolean,
    tz: string,
  ): { days: number; seconds: number } {
    if (dateOnly) return { days: daysBetween(from.text, to.text), seconds: 0 };
    const a = wallOf(tz, from.ms);
    const b = wallOf(tz, to.ms);
    const days = daysBetween(a.slice(0, 10), b.slice(0, 10));
    return { days, seconds: wallSecondsBetween(addWallSeconds(a, days * 86_400), b) };
  }

  protected instantWhen(ms: number): When {
    return { text: isoZ(ms), ms, dateOnly: false, tzid: null, floating: false };
  }

  protected shifted(
    w: When,
    s: { days: number; seconds: number },
    dateOnly: boolean,
    tz: string,
  ): When {
    if (s.days === 0 && s.seconds === 0) return w;
    if (w.dateOnly) {
      const date = addDays(w.text, s.days);
      return { ...w, text: date, ms: this.instant(date, tz, "date") };
    }
    const local = addWallSeconds(wallOf(tz, w.ms), s.days * 86_400 + s.seconds);
    const ms = this.instant(local, tz, "date-time");
    return dateOnly
      ? { ...w, text: local.slice(0, 10), ms }
      : { text: isoZ(ms), ms, dateOnly: false, tzid: null, floating: false };
  }

  /** The recurrence of part k of a series: bounded before `hi`, shifted like its head. */
  protected partOf(
    master: ParsedEvent,
    head: ParsedEvent,
    k: number,
    lo: number,
    hi: number,
    shift: { days: number; seconds: number },
    countBefore: (ms: number) => number,
    dateOnly: boolean,
    tz: string,
  ): ParsedEvent {
    const start = k === 0 ? master.start : this.inSeries(head.start, dateOnly, tz);
    const rule: RuleParts | null = master.rrule === null ? null : ruleParts(master.rrule);
    const part: ParsedEvent = { ...head, tzid: tz, start, rrule: null, rdate: [], exdate: [] };
    if (rule === null) return part;
    const moved = k > 0 && (shift.days !== 0 || shift.seconds !== 0);
    // COUNT counts the original instances (§3.3.10): split it between the parts.
    const count = rule.get("COUNT");
    if (count !== undefined) {
      const before = countBefore(lo);
      const upTo = Math.min(Number(count), hi === Infinity ? Infinity : countBefore(hi));
      const n = upTo - before;
      if (n <= 0) return part;
      rule.set("COUNT", String(n));
    } else {
      const old = rule.get("UNTIL");
      let untilMs = old === undefined ? Infinity : this.untilMs(old, tz);
      if (moved && Number.isFinite(untilMs))
        untilMs = this.shifted(this.instantWhen(untilMs), shift, false, tz).ms;
      if (hi !== Infinity)
        untilMs = Math.min(untilMs, this.shifted(this.instantWhen(hi), shift, false, tz).ms - 1000);
      if (Number.isFinite(untilMs)) {
        rule.set(
          "UNTIL",
          dateOnly
            ? compactLocal(wallOf(tz, untilMs).slice(0, 10))
            : `${compactLocal(isoZ(untilMs).slice(0, 19))}Z`,
        );
      }
    }
    if (moved && !shiftRuleParts(rule, shift)) {
      return this.materialize(master, part, lo, hi, shift, dateOnly, tz);
    }
    part.rrule = formatRuleParts(rule);
    return part;
  }

  protected untilMs(value: string, tz: string): number {
    const u = parseIcalTime(value);
    if (u === null) return Infinity;
    if (u.kind === "date") return this.instant(u.date, tz, "UNTIL");
    if (u.kind === "utc") return Date.parse(`${u.local}Z`);
    return this.instant(u.local, tz, "UNTIL");
  }

  /** A part whose rule cannot be shifted: its instances listed as RDATEs (finite parts only). */
  protected materialize(
    master: ParsedEvent,
    part: ParsedEvent,
    lo: number,
    hi: number,
    shift: { days: number; seconds: number },
    dateOnly: boolean,
    tz: string,
  ): ParsedEvent {
    const rec = validateRule({ dtstart: master.start.text, tzid: tz, rrule: master.rrule });
    const list = rec.between(lo, hi, MAX_DATES + 1);
    if (list.length > MAX_DATES || (!rec.bounded && hi === Infinity)) {
      fail(
        `RANGE=THISANDFUTURE at ${part.rid?.raw}: the moved rest of the series cannot be written as one rule and has too many instances to list`,
      );
    }
    const instants = list.map((o) =>
      this.shifted(
        dateOnly
          ? { text: o.local, ms: o.instant, dateOnly: true, tzid: null, floating: false }
          : { text: isoZ(o.instant), ms: o.instant, dateOnly: false, tzid: null, floating: false },
        shift,
        dateOnly,
        tz,
      ),
    );
    this.warn(
      "a RANGE=THISANDFUTURE change that a rule cannot express was written as a list of dates",
    );
    return { ...part, rrule: null, rdate: instants };
  }
}
