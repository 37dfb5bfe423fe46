/**
 * Time-zone identifiers in real calendars (RFC 5545 §3.2.19, §3.6.5) resolved to IANA names.
 *
 * Order: an IANA name as is; a path with a vendor prefix (`/Europe/Berlin`,
 * `/mozilla.org/20050126_1/Europe/Berlin`); a Windows name through the CLDR mapping of the
 * `windows-iana` package (`W. Europe Standard Time` → `Europe/Berlin`); an Outlook display
 * name (`(UTC-05:00) Eastern Time (US & Canada)`, `Canberra, Melbourne, Sydney`); and,
 * for names only the file defines (`Customized Time Zone`), the IANA zone whose UTC
 * offsets equal those of the file's VTIMEZONE over the years the events use. When a
 * VTIMEZONE disagrees with the IANA zone its name designates, IANA wins and a warning says so.
 */
import { findIana, WINDOWS_TO_IANA_MAP } from "windows-iana";
import { getZone, isValidTimeZone, parseRule } from "../recurrence/index.js";
import type { IcalComponent } from "./lexer.js";
import { prop, props } from "./lexer.js";
import { parseIcalTime } from "./values.js";

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/**
 * UTC offset of IANA zone `tz` at instant `ms`, in seconds: the recurrence engine's own
 * reading of the zone (its cached offset segments), so the importer and the engine agree.
 * @throws RangeError for an unknown zone.
 */
export function ianaOffset(tz: string, ms: number): number {
  return Math.round(getZone(tz).offsetAt(ms) / 1000);
}

/** Local wall time `YYYY-MM-DDTHH:mm:ss` of instant `ms` in IANA zone `tz`. */
export function wallOf(tz: string, ms: number): string {
  return new Date(ms + ianaOffset(tz, ms) * 1000).toISOString().slice(0, 19);
}

let canonicalZones: string[] | null = null;
let cityIndex: Map<string, string> | null = null;
let preferred: Set<string> | null = null;

function zonesList(): string[] {
  if (canonicalZones === null) {
    canonicalZones = [...Intl.supportedValuesOf("timeZone"), "UTC"];
  }
  return canonicalZones;
}

/** City name (lower case, spaces) → IANA zone, from the last segment of every zone name. */
function cities(): Map<string, string> {
  if (cityIndex === null) {
    cityIndex = new Map();
    const all = [...zonesList(), ...WINDOWS_TO_IANA_MAP.flatMap((e) => [...e.iana])];
    for (const z of all) {
      const city = z.split("/").pop()?.replace(/_/g, " ").toLowerCase();
      if (city !== undefined && !cityIndex.has(city) && z.includes("/")) cityIndex.set(city, z);
    }
  }
  return cityIndex;
}

/** The CLDR "golden" zone of every Windows zone: preferred among equal matches. */
function goldenZones(): Set<string> {
  if (preferred === null) {
    preferred = new Set();
    for (const entry of WINDOWS_TO_IANA_MAP) {
      const first = entry.territory === "001" ? entry.iana[0] : undefined;
      if (first !== undefined) preferred.add(first);
    }
  }
  return preferred;
}

const windowsByLower = new Map<string, string>(
  WINDOWS_TO_IANA_MAP.map((e) => [e.windowsName.toLowerCase(), e.windowsName]),
);

/** IANA zone for a Windows zone name (CLDR windowsZones, territory 001), or null. */
export function windowsToIana(name: string): string | null {
  const key = windowsByLower.get(name.trim().toLowerCase());
  if (key === undefined) return null;
  const list = findIana(key);
  return list[0] ?? null;
}

/** Strips quotes, TEXT escapes and stray trailing punctuation from a TZID. */
export function cleanTzid(raw: string): string {
  return raw
    .trim()
    .replace(/^"(.*)"$/, "$1")
    .replace(/\\([,;\\])/g, "$1")
    .replace(/[:;\s]+$/, "")
    .trim();
}

/** How a TZID designates an IANA zone by its name alone. */
interface NameMatch {
  tzid: string;
  /** `exact`: an IANA name or an IANA path after a prefix or a Windows name (IANA wins over the file); `guess`: a display-name or case-insensitive guess (the file's VTIMEZONE wins). */
  strength: "exact" | "guess";
  how: string;
}

function exactIana(name: string): string | null {
  if (name === "" || !isValidTimeZone(name)) return null;
  if (/^[+-]\d/.test(name)) return null;
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat("en-US", { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return name;
  }
  // "Europe/lisbon": known only by a case-insensitive lookup.
  if (resolved.toLowerCase() === name.toLowerCase() && resolved !== name) return null;
  return name;
}

const OFFSET_PREFIX = /^\(\s*(?:UTC|GMT)\s*(?:([+-])(\d{1,2})[:.]?(\d{2})?)?\s*\)\s*/i;

function standardOffsetSeconds(tz: string, year: number): number {
  return Math.min(ianaOffset(tz, Date.UTC(year, 0, 15)), ianaOffset(tz, Date.UTC(year, 6, 15)));
}

/** Resolves a TZID by its name alone, without any VTIMEZONE. */
export function matchName(raw: string): NameMatch | null {
  const name = cleanTzid(raw);
  const direct = exactIana(name);
  if (direct !== null) return { tzid: direct, strength: "exact", how: "IANA name" };
  // Vendor prefixes: take the longest suffix that is an IANA name.
  const segments = name.split("/").filter((s) => s !== "");
  for (let i = 0; i < segments.length - 1; i++) {
    const candidate = exactIana(segments.slice(i).join("/"));
    if (candidate !== null && candidate.includes("/")) {
      return { tzid: candidate, strength: "exact", how: "IANA name after a prefix" };
    }
  }
  const win = windowsToIana(name);
  if (win !== null) return { tzid: win, strength: "exact", how: "Windows name (CLDR)" };
  if (isValidTimeZone(name) && !/^[+-]\d/.test(name)) {
    const canonical = new Intl.DateTimeFormat("en-US", { timeZone: name }).resolvedOptions()
      .timeZone;
    return { tzid: canonical, strength: "guess", how: "IANA name in another letter case" };
  }
  // Outlook display names: "(UTC-05:00) Eastern Time (US & Canada)", "(GMT+01.00) Amsterdam / Berlin …".
  const om = OFFSET_PREFIX.exec(name);
  const rest = om === null ? name : name.slice(om[0].length);
  let prefixOffset: number | null = null;
  if (om !== null) {
    const sign = om[1] === "-" ? -1 : 1;
    prefixOffset =
      om[2] === undefined ? 0 : sign * (Number(om[2]) * 3600 + Number(om[3] ?? 0) * 60);
  }
  const fits = (tz: string): boolean =>
    prefixOffset === null || standardOffsetSeconds(tz, 2020) === prefixOffset;
  const bare = rest
    .replace(/\([^)]*\)/g, " ")
    .replace(/\s+/g, " ")
    .trim();
  const asWindows =
    windowsToIana(rest) ??
    windowsToIana(bare) ??
    windowsToIana(bare.replace(/ Time$/i, " Standard Time")) ??
    windowsToIana(`${bare} Standard Time`);
  if (asWindows !== null && fits(asWindows)) {
    return { tzid: asWindows, strength: "guess", how: "Outlook display name" };
  }
  const index = cities();
  for (const token of rest.split(/[,/;&()]| and /)) {
    const city = token.trim().toLowerCase();
    if (city === "") continue;
    const tz = index.get(city);
    if (tz !== undefined && isValidTimeZone(tz) && fits(tz)) {
      return { tzid: tz, strength: "guess", how: `city "${token.trim()}"` };
    }
  }
  return null;
}

/** One STANDARD/DAYLIGHT observance of a VTIMEZONE (§3.6.5). */
interface Observance {
  startLocal: string;
  from: number;
  to: number;
  rrule: string | null;
  rdates: string[];
}

/** A VTIMEZONE read from the file: UTC offset at an instant, in seconds. */
export class FileZone {
  readonly id: string;
  private readonly observances: Observance[];
  private readonly cache = new Map<number, Array<{ at: number; to: number }>>();

  constructor(component: IcalComponent) {
    this.id = cleanTzid(prop(component, "TZID")?.value ?? "");
    this.observances = [];
    for (const sub of component.components) {
      if (sub.name !== "STANDARD" && sub.name !== "DAYLIGHT") continue;
      const start = parseIcalTime(prop(sub, "DTSTART")?.value ?? "");
      const from = parseUtcOffset(prop(sub, "TZOFFSETFROM")?.value ?? "");
      const to = parseUtcOffset(prop(sub, "TZOFFSETTO")?.value ?? "");
      if (start === null || to === null) continue;
      const rdates: string[] = [];
      for (const p of props(sub, "RDATE")) {
        for (const v of p.value.split(",")) {
          const t = parseIcalTime(v);
          if (t !== null) rdates.push(t.kind === "date" ? `${t.date}T00:00:00` : t.local);
        }
      }
      this.observances.push({
        startLocal: start.kind === "date" ? `${start.date}T00:00:00` : start.local,
        from: from ?? to,
        to,
        rrule: prop(sub, "RRULE")?.value.trim() || null,
        rdates,
      });
    }
  }

  /** Whether the block defines any observance. */
  get usable(): boolean {
    return this.observances.length > 0;
  }

  /** Onsets (UTC ms, offset after) in the given year and the two before, sorted. */
  private onsets(year: number): Array<{ at: number; to: number }> {
    const hit = this.cache.get(year);
    if (hit !== undefined) return hit;
    const lo = Date.UTC(year - 2, 0, 1);
    const hi = Date.UTC(year + 1, 0, 1);
    const out: Array<{ at: number; to: number }> = [];
    for (const o of this.observances) {
      const onset = (local: string): number => Date.parse(`${local}Z`) - o.from * 1000;
      out.push({ at: onset(o.startLocal), to: o.to });
      for (const r of o.rdates) out.push({ at: onset(r), to: o.to });
      if (o.rrule !== null) {
        const parsed = parseRule({
          dtstart: o.startLocal,
          tzid: "UTC",
          rrule: o.rrule.replace(/;+$/, "").replace(/\s+/g, ""),
        });
        if (parsed.ok) {
          for (const occ of parsed.recurrence.between(lo - DAY_MS, hi + DAY_MS, 50)) {
            out.push({ at: occ.instant - o.from * 1000, to: o.to });
          }
        }
      }
    }
    out.sort((a, b) => a.at - b.at);
    this.cache.set(year, out);
    return out;
  }

  /** Offset in seconds at instant `ms`, or null when the block says nothing about it. */
  offsetAt(ms: number): number | null {
    const year = new Date(ms).getUTCFullYear();
    const list = this.onsets(year);
    let best: number | null = null;
    for (const o of list) {
      if (o.at <= ms) best = o.to;
      else break;
    }
    if (best === null) {
      const first = this.observances[0];
      return first === undefined ? null : first.from;
    }
    return best;
  }

  /** Instants worth comparing in `year`: noon UTC of every day, and around each onset. */
  samples(year: number): number[] {
    // Around each onset first: most zones that differ fail there at once.
    const out: number[] = [];
    for (const o of this.onsets(year)) {
      if (new Date(o.at).getUTCFullYear() === year)
        out.push(o.at - HOUR_MS * 2, o.at + HOUR_MS * 2);
    }
    for (let t = Date.UTC(year, 0, 1, 12); t < Date.UTC(year + 1, 0, 1); t += DAY_MS) out.push(t);
    return out;
  }
}

/** `+0100`, `-0500`, `+053000` → seconds. */
function parseUtcOffset(text: string): number | null {
  const m = /^([+-])(\d{2})(\d{2})(\d{2})?$/.exec(text.trim());
  if (m === null) return null;
  const s = (Number(m[2]) * 3600 + Number(m[3]) * 60 + Number(m[4] ?? 0)) * (m[1] === "-" ? -1 : 1);
  return s;
}

/** First instant in `years` where `zone` and IANA `tz` disagree, or null. */
function firstDisagreement(zone: FileZone, tz: string, years: number[]): number | null {
  for (const y of years) {
    for (const t of zone.samples(y)) {
      const mine = zone.offsetAt(t);
      if (mine !== null && mine !== ianaOffset(tz, t)) return t;
    }
  }
  return null;
}

/** Result of resolving one TZID. */
export type ZoneResolution = { ok: true; tzid: string } | { ok: false; reason: string };

function formatSeconds(s: number): string {
  const sign = s < 0 ? "-" : "+";
  const a = Math.abs(s);
  return `${sign}${String(Math.floor(a / 3600)).padStart(2, "0")}:${String(Math.floor((a % 3600) / 60)).padStart(2, "0")}`;
}

/**
 * Resolves the TZIDs of one file, once each, with the file's VTIMEZONE blocks and the
 * years in which each TZID is used (the years compared with IANA).
 */
export class ZoneResolver {
  private readonly fileZones = new Map<string, FileZone>();
  private readonly fileZonesLower = new Map<string, FileZone>();
  private readonly memo = new Map<string, ZoneResolution>();

  constructor(
    vtimezones: IcalComponent[],
    private readonly yearsOf: (cleanId: string) => number[],
    private readonly warn: (message: string) => void,
  ) {
    for (const c of vtimezones) {
      const z = new FileZone(c);
      if (z.id === "" || !z.usable) continue;
      this.fileZones.set(z.id, z);
      if (!this.fileZonesLower.has(z.id.toLowerCase()))
        this.fileZonesLower.set(z.id.toLowerCase(), z);
    }
  }

  /** IANA zone for a TZID, or a reason it has none. Warnings are emitted once per TZID. */
  resolve(raw: string): ZoneResolution {
    const id = cleanTzid(raw);
    const hit = this.memo.get(id);
    if (hit !== undefined) return hit;
    const result = this.compute(id);
    this.memo.set(id, result);
    return result;
  }

  private compute(id: string): ZoneResolution {
    const byName = matchName(id);
    const fileZone = this.fileZones.get(id) ?? this.fileZonesLower.get(id.toLowerCase());
    const years = this.yearsOf(id);
    if (fileZone === undefined || years.length === 0) {
      if (byName !== null) {
        if (byName.strength === "guess")
          this.warn(`time zone "${id}" read as ${byName.tzid} (${byName.how})`);
        return { ok: true, tzid: byName.tzid };
      }
      return {
        ok: false,
        reason: `unknown time zone "${id}" (not IANA, not a Windows name, and no VTIMEZONE)`,
      };
    }
    if (byName !== null) {
      const diff = firstDisagreement(fileZone, byName.tzid, years);
      if (diff === null) {
        if (byName.strength === "guess")
          this.warn(`time zone "${id}" read as ${byName.tzid} (${byName.how})`);
        return { ok: true, tzid: byName.tzid };
      }
      const detail = `the file's VTIMEZONE says ${formatSeconds(fileZone.offsetAt(diff) ?? 0)} at ${new Date(diff).toISOString()}, IANA ${byName.tzid} says ${formatSeconds(ianaOffset(byName.tzid, diff))}`;
      if (byName.strength === "exact") {
        this.warn(`time zone "${id}": ${detail}; using the IANA database`);
        return { ok: true, tzid: byName.tzid };
      }
      const matched = this.matchRules(fileZone, years);
      if (matched !== null) {
        this.warn(
          `time zone "${id}": ${detail}; its VTIMEZONE rules match ${matched}, used instead`,
        );
        return { ok: true, tzid: matched };
      }
      this.warn(
        `time zone "${id}": ${detail}; no IANA zone matches its rules, using ${byName.tzid}`,
      );
      return { ok: true, tzid: byName.tzid };
    }
    const matched = this.matchRules(fileZone, years);
    if (matched !== null) {
      this.warn(
        `time zone "${id}" defined only in the file: its VTIMEZONE rules match ${matched}, used for its events`,
      );
      return { ok: true, tzid: matched };
    }
    return { ok: false, reason: `unknown time zone "${id}": its VTIMEZONE matches no IANA zone` };
  }

  /** The IANA zone whose offsets equal the block's over `years`, preferring CLDR golden zones. */
  private matchRules(zone: FileZone, years: number[]): string | null {
    const y0 = years[0] as number;
    const probes = [Date.UTC(y0, 0, 15, 12), Date.UTC(y0, 6, 15, 12)];
    const want = probes.map((t) => zone.offsetAt(t));
    const golden = goldenZones();
    const candidates = zonesList()
      .filter((tz) => probes.every((t, i) => ianaOffset(tz, t) === want[i]))
      .sort((a, b) => Number(golden.has(b)) - Number(golden.has(a)) || a.localeCompare(b));
    const fits = candidates.filter((tz) => firstDisagreement(zone, tz, years) === null);
    if (fits.length <= 1) return fits[0] ?? null;
    // Several zones agree over those years: prefer the one that agrees longest around them.
    const wider: number[] = [];
    for (let y = y0 - 30; y <= (years[years.length - 1] as number) + 5; y++) {
      for (let m = 0; m < 12; m++) wider.push(Date.UTC(y, m, 1, 12), Date.UTC(y, m, 15, 12));
    }
    let best = fits[0] as string;
    let bestScore = -1;
    for (const tz of fits) {
      let score = 0;
      for (const t of wider) if (zone.offsetAt(t) === ianaOffset(tz, t)) score++;
      if (score > bestScore) {
        best = tz;
        bestScore = score;
      }
    }
    return best;
  }
}
