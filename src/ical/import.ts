/**
 * `parseCalendar`: an iCalendar file (RFC 5545) → one schedule per VEVENT UID (API-5).
 * Pure: no I/O, no clock, no dependence on the host's time zone.
 */
import { createHash } from "node:crypto";
import { isUnstorableText, MAX_EXTERNAL_ID_CHARS } from "../contracts/index.js";
import { prop, readComponents, readComponentsSteps, type IcalComponent } from "./lexer.js";
import type { CalendarImport, IcalImportOptions } from "./types.js";
import { cleanTzid, ZoneResolver } from "./zones.js";
import { Emitter } from "./emitting.js";
import {
  checkEventCount,
  checkFile,
  EventError,
  IMPORT_SLICE_MS,
  readOptions,
  text,
  yieldToEventLoop,
  type ParsedEvent,
  type ReadOptions,
} from "./reading.js";

export { validated } from "./emitting.js";
export {
  DEFAULT_MAX_BYTES,
  DEFAULT_MAX_EVENTS,
  IMPORT_SLICE_MS,
  MAX_DESCRIPTION,
  titleOf,
  yieldToEventLoop,
} from "./reading.js";

const PROGRESS_EVERY = 250;

/** Events the importer's passes over the whole file look at between two of its steps. */
const EVENTS_PER_STEP = 500;

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
  const lex = await stepped(readComponentsSteps(text), sliceMs, yieldNow);
  checkEventCount(lex.eventCount, opts);
  await yieldNow();
  const importer = new Importer(lex.roots, opts, lex.repairs, options.onProgress);
  const parsed = await stepped(importer.steps(), sliceMs, yieldNow);
  return { ...parsed, complete: !lex.truncated };
}

/**
 * Runs `steps` to its end, giving the event loop a turn with `yieldNow` whenever about
 * `sliceMs` of work has passed since the last one (OPS-12). @returns the generator's value.
 */
async function stepped<T>(
  steps: Generator<void, T, undefined>,
  sliceMs: number,
  yieldNow: () => Promise<void>,
): Promise<T> {
  let sliceStart = performance.now();
  for (;;) {
    const next = steps.next();
    if (next.done === true) return next.value;
    if (performance.now() - sliceStart >= sliceMs) {
      await yieldNow();
      sliceStart = performance.now();
    }
  }
}

/** Calendar components that are not events: reported as ignored, never imported. */
const IGNORED_COMPONENTS = new Set(["VTODO", "VJOURNAL", "VFREEBUSY", "VAVAILABILITY"]);

/** The importer: the file's events grouped by UID, each group read, combined and emitted. */
class Importer extends Emitter {
  private readonly vevents: IcalComponent[] = [];
  private readonly vtimezones: IcalComponent[] = [];
  private readonly calendarProps: IcalComponent[] = [];
  private done = 0;

  constructor(
    roots: IcalComponent[],
    opts: ReadOptions,
    repairs: string[],
    private readonly onProgress: IcalImportOptions["onProgress"],
  ) {
    super(opts);
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
    let seen = 0;
    for (const ev of this.vevents) {
      if (++seen % EVENTS_PER_STEP === 0) yield;
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
      if (++seen % EVENTS_PER_STEP === 0) yield;
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
      if (isUnstorableText(uid)) {
        // API-7: the UID is the schedule's external id, which the import looks up and
        // stores; a NUL or an unpaired surrogate cannot reach the database, and dropping
        // it could make one UID of two, so the event is refused by name.
        const shown = JSON.stringify(uid.slice(0, 80)).slice(1, -1);
        const reason =
          "UID contains a NUL character or an unpaired UTF-16 surrogate, which cannot be stored: event not imported";
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
}
