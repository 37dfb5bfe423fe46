/**
 * iCalendar import as a service (API-5, DEL-9, DEL-10, OPS-12): read → compare → write.
 *
 * 1. Read: the file becomes events (`parseCalendarAsync` here, in slices, or a worker
 *    thread's `parseCalendar` through `readCalendar`), outside any lock.
 * 2. Compare, under the import lock of (tenant, source) — across processes on PostgreSQL,
 *    so the API, the periodic calendar task and the CLI take turns: the stored schedules
 *    of the source against the events ({@link planImport}): creates, updates, cancels.
 * 3. Write the changes in chunks of {@link IMPORT_CHUNK}, each chunk one transaction
 *    ({@link applyChanges}), still under the lock; progress is reported per chunk.
 * 4. Record the import (`GET /v1/imports`).
 */
import { parseCalendarAsync, yieldToEventLoop, type CalendarImport } from "../../ical/index.js";
import { lendRuleWork } from "../../recurrence/recurrence.js";
import { withImportLock } from "../../store/import-lock.js";
import { recordImport } from "../../store/imports.js";
import { schedulesOfSource } from "../../store/schedules.js";
import { ValidationError } from "../../errors/index.js";
import { DEFAULT_TENANT, type AppContext } from "../context.js";
import { applyChanges } from "./apply.js";
import { planImport } from "./plan.js";
import {
  IMPORT_CHUNK,
  IMPORT_CHUNK_EMBEDDED,
  type ImportOptions,
  type ImportSummary,
} from "./types.js";

/**
 * Imports a calendar into the schedules of `options.source` (see the module comment).
 * Safe to repeat: the same file changes nothing.
 * @throws ValidationError when the file is not iCalendar at all or breaks a limit, or
 *   field `chunkSize` when it is not a positive integer; a database error of a chunk
 *   (the chunks committed before it stay).
 */
export async function runImport(
  app: AppContext,
  text: string,
  options: ImportOptions,
): Promise<ImportSummary> {
  const tenant = options.tenant ?? DEFAULT_TENANT;
  const yieldNow = options.yieldNow ?? yieldToEventLoop;
  const chunkSize =
    options.chunkSize ?? (app.db.engine === "pglite" ? IMPORT_CHUNK_EMBEDDED : IMPORT_CHUNK);
  if (!Number.isInteger(chunkSize) || chunkSize < 1) {
    throw new ValidationError({
      field: "chunkSize",
      message: "must be a positive integer",
      value: chunkSize,
    });
  }
  let release = (): void => {};
  let parsed: CalendarImport;
  if (options.readCalendar !== undefined) {
    const {
      onProgress: _p,
      onChunk: _c,
      chunkSize: _s,
      yieldNow: _y,
      readCalendar,
      tenant: _t,
      ...ical
    } = options;
    const read = await readCalendar(text, ical);
    parsed = read.parsed;
    // The rule work the reading thread did is lent to this thread's validation.
    release = lendRuleWork(read.work);
  } else {
    parsed = await parseCalendarAsync(text, { ...options, yieldNow });
  }
  try {
    const summary = await withImportLock(app.db, tenant, options.source, async () => {
      const stored = await schedulesOfSource(app.db, { tenant, source: options.source });
      const plan = await planImport(app, parsed, stored, {
        source: options.source,
        tenant,
        yieldNow,
      });
      await applyChanges(app, plan.changes, plan.summary, {
        tenant,
        chunkSize,
        yieldNow,
        onChunk: async (p) => {
          options.onProgress?.(p.done, p.total);
          await options.onChunk?.(p);
        },
      });
      return plan.summary;
    });
    // API-5: the record `GET /v1/imports` lists.
    await recordImport(app.db, {
      now: app.now(),
      tenant,
      source: options.source,
      events: parsed.events.length,
      created: summary.created,
      updated: summary.updated,
      unchanged: summary.unchanged,
      cancelled: summary.cancelled,
      skipped: summary.skipped.length,
      warnings: summary.warnings.length,
    });
    return summary;
  } finally {
    release();
  }
}
