/**
 * The record of calendar imports (API-5, API-3): one row of `punctual_imports` (migrations
 * 0027, 0047) per import read, from its start: `running` with its progress per chunk, then
 * `succeeded` or `failed`. Dry runs and files refused as a whole leave none (an
 * asynchronous import's refused file: a `failed` row). `$1` is "now"
 * where present (NULL: the database clock).
 */
import type { ImportRunView, ImportView } from "../contracts/index.js";
import type { Queryable } from "./database.js";
import { msAfterNow, NOW } from "./deliveries/sql.js";
import { columnsOf, execute, firstRow, orderedRowsStatement, rows } from "./statement.js";
import { idPastSql, type KeysetPageParams } from "./keyset.js";

/** Status of an import: `running` until it succeeds or fails (API-5). */
export type ImportStatus = ImportRunView["status"];

/**
 * The lists an import's summary holds once the file is read (column `details`, jsonb):
 * skipped events, warning texts, the calendar's zone and the zone floating times were read
 * in — as `GET /v1/imports/{id}` shows them.
 */
export type ImportDetails = NonNullable<ImportView["details"]>;

/** The counts of an import, named as its view names them. */
type ImportTallies = Pick<
  ImportRunView,
  "events" | "created" | "updated" | "unchanged" | "cancelled" | "skipped" | "warnings"
>;

/** A row of `punctual_imports` (migrations 0027, 0047). */
export interface ImportRow extends ImportTallies {
  id: number | string;
  tenant: string;
  source: string;
  status: ImportStatus;
  started_at: Date | null;
  imported_at: Date;
  chunks_done: number;
  chunks_total: number;
  changes_done: number;
  changes_total: number;
  error: string | null;
}

/** Result columns of the statements that return {@link ImportRow}s. */
export const IMPORT_ROW_KEYS = columnsOf<ImportRow>()([
  "id",
  "tenant",
  "source",
  "status",
  "started_at",
  "imported_at",
  "events",
  "created",
  "updated",
  "unchanged",
  "cancelled",
  "skipped",
  "warnings",
  "chunks_done",
  "chunks_total",
  "changes_done",
  "changes_total",
  "error",
]);

/** How long a running import's lease lasts without a renewal, ms (API-5). */
export const IMPORT_LEASE_MS = 60_000;

/**
 * Starts the record of an import: a `running` row leased to `owner`. $1 now, $2 tenant,
 * $3 source, $4 owner, $5 lease length in ms. Returns its id.
 */
export const START_IMPORT_SQL = `
insert into punctual_imports
  (tenant, source, status, started_at, imported_at, events, created, updated, unchanged,
   cancelled, skipped, warnings, lease_owner, lease_expires_at)
values ($2, $3, 'running', ${NOW}, ${NOW}, 0, 0, 0, 0, 0, 0, 0, $4, ${msAfterNow("$5")})
returning id`;
export const START_IMPORT_COLUMNS = columnsOf<{ id: number | string }>()(["id"]);

/**
 * Progress of a running import, written by its owner (renewing the lease). $1 now, $2 id,
 * $3 owner, $4 lease ms, $5 events read, $6 chunks done, $7 chunks in all, $8 changes
 * written, $9 changes in all, $10 created, $11 updated, $12 cancelled, $13 unchanged,
 * $14 skipped, $15 warnings, $16 details (jsonb text) or NULL to keep them. Updates no row
 * when the import is no longer running under that owner (it was marked abandoned).
 */
export const IMPORT_PROGRESS_SQL = `
update punctual_imports set
  events = $5, chunks_done = $6, chunks_total = $7, changes_done = $8, changes_total = $9,
  created = $10, updated = $11, cancelled = $12, unchanged = $13, skipped = $14,
  warnings = $15, details = coalesce($16::jsonb, details),
  lease_expires_at = ${msAfterNow("$4")}
where id = $2 and status = 'running' and lease_owner = $3`;

/** Renews a running import's lease. $1 now, $2 id, $3 owner, $4 lease ms. */
export const RENEW_IMPORT_LEASE_SQL = `
update punctual_imports set lease_expires_at = ${msAfterNow("$4")}
where id = $2 and status = 'running' and lease_owner = $3`;

/**
 * Ends a running import: $1 now, $2 id, $3 owner, $4 status (`succeeded` or `failed`),
 * $5 error or NULL. `imported_at` becomes the time it ended; the lease is dropped.
 */
export const FINISH_IMPORT_SQL = `
update punctual_imports set
  status = $4, error = $5, imported_at = ${NOW}, lease_owner = null, lease_expires_at = null
where id = $2 and status = 'running' and lease_owner = $3`;

/** The error an abandoned import is marked failed with. */
export const ABANDONED_IMPORT_ERROR =
  "abandoned: the process running the import stopped before it finished";

/**
 * Marks failed every running import whose lease expired: its process died (API-5). $1 now.
 * Served by the partial index `punctual_imports_running`.
 */
export const ABANDON_IMPORTS_SQL = `
update punctual_imports set
  status = 'failed', error = '${ABANDONED_IMPORT_ERROR}', imported_at = ${NOW},
  lease_owner = null, lease_expires_at = null
where status = 'running' and lease_expires_at < ${NOW}`;

/** One import of a tenant, with its details. $1 tenant, $2 id. */
export const GET_IMPORT_SQL = `
select ${IMPORT_ROW_KEYS.join(", ")}, details from punctual_imports
where tenant = $1 and id = $2`;
export const GET_IMPORT_COLUMNS = columnsOf<ImportRow & { details: ImportDetails | null }>()([
  ...IMPORT_ROW_KEYS,
  "details",
]);

/** Counts of an import so far, as {@link IMPORT_PROGRESS_SQL} records them. */
export interface ImportCounts {
  events: number;
  chunksDone: number;
  chunksTotal: number;
  changesDone: number;
  changesTotal: number;
  created: number;
  updated: number;
  cancelled: number;
  unchanged: number;
  skipped: number;
  warnings: number;
}

/** API-5: runs {@link START_IMPORT_SQL}; answers the new row's id. */
export async function startImportRecord(
  db: Queryable,
  p: { now: Date | null; tenant: string; source: string; owner: string },
): Promise<number> {
  const [row] = await rows<{ id: number | string }>(db, START_IMPORT_SQL, [
    p.now,
    p.tenant,
    p.source,
    p.owner,
    IMPORT_LEASE_MS,
  ]);
  return Number(row!.id);
}

/**
 * API-5: runs {@link IMPORT_PROGRESS_SQL}; `details` are written when given.
 * @returns false when the row is no longer this owner's running import.
 */
export async function recordImportProgress(
  db: Queryable,
  p: { now: Date | null; id: number; owner: string; counts: ImportCounts; details?: ImportDetails },
): Promise<boolean> {
  const c = p.counts;
  const n = await execute(db, IMPORT_PROGRESS_SQL, [
    p.now,
    p.id,
    p.owner,
    IMPORT_LEASE_MS,
    c.events,
    c.chunksDone,
    c.chunksTotal,
    c.changesDone,
    c.changesTotal,
    c.created,
    c.updated,
    c.cancelled,
    c.unchanged,
    c.skipped,
    c.warnings,
    p.details === undefined ? null : JSON.stringify(p.details),
  ]);
  return n > 0;
}

/** API-5: runs {@link RENEW_IMPORT_LEASE_SQL}. */
export async function renewImportLease(
  db: Queryable,
  p: { now: Date | null; id: number; owner: string },
): Promise<void> {
  await execute(db, RENEW_IMPORT_LEASE_SQL, [p.now, p.id, p.owner, IMPORT_LEASE_MS]);
}

/** API-5: runs {@link FINISH_IMPORT_SQL}. */
export async function finishImportRecord(
  db: Queryable,
  p: { now: Date | null; id: number; owner: string; error: string | null },
): Promise<void> {
  await execute(db, FINISH_IMPORT_SQL, [
    p.now,
    p.id,
    p.owner,
    p.error === null ? "succeeded" : "failed",
    p.error,
  ]);
}

/** API-5: runs {@link ABANDON_IMPORTS_SQL}; answers how many imports it marked failed. */
export function abandonExpiredImports(db: Queryable, now: Date | null): Promise<number> {
  return execute(db, ABANDON_IMPORTS_SQL, [now]);
}

/** API-5: runs {@link GET_IMPORT_SQL}; null when the tenant has no such import. */
export async function getImportRow(
  db: Queryable,
  tenant: string,
  id: number,
): Promise<(ImportRow & { details: ImportDetails | null }) | null> {
  return firstRow<ImportRow & { details: ImportDetails | null }>(db, GET_IMPORT_SQL, [tenant, id]);
}

/**
 * API-3: one keyset page of a tenant's imports by id, in `dir` order. Parameters: $1
 * tenant, $2 source or NULL, $3 imported at or after (inclusive) or NULL, $4 imported
 * before (exclusive) or NULL, $5 the last id seen or NULL from the start, $6 limit. The
 * id bound has a finite default, so the page is a range scan of `punctual_imports_tenant`
 * (tenant, id), or of `punctual_imports_source` (tenant, source, id) with a source.
 */
function listImportsSql(dir: "asc" | "desc"): string {
  return `
select ${IMPORT_ROW_KEYS.join(", ")} from punctual_imports
where tenant = $1 and ($2::text is null or source = $2)
  and ($3::timestamptz is null or imported_at >= $3)
  and ($4::timestamptz is null or imported_at < $4)
  and ${idPastSql("id", "$5", dir)}
order by id ${dir}
limit $6`;
}

/** {@link listImportsSql} oldest first. */
export const LIST_IMPORTS_SQL = listImportsSql("asc");
export const LIST_IMPORTS_COLUMNS = IMPORT_ROW_KEYS;
/** {@link listImportsSql} newest first. */
export const LIST_IMPORTS_DESC_SQL = listImportsSql("desc");
export const LIST_IMPORTS_DESC_COLUMNS = IMPORT_ROW_KEYS;

/** Parameters of {@link listImportRows}. */
export interface ListImportsParams extends KeysetPageParams<number> {
  tenant: string;
  source: string | null;
  importedFrom: string | null;
  importedTo: string | null;
}

/** API-3: runs {@link LIST_IMPORTS_SQL} (or its newest-first twin): one page. */
export const listImportRows = orderedRowsStatement<ImportRow, ListImportsParams>(
  { asc: LIST_IMPORTS_SQL, desc: LIST_IMPORTS_DESC_SQL },
  (p) => [p.tenant, p.source, p.importedFrom, p.importedTo, p.afterId, p.limit],
);
