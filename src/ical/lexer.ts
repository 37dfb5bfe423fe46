/**
 * A tolerant reader of iCalendar content lines (RFC 5545 §3.1) into a component tree.
 *
 * Real exports deviate from the RFC in ways that other tools accept, so this reader never
 * throws on content: it unfolds lines (§3.1), accepts LF, CRLF or CR line ends, folds
 * with a space or a tab, upper-cases property and parameter names, joins stray lines that
 * are not content lines to the previous property (broken folding), and closes components
 * whose END line is missing (reported as repairs).
 */

/** One property: `NAME;PARAM=VALUE:value` (§3.1). Parameter names are upper case. */
export interface IcalProperty {
  name: string;
  params: Record<string, string>;
  /** Raw value, still escaped (§3.3.11 escapes are undone by {@link unescapeText}). */
  value: string;
  /** 1-based line number of the property's first physical line. */
  line: number;
}

/** One component (`BEGIN:NAME` … `END:NAME`, §3.4 / §3.6). */
export interface IcalComponent {
  name: string;
  properties: IcalProperty[];
  components: IcalComponent[];
  /** 1-based line number of its BEGIN line. */
  line: number;
}

/** Result of {@link readComponents}. */
export interface LexResult {
  /** Top-level components (normally one VCALENDAR). */
  roots: IcalComponent[];
  /** Repairs made on the way (missing END lines, broken folding), for the warnings. */
  repairs: string[];
  /** Number of `BEGIN:VEVENT` lines seen. */
  eventCount: number;
  /** True when the text ended inside a component (no END:VCALENDAR): a cut-off file. */
  truncated: boolean;
}

const NAME = /^[A-Za-z0-9-]+(?=[;:])/;
/** Components that never nest inside each other: a new BEGIN closes an open one. */
const FLAT = new Set(["VEVENT", "VTODO", "VJOURNAL", "VFREEBUSY", "VALARM"]);

interface Logical {
  text: string;
  line: number;
}

/** Line ends of §3.1 (CRLF), and the bare LF and CR that real files use. */
const LINE_END = /\r\n|\n|\r/g;

/**
 * Splits and unfolds the text into logical lines, keeping the first physical line number,
 * one at a time (a caller may stop between two lines to give the event loop a turn).
 */
function* unfold(text: string, repairs: string[]): Generator<Logical, void, undefined> {
  let last: Logical | undefined;
  let brokenFolds = 0;
  let line = 0;
  let from = 0;
  const ends = new RegExp(LINE_END);
  while (from <= text.length) {
    const end = ends.exec(text);
    const to = end === null ? text.length : end.index;
    const raw = text.slice(from, to);
    line++;
    from = end === null ? text.length + 1 : to + end[0].length;
    if (raw.length === 0) continue;
    if (raw[0] === " " || raw[0] === "\t") {
      if (last !== undefined) last.text += raw.slice(1);
      continue;
    }
    if (!NAME.test(raw) && last !== undefined) {
      // Not a content line: a line break left unfolded inside a value.
      last.text += "\n" + raw;
      brokenFolds++;
      continue;
    }
    if (last !== undefined) yield last;
    last = { text: raw, line };
  }
  if (last !== undefined) yield last;
  if (brokenFolds > 0) {
    repairs.push(`${brokenFolds} line(s) that were not content lines joined to the line before`);
  }
}

/** Parses one logical content line; `null` when it has no name or no colon. */
export function parseContentLine(text: string, line: number): IcalProperty | null {
  const m = NAME.exec(text);
  if (m === null) return null;
  const name = m[0].toUpperCase();
  const params: Record<string, string> = {};
  let i = m[0].length;
  while (i < text.length && text[i] === ";") {
    i++;
    const eq = text.indexOf("=", i);
    const stop = firstOf(text, i, [";", ":"]);
    if (eq === -1 || (stop !== -1 && stop < eq)) {
      // A parameter without a value: skip it.
      if (stop === -1) return null;
      i = stop;
      continue;
    }
    const pname = text.slice(i, eq).trim().toUpperCase();
    i = eq + 1;
    const values: string[] = [];
    for (;;) {
      if (text[i] === '"') {
        const close = text.indexOf('"', i + 1);
        if (close === -1) return null;
        values.push(text.slice(i + 1, close));
        i = close + 1;
      } else {
        const end = firstOf(text, i, [",", ";", ":"]);
        const v = text.slice(i, end === -1 ? text.length : end);
        values.push(v);
        i = end === -1 ? text.length : end;
      }
      if (text[i] === ",") {
        i++;
        continue;
      }
      break;
    }
    params[pname] = values.join(",");
  }
  if (text[i] !== ":") return null;
  return { name, params, value: text.slice(i + 1), line };
}

function firstOf(text: string, from: number, chars: string[]): number {
  for (let i = from; i < text.length; i++) {
    if (chars.includes(text[i] as string)) return i;
  }
  return -1;
}

/**
 * Reads the whole text into components. Never throws; lines outside any component and
 * unreadable lines are ignored.
 */
export function readComponents(text: string): LexResult {
  const steps = readComponentsSteps(text);
  for (;;) {
    const next = steps.next();
    if (next.done === true) return next.value;
  }
}

/** Logical lines {@link readComponentsSteps} reads between two of its steps. */
const LINES_PER_STEP = 500;

/**
 * {@link readComponents} a step at a time (OPS-12): it pauses after every
 * {@link LINES_PER_STEP} logical lines, so a caller can give the event loop a turn while
 * a large file is read. The generator's return value is what `readComponents` answers.
 */
export function* readComponentsSteps(text: string): Generator<void, LexResult, undefined> {
  const repairs: string[] = [];
  const roots: IcalComponent[] = [];
  const stack: IcalComponent[] = [];
  let eventCount = 0;
  let closedImplicitly = 0;
  let unmatchedEnds = 0;
  const lines = unfold(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text, repairs);
  let read = 0;
  for (const { text: t, line } of lines) {
    if (++read % LINES_PER_STEP === 0) yield;
    const prop = parseContentLine(t, line);
    if (prop === null) continue;
    if (prop.name === "BEGIN") {
      const name = prop.value.trim().toUpperCase();
      if (name === "VEVENT") eventCount++;
      if (FLAT.has(name)) {
        // A flat component cannot contain itself or another event-like component.
        const at = stack.findIndex(
          (c) => FLAT.has(c.name) && (c.name !== "VALARM" || name === "VALARM"),
        );
        if (at !== -1 && name !== "VALARM") {
          closedImplicitly += stack.length - at;
          stack.length = at;
        } else if (name === "VALARM" && stack[stack.length - 1]?.name === "VALARM") {
          closedImplicitly++;
          stack.pop();
        }
      }
      const comp: IcalComponent = { name, properties: [], components: [], line };
      const parent = stack[stack.length - 1];
      if (parent === undefined) roots.push(comp);
      else parent.components.push(comp);
      stack.push(comp);
      continue;
    }
    if (prop.name === "END") {
      const name = prop.value.trim().toUpperCase();
      let at = -1;
      for (let k = stack.length - 1; k >= 0; k--) {
        if ((stack[k] as IcalComponent).name === name) {
          at = k;
          break;
        }
      }
      if (at === -1) {
        unmatchedEnds++;
        continue;
      }
      closedImplicitly += stack.length - 1 - at;
      stack.length = at;
      continue;
    }
    const top = stack[stack.length - 1];
    if (top !== undefined) top.properties.push(prop);
  }
  // Components still open at the end of the text: the file was cut off.
  const truncated = stack.length > 0;
  closedImplicitly += stack.length;
  if (closedImplicitly > 0)
    repairs.push(`${closedImplicitly} component(s) without END line closed`);
  if (unmatchedEnds > 0) repairs.push(`${unmatchedEnds} END line(s) without BEGIN ignored`);
  return { roots, repairs, eventCount, truncated };
}

/** Undoes TEXT escapes (RFC 5545 §3.3.11): `\n`, `\N`, `\,`, `\;`, `\\`. */
export function unescapeText(value: string): string {
  return value.replace(/\\([nN,;\\:])/g, (_, c: string) => (c === "n" || c === "N" ? "\n" : c));
}

/** First property named `name`, or undefined. */
export function prop(component: IcalComponent, name: string): IcalProperty | undefined {
  return component.properties.find((p) => p.name === name);
}

/** Every property named `name`. */
export function props(component: IcalComponent, name: string): IcalProperty[] {
  return component.properties.filter((p) => p.name === name);
}
