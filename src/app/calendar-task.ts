/**
 * The built-in periodic task (OPS-7): re-import a calendar file or URL on a cadence
 * (API-5 import, safe to repeat: an unchanged calendar changes nothing; edited events
 * are updated, events gone from it cancelled). Each import's summary is logged at INFO.
 *
 * ```ts
 * createPunctual({
 *   tasks: [
 *     calendarImportTask({
 *       from: "https://calendar.example.com/team.ics",
 *       source: "team",
 *       every: "15m",
 *       import: { remind: ["-PT15M"], channel: "log" },
 *     }),
 *   ],
 * });
 * ```
 */
import { readFile } from "node:fs/promises";
import { fetch } from "undici";
import { ValidationError } from "../errors/index.js";
import { importCalendar, type ImportOptions, type ImportSummary } from "./import.js";
import type { PunctualTaskDefinition } from "./punctual.js";

/** Options of {@link calendarImportTask}. */
export interface CalendarImportTaskOptions {
  /** A file path, or an `http(s)://` URL fetched with GET. */
  from: string;
  /** Calendar id the schedules belong to (`schedule.source`); keep it across imports. */
  source: string;
  /** Cadence: ms or `"15m"`, `"1h"` … (see the `every` of a task). */
  every: number | string;
  /** Task name; default `calendar-import:<source>`. */
  name?: string;
  /** Budget of one import, ms; default 120,000. Past it the fetch and the import stop. */
  budgetMs?: number;
  /** One process of the cluster imports each occurrence; default true. */
  singleton?: boolean;
  /** The reminders and zones of the import, as `punctual import` takes them. */
  import?: Omit<ImportOptions, "source" | "onProgress" | "yieldNow">;
}

/** Largest calendar fetched or read, bytes (the import's own default limit). */
const DEFAULT_MAX_BYTES = 20 * 1024 * 1024;

/**
 * Reads a calendar from a file or an http(s) URL.
 * @throws ValidationError (field `from`) on a non-2xx reply or a file or body over `maxBytes`.
 */
export async function readCalendarSource(
  from: string,
  signal: AbortSignal,
  maxBytes = DEFAULT_MAX_BYTES,
): Promise<string> {
  if (/^https?:\/\//i.test(from)) {
    const res = await fetch(from, { signal, headers: { accept: "text/calendar, */*" } });
    if (!res.ok) {
      await res.body?.cancel();
      throw new ValidationError({
        field: "from",
        message: `GET answered ${res.status}`,
        value: from,
      });
    }
    const length = Number(res.headers.get("content-length") ?? "0");
    if (length > maxBytes) {
      await res.body?.cancel();
      throw new ValidationError({
        field: "from",
        message: `larger than ${maxBytes} bytes`,
        value: from,
      });
    }
    const text = await res.text();
    if (Buffer.byteLength(text) > maxBytes) {
      throw new ValidationError({
        field: "from",
        message: `larger than ${maxBytes} bytes`,
        value: from,
      });
    }
    return text;
  }
  return readFile(from, { encoding: "utf8", signal });
}

/** One line of an import summary for the log: counts, skipped UIDs and warnings. */
export function summaryFields(summary: ImportSummary): Record<string, unknown> {
  return {
    source: summary.source,
    created: summary.created,
    updated: summary.updated,
    unchanged: summary.unchanged,
    cancelled: summary.cancelled,
    skipped: summary.skipped.length,
    warnings: summary.warnings.length,
  };
}

/**
 * OPS-7: a task that imports the calendar `from` as `source` every `every`, logging each
 * import's summary (`calendar imported`), or the failure (the task counts `error`).
 * @returns a definition for the `tasks` option of `createPunctual`.
 */
export function calendarImportTask(options: CalendarImportTaskOptions): PunctualTaskDefinition {
  return {
    name: options.name ?? `calendar-import:${options.source}`,
    every: options.every,
    budgetMs: options.budgetMs ?? 120_000,
    singleton: options.singleton ?? true,
    async run(ctx) {
      const text = await readCalendarSource(
        options.from,
        ctx.signal,
        options.import?.maxBytes ?? DEFAULT_MAX_BYTES,
      );
      ctx.signal.throwIfAborted();
      const summary = await importCalendar(ctx.punctual, text, {
        ...options.import,
        source: options.source,
      });
      ctx.logger.info({ ...summaryFields(summary), from: options.from }, "calendar imported");
    },
  };
}
