/**
 * The record of calendar imports (API-5), listed by `GET /v1/imports` in keyset pages
 * (API-3), one by `GET /v1/imports/{id}`. `./import/service.ts` writes one row per import
 * from its start; a reader first marks failed the running imports whose process died.
 */
import { listImportsQuerySchema, type ImportRunView, type ImportView } from "../contracts/index.js";
import { NotFoundError } from "../errors/index.js";
import {
  abandonExpiredImports,
  getImportRow,
  listImportRows,
  type ImportRow,
} from "../store/imports.js";
import { tenantOf, type AppContext, type CallContext } from "./context.js";
import { cursorPart, decodeCursor, keysetPage, type CursorScope } from "./cursor.js";
import { checkWindow, parseInput } from "./input.js";

function toImportRunView(r: ImportRow): ImportRunView {
  return {
    id: Number(r.id),
    source: r.source,
    status: r.status,
    startedAt: r.started_at === null ? null : r.started_at.toISOString(),
    importedAt: r.imported_at.toISOString(),
    events: r.events,
    created: r.created,
    updated: r.updated,
    unchanged: r.unchanged,
    cancelled: r.cancelled,
    skipped: r.skipped,
    warnings: r.warnings,
    progress: {
      chunksDone: r.chunks_done,
      chunksTotal: r.chunks_total,
      changesDone: r.changes_done,
      changesTotal: r.changes_total,
    },
    error: r.error,
  };
}

/**
 * API-5: one of the caller's imports with its progress and lists (skipped events, warning
 * texts). A running import whose process died (its lease expired) reads as failed.
 * @throws NotFoundError no import `id` of the caller's tenant.
 */
export async function getImport(
  app: AppContext,
  id: number,
  ctx: CallContext = {},
): Promise<ImportView> {
  await abandonExpiredImports(app.db, app.now());
  const row = Number.isSafeInteger(id) ? await getImportRow(app.db, tenantOf(ctx), id) : null;
  if (row === null) throw new NotFoundError("import", String(id));
  return { ...toImportRunView(row), details: row.details };
}

/**
 * Lists the caller's written imports (API-5, API-3) by id: `order` `asc` (oldest first,
 * the default) or `desc`, filtered by `source` and the time written in [`importedFrom`,
 * `importedTo`), one keyset page of `limit` rows. `nextCursor` (null on the last page)
 * continues the same order and filters. Running and failed imports are listed too; dry
 * runs and files refused as a whole are not.
 * @throws ValidationError a bad query field, or a `cursor` of another order or filter set.
 */
export async function listImports(
  app: AppContext,
  query: unknown = {},
  ctx: CallContext = {},
): Promise<{ items: ImportRunView[]; nextCursor: string | null }> {
  const q = parseInput(listImportsQuerySchema, query);
  checkWindow(q.importedFrom, q.importedTo, ["importedFrom", "importedTo"]);
  const iso = (v: string | undefined) => (v === undefined ? undefined : new Date(v).toISOString());
  const scope: CursorScope = {
    list: "imports",
    order: q.order,
    source: q.source,
    importedFrom: iso(q.importedFrom),
    importedTo: iso(q.importedTo),
  };
  const afterId =
    q.cursor === undefined ? null : (decodeCursor(q.cursor, scope, [cursorPart.id])[0] as number);
  await abandonExpiredImports(app.db, app.now());
  const rows = await listImportRows(app.db, {
    tenant: tenantOf(ctx),
    source: q.source ?? null,
    importedFrom: q.importedFrom ?? null,
    importedTo: q.importedTo ?? null,
    afterId,
    limit: q.limit,
    order: q.order,
  });
  return keysetPage(rows, q.limit, scope, (r) => [Number(r.id)], toImportRunView);
}
