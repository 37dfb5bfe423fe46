/**
 * `parseCalendar`: an iCalendar file (RFC 5545) → one schedule per VEVENT UID (API-5).
 * Pure: no I/O, no clock, no dependence on the host's time zone.
 */
import { createHash } from "node:crypto";
import {
  jsonBytes,
  MAX_EVENT_DESCRIPTION_CHARS,
  MAX_EVENT_TEXT_CHARS,
  MAX_EXTERNAL_ID_CHARS,
  MAX_PAYLOAD_BYTES,
  MAX_TITLE_CHARS,
} from "../contracts/index.js";
import { ValidationError } from "../errors/index.js";
import {
  isOffsetZone,
  parseOffset,
  repairRuleText,
  toInstant,
  validateRule,
  type Recurrence,
} from "../recurrence/index.js";
import { prop, props, readComponents, unescapeText, type IcalComponent } from "./lexer.js";
import type {
  CalendarImport,
  IcalImportOptions,
  ImportedEvent,
  ImportedReminder,
  ImportedSchedule,
  SkippedEvent,
} from "./types.js";
import {
  addDays,
  addWallSeconds,
  compactLocal,
  daysBetween,
  formatOffset,
  isoZ,
  parseDuration,
  parseIcalTime,
  wallSecondsBetween,
  type Duration,
  type IcalTime,
} from "./values.js";
import { cleanTzid, wallOf, ZoneResolver } from "./zones.js";

/** Default {@link IcalImportOptions.maxBytes}: 20 MiB. */
export const DEFAULT_MAX_BYTES = 20 * 1024 * 1024;
/** Default {@link IcalImportOptions.maxEvents}. */
export const DEFAULT_MAX_EVENTS = 50_000;
/** Longest DESCRIPTION kept in the payload, in characters. */
export const MAX_DESCRIPTION = 1_000;
/** Most reminders of one schedule (the create contract's limit). */
const MAX_REMINDERS = 50;
/** Most extra reminders taken from one VALARM's REPEAT. */
const MAX_REPEAT = 10;
/** Most RDATE/EXDATE values of one schedule (the engine's limit). */
const MAX_DATES = 1_000;
const PROGRESS_EVERY = 250;

/** API-5: the longest text read from an event's fields, characters (an event over one is skipped). */
const TEXT_LIMITS: ReadonlyArray<readonly [string, number]> = [
  ["SUMMARY", MAX_EVENT_TEXT_CHARS],
  ["LOCATION", MAX_EVENT_TEXT_CHARS],
  ["DESCRIPTION", MAX_EVENT_DESCRIPTION_CHARS],
];

/** Recurrences validated during the import, reused by the dry run. */
export const validated = new WeakMap<ImportedSchedule, Recurrence>();

/** A date or instant resolved in a zone. */
interface When {
  /** The engine's notation: `YYYY-MM-DD`, `YYYY-MM-DDTHH:mm:ss` (read in `tzid`) or `…Z`. */
  text: string;
  ms: number;
  dateOnly: boolean;
  /** Zone the value was written in (IANA), or null for UTC. */
  tzid: string | null;
  floating: boolean;
}

/** A VEVENT read and checked, not yet combined with its overrides. */
interface ParsedEvent {
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

class EventError extends Error {}

function fail(message: string): never {
  throw new EventError(message);
}

/** Reads the import options, strict with people: bad ones throw. */
function readOptions(options: IcalImportOptions): {
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
    } catch {
      throw new ValidationError({
        field: `remind.${i}`,
        message: "must be an ISO 8601 duration such as -PT15M or -P1D",
        value: text,
      });
    }
    if (d === null)
      throw new ValidationError({
        field: `remind.${i}`,
        message: "must be an ISO 8601 duration such as -PT15M or -P1D",
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

function text(comp: IcalComponent, name: string): string | null {
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
function displayText(comp: IcalComponent, name: string): string | null {
  const v =
    text(comp, name)
      ?.replace(/\u0000/g, "")
      .trim() ?? null;
  return v === "" ? null : v;
}

/**
 * Reads an iCalendar file into schedules, one per VEVENT UID (API-5, RFC 5545 §3.6.1).
 *
 * - DTSTART/TZID, RRULE (§3.8.5.3, checked with `validateRule`), RDATE, EXDATE become the
 *   schedule's recurrence; DTEND/DURATION, SUMMARY, LOCATION, DESCRIPTION the payload.
 * - RECURRENCE-ID overrides (§3.8.4.4) are matched by UID: a moved instance is an EXDATE of
 *   the original plus an RDATE of its new start (listed in `recurrenceIds`); a cancelled one
 *   an EXDATE; `RANGE=THISANDFUTURE` ends the series before it and starts a second schedule
 *   (`externalId` `${uid}#${recurrenceId}`) shifted like the override.
 * - All-day (`VALUE=DATE`) events are date-only schedules at local midnight in
 *   `floatingTzid`; floating times are read there too (X-WR-TIMEZONE, else `defaultTzid`).
 *   UTC-anchored events of a file with X-WR-TIMEZONE expand in that zone (wall clock kept).
 * - VALARMs (§3.6.6, with `useAlarms`) and `remind` offsets become reminders; day-based
 *   offsets follow the wall clock, hour-based ones are exact (§3.8.6.3).
 * - One bad event is skipped with its UID, line and reason; the rest imports.
 *
 * @param text the file's content (UTF-8 text).
 * @throws ValidationError field `file` when the text is not iCalendar (no BEGIN:VCALENDAR)
 *   or exceeds `maxBytes` / `maxEvents`; fields `source`, `tzid`, `remind.N`, `maxBytes`,
 *   `maxEvents` for bad options.
 */
export function parseCalendar(text: string, options: IcalImportOptions): CalendarImport {
  const opts = readOptions(options);
  checkFile(text, opts);
  const lex = readComponents(text);
  checkEventCount(lex.eventCount, opts);
  return {
    ...new Importer(lex.roots, opts, lex.repairs, options.onProgress).run(),
    complete: !lex.truncated,
  };
}

/** The file-level checks: text, `maxBytes`, a VCALENDAR line. */
function checkFile(text: unknown, opts: ReturnType<typeof readOptions>): asserts text is string {
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

function checkEventCount(count: number, opts: ReturnType<typeof readOptions>): void {
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

/**
 * {@link parseCalendar} in slices (OPS-12): the events are read a group (UID) at a time,
 * and after about {@link IMPORT_SLICE_MS} of work the event loop gets a turn, so a large
 * calendar never holds up timers, health checks or other requests for long. Same result
 * and errors as {@link parseCalendar}.
 *
 * @param options.yieldNow how to give the event loop its turn (default: one `setImmediate`).
 * @param options.sliceMs work between two turns, ms (default {@link IMPORT_SLICE_MS}; 0
 *   gives a turn after every UID).
 */
export async function parseCalendarAsync(
  text: string,
  options: IcalImportOptions & { yieldNow?: () => Promise<void>; sliceMs?: number },
): Promise<CalendarImport> {
  const sliceMs = options.sliceMs ?? IMPORT_SLICE_MS;
  const opts = readOptions(options);
  const yieldNow = options.yieldNow ?? yieldToEventLoop;
  checkFile(text, opts);
  await yieldNow();
  const lex = readComponents(text);
  checkEventCount(lex.eventCount, opts);
  await yieldNow();
  const importer = new Importer(lex.roots, opts, lex.repairs, options.onProgress);
  const steps = importer.steps();
  let sliceStart = performance.now();
  for (;;) {
    const next = steps.next();
    if (next.done === true) return { ...next.value, complete: !lex.truncated };
    if (performance.now() - sliceStart >= sliceMs) {
      await yieldNow();
      sliceStart = performance.now();
    }
  }
}

/** Calendar components that are not events: reported as ignored, never imported. */
const IGNORED_COMPONENTS = new Set(["VTODO", "VJOURNAL", "VFREEBUSY", "VAVAILABILITY"]);

class Importer {
  private readonly warnings: string[] = [];
  private readonly warned = new Set<string>();
  private readonly skipped: SkippedEvent[] = [];
  private readonly events: ImportedEvent[] = [];
  private readonly vevents: IcalComponent[] = [];
  private readonly vtimezones: IcalComponent[] = [];
  private readonly calendarProps: IcalComponent[] = [];
  private resolver!: ZoneResolver;
  private calendarTzid: string | null = null;
  private floatingTzid = "UTC";
  private allDayHint = "UTC";
  private allDayTzid = "UTC";
  private floatingCount = 0;
  private utcInCalendarZone = 0;
  private done = 0;

  constructor(
    roots: IcalComponent[],
    private readonly opts: ReturnType<typeof readOptions>,
    repairs: string[],
    private readonly onProgress: IcalImportOptions["onProgress"],
  ) {
    for (const r of repairs) this.warn(`file repaired: ${r}`);
    // Components that become no schedule (to-dos, journal entries, free/busy), counted
    // per name so that the summary says what the import left out.
    const ignored = new Map<string, number>();
    const walk = (c: IcalComponent): void => {
      if (c.name === "VEVENT") this.vevents.push(c);
      else if (c.name === "VTIMEZONE") this.vtimezones.push(c);
      else if (IGNORED_COMPONENTS.has(c.name)) ignored.set(c.name, (ignored.get(c.name) ?? 0) + 1);
      else {
        if (c.name === "VCALENDAR") this.calendarProps.push(c);
        for (const sub of c.components) walk(sub);
      }
    };
    for (const r of roots) walk(r);
    for (const [name, count] of ignored) {
      this.warn(
        `${count} ${name} component${count === 1 ? "" : "s"} ignored: only VEVENT components become schedules`,
      );
    }
  }

  private warn(message: string): void {
    if (this.warned.has(message)) return;
    this.warned.add(message);
    if (this.warnings.length < 200) this.warnings.push(message);
  }

  private progress(): void {
    this.done++;
    if (
      this.onProgress !== undefined &&
      (this.done % PROGRESS_EVERY === 0 || this.done === this.vevents.length)
    ) {
      this.onProgress(this.done, this.vevents.length);
    }
  }

  run(): CalendarImport {
    const steps = this.steps();
    for (;;) {
      const next = steps.next();
      if (next.done === true) return next.value;
    }
  }

  /** The import, one UID group per step (a caller may give the event loop a turn between). */
  *steps(): Generator<void, CalendarImport, undefined> {
    // Years in which each TZID is used: the years compared with the IANA database.
    const years = new Map<string, Set<number>>();
    for (const ev of this.vevents) {
      for (const name of ["DTSTART", "RECURRENCE-ID"]) {
        const p = prop(ev, name);
        const tz = p?.params.TZID;
        const y = Number(p?.value.slice(0, 4));
        if (tz !== undefined && Number.isInteger(y) && y > 0) {
          const key = cleanTzid(tz);
          const set = years.get(key) ?? new Set<number>();
          set.add(y);
          years.set(key, set);
        }
      }
    }
    const yearsOf = (id: string): number[] => {
      const set = years.get(id);
      if (set === undefined) return [];
      const sorted = [...set].sort((a, b) => b - a);
      const recent = sorted.filter((y) => y >= 1970);
      return (recent.length > 0 ? recent : sorted).slice(0, 3).sort((a, b) => a - b);
    };
    this.resolver = new ZoneResolver(this.vtimezones, yearsOf, (m) => this.warn(m));

    const wr = this.calendarProps.map((c) => text(c, "X-WR-TIMEZONE")).find((v) => v !== null);
    if (wr !== undefined && wr !== null) {
      let r: ReturnType<ZoneResolver["resolve"]>;
      try {
        r = this.resolver.resolve(wr);
      } catch {
        r = { ok: false, reason: "unreadable" };
      }
      if (r.ok) this.calendarTzid = r.tzid;
      else this.warn(`X-WR-TIMEZONE "${wr}" ignored: ${r.reason}`);
    }
    this.floatingTzid = this.calendarTzid ?? this.opts.defaultTzid;
    this.allDayHint = this.calendarTzid ?? this.fileZoneHint() ?? this.floatingTzid;
    // All-day dates are local midnight somewhere: X-WR-TIMEZONE, else the zone the caller
    // chose, else the zone of the file's own VTIMEZONE (an Outlook export names its zone
    // there only), else the default.
    this.allDayTzid =
      this.calendarTzid ?? (this.opts.defaultTzidGiven ? this.floatingTzid : this.allDayHint);

    // Group by UID, keeping file order.
    const groups = new Map<string, Array<{ comp: IcalComponent; uid: string }>>();
    const derived = new Map<string, number>();
    for (const comp of this.vevents) {
      let uid = text(comp, "UID");
      if (uid === null) {
        const basis = ["DTSTART", "SUMMARY", "RRULE", "RECURRENCE-ID"]
          .map((n) => prop(comp, n)?.value ?? "")
          .join("\u0000");
        const base = `nouid-${createHash("sha256").update(basis).digest("hex").slice(0, 16)}`;
        const n = (derived.get(base) ?? 0) + 1;
        derived.set(base, n);
        uid = n === 1 ? base : `${base}-${n}`;
        this.warn("event(s) without UID given a UID derived from DTSTART, SUMMARY and RRULE");
      }
      const list = groups.get(uid) ?? [];
      list.push({ comp, uid });
      groups.set(uid, list);
    }
    for (const [uid, list] of groups) {
      if (uid.length > MAX_EXTERNAL_ID_CHARS) {
        // The schedule's external id: the API refuses a longer one, so the import does too
        // (and names it by its start: a UID this long is not repeated in the answer).
        const shown = `${uid.slice(0, 80)}…`;
        const reason = `UID is ${uid.length} characters, over the limit of ${MAX_EXTERNAL_ID_CHARS}: event not imported`;
        this.skipped.push({ uid: shown, line: list[0]?.comp.line ?? null, reason });
        this.warn(`event "${shown}" (line ${list[0]?.comp.line ?? "?"}): ${reason}`);
        for (let i = 0; i < list.length; i++) this.progress();
        yield;
        continue;
      }
      try {
        this.importGroup(
          uid,
          list.map((x) => x.comp),
        );
      } catch (err) {
        // Anything unexpected stays with this UID: the rest of the file imports.
        const first = list[0]?.comp;
        this.skipped.push({
          uid,
          line: first?.line ?? null,
          reason: `could not be read: ${(err as Error).message}`,
        });
      }
      for (let i = 0; i < list.length; i++) this.progress();
      yield;
    }
    if (this.floatingCount > 0) {
      const why =
        this.calendarTzid !== null ? "X-WR-TIMEZONE" : "the default zone; the file names none";
      this.warn(
        `${this.floatingCount} event(s) with floating times read in ${this.floatingTzid} (${why})`,
      );
    }
    if (this.utcInCalendarZone > 0) {
      this.warn(
        `${this.utcInCalendarZone} event(s) written in UTC expanded in ${this.calendarTzid} (X-WR-TIMEZONE): a series keeps its wall-clock time there across DST`,
      );
    }
    this.events.sort((a, b) =>
      a.schedule.externalId < b.schedule.externalId
        ? -1
        : a.schedule.externalId > b.schedule.externalId
          ? 1
          : 0,
    );
    return {
      events: this.events,
      skipped: this.skipped,
      warnings: this.warnings,
      calendarTzid: this.calendarTzid,
      floatingTzid: this.floatingTzid,
      complete: true,
    };
  }

  /** The zone of the file's first usable non-UTC VTIMEZONE, for reading UTC values as dates. */
  private fileZoneHint(): string | null {
    for (const vt of this.vtimezones) {
      const id = prop(vt, "TZID")?.value;
      if (id === undefined) continue;
      const r = this.resolver.resolve(id);
      if (r.ok && !/^(UTC|Etc\/(UTC|GMT))$/.test(r.tzid)) return r.tzid;
    }
    return null;
  }

  // ---------------------------------------------------------------- values

  /** Resolves a DATE/DATE-TIME property value; `series` gives the zone of floating values. */
  private when(t: IcalTime, tzidParam: string | undefined, seriesTzid: string, what: string): When {
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

  private instant(local: string, tzid: string, what: string): number {
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
  private inSeries(w: When, dateOnly: boolean, tzid: string): When {
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

  private list(comp: IcalComponent, name: string, dateOnly: boolean, tzid: string): When[] {
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

  private readEvent(comp: IcalComponent, uid: string): ParsedEvent {
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
  private repairRule(raw: string, uid: string, line: number): string {
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
  private tidyRule(raw: string, dateOnly: boolean, tzid: string, floating: boolean): string | null {
    const parts = raw
      .replace(/^RRULE:/i, "")
      .split(";")
      .map((p) => p.replace(/\s+/g, ""))
      .filter((p) => p !== "");
    if (parts.length === 0) return null;
    const out = parts.map((p) => {
      const eq = p.indexOf("=");
      if (eq === -1) return p.toUpperCase();
      const key = p.slice(0, eq).toUpperCase();
      const value = p.slice(eq + 1);
      if (key !== "UNTIL") return `${key}=${value.toUpperCase()}`;
      const u = parseIcalTime(value);
      if (u === null) return `${key}=${value}`;
      if (dateOnly && u.kind !== "date") {
        const date =
          u.kind === "utc"
            ? wallOf(this.allDayHint, Date.parse(`${u.local}Z`)).slice(0, 10)
            : u.local.slice(0, 10);
        return `UNTIL=${date.replace(/-/g, "")}`;
      }
      if (!dateOnly && u.kind === "date") {
        const ms = this.instant(`${u.date}T23:59:59`, tzid, "RRULE UNTIL");
        return `UNTIL=${compactLocal(isoZ(ms).slice(0, 19))}Z`;
      }
      if (!dateOnly && u.kind === "local") {
        if (!floating) {
          this.warn(
            `event(s) whose RRULE UNTIL is a local time while DTSTART has a zone (RFC 5545 §3.3.10 wants UTC): UNTIL read in the event's zone`,
          );
        }
        const ms = this.instant(u.local, tzid, "RRULE UNTIL");
        return `UNTIL=${compactLocal(isoZ(ms).slice(0, 19))}Z`;
      }
      return `${key}=${value.toUpperCase()}`;
    });
    return out.join(";");
  }

  // ---------------------------------------------------------------- groups

  private skip(uid: string | null, line: number | null, reason: string): void {
    this.skipped.push({ uid, line, reason });
  }

  private importGroup(uid: string, comps: IcalComponent[]): void {
    const parsed: ParsedEvent[] = [];
    for (const comp of comps) {
      try {
        parsed.push(this.readEvent(comp, uid));
      } catch (err) {
        if (!(err instanceof EventError)) throw err;
        const isOverride = prop(comp, "RECURRENCE-ID") !== undefined;
        this.skip(uid, comp.line, isOverride ? `override: ${err.message}` : err.message);
      }
    }
    const masterComps = comps.filter((c) => prop(c, "RECURRENCE-ID") === undefined);
    let masters = parsed.filter((p) => p.rid === null);
    const overrides = parsed.filter((p) => p.rid !== null);
    if (masters.length > 1) {
      masters = [...masters].sort((a, b) => a.sequence - b.sequence);
      this.warn(
        `UID "${uid}" has ${masters.length} events without RECURRENCE-ID: the one with the highest SEQUENCE is used`,
      );
      masters = [masters[masters.length - 1] as ParsedEvent];
    }
    const master = masters[0];
    if (master === undefined) {
      if (masterComps.length > 0) {
        if (overrides.length > 0)
          this.skip(
            uid,
            overrides[0]?.line ?? null,
            `${overrides.length} override(s) of a series that was skipped`,
          );
        return;
      }
      // Overrides whose series is not in the file: each is an event of its own.
      for (const o of overrides) {
        const rid = (o.rid as NonNullable<ParsedEvent["rid"]>).raw;
        if (o.cancelled) {
          this.skip(uid, o.line, `STATUS:CANCELLED instance ${rid} (not reminded)`);
          continue;
        }
        this.emit(o, { ...o, rrule: null, rdate: [], exdate: [] }, `${uid}#${rid}`, rid, {});
      }
      return;
    }
    if (master.cancelled) {
      this.skip(uid, master.line, "STATUS:CANCELLED (not reminded)");
      return;
    }
    this.buildSeries(master, overrides);
  }

  /** Combines a series with its overrides (§3.8.4.4) and emits one schedule per part. */
  private buildSeries(master: ParsedEvent, overrides: ParsedEvent[]): void {
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
  private instanceTest(master: ParsedEvent): ((ms: number) => boolean) | null {
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
  private overrideTarget(
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
  private ruleInstantsBefore(master: ParsedEvent): (ms: number) => number {
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

  private shiftOf(
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

  private instantWhen(ms: number): When {
    return { text: isoZ(ms), ms, dateOnly: false, tzid: null, floating: false };
  }

  private shifted(
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
  private partOf(
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
    let rule: Map<string, string> | null = null;
    if (master.rrule !== null) {
      rule = new Map();
      for (const p of master.rrule.split(";")) {
        const eq = p.indexOf("=");
        rule.set(eq === -1 ? p : p.slice(0, eq), eq === -1 ? "" : p.slice(eq + 1));
      }
    }
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
    if (moved && !this.shiftRule(rule, shift)) {
      return this.materialize(master, part, lo, hi, shift, dateOnly, tz);
    }
    part.rrule = [...rule].map(([key, v]) => (v === "" ? key : `${key}=${v}`)).join(";");
    return part;
  }

  private untilMs(value: string, tz: string): number {
    const u = parseIcalTime(value);
    if (u === null) return Infinity;
    if (u.kind === "date") return this.instant(u.date, tz, "UNTIL");
    if (u.kind === "utc") return Date.parse(`${u.local}Z`);
    return this.instant(u.local, tz, "UNTIL");
  }

  /** Rewrites the rule for a part moved by `shift`; false when the rule cannot follow the move. */
  private shiftRule(rule: Map<string, string>, shift: { days: number; seconds: number }): boolean {
    if (shift.seconds !== 0 && ["BYHOUR", "BYMINUTE", "BYSECOND"].some((p) => rule.has(p)))
      return false;
    if (shift.days === 0) return true;
    if (["BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYSETPOS", "BYMONTH"].some((p) => rule.has(p)))
      return false;
    const byday = rule.get("BYDAY");
    if (byday === undefined) return true;
    const freq = rule.get("FREQ");
    if (freq !== "WEEKLY" && freq !== "DAILY") return false;
    const days = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"];
    const out: string[] = [];
    for (const d of byday.split(",")) {
      const i = days.indexOf(d);
      if (i === -1) return false;
      out.push(days[(((i + shift.days) % 7) + 7) % 7] as string);
    }
    rule.set("BYDAY", out.join(","));
    return true;
  }

  /** A part whose rule cannot be shifted: its instances listed as RDATEs (finite parts only). */
  private materialize(
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

  // ---------------------------------------------------------------- output

  private emit(
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

  private reminders(
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

  private withTarget(r: ImportedReminder): ImportedReminder {
    return this.opts.target === undefined ? r : { ...r, target: { ...this.opts.target } };
  }

  /** Offsets of one VALARM from the occurrence start (§3.8.6.3, §3.8.6.2 REPEAT/DURATION). */
  private alarmOffsets(
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
