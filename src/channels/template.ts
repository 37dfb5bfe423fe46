/**
 * Reminder templates (CH-6): a reminder may carry `template: { subject?, text?, html? }`,
 * rendered with LiquidJS against
 * `{ payload, occurrenceAt, dueAt, deliveryKey, attempt, late, schedule: { id, tzid },
 * reminder: { key, channel } }` (instants ISO 8601 UTC with `Z`).
 *
 * Why LiquidJS: Liquid was designed for templates written by people other than the
 * operator (shop owners), so it evaluates no JavaScript, reads only own properties, and
 * LiquidJS bounds parse size, render time and memory; it is actively maintained, has no
 * native code, runs on Node 16+, renders synchronously, and its parse errors carry the line
 * and column. Handlebars escapes by default too but sees little maintenance; Eta compiles
 * templates to JavaScript, which a template arriving over the API must never be.
 *
 * Escaping: every `{{ output }}` in `html` is HTML-escaped; in Slack text, `&`, `<` and `>`
 * are escaped as Slack asks; `subject` and plain `text` are not escaped (they are not
 * markup). The `raw` filter opts out for one output. File tags (`include`, `render`,
 * `layout`) are refused: a template reads nothing but its context.
 *
 * Filters beyond Liquid's own (zone: IANA name, default the schedule's `tzid`; locale:
 * BCP 47, default `en`; style: `full`, `long`, `medium` or `short`):
 * - `{{ dueAt | format_instant: "Europe/Paris", "fr-FR", "long" }}` date and time;
 * - `{{ dueAt | format_date: zone, locale, style }}` date only;
 * - `{{ dueAt | format_time: zone, locale, style }}` time only.
 */
import { Liquid, type Template } from "liquidjs";
import { PermanentError, ValidationError, type FieldIssue } from "../errors/index.js";
import type { ChannelDelivery } from "./types.js";

/** The template fields a reminder may carry, each a Liquid template. */
export interface ReminderTemplate {
  /** E-mail subject (one line; line breaks become spaces). */
  subject?: string;
  /** Plain text: the e-mail text part, the Slack `text`, the Discord `content`. */
  text?: string;
  /** HTML: the e-mail HTML part; outputs are HTML-escaped. */
  html?: string;
}

/** A template after rendering: the same fields, as text. */
export interface RenderedMessage {
  subject?: string;
  text?: string;
  html?: string;
}

/** How `text` outputs are escaped: not at all, or Slack's `&`, `<`, `>` escape. */
export type TextEscape = "none" | "slack";

/** The names of the template fields. */
export const TEMPLATE_FIELDS = ["subject", "text", "html"] as const;

/** Longest template field accepted, characters. */
export const MAX_TEMPLATE_CHARS = 65_536;

const STYLES = new Set(["full", "long", "medium", "short"]);

/** A file system that holds nothing: templates may not read files. */
const NO_FILES = {
  exists: () => Promise.resolve(false),
  existsSync: () => false,
  readFile: (file: string) => Promise.reject(new Error(`templates cannot read files (${file})`)),
  readFileSync: (file: string): string => {
    throw new Error(`templates cannot read files (${file})`);
  },
  resolve: (_dir: string, file: string) => file,
  contains: () => Promise.resolve(false),
  containsSync: () => false,
  sep: "/",
  dirname: (file: string) => file,
};

function escapeSlack(value: unknown): string {
  return String(value ?? "")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;");
}

type Intlish = Intl.DateTimeFormatOptions;

function formatter(
  kind: "instant" | "date" | "time",
): (this: { context: { getSync(path: string[]): unknown } }, ...args: unknown[]) => string {
  return function (this, value, zone, locale, style) {
    if (value === null || value === undefined || value === "") return "";
    const at = value instanceof Date ? value : new Date(String(value));
    if (Number.isNaN(at.getTime())) {
      throw new Error(`format_${kind}: ${JSON.stringify(value)} is not an instant`);
    }
    const tz =
      typeof zone === "string" && zone !== ""
        ? zone
        : ((this.context.getSync(["schedule", "tzid"]) as string | undefined) ?? "UTC");
    const s = typeof style === "string" ? style : "";
    if (s !== "" && !STYLES.has(s)) {
      throw new Error(`format_${kind}: style must be full, long, medium or short (got "${s}")`);
    }
    const options: Intlish = { timeZone: tz };
    if (kind !== "time") options.dateStyle = (s || "full") as Intlish["dateStyle"];
    if (kind !== "date") options.timeStyle = (s || "short") as Intlish["timeStyle"];
    const loc = typeof locale === "string" && locale !== "" ? locale : "en";
    return new Intl.DateTimeFormat(loc, options).format(at);
  };
}

function engine(escape: "html" | "slack" | "none"): Liquid {
  const liquid = new Liquid({
    ...(escape === "html"
      ? { outputEscape: "escape" as const }
      : escape === "slack"
        ? { outputEscape: escapeSlack }
        : {}),
    strictFilters: true,
    ownPropertyOnly: true,
    fs: NO_FILES,
    root: [],
    partials: [],
    layouts: [],
    relativeReference: false,
    // Bounds against hostile templates: characters parsed, ms rendering, bytes allocated.
    parseLimit: MAX_TEMPLATE_CHARS * 2,
    renderLimit: 1_000,
    memoryLimit: 16 * 1024 * 1024,
  });
  liquid.registerFilter("format_instant", formatter("instant"));
  liquid.registerFilter("format_date", formatter("date"));
  liquid.registerFilter("format_time", formatter("time"));
  for (const tag of ["include", "render", "layout"]) {
    liquid.registerTag(tag, {
      parse() {
        throw new Error(`the ${tag} tag is not available: a template reads only its context`);
      },
      render() {
        return "";
      },
    });
  }
  return liquid;
}

const ENGINES = {
  html: engine("html"),
  slack: engine("slack"),
  none: engine("none"),
} as const;

type Mode = keyof typeof ENGINES;

/** Parsed templates by mode and source; a bounded map, oldest entry evicted first. */
const parsed = new Map<string, Template[]>();
const MAX_CACHED = 1_000;

function parse(mode: Mode, source: string): Template[] {
  const key = `${mode}\u0000${source}`;
  const hit = parsed.get(key);
  if (hit) return hit;
  const templates = ENGINES[mode].parse(source);
  if (parsed.size >= MAX_CACHED) parsed.delete(parsed.keys().next().value as string);
  parsed.set(key, templates);
  return templates;
}

function modeOf(field: (typeof TEMPLATE_FIELDS)[number], textEscape: TextEscape): Mode {
  if (field === "html") return "html";
  if (field === "text") return textEscape === "slack" ? "slack" : "none";
  return "none";
}

/** Liquid's message without its trailing `, line:N, col:M`, and the position apart. */
function describe(err: unknown): { line: number | null; column: number | null; message: string } {
  const e = err as { message?: unknown; token?: { getPosition?: () => [number, number] } };
  const text = typeof e?.message === "string" ? e.message : String(err);
  let line: number | null = null;
  let column: number | null = null;
  try {
    const pos = e?.token?.getPosition?.();
    if (pos) [line, column] = pos;
  } catch {
    // no position
  }
  const m = /, line:(\d+), col:(\d+)$/.exec(text);
  if (m) {
    line ??= Number(m[1]);
    column ??= Number(m[2]);
  }
  return { line, column, message: text.replace(/, line:\d+, col:\d+$/, "") };
}

function positioned(err: unknown): string {
  const d = describe(err);
  return d.line === null ? d.message : `line ${d.line}, column ${d.column}: ${d.message}`;
}

/** The render context of a delivery (see the module comment). */
export function templateContext(delivery: ChannelDelivery): Record<string, unknown> {
  return {
    payload: delivery.payload ?? null,
    occurrenceAt: delivery.occurrenceAt.toISOString(),
    dueAt: delivery.dueAt.toISOString(),
    deliveryKey: delivery.deliveryKey,
    attempt: delivery.attempt,
    late: delivery.late,
    schedule: { id: delivery.scheduleId, tzid: delivery.tzid ?? "UTC" },
    reminder: { key: delivery.reminderKey, channel: delivery.channel ?? null },
  };
}

/**
 * Checks a reminder's `template` when a schedule is created or edited: an object with
 * only `subject`, `text` and `html`, each a string of at most {@link MAX_TEMPLATE_CHARS}
 * characters that parses, and renders against `sample` (the schedule's own payload and
 * first due time), so a bad filter argument such as an unknown time zone is refused too.
 *
 * @param field the dotted path of the template (`reminders.0.template`).
 * @throws ValidationError naming `<field>.<name>` and, for a template error, its line
 *   and column: `reminders.0.template.html: line 3, column 5: undefined filter: nope`.
 */
export function validateTemplate(template: unknown, field: string, sample: ChannelDelivery): void {
  if (template === undefined || template === null) return;
  const issues: FieldIssue[] = [];
  if (typeof template !== "object" || Array.isArray(template)) {
    throw new ValidationError({ field, message: "must be an object { subject?, text?, html? }" });
  }
  const t = template as Record<string, unknown>;
  for (const key of Object.keys(t)) {
    if (!(TEMPLATE_FIELDS as readonly string[]).includes(key)) {
      issues.push({
        field: `${field}.${key}`,
        message: "unknown field; known: subject, text, html",
      });
    }
  }
  const context = templateContext(sample);
  for (const name of TEMPLATE_FIELDS) {
    const source = t[name];
    if (source === undefined) continue;
    if (typeof source !== "string") {
      issues.push({ field: `${field}.${name}`, message: "must be a string (a Liquid template)" });
      continue;
    }
    if (source.length > MAX_TEMPLATE_CHARS) {
      issues.push({
        field: `${field}.${name}`,
        message: `must be at most ${MAX_TEMPLATE_CHARS} characters`,
      });
      continue;
    }
    // Parse (and try) in every mode the field may render in.
    const modes: Mode[] = name === "text" ? ["none", "slack"] : [modeOf(name, "none")];
    try {
      for (const mode of modes) ENGINES[mode].renderSync(parse(mode, source), context);
    } catch (err) {
      issues.push({ field: `${field}.${name}`, message: positioned(err) });
    }
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

/**
 * Renders a delivery's template. Fields the template lacks are absent from the result.
 * @throws PermanentError (`TEMPLATE_FAILED`, naming the field and line) when rendering
 *   fails, e.g. a payload value that is not an instant given to `format_instant`: no
 *   retry can fix it.
 */
export function renderTemplate(
  template: ReminderTemplate,
  delivery: ChannelDelivery,
  options: { textEscape?: TextEscape } = {},
): RenderedMessage {
  const context = templateContext(delivery);
  const out: RenderedMessage = {};
  for (const name of TEMPLATE_FIELDS) {
    const source = template[name];
    if (typeof source !== "string") continue;
    const mode = modeOf(name, options.textEscape ?? "none");
    let text: string;
    try {
      text = String(ENGINES[mode].renderSync(parse(mode, source), context));
    } catch (err) {
      throw new PermanentError(`template ${name}: ${positioned(err)}`, {
        code: "TEMPLATE_FAILED",
        cause: err,
      });
    }
    out[name] = name === "subject" ? text.replace(/\s*[\r\n]+\s*/g, " ").trim() : text;
  }
  return out;
}

/**
 * The text a chat or e-mail channel sends for a delivery without a template (or without
 * a `text` field): the payload's `title` (else the reminder key) and the due time in the
 * schedule's zone.
 */
export const DEFAULT_TEXT_TEMPLATE =
  "Reminder: {{ payload.title | default: reminder.key }}, due {{ dueAt | format_instant }}";

/** Subject of an e-mail without `template.subject` nor `target.subject`. */
export const DEFAULT_SUBJECT_TEMPLATE = "Reminder: {{ payload.title | default: reminder.key }}";
