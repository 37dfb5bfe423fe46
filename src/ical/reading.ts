/**
 * Reading an iCalendar file (RFC 5545, API-5): the import options checked, the file-level
 * limits, and each VEVENT read into a {@link ParsedEvent} — its values resolved in their
 * zones, its RRULE repaired and tidied — by {@link EventReader}, the first layer of the
 * importer (then alarms.ts, series.ts, emitting.ts, import.ts).
 */
import { offsetRefusal } from "../domain/index.js";
import {
  MAX_EVENT_DESCRIPTION_CHARS,
  MAX_EVENT_TEXT_CHARS,
  MAX_TITLE_CHARS,
} from "../contracts/index.js";
import { ValidationError } from "../errors/index.js";
import {
  isOffsetZone,
  parseOffset,
  repairRuleText,
  tidyRuleText,
  toInstant,
} from "../recurrence/index.js";
import { prop, props, unescapeText, type IcalComponent } from "./lexer.js";
import type { IcalImportOptions, ImportedReminder, SkippedEvent } from "./types.js";
import {
  compactLocal,
  daysBetween,
  formatOffset,
  isoZ,
  parseDuration,
  parseIcalTime,
  type Duration,
  type IcalTime,
} from "./values.js";
import { cleanTzid, wallOf, type ZoneResolver } from "./zones.js";

/** Default {@link IcalImportOptions.maxBytes}: 20 MiB. */
export const DEFAULT_MAX_BYTES = 20 * 1024 * 1024;
/** Default {@link IcalImportOptions.maxEvents}. */
export const DEFAULT_MAX_EVENTS = 50_000;
/** Longest DESCRIPTION kept in the payload, in characters. */
export const MAX_DESCRIPTION = 1_000;

/** API-5: the longest text read from an event's fields, characters (an event over one is skipped). */
export const TEXT_LIMITS: ReadonlyArray<readonly [string, number]> = [
  ["SUMMARY", MAX_EVENT_TEXT_CHARS],
  ["LOCATION", MAX_EVENT_TEXT_CHARS],
  ["DESCRIPTION", MAX_EVENT_DESCRIPTION_CHARS],
];

/** A date or instant resolved in a zone. */
export interface When {
  /** The engine's notation: `YYYY-MM-DD`, `YYYY-MM-DDTHH:mm:ss` (read in `tzid`) or `…Z`. */
  text: string;
  ms: number;
  dateOnly: boolean;
  /** Zone the value was written in (IANA), or null for UTC. */
  tzid: string | null;
  floating: boolean;
}

/** A VEVENT read and checked, not yet combined with its overrides. */
export interface ParsedEvent {
  uid: string;
  line: number;
  comp: IcalComponent;
  cancelled: boolean;
  sequence: number;
  summary: string | null;
  location: string | null;
  description: string | null;
  tzidText: string | null;
  /** Schedule zone and DTSTART in the engine's notation. */
  tzid: string;
  start: When;
  duration: Duration;
  rrule: string | null;
  rdate: When[];
  exdate: When[];
  rid: { raw: string; when: When; future: boolean } | null;
  alarms: IcalComponent[];
}

export class EventError extends Error {}

export function fail(message: string): never {
  throw new EventError(message);
}

/** Reads the import options, strict with people: bad ones throw. */
export function readOptions(options: IcalImportOptions): {
  source: string;
  defaultTzid: string;
  /** The caller chose the default zone (else a zone the file itself defines may serve). */
  defaultTzidGiven: boolean;
  remind: ImportedReminder[];
  useAlarms: boolean;
  channel: string;
  target: Record<string, unknown> | undefined;
  maxBytes: number;
  maxEvents: number;
} {
  if (options === null || typeof options !== "object")
    throw new ValidationError({ field: "options", message: "are required" });
  if (
    typeof options.source !== "string" ||
    options.source.length === 0 ||
    options.source.length > 200
  )
    throw new ValidationError({
      field: "source",
      message: "must be 1–200 characters",
      value: options.source,
    });
  const defaultTzid = options.defaultTzid ?? "UTC";
  if (typeof defaultTzid === "string" && isOffsetZone(defaultTzid)) {
    throw new ValidationError({
      field: "tzid",
      message: "is a UTC offset, not a time zone: use an IANA name such as Europe/Berlin (or UTC)",
      value: defaultTzid,
    });
  }
  try {
    toInstant("2000-01-01", defaultTzid);
  } catch {
    throw new ValidationError({
      field: "tzid",
      message: "is not a known IANA time zone",
      value: defaultTzid,
    });
  }
  const channel = options.channel ?? "webhook";
  const remind: ImportedReminder[] = [];
  (options.remind ?? []).forEach((text, i) => {
    const d = typeof text === "string" ? parseDuration(text) : null;
    try {
      parseOffset(String(text));
    } catch (err) {
      const message = err instanceof ValidationError ? err.issues[0]?.message : undefined;
      throw new ValidationError({
        field: `remind.${i}`,
        message: message ?? offsetRefusal(text),
        value: text,
      });
    }
    if (d === null)
      throw new ValidationError({
        field: `remind.${i}`,
        message: offsetRefusal(text),
        value: text,
      });
    const offset = formatOffset(d);
    if (!remind.some((r) => r.offset === offset))
      remind.push({ key: `remind-${offset}`, offset, channel });
  });
  const num = (v: number | undefined, dflt: number, field: string): number => {
    if (v === undefined) return dflt;
    if (!Number.isInteger(v) || v <= 0)
      throw new ValidationError({ field, message: "must be a positive integer", value: v });
    return v;
  };
  return {
    source: options.source,
    defaultTzid,
    defaultTzidGiven: options.defaultTzid !== undefined,
    remind,
    useAlarms: options.useAlarms === true,
    channel,
    target: options.target,
    maxBytes: num(options.maxBytes, DEFAULT_MAX_BYTES, "maxBytes"),
    maxEvents: num(options.maxEvents, DEFAULT_MAX_EVENTS, "maxEvents"),
  };
}

/**
 * API-5: an event's SUMMARY as its schedule's title: control characters (line breaks,
 * escape sequences) replaced by spaces, cut to {@link MAX_TITLE_CHARS} characters (never
 * between the two halves of a surrogate pair); null without one.
 */
export function titleOf(summary: string | null): string | null {
  if (summary === null) return null;
  // Control characters (line breaks of a folded SUMMARY, escapes) become one space each run.
  const line = summary.replace(/[\u0000-\u001f\u007f-\u009f]+/g, " ").trim();
  if (line === "") return null;
  if (line.length <= MAX_TITLE_CHARS) return line;
  const cut = line.slice(0, MAX_TITLE_CHARS);
  return /[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut;
}

export function text(comp: IcalComponent, name: string): string | null {
  const p = prop(comp, name);
  if (p === undefined) return null;
  const v = unescapeText(p.value).trim();
  return v === "" ? null : v;
}

/**
 * A text shown to people (SUMMARY, LOCATION, DESCRIPTION) without NUL, which cannot be
 * stored (PostgreSQL text and jsonb refuse it): dropped, so the dry run and the import read
 * the same event, where the import used to refuse the whole event. Identifiers (UID) keep
 * theirs and are refused: dropping it could make one UID of two.
 */
export function displayText(comp: IcalComponent, name: string): string | null {
  const v =
    text(comp, name)
      ?.replace(/\u0000/g, "")
      .trim() ?? null;
  return v === "" ? null : v;
}

/** The file-level checks: text, `maxBytes`, a VCALENDAR line. */
export function checkFile(
  text: unknown,
  opts: ReturnType<typeof readOptions>,
): asserts text is string {
  if (typeof text !== "string")
    throw new ValidationError({ field: "file", message: "must be text" });
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > opts.maxBytes) {
    throw new ValidationError({
      field: "file",
      message: `is ${bytes} bytes, more than the limit maxBytes=${opts.maxBytes}`,
    });
  }
  if (!/^[ \t]*BEGIN:VCALENDAR[ \t]*$/im.test(text)) {
    throw new ValidationError({
      field: "file",
      message: "is not an iCalendar file (no BEGIN:VCALENDAR line)",
    });
  }
}

export function checkEventCount(count: number, opts: ReturnType<typeof readOptions>): void {
  if (count > opts.maxEvents) {
    throw new ValidationError({
      field: "file",
      message: `has ${count} events, more than the limit maxEvents=${opts.maxEvents}`,
    });
  }
}

/** Work done between two turns of the event loop by {@link parseCalendarAsync}, in ms. */
export const IMPORT_SLICE_MS = 10;

/** Lets timers, I/O and other requests run: resolves on the next turn of the event loop. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** The import options as read by {@link readOptions}. */
export type ReadOptions = ReturnType<typeof readOptions>;

/**
 * The first layer of the importer: warnings and skips, values resolved in their zones,
 * and one VEVENT read into a {@link ParsedEvent}.
 */
export class EventReader {
  protected readonly warnings: string[] = [];
  protected readonly warned = new Set<string>();
  protected readonly skipped: SkippedEvent[] = [];
  protected resolver!: ZoneResolver;
  protected calendarTzid: string | null = null;
  protected floatingTzid = "UTC";
  protected allDayHint = "UTC";
  protected allDayTzid = "UTC";

  constructor(protected readonly opts: ReadOptions) {}

  protected warn(message: string): void {
    if (this.warned.has(message)) return;
    this.warned.add(message);
    if (this.warnings.length < 200) this.warnings.push(message);
  }

  // ---------------------------------------------------------------- values

  /** Resolves a DATE/DATE-TIME property value; `series` gives the zone of floating values. */
  protected when(
    t: IcalTime,
    tzidParam: string | undefined,
    seriesTzid: string,
    what: string,
  ): When {
    if (t.kind === "date") {
      return {
        text: t.date,
        ms: this.instant(t.date, seriesTzid, what),
        dateOnly: true,
        tzid: null,
        floating: false,
      };
    }
    if (t.kind === "utc") {
      const ms = Date.parse(`${t.local}Z`);
      return { text: `${t.local}Z`, ms, dateOnly: false, tzid: null, floating: false };
    }
    if (tzidParam !== undefined && !/^(Z|UTC|GMT|Etc\/UTC)$/i.test(cleanTzid(tzidParam))) {
      const r = this.resolver.resolve(tzidParam);
      if (!r.ok) fail(`${what}: ${r.reason}`);
      return {
        text: t.local,
        ms: this.instant(t.local, r.tzid, what),
        dateOnly: false,
        tzid: r.tzid,
        floating: false,
      };
    }
    if (tzidParam !== undefined) {
      const ms = Date.parse(`${t.local}Z`);
      return { text: `${t.local}Z`, ms, dateOnly: false, tzid: null, floating: false };
    }
    return {
      text: t.local,
      ms: this.instant(t.local, seriesTzid, what),
      dateOnly: false,
      tzid: null,
      floating: true,
    };
  }

  protected instant(local: string, tzid: string, what: string): number {
    try {
      const ms = toInstant(local, tzid);
      if (ms === null) fail(`${what}: ${local} does not exist in ${tzid}`);
      return ms;
    } catch (err) {
      if (err instanceof EventError) throw err;
      fail(`${what}: ${(err as Error).message}`);
    }
  }

  /** A value converted into a series' notation (date-only or not, zone `tzid`). */
  protected inSeries(w: When, dateOnly: boolean, tzid: string): When {
    if (dateOnly) {
      if (w.dateOnly) return { ...w, ms: this.instant(w.text, tzid, "date") };
      const date =
        w.floating || w.tzid !== null
          ? w.text.slice(0, 10)
          : wallOf(this.allDayHint, w.ms).slice(0, 10);
      return {
        text: date,
        ms: this.instant(date, tzid, "date"),
        dateOnly: true,
        tzid: null,
        floating: false,
      };
    }
    if (w.dateOnly) return { ...w, ms: this.instant(w.text, tzid, "date") };
    if (w.floating) return { ...w, ms: this.instant(w.text, tzid, "date-time") };
    if (w.tzid === tzid) return w;
    return { text: isoZ(w.ms), ms: w.ms, dateOnly: false, tzid: null, floating: false };
  }

  protected list(comp: IcalComponent, name: string, dateOnly: boolean, tzid: string): When[] {
    const out: When[] = [];
    for (const p of props(comp, name)) {
      for (const raw of p.value.split(",")) {
        const v = raw.trim().split("/")[0] ?? "";
        if (v === "") continue;
        const t = parseIcalTime(v, p.params.VALUE === "PERIOD" ? undefined : p.params.VALUE);
        if (t === null)
          fail(`${name} value "${v.slice(0, 40)}" is not a date or date-time (line ${p.line})`);
        out.push(
          this.inSeries(
            this.when(t, t.kind === "date" ? undefined : p.params.TZID, tzid, name),
            dateOnly,
            tzid,
          ),
        );
      }
    }
    return out;
  }

  // ---------------------------------------------------------------- events

  protected readEvent(comp: IcalComponent, uid: string): ParsedEvent {
    // API-5: the same limits as every other way in; an event over one is not imported.
    for (const [name, max] of TEXT_LIMITS) {
      const length = text(comp, name)?.length ?? 0;
      if (length > max) {
        const reason = `${name} is ${length} characters, over the limit of ${max}: event not imported`;
        this.warn(`event "${uid.slice(0, 80)}" (line ${comp.line}): ${reason}`);
        fail(reason);
      }
    }
    const dtstartProp = prop(comp, "DTSTART");
    if (dtstartProp === undefined || dtstartProp.value.trim() === "") fail("no DTSTART");
    // RFC 5545 §3.6.1: DTSTART may occur once in a VEVENT. The same value twice (an
    // exporter's repetition) is one start; two different ones leave the event's time
    // undecidable, so the event is skipped with both values named, never one picked.
    const starts = props(comp, "DTSTART");
    const other = starts.find(
      (p) =>
        p.value.trim() !== dtstartProp.value.trim() || p.params.TZID !== dtstartProp.params.TZID,
    );
    if (other !== undefined) {
      const shown = (p: typeof other) =>
        `${p.params.TZID === undefined ? "" : `TZID=${p.params.TZID.slice(0, 40)}:`}${p.value.trim().slice(0, 40)}`;
      fail(
        `more than one DTSTART (${shown(dtstartProp)}, ${shown(other)}; RFC 5545 §3.6.1 allows one): event not imported`,
      );
    }
    const t = parseIcalTime(dtstartProp.value, dtstartProp.params.VALUE);
    if (t === null) fail(`DTSTART "${dtstartProp.value.slice(0, 40)}" is not a date or date-time`);
    const tzParam = t.kind === "local" ? dtstartProp.params.TZID : undefined;
    const start0 = this.when(t, tzParam, this.floatingTzid, "DTSTART");
    let tzid: string;
    if (start0.dateOnly) tzid = this.allDayTzid;
    else if (start0.floating) tzid = this.floatingTzid;
    else if (start0.tzid !== null) tzid = start0.tzid;
    else tzid = this.calendarTzid ?? "UTC";
    const start = start0;
    const dateOnly = start.dateOnly;

    // Length of the event: DTEND or DURATION (§3.8.2.2, §3.8.2.5).
    let duration: Duration = dateOnly ? { days: 1, exactMs: 0 } : { days: 0, exactMs: 0 };
    const endProp = prop(comp, "DTEND");
    const durProp = prop(comp, "DURATION");
    if (endProp !== undefined && endProp.value.trim() !== "") {
      const et = parseIcalTime(endProp.value, endProp.params.VALUE);
      if (et === null) fail(`DTEND "${endProp.value.slice(0, 40)}" is not a date or date-time`);
      const end = this.when(
        et,
        et.kind === "local" ? endProp.params.TZID : undefined,
        tzid,
        "DTEND",
      );
      if (dateOnly && end.dateOnly)
        duration = { days: daysBetween(start.text, end.text), exactMs: 0 };
      else duration = { days: 0, exactMs: end.ms - start.ms };
      if (end.ms < start.ms)
        fail(`DTEND ${endProp.value.trim()} is before DTSTART ${dtstartProp.value.trim()}`);
    } else if (durProp !== undefined) {
      const d = parseDuration(durProp.value);
      if (d === null) fail(`DURATION "${durProp.value.slice(0, 40)}" is not a duration`);
      if (d.days < 0 || d.exactMs < 0) fail(`DURATION ${durProp.value.trim()} is negative`);
      duration = d;
    }

    // RRULE: tidy the notation, make UNTIL match DTSTART's value type (§3.3.10).
    let rrule: string | null = null;
    const rr = props(comp, "RRULE");
    if (rr.length > 1) this.warn("event(s) with more than one RRULE: only the first is used");
    let rawRule = rr[0]?.value.trim() ?? "";
    if (rawRule !== "") {
      rawRule = this.repairRule(rawRule, uid, comp.line);
      rrule = this.tidyRule(rawRule, dateOnly, tzid, start.floating);
    }

    const rdate = this.list(comp, "RDATE", dateOnly, tzid);
    const exdate = this.list(comp, "EXDATE", dateOnly, tzid);

    let rid: ParsedEvent["rid"] = null;
    const ridProp = prop(comp, "RECURRENCE-ID");
    if (ridProp !== undefined) {
      const rt = parseIcalTime(ridProp.value, ridProp.params.VALUE);
      if (rt === null)
        fail(`RECURRENCE-ID "${ridProp.value.slice(0, 40)}" is not a date or date-time`);
      rid = {
        raw: ridProp.value.trim(),
        when: this.when(
          rt,
          rt.kind === "local" ? ridProp.params.TZID : undefined,
          tzid,
          "RECURRENCE-ID",
        ),
        future: (ridProp.params.RANGE ?? "").toUpperCase() === "THISANDFUTURE",
      };
    }
    const status = (text(comp, "STATUS") ?? "").toUpperCase();
    for (const name of ["SUMMARY", "LOCATION", "DESCRIPTION"]) {
      if (text(comp, name)?.includes("\u0000")) {
        this.warn(`${name} of event "${uid.slice(0, 80)}" had NUL characters; they were dropped`);
      }
    }
    const description = displayText(comp, "DESCRIPTION");
    const seq = Number(text(comp, "SEQUENCE") ?? "0");
    return {
      uid,
      line: comp.line,
      comp,
      cancelled: status === "CANCELLED",
      sequence: Number.isFinite(seq) ? seq : 0,
      summary: displayText(comp, "SUMMARY"),
      location: displayText(comp, "LOCATION"),
      description: description === null ? null : description.slice(0, MAX_DESCRIPTION),
      tzidText: tzParam === undefined ? null : cleanTzid(tzParam),
      tzid,
      start,
      duration,
      rrule,
      rdate,
      exdate,
      rid,
      alarms: comp.components.filter((c) => c.name === "VALARM"),
    };
  }

  /**
   * Lenient repairs exports need (API-5): a doubled `RRULE:RRULE:` prefix and parts that are
   * not RFC 5545 rule parts (unknown names, `X-` extensions, text without `=`) are taken
   * out, each event's repair named in a warning, so the event imports instead of being
   * skipped. A rule left without FREQ, or with a misspelt part (`UNTL=…`: a bound the
   * author meant, so leaving it out would lengthen the series), is not repaired:
   * `validateRule` then refuses it as written and the event is skipped with that reason.
   */
  protected repairRule(raw: string, uid: string, line: number): string {
    const repair = repairRuleText(raw);
    if (repair.prefixes === 0 && repair.dropped.length === 0) return raw;
    if (repair.misspelt.length > 0 || !/(^|;)\s*FREQ\s*=/i.test(repair.text)) return raw;
    const what: string[] = [];
    if (repair.prefixes > 0) what.push('a doubled "RRULE:" prefix removed');
    if (repair.dropped.length > 0) {
      const names = repair.dropped.map((p) => JSON.stringify(p.slice(0, 40)));
      what.push(`unknown part(s) ${names.join(", ")} left out`);
    }
    this.warn(`event "${uid.slice(0, 80)}" (line ${line}): RRULE repaired: ${what.join("; ")}`);
    return repair.text;
  }

  /**
   * The RRULE in the engine's strict notation: parts trimmed and upper-cased, UNTIL of the
   * same value type as DTSTART and, for a date-time series, in UTC (§3.3.10). A local UNTIL is
   * read in the series' zone (with a warning when DTSTART was zoned, where the RFC wants UTC).
   */
  protected tidyRule(
    raw: string,
    dateOnly: boolean,
    tzid: string,
    floating: boolean,
  ): string | null {
    return tidyRuleText(raw, (value) => {
      const u = parseIcalTime(value);
      if (u === null) return value;
      if (dateOnly && u.kind !== "date") {
        const date =
          u.kind === "utc"
            ? wallOf(this.allDayHint, Date.parse(`${u.local}Z`)).slice(0, 10)
            : u.local.slice(0, 10);
        return date.replace(/-/g, "");
      }
      if (!dateOnly && u.kind === "date") {
        const ms = this.instant(`${u.date}T23:59:59`, tzid, "RRULE UNTIL");
        return `${compactLocal(isoZ(ms).slice(0, 19))}Z`;
      }
      if (!dateOnly && u.kind === "local") {
        if (!floating) {
          this.warn(
            `event(s) whose RRULE UNTIL is a local time while DTSTART has a zone (RFC 5545 §3.3.10 wants UTC): UNTIL read in the event's zone`,
          );
        }
        const ms = this.instant(u.local, tzid, "RRULE UNTIL");
        return `${compactLocal(isoZ(ms).slice(0, 19))}Z`;
      }
      return value.toUpperCase();
    });
  }

  protected skip(uid: string | null, line: number | null, reason: string): void {
    this.skipped.push({ uid, line, reason });
  }
}
