/**
 * The record of calendar imports (API-5, API-3): one row of `punctual_imports` (migration
 * 0027) per import that was written, with what it did. Dry runs leave none. `$1` is "now"
 * where present (NULL: the database clock).
 */
import type { Queryable } from "./database.js";
import { NOW } from "./deliveries/sql.js";
import { columnsOf, execute, rows } from "./statement.js";

/** A row of `punctual_imports`. */
export interface ImportRow {
  id: number | string;
  tenant: string;
  source: string;
  imported_at: Date;
  events: number;
  created: number;
  updated: number;
  unchanged: number;
  cancelled: number;
  skipped: number;
  warnings: number;
}

/** Result columns of the statements that return {@link ImportRow}s. */
export const IMPORT_ROW_KEYS = columnsOf<ImportRow>()([
  "id",
  "tenant",
  "source",
  "imported_at",
  "events",
  "created",
  "updated",
  "unchanged",
  "cancelled",
  "skipped",
  "warnings",
]);

/**
 * Records a written import. $1 now, $2 tenant, $3 source, $4 events read, $5 created,
 * $6 updated, $7 unchanged, $8 cancelled, $9 skipped, $10 warnings.
 */
export const INSERT_IMPORT_SQL = `
insert into punctual_imports
  (tenant, source, imported_at, events, created, updated, unchanged, cancelled, skipped, warnings)
values ($2, $3, ${NOW}, $4, $5, $6, $7, $8, $9, $10)`;

/** Counts of a written import, as {@link INSERT_IMPORT_SQL} records them. */
export interface ImportRecord {
  now: Date | null;
  tenant: string;
  source: string;
  events: number;
  created: number;
  updated: number;
  unchanged: number;
  cancelled: number;
  skipped: number;
  warnings: number;
}

/** API-5: runs {@link INSERT_IMPORT_SQL}. */
export async function recordImport(db: Queryable, p: ImportRecord): Promise<void> {
  await execute(db, INSERT_IMPORT_SQL, [
    p.now,
    p.tenant,
    p.source,
    p.events,
    p.created,
    p.updated,
    p.unchanged,
    p.cancelled,
    p.skipped,
    p.warnings,
  ]);
}

/**
 * API-3: one keyset page of a tenant's imports by id, in `dir` order. Parameters: $1
 * tenant, $2 source or NULL, $3 imported at or after (inclusive) or NULL, $4 imported
 * before (exclusive) or NULL, $5 the last id seen or NULL from the start, $6 limit. The
 * id bound has a finite default, so the page is a range scan of `punctual_imports_tenant`
 * (tenant, id), or of `punctual_imports_source` (tenant, source, id) with a source.
 */
function listImportsSql(dir: "asc" | "desc"): string {
  const bound =
    dir === "asc"
      ? "id > coalesce($5::bigint, 0)"
      : "id < coalesce($5::bigint, 9223372036854775807)";
  return `
select ${IMPORT_ROW_KEYS.join(", ")} from punctual_imports
where tenant = $1 and ($2::text is null or source = $2)
  and ($3::timestamptz is null or imported_at >= $3)
  and ($4::timestamptz is null or imported_at < $4)
  and ${bound}
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
export interface ListImportsParams {
  tenant: string;
  source: string | null;
  importedFrom: string | null;
  importedTo: string | null;
  afterId: number | null;
  limit: number;
  order: "asc" | "desc";
}

/** API-3: runs {@link LIST_IMPORTS_SQL} (or its newest-first twin): one page. */
export function listImportRows(db: Queryable, p: ListImportsParams): Promise<ImportRow[]> {
  return rows<ImportRow>(db, p.order === "desc" ? LIST_IMPORTS_DESC_SQL : LIST_IMPORTS_SQL, [
    p.tenant,
    p.source,
    p.importedFrom,
    p.importedTo,
    p.afterId,
    p.limit,
  ]);
}
