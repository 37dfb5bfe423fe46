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
 * 4. The import's record (`GET /v1/imports`, `GET /v1/imports/{id}`) is `running` from the
 *    moment the file is read (an asynchronous import: from its request), shows the progress
 *    per chunk, and ends `succeeded` or `failed` with the error. Its process renews a lease
 *    on it while it runs; a record whose lease expired (the process died) is marked failed.
 */
import { randomUUID } from "node:crypto";
import { parseCalendarAsync, yieldToEventLoop, type CalendarImport } from "../../ical/index.js";
import { lendRuleWork } from "../../recurrence/recurrence.js";
import { withImportLock } from "../../store/import-lock.js";
import {
  finishImportRecord,
  IMPORT_LEASE_MS,
  recordImportProgress,
  renewImportLease,
  startImportRecord,
  type ImportDetails,
} from "../../store/imports.js";
import {
  sourceSchedulesPage,
  sourceSchedulesUnkeyed,
  type SourceScheduleRow,
} from "../../store/schedules.js";
import { ValidationError } from "../../errors/index.js";
import { tenantOf, type AppContext } from "../context.js";
import { applyChanges } from "./apply.js";
import { planImport } from "./plan.js";
import {
  IMPORT_CHUNK,
  IMPORT_CHUNK_EMBEDDED,
  type ImportOptions,
  type ImportProgress,
  type ImportSummary,
} from "./types.js";

/**
 * The record of one import in `punctual_imports` (API-5): its id and the lease owner that
 * writes its progress. {@link startImport} makes one; {@link runImport} makes its own when
 * given none.
 */
export interface ImportHandle {
  id: number;
  owner: string;
}

/**
 * Starts the record of an import of `source`: a `running` row, leased to this process for
 * `IMPORT_LEASE_MS` and renewed while {@link runImport} runs it. An asynchronous import
 * answers with its id before reading the file.
 */
export async function startImport(
  app: AppContext,
  tenant: string,
  source: string,
): Promise<ImportHandle> {
  const owner = randomUUID();
  const id = await startImportRecord(app.db, { now: app.now(), tenant, source, owner });
  return { id, owner };
}

/** The summary's lists as the import's record keeps them. */
function detailsOf(summary: ImportSummary): ImportDetails {
  return {
    skipped: summary.skipped,
    warnings: summary.warnings,
    calendarTzid: summary.calendarTzid,
    floatingTzid: summary.floatingTzid,
  };
}

/** The message a failed import's record keeps. */
function failureText(err: unknown): string {
  if (err instanceof ValidationError) {
    return err.issues.map((i) => `${i.field}: ${i.message}`).join("; ");
  }
  return err instanceof Error ? err.message : String(err);
}

/**
 * Imports a calendar into the schedules of `options.source` (see the module comment).
 * Safe to repeat: the same file changes nothing. The import is recorded from the moment
 * the file is read (or from `record`, an asynchronous import's row): its progress per
 * chunk, then `succeeded` or `failed` with the error (`GET /v1/imports/{id}`).
 * @throws ValidationError when the file is not iCalendar at all or breaks a limit, or
 *   field `chunkSize` when it is not a positive integer; a database error of a chunk
 *   (the chunks committed before it stay).
 */
export async function runImport(
  app: AppContext,
  text: string,
  options: ImportOptions & { record?: ImportHandle },
): Promise<ImportSummary> {
  const tenant = tenantOf(options);
  let record = options.record;
  let renewal: NodeJS.Timeout | undefined;
  try {
    const summary = await importRecorded(app, text, options, tenant, (handle) => {
      record = handle;
      // The lease outlives a stretch without chunks (a long comparison, a wait on the lock).
      renewal = setInterval(() => {
        renewImportLease(app.db, { now: app.now(), ...handle }).catch((err: unknown) =>
          app.logger.warn({ err, importId: handle.id }, "import lease renewal failed"),
        );
      }, IMPORT_LEASE_MS / 4);
      renewal.unref();
    });
    if (record !== undefined) {
      await finishImportRecord(app.db, { now: app.now(), ...record, error: null });
    }
    return summary;
  } catch (err) {
    if (record !== undefined) {
      await finishImportRecord(app.db, {
        now: app.now(),
        ...record,
        error: failureText(err),
      }).catch((e: unknown) =>
        app.logger.warn({ err: e, importId: record?.id }, "import failure not recorded"),
      );
    }
    throw err;
  } finally {
    clearInterval(renewal);
  }
}

/** {@link runImport}'s work; `started` hears of the record once there is one. */
async function importRecorded(
  app: AppContext,
  text: string,
  options: ImportOptions & { record?: ImportHandle },
  tenant: string,
  started: (record: ImportHandle) => void,
): Promise<ImportSummary> {
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
  if (options.record !== undefined) started(options.record);
  let release = (): void => {};
  // Let go of once compared (below): what is left live while the changes are written is
  // what a major garbage collection's pause on this thread grows with (OPS-12).
  let parsed: CalendarImport | undefined;
  if (options.readCalendar !== undefined) {
    const {
      onProgress: _p,
      onChunk: _c,
      chunkSize: _s,
      yieldNow: _y,
      readCalendar,
      tenant: _t,
      record: _r,
      ...ical
    } = options;
    const read = await readCalendar(text, ical);
    parsed = read.parsed;
    // The rule work the reading thread did is lent to this thread's validation.
    release = lendRuleWork(read.work);
  } else {
    const { record: _r, ...rest } = options;
    parsed = await parseCalendarAsync(text, { ...rest, yieldNow });
  }
  try {
    // A file refused as a whole leaves no record; one that was read has one from here.
    const record = options.record ?? (await startImport(app, tenant, options.source));
    if (options.record === undefined) started(record);
    const events = parsed.events.length;
    const source = options.source;
    const progress = (
      s: ImportSummary,
      p: Omit<ImportProgress, "created" | "updated" | "cancelled">,
    ) =>
      recordImportProgress(app.db, {
        now: app.now(),
        ...record,
        counts: {
          events,
          chunksDone: p.chunk,
          chunksTotal: p.chunks,
          changesDone: p.done,
          changesTotal: p.total,
          created: s.created,
          updated: s.updated,
          cancelled: s.cancelled,
          unchanged: s.unchanged,
          skipped: s.skipped.length,
          warnings: s.warnings.length,
        },
        details: detailsOf(s),
      });
    return await withImportLock(app.db, tenant, options.source, async () => {
      const plan = await planImport(
        app,
        parsed as CalendarImport,
        await storedOfSource(app, tenant, source, yieldNow),
        { source, tenant, yieldNow },
      );
      parsed = undefined;
      const total = plan.changes.length;
      const chunks = Math.ceil(total / chunkSize);
      await progress(plan.summary, { chunk: 0, chunks, done: 0, total });
      await applyChanges(app, plan.changes, plan.summary, {
        tenant,
        chunkSize,
        yieldNow,
        onChunk: async (p) => {
          await progress(plan.summary, p);
          options.onProgress?.(p.done, p.total);
          await options.onChunk?.(p);
        },
      });
      // The outcomes of the last chunk (skips found while writing) and the zero-change case.
      await progress(plan.summary, { chunk: chunks, chunks, done: total, total });
      return plan.summary;
    });
  } finally {
    release();
  }
}

/**
 * Stored schedules of an import source read per page (OPS-12): one answer of 50,000 rows
 * is parsed on the event loop in a few long pieces; pages of this size are not.
 */
export const SOURCE_PAGE = 2_000;

/**
 * What an import compares with: every stored schedule of (tenant, source), any state, read
 * `pageSize` at a time in external id order with a turn of the event loop between pages;
 * those without an external id last.
 */
export async function storedOfSource(
  app: Pick<AppContext, "db">,
  tenant: string,
  source: string,
  yieldNow: () => Promise<void>,
  pageSize = SOURCE_PAGE,
): Promise<SourceScheduleRow[]> {
  const stored: SourceScheduleRow[] = [];
  let after = "";
  for (;;) {
    const page = await sourceSchedulesPage(app.db, { tenant, source, after, limit: pageSize });
    for (const row of page) stored.push(row);
    const last = page[page.length - 1];
    if (page.length < pageSize || last?.external_id == null) break;
    after = last.external_id;
    await yieldNow();
  }
  // Last, as PostgreSQL sorts NULLs after every external id.
  for (const row of await sourceSchedulesUnkeyed(app.db, { tenant, source })) stored.push(row);
  return stored;
}
