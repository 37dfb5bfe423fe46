/**
 * Reminder templates (CH-6): a reminder may carry `template: { subject?, text?, html? }`,
 * rendered with LiquidJS against
 * `{ payload, occurrenceAt, dueAt, deliveryKey, attempt, late, schedule: { id, tzid },
 * reminder: { key, channel }, recipient: { id, tzid, attributes } | null }` (instants
 * ISO 8601 UTC with `Z`; `recipient` for a schedule for recipients, API-11), and for a
 * digest (DEL-19) `items: [{ title, occurrenceAt, dueAt, payload, scheduleId, reminderKey,
 * deliveryId, deliveryKey }]` and `digest: { id, key }`.
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
 *
 * Where a template renders (CH-6): a *light* template — text and at most
 * {@link MAX_LIGHT_OUTPUTS} `{{ value | filter … }}` outputs of a path or literal through
 * filters whose cost is linear in their input (`default`, `upcase`, `format_instant`, …),
 * at most one of them a filter that multiplies its input's length (`json`, `escape`,
 * `url_encode`, …; a chain of them grows exponentially), no tags, and whose output is
 * proven (from the size of its context) to be at most {@link MAX_LIGHT_CHARS}
 * characters — renders on the calling thread: its cost is bounded, and most templates
 * are such. At create, the tries on the calling thread of all templates of one request
 * share a budget of {@link TRIAL_BUDGET_CHARS} proven characters; the others are tried
 * on a render thread. Any other template (loops, `assign`, `capture`, `sort`,
 * `split`, ranges, …) renders on a worker thread under a hard deadline of
 * {@link RENDER_DEADLINE_MS} ms (`TEMPLATE_TIMEOUT` past it) with a capped heap
 * (template-pool.ts). Every rendered field is at most {@link MAX_RENDERED_CHARS}
 * characters (`TEMPLATE_TOO_LARGE`, named in the error; refused at create too). All three failures are permanent: the delivery ends
 * `dead` with that reason.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Liquid, Output, Tag, type Template } from "liquidjs";
import {
  PermanentError,
  PunctualError,
  ValidationError,
  type FieldIssue,
} from "../errors/index.js";
import { RENDER_DEADLINE_MS, templateRenderPool } from "./template-pool.js";

export { RENDER_DEADLINE_MS };
import { digestItemsJson, type ChannelDelivery } from "./types.js";

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

/** Longest rendered field, characters (`TEMPLATE_TOO_LARGE` beyond). */
export const MAX_RENDERED_CHARS = 1_048_576;

/** Most outputs of a light template (one rendering on the calling thread). */
export const MAX_LIGHT_OUTPUTS = 64;

/**
 * Filters whose cost is linear in their input and whose output is at most their input
 * plus their (template-bounded) arguments: a light template may use only these.
 */
const LINEAR_FILTERS = new Set([
  "default",
  "format_instant",
  "format_date",
  "format_time",
  "upcase",
  "downcase",
  "capitalize",
  "escape",
  "escape_once",
  "strip",
  "lstrip",
  "rstrip",
  "strip_newlines",
  "strip_html",
  "newline_to_br",
  "url_encode",
  "truncate",
  "append",
  "prepend",
  "size",
  "json",
  "raw",
  "date",
  "plus",
  "minus",
  "round",
  // The engine's own output escape (html, Slack), appended by LiquidJS under this name.
  "[object Function]",
]);

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

/**
 * Filters that may multiply the length of their input by a constant (`json` doubles every
 * backslash and quote and writes a control character as six, `escape` writes `"` as six,
 * `url_encode` writes one character as up to nine): one of them in an output is linear,
 * a chain of them is exponential (22 `json` in a row turn ten quotes into gigabytes). A
 * light output holds at most one.
 */
const GROWTH_FILTERS = new Set(["json", "escape", "escape_once", "url_encode", "newline_to_br"]);

/** Most characters one growth filter (or the engine's own escape) writes per character read. */
const GROWTH_FACTOR = 9;

/** Filters whose output is short whatever their input (a number, a formatted instant). */
const SHORT_FILTERS = new Set([
  "size",
  "plus",
  "minus",
  "round",
  "format_instant",
  "format_date",
  "format_time",
]);

/** Longest output of a {@link SHORT_FILTERS} filter, characters (a generous bound). */
const SHORT_OUTPUT_CHARS = 256;

/** The engine's own output escape (HTML, Slack), appended by LiquidJS under this name. */
const ENGINE_ESCAPE = "[object Function]";

/**
 * Most characters a light template may be proven to render: a light template renders on
 * the calling thread, so its work must be bounded by a size we accept anyway.
 */
export const MAX_LIGHT_CHARS = MAX_RENDERED_CHARS;

/**
 * An upper bound of the characters parsed templates render when every path or literal
 * is at most `unit` characters, or `Infinity` when they are not light (see the module
 * comment): a tag, more than {@link MAX_LIGHT_OUTPUTS} outputs, a range, a filter not in
 * {@link LINEAR_FILTERS}, or more than one {@link GROWTH_FILTERS} filter in one output.
 * Each output is bounded filter by filter: a growth filter multiplies by
 * {@link GROWTH_FACTOR}, `append`, `prepend`, `default`, `truncate` and `date` add a unit
 * per argument, a short filter resets to {@link SHORT_OUTPUT_CHARS}.
 */
function lightBound(templates: Template[], unit: number): number {
  let outputs = 0;
  let total = 0;
  for (const t of templates) {
    if (t instanceof Tag) return Infinity;
    if (!(t instanceof Output)) {
      const text = (t as unknown as { str?: unknown }).str;
      total += typeof text === "string" ? text.length : unit;
      continue;
    }
    if (++outputs > MAX_LIGHT_OUTPUTS) return Infinity;
    const token = (t as unknown as { token?: { content?: unknown } }).token;
    if (typeof token?.content !== "string" || token.content.includes("(")) return Infinity;
    let chars = unit;
    let growth = 0;
    for (const f of t.value.filters) {
      if (!LINEAR_FILTERS.has(f.name)) return Infinity;
      if (GROWTH_FILTERS.has(f.name)) {
        if (++growth > 1) return Infinity;
        chars *= GROWTH_FACTOR;
      } else if (f.name === ENGINE_ESCAPE) {
        // HTML writes `"` as `&#34;`, Slack `&` as `&amp;`: five characters for one.
        chars *= 5;
      } else if (SHORT_FILTERS.has(f.name)) {
        chars = SHORT_OUTPUT_CHARS;
      } else {
        // upcase may turn one character into three ("ß" is "SS", "ŉ" is "ʼN").
        chars = chars * (f.name === "upcase" || f.name === "capitalize" ? 3 : 1);
        chars += f.args.length * unit;
      }
    }
    total += chars;
  }
  return total;
}

/**
 * The unit of {@link lightBound} for a source against a context: no path or literal of
 * the template renders longer than the context as JSON plus the source (and a few
 * characters for `[object Object]`-like renderings).
 */
function unitOf(source: string, contextChars: number): number {
  return contextChars + source.length + 64;
}

/** Characters of a context as JSON, cached per context object. */
const contextSizes = new WeakMap<object, number>();

function contextChars(context: Record<string, unknown>): number {
  let n = contextSizes.get(context);
  if (n === undefined) {
    try {
      n = JSON.stringify(context).length;
    } catch {
      n = Infinity;
    }
    contextSizes.set(context, n);
  }
  return n;
}

/**
 * The proven bound of the characters a template renders against `context` on the calling
 * thread, summed over its fields, or `Infinity` when some field must render on a render
 * thread. A field that does not parse counts 0 (it fails at once wherever it renders).
 */
function threadBound(
  template: ReminderTemplate,
  textEscape: TextEscape,
  context: Record<string, unknown> | null,
): number {
  let total = 0;
  for (const name of TEMPLATE_FIELDS) {
    const source = template[name];
    if (typeof source !== "string") continue;
    let templates: Template[];
    try {
      templates = parse(modeOf(name, textEscape), source);
    } catch {
      continue;
    }
    const unit = context === null ? 1 : unitOf(source, contextChars(context));
    const bound = lightBound(templates, unit);
    if (bound > MAX_LIGHT_CHARS) return Infinity;
    total += bound;
  }
  return total;
}

/**
 * Whether a template must render on a render thread: some field is not light, or (given
 * the render context) renders more than {@link MAX_LIGHT_CHARS} characters by the proven
 * bound. A field that does not parse counts as light (it fails at once wherever it renders).
 */
export function needsRenderThread(
  template: ReminderTemplate,
  textEscape: TextEscape,
  context: Record<string, unknown> | null = null,
): boolean {
  return threadBound(template, textEscape, context) === Infinity;
}

/**
 * The main-thread budget of the create-time tries of one request (CH-6): the proven
 * characters of every light template tried on the event loop count against it; a
 * template past it is tried on a render thread instead (by {@link sampleRender}), so one
 * request of many reminders cannot hold the loop longer than a small constant.
 */
export class TrialBudget {
  /** Characters left, by the proven bound of each try. */
  remaining: number;
  /** Templates tried on the event loop (the others are tried on a render thread). */
  readonly tried = new WeakSet<object>();
  constructor(chars: number = TRIAL_BUDGET_CHARS) {
    this.remaining = chars;
  }
}

/** Default {@link TrialBudget} of one request, characters rendered on the event loop. */
export const TRIAL_BUDGET_CHARS = 4 * MAX_LIGHT_CHARS;

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
    // API-11: whom the delivery is for, as the registry has it at send time.
    recipient: delivery.recipient ?? null,
    // DEL-19: a digest's items (each: title, occurrenceAt, dueAt, payload, …) and id.
    ...(delivery.digest
      ? {
          items: digestItemsJson(delivery.digest),
          digest: { id: delivery.digest.id, key: delivery.digest.key },
        }
      : {}),
  };
}

/**
 * The proven characters a create-time try renders on the event loop: each field in both
 * text escapes (`Infinity` when some field must render on a render thread).
 */
function trialCost(template: ReminderTemplate, context: Record<string, unknown>): number {
  return (
    2 * Math.max(threadBound(template, "none", context), threadBound(template, "slack", context))
  );
}

function isShortString(value: unknown): boolean {
  return typeof value === "string" && value.length <= MAX_TEMPLATE_CHARS;
}

/** The error of a rendered field past {@link MAX_RENDERED_CHARS}, naming its code. */
function tooLarge(chars: number): Error {
  return new Error(
    `TEMPLATE_TOO_LARGE: the rendered text has ${chars} characters, more than ${MAX_RENDERED_CHARS}`,
  );
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
export function validateTemplate(
  template: unknown,
  field: string,
  sample: ChannelDelivery,
  budget: TrialBudget = new TrialBudget(),
): void {
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
  // Tried here only when every field is light against this context and the request's
  // budget holds the proven size of all of them; else sampleRender tries it on a thread.
  let tryHere = false;
  if (TEMPLATE_FIELDS.every((n) => t[n] === undefined || isShortString(t[n]))) {
    const cost = trialCost(t as ReminderTemplate, context);
    if (cost <= budget.remaining) {
      budget.remaining -= cost;
      budget.tried.add(t);
      tryHere = true;
    }
  }
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
    // Parse (and try, when within the budget) in every mode the field may render in;
    // any other template is tried on a render thread by sampleRender.
    const modes: Mode[] = name === "text" ? ["none", "slack"] : [modeOf(name, "none")];
    try {
      for (const mode of modes) {
        const templates = parse(mode, source);
        if (!tryHere) continue;
        const text = String(ENGINES[mode].renderSync(templates, context));
        if (text.length > MAX_RENDERED_CHARS) throw tooLarge(text.length);
      }
    } catch (err) {
      issues.push({ field: `${field}.${name}`, message: positioned(err) });
    }
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

/**
 * Renders every field of `template` against `context` on this thread (a render thread
 * runs this; so does {@link renderTemplate} for a light template).
 * @throws PermanentError `TEMPLATE_FAILED` (naming the field and line) or
 *   `TEMPLATE_TOO_LARGE` (a field longer than {@link MAX_RENDERED_CHARS} characters).
 */
export function renderOnThisThread(
  template: ReminderTemplate,
  context: Record<string, unknown>,
  textEscape: TextEscape,
): RenderedMessage {
  const out: RenderedMessage = {};
  for (const name of TEMPLATE_FIELDS) {
    const source = template[name];
    if (typeof source !== "string") continue;
    const mode = modeOf(name, textEscape);
    let text: string;
    try {
      text = String(ENGINES[mode].renderSync(parse(mode, source), context));
    } catch (err) {
      throw new PermanentError(`template ${name}: ${positioned(err)}`, {
        code: "TEMPLATE_FAILED",
        cause: err,
      });
    }
    // Checked before any other pass over the text (a string's length costs nothing).
    if (text.length > MAX_RENDERED_CHARS) {
      throw new PermanentError(`template ${name}: ${tooLarge(text.length).message}`, {
        code: "TEMPLATE_TOO_LARGE",
      });
    }
    out[name] = name === "subject" ? text.replace(/\s*[\r\n]+\s*/g, " ").trim() : text;
  }
  return out;
}

/**
 * Renders a delivery's template: a light one on this thread, any other on a render
 * thread under a deadline (see the module comment). Fields the template lacks are
 * absent from the result.
 * @throws PermanentError `TEMPLATE_FAILED` (naming the field and line) when rendering
 *   fails, e.g. a payload value that is not an instant given to `format_instant`;
 *   `TEMPLATE_TIMEOUT` past {@link RENDER_DEADLINE_MS} ms; `TEMPLATE_TOO_LARGE`: no
 *   retry can fix these. TransientError `TEMPLATE_BUSY` when too many renders wait.
 */
export async function renderTemplate(
  template: ReminderTemplate,
  delivery: ChannelDelivery,
  options: { textEscape?: TextEscape } = {},
): Promise<RenderedMessage> {
  const context = templateContext(delivery);
  const textEscape = options.textEscape ?? "none";
  if (!needsRenderThread(template, textEscape, context)) {
    return renderOnThisThread(template, context, textEscape);
  }
  return templateRenderPool().render({ template, context, textEscape });
}

/**
 * The create-time try of a template that is not light (those are tried by
 * {@link validateTemplate}): renders it on a render thread against `sample`, in every
 * escape mode. Does nothing for a light template or one that is not an object.
 * @throws ValidationError naming `<field>.<name>`: the render error, or that it ran past
 *   {@link RENDER_DEADLINE_MS} ms or grew too large.
 */
export async function sampleRender(
  template: unknown,
  field: string,
  sample: ChannelDelivery,
  budget: TrialBudget | null = null,
): Promise<void> {
  if (!template || typeof template !== "object" || Array.isArray(template)) return;
  const t = template as ReminderTemplate;
  const context = templateContext(sample);
  for (const textEscape of ["none", "slack"] as const) {
    if (budget ? budget.tried.has(t) : trialCost(t, context) <= TRIAL_BUDGET_CHARS) continue;
    try {
      await templateRenderPool().render({ template: t, context, textEscape });
    } catch (err) {
      if (!(err instanceof PunctualError) || err.code === "TEMPLATE_BUSY") throw err;
      const m = /^template (subject|text|html): (.*)$/s.exec(err.message);
      throw new ValidationError({
        field: m ? `${field}.${m[1]}` : field,
        message: m ? (m[2] as string) : err.message.replace(/^template: /, ""),
      });
    }
  }
}

/**
 * A create-time sample delivery (CH-6): a delivery key and a schedule id of the real
 * forms, fresh on every call, so a template cannot tell the try from a send.
 */
export function sampleIdentity(): { deliveryKey: string; scheduleId: string } {
  return {
    deliveryKey: `dk_${randomBytes(16).toString("hex")}`,
    scheduleId: randomUUID(),
  };
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
