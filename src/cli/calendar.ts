/**
 * `punctual import FILE.ics` (API-5): a calendar's events become schedules on the running
 * server (`POST /v1/imports`, asynchronous: its progress per chunk is read from
 * `GET /v1/imports/{id}` and shown on stderr, a bar on a terminal, plain lines otherwise),
 * or with `--dry-run` the deliveries they would produce are computed here, touching
 * nothing and needing no server. `--json` waits for the one synchronous reply.
 *
 * Output contract of `--dry-run --json`: stdout holds exactly the array
 * `[{ uid, recurrenceId, occurrenceAt, dueAt, reminderKey }]` sorted by `dueAt` then
 * `uid`; the summary, skipped events and warnings go to stderr.
 *
 * Exit status: 1 when the file cannot be read or is not iCalendar (the message names
 * the file), or when the server refuses the request; 0 otherwise. Events the import
 * skips are reported with their UID, line and reason, and are not an error.
 */
import { readFile } from "node:fs/promises";
import { basename, extname } from "node:path";
import { readCalendarSource } from "../app/calendar-task.js";
import { dryRunImport, type ImportSummary } from "../app/import.js";
import type { ImportView } from "../contracts/index.js";
import { ValidationError, type FieldIssue } from "../errors/index.js";
import { parseCalendar, type DryRunDelivery, type SkippedEvent } from "../ical/index.js";
import { ApiError, CliError, EXIT_FAILURE, unreadableFile } from "./errors.js";
import { jsonText, table } from "./format.js";
import { clientFor } from "./remote.js";
import type { Io } from "./run.js";

/** Default dry-run window after `--from`: 30 days. */
export const DRY_RUN_DAYS = 30;

/** Files with at least this many events get a progress display. */
export const PROGRESS_MIN_EVENTS = 1_000;

/** How long the server may take over a large calendar before the command gives up, ms. */
const IMPORT_TIMEOUT_MS = 10 * 60_000;

/** `punctual import` flags. `from`/`to` are already parsed to epoch milliseconds. */
export interface ImportFlags {
  source?: string;
  remind: string[];
  useAlarms: boolean;
  channel: "webhook" | "log";
  target?: string;
  tzid?: string;
  dryRun: boolean;
  from?: number;
  to?: number;
  json: boolean;
  url: string;
}

/** What the command needs from its surroundings besides the output streams. */
export interface ImportEnv {
  /** Whether stderr is a terminal: a redrawn progress bar, else plain progress lines. */
  errIsTTY: boolean;
  /** Current time, ms (the default `--from`). */
  now: () => number;
  /** How often an import's progress is read, ms; default {@link IMPORT_POLL_MS}. */
  pollMs?: number;
}

/** `--source` default: the file's name without its extension (`work.ics` → `work`). */
export function defaultSource(file: string): string {
  const name = basename(file);
  const stem = basename(name, extname(name));
  return stem === "" ? name : stem;
}

/** The flag a field of the import options came from, for messages. */
function flagOf(field: string): string {
  const [head, index] = field.split(".");
  switch (head) {
    case "remind":
      return index === undefined ? "--remind" : `--remind #${Number(index) + 1}`;
    case "useAlarms":
      return "--use-alarms";
    case "tzid":
    case "source":
    case "channel":
    case "target":
    case "from":
    case "to":
      return `--${head}`;
    default:
      return field;
  }
}

/**
 * Turns a refusal of the import (local or from the server) into a message for people: the
 * file's problems name the file, the options' problems name their flags.
 */
function refusal(file: string, issues: readonly FieldIssue[], status?: string): CliError {
  const fileIssue = issues.find((i) => i.field === "file");
  if (fileIssue) return new CliError(`${file} ${fileIssue.message}`, EXIT_FAILURE);
  return new CliError(
    status ? `the server refused the import (${status}):` : "invalid import options:",
    EXIT_FAILURE,
    issues.map((i) => ({ ...i, field: flagOf(i.field) })),
  );
}

/** Reads the calendar as UTF-8 text (a byte-order mark is dropped). */
async function readCalendar(file: string): Promise<string> {
  try {
    // OPS-7: a calendar URL (`punctual import --every 15m https://…`) is fetched.
    const text = /^https?:\/\//i.test(file)
      ? await readCalendarSource(file, AbortSignal.timeout(IMPORT_TIMEOUT_MS))
      : await readFile(file, "utf8");
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  } catch (err) {
    throw unreadableFile(file, err);
  }
}

/**
 * A progress display for the parse of a large file, fed by the import's `onProgress`.
 * On a terminal a bar is redrawn in place; otherwise a plain `parsed N/M events` line is
 * written now and then (and once at the end). Small files show nothing.
 */
export function progressReporter(
  io: Io,
  label: string,
  errIsTTY: boolean,
  clock: () => number = () => performance.now(),
): { onProgress: (done: number, total: number) => void; finish: () => void } {
  const started = clock();
  let lastDraw = -Infinity;
  let drawn = false;
  let last: { done: number; total: number } | null = null;
  const WIDTH = 24;
  const onProgress = (done: number, total: number): void => {
    if (total < PROGRESS_MIN_EVENTS) return;
    last = { done, total };
    const now = clock();
    const final = done >= total;
    if (errIsTTY) {
      if (!final && now - lastDraw < 50) return;
      const filled = Math.round((done / total) * WIDTH);
      io.err(
        `\r\x1b[K${label} [${"#".repeat(filled)}${"-".repeat(WIDTH - filled)}] ${done}/${total} events`,
      );
      drawn = true;
    } else {
      if (!final && now - lastDraw < 1_000) return;
      io.err(`parsed ${done}/${total} events\n`);
    }
    lastDraw = now;
  };
  const finish = (): void => {
    if (!errIsTTY || !drawn || last === null) return;
    const seconds = ((clock() - started) / 1_000).toFixed(1);
    io.err(`\r\x1b[Kparsed ${last.done}/${last.total} events in ${seconds} s\n`);
    drawn = false;
  };
  return { onProgress, finish };
}

function skippedTable(skipped: readonly SkippedEvent[]): string {
  return table(
    skipped,
    [
      { header: "UID", cell: (s) => s.uid ?? "(no UID)" },
      { header: "LINE", cell: (s) => s.line },
      { header: "REASON", cell: (s) => s.reason },
    ],
    "  ",
  );
}

function warningLines(warnings: readonly string[]): string {
  return warnings.map((w) => `  - ${w}\n`).join("");
}

/**
 * Where floating times and all-day dates were read, and why there. `calendarTzid` is the
 * file's X-WR-TIMEZONE when known; `undefined` when only the zone used is known, in which
 * case the reason follows from the rule "X-WR-TIMEZONE, else --tzid, else UTC".
 */
function floatingLine(
  floatingTzid: string,
  calendarTzid: string | null | undefined,
  flags: ImportFlags,
): string {
  const fromCalendar =
    calendarTzid === undefined
      ? floatingTzid !== (flags.tzid ?? "UTC")
      : calendarTzid !== null && calendarTzid === floatingTzid;
  const why = fromCalendar
    ? "the calendar's X-WR-TIMEZONE"
    : flags.tzid !== undefined
      ? "--tzid"
      : "default; choose another with --tzid";
  return `floating times and all-day dates read in ${floatingTzid} (${why})\n`;
}

/** The readable summary of a stored import. */
export function summaryText(file: string, s: ImportSummary, flags: ImportFlags): string {
  let text =
    `Imported ${file} as source "${s.source}": ${s.created} created, ${s.updated} updated, ` +
    `${s.unchanged} unchanged, ${s.cancelled} cancelled, ${s.skipped.length} skipped.\n` +
    floatingLine(s.floatingTzid, s.calendarTzid, flags);
  if (s.skipped.length > 0) text += `skipped (${s.skipped.length}):\n${skippedTable(s.skipped)}`;
  if (s.warnings.length > 0)
    text += `warnings (${s.warnings.length}):\n${warningLines(s.warnings)}`;
  return text;
}

/**
 * `punctual import FILE`: sends the calendar to the server, or with `--dry-run` prints
 * the deliveries it would produce.
 * @throws CliError (exit 1) for an unreadable or non-iCalendar file, bad options, or a
 *   refusal by the server.
 */
export async function runImport(
  file: string,
  flags: ImportFlags,
  io: Io,
  env: ImportEnv,
): Promise<void> {
  if (flags.remind.length === 0 && !flags.useAlarms) {
    throw new CliError(
      "nothing to remind: give --remind OFFSET (e.g. --remind -PT15M, repeatable) and/or --use-alarms",
    );
  }
  if (!flags.dryRun && (flags.from !== undefined || flags.to !== undefined)) {
    throw new CliError("--from and --to only apply with --dry-run");
  }
  const text = await readCalendar(file);
  const source = flags.source ?? defaultSource(file);
  const options = {
    source,
    remind: flags.remind,
    useAlarms: flags.useAlarms,
    channel: flags.channel,
    ...(flags.target !== undefined ? { target: { url: flags.target } } : {}),
    ...(flags.tzid !== undefined ? { defaultTzid: flags.tzid } : {}),
  };
  if (flags.dryRun) return await dryRun(file, text, options, flags, io, env);

  // Read the file here first: a file that is not iCalendar fails without a server, and
  // a large one shows its progress. The server reads it again and decides what to store.
  const progress = progressReporter(io, `reading ${basename(file)}`, env.errIsTTY);
  let events: number;
  try {
    events = parseCalendar(text, {
      ...options,
      // The server enforces its own size limit, which may be larger than the default.
      maxBytes: Number.MAX_SAFE_INTEGER,
      onProgress: progress.onProgress,
    }).events.length;
  } catch (err) {
    if (err instanceof ValidationError) throw refusal(file, err.issues);
    throw err;
  } finally {
    progress.finish();
  }
  if (events >= PROGRESS_MIN_EVENTS) io.err(`importing ${events} events into ${flags.url}…\n`);

  const client = clientFor(flags);
  const query = {
    source,
    remind: flags.remind,
    ...(flags.useAlarms ? { useAlarms: "true" } : {}),
    channel: flags.channel,
    target: flags.target,
    tzid: flags.tzid,
    // Without --json the server answers at once and the writing is followed per chunk;
    // --json keeps its one reply, the whole summary with every schedule.
    ...(flags.json ? {} : { async: "true" }),
  };
  let reply: { body: ImportSummary | ImportView };
  try {
    reply = await client.request<ImportSummary | ImportView>("POST", "/v1/imports", {
      rawBody: { text, contentType: "text/calendar; charset=utf-8" },
      query,
      timeoutMs: IMPORT_TIMEOUT_MS,
    });
  } catch (err) {
    if (err instanceof ApiError && err.body.error.issues?.length) {
      throw refusal(file, err.body.error.issues, `${err.status} ${err.body.error.code}`);
    }
    throw err;
  }
  if (flags.json) {
    io.out(jsonText(reply.body));
    return;
  }
  const view = await followImport(
    (id) => client.get<ImportView>(`/v1/imports/${id}`),
    reply.body as ImportView,
    chunkProgress(io, `importing ${basename(file)}`, env.errIsTTY),
    env.pollMs ?? IMPORT_POLL_MS,
  );
  if (view.status === "failed") {
    throw new CliError(`import ${view.id} of ${file} failed: ${view.error ?? "no reason given"}`);
  }
  io.out(summaryText(file, summaryOfView(view), flags));
}

/** How often `punctual import` reads an import's progress, ms. */
export const IMPORT_POLL_MS = 200;

/**
 * Reads an asynchronous import (`GET /v1/imports/{id}`) every `pollMs` until it is no
 * longer running, showing each new state; answers the last one.
 */
export async function followImport(
  read: (id: number) => Promise<ImportView>,
  started: ImportView,
  progress: { show: (view: ImportView) => void; finish: () => void },
  pollMs: number,
): Promise<ImportView> {
  let view = started;
  try {
    for (;;) {
      progress.show(view);
      if (view.status !== "running") return view;
      await new Promise((resolve) => setTimeout(resolve, pollMs));
      view = await read(view.id);
    }
  } finally {
    progress.finish();
  }
}

/** The one line of an import's progress: chunks, changes and the counts so far. */
export function progressLine(v: ImportView): string {
  const p = v.progress;
  return (
    `chunk ${p.chunksDone}/${p.chunksTotal}: ${p.changesDone}/${p.changesTotal} changes written ` +
    `(${v.created} created, ${v.updated} updated, ${v.cancelled} cancelled)`
  );
}

/**
 * The progress of an import's writing, per chunk (OPS-12): on a terminal a bar redrawn in
 * place; otherwise one plain line per chunk seen. Nothing before the events are compared
 * (no chunk known yet) or for an import with nothing to write.
 */
export function chunkProgress(
  io: Io,
  label: string,
  errIsTTY: boolean,
): { show: (view: ImportView) => void; finish: () => void } {
  const WIDTH = 24;
  let shown = -1;
  let drawn = false;
  return {
    show(v) {
      const p = v.progress;
      if (p.chunksTotal === 0 || p.chunksDone === shown) return;
      shown = p.chunksDone;
      if (errIsTTY) {
        const filled = Math.round((p.chunksDone / p.chunksTotal) * WIDTH);
        io.err(
          `\r\x1b[K${label} [${"#".repeat(filled)}${"-".repeat(WIDTH - filled)}] ${progressLine(v)}`,
        );
        drawn = true;
      } else {
        io.err(`${progressLine(v)}\n`);
      }
    },
    finish() {
      if (drawn) io.err("\n");
      drawn = false;
    },
  };
}

/** The summary a finished import's record holds, as {@link summaryText} prints it. */
function summaryOfView(v: ImportView): ImportSummary {
  return {
    source: v.source,
    created: v.created,
    updated: v.updated,
    unchanged: v.unchanged,
    cancelled: v.cancelled,
    skipped: v.details?.skipped ?? [],
    warnings: v.details?.warnings ?? [],
    calendarTzid: v.details?.calendarTzid ?? null,
    floatingTzid: v.details?.floatingTzid ?? "UTC",
    schedules: [],
  };
}

/** `--dry-run`: computed here with the scheduler's planning code; nothing is stored. */
async function dryRun(
  file: string,
  text: string,
  options: {
    source: string;
    remind: string[];
    useAlarms: boolean;
    channel: string;
    target?: Record<string, unknown>;
    defaultTzid?: string;
  },
  flags: ImportFlags,
  io: Io,
  env: ImportEnv,
): Promise<void> {
  const fromMs = flags.from ?? env.now();
  const toMs = flags.to ?? fromMs + DRY_RUN_DAYS * 86_400_000;
  if (toMs <= fromMs) {
    throw new CliError(
      `--to (${new Date(toMs).toISOString()}) must be after --from (${new Date(fromMs).toISOString()})`,
    );
  }
  const progress = progressReporter(io, `reading ${basename(file)}`, env.errIsTTY);
  let result: Awaited<ReturnType<typeof dryRunImport>>;
  try {
    result = await dryRunImport(text, {
      ...options,
      fromMs,
      toMs,
      onProgress: progress.onProgress,
    });
  } catch (err) {
    if (err instanceof ValidationError) throw refusal(file, err.issues);
    throw err;
  } finally {
    progress.finish();
  }
  const { deliveries, skipped, warnings, events, floatingTzid } = result;
  const from = new Date(fromMs).toISOString();
  const to = new Date(toMs).toISOString();
  let report =
    `dry run of ${file} (nothing stored): ${deliveries.length} deliver${deliveries.length === 1 ? "y" : "ies"} ` +
    `from ${events} schedule${events === 1 ? "" : "s"} in [${from}, ${to}), ${skipped.length} event${skipped.length === 1 ? "" : "s"} skipped\n` +
    floatingLine(floatingTzid, undefined, flags);
  if (skipped.length > 0) report += `skipped (${skipped.length}):\n${skippedTable(skipped)}`;
  if (warnings.length > 0) report += `warnings (${warnings.length}):\n${warningLines(warnings)}`;
  if (flags.json) {
    // The contract: stdout holds the array and nothing else.
    io.out(jsonText(deliveries));
    io.err(report);
    return;
  }
  io.out(deliveryTable(deliveries) + report);
}

function deliveryTable(deliveries: readonly DryRunDelivery[]): string {
  return table(deliveries, [
    { header: "DUE (UTC)", cell: (d) => d.dueAt },
    { header: "OCCURRENCE", cell: (d) => d.occurrenceAt },
    { header: "REMINDER", cell: (d) => d.reminderKey },
    { header: "UID", cell: (d) => d.uid },
    { header: "RECURRENCE-ID", cell: (d) => d.recurrenceId },
  ]);
}
