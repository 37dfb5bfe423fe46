/**
 * The recipient registry (API-10): statements over `punctual_recipients` (migration
 * 0026), one row per (tenant, id). Every statement is scoped by tenant, so a recipient of
 * another tenant is never read, listed, changed or removed. `$1` is "now" (NULL: the
 * database clock) where present.
 *
 * Invariant: a recipient's `version` grows by one on each write that changes it and stays
 * put (with its `updated_at`) on a write equal to what is stored, so a bulk import run
 * twice changes nothing the second time.
 */
import type { Queryable } from "./database.js";
import { NOW } from "./deliveries/sql.js";
import { columnsOf, execute, orderedRowsStatement, rows, rowsStatement } from "./statement.js";

/** A row of `punctual_recipients`, every column. */
export interface RecipientRow {
  tenant: string;
  id: string;
  tzid: string;
  /** One target per channel name, each as that channel accepted it. */
  targets: Record<string, Record<string, unknown>>;
  attributes: Record<string, unknown>;
  preferences: Record<string, unknown>;
  version: number;
  created_at: Date;
  updated_at: Date;
}

const RECIPIENT_KEYS = [
  "tenant",
  "id",
  "tzid",
  "targets",
  "attributes",
  "preferences",
  "version",
  "created_at",
  "updated_at",
] as const;

const COLUMNS_LIST = RECIPIENT_KEYS.join(", ");

/**
 * Creates or replaces recipients, many in one statement (one row: a `PUT`; up to a chunk
 * of a bulk upsert). Returns the rows this statement created or changed; a row equal to
 * the stored one is left alone (same version, same `updated_at`) and not returned. The
 * ids must be distinct (ON CONFLICT cannot touch one row twice); the caller ensures it.
 * $1 now, $2 tenant, $3 ids text[], $4 zones text[], $5 targets (JSON text)[],
 * $6 attributes (JSON text)[], $7 preferences (JSON text)[], all of one length.
 */
export const UPSERT_RECIPIENTS_SQL = `
insert into punctual_recipients as r
  (tenant, id, tzid, targets, attributes, preferences, created_at, updated_at)
select $2, v.id, v.tzid, v.targets::jsonb, v.attributes::jsonb, v.preferences::jsonb, ${NOW}, ${NOW}
from unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
  as v(id, tzid, targets, attributes, preferences)
on conflict (tenant, id) do update
  set tzid = excluded.tzid, targets = excluded.targets, attributes = excluded.attributes,
      preferences = excluded.preferences, version = r.version + 1, updated_at = ${NOW}
  where (r.tzid, r.targets, r.attributes, r.preferences)
        is distinct from
        (excluded.tzid, excluded.targets, excluded.attributes, excluded.preferences)
returning ${COLUMNS_LIST}`;

/** Result columns of {@link UPSERT_RECIPIENTS_SQL}. */
export const UPSERT_RECIPIENTS_COLUMNS = columnsOf<RecipientRow>()(RECIPIENT_KEYS);

/** The recipients of a tenant named by `ids`, by id. $1 tenant, $2 ids text[] */
export const RECIPIENTS_BY_ID_SQL = `
select ${COLUMNS_LIST} from punctual_recipients
where tenant = $1 and id = any($2::text[])
order by id`;

/** Result columns of {@link RECIPIENTS_BY_ID_SQL}. */
export const RECIPIENTS_BY_ID_COLUMNS = columnsOf<RecipientRow>()(RECIPIENT_KEYS);

/**
 * One keyset page of a tenant's recipients by id (byte order, collation "C"), in `dir`
 * order: a range scan of the primary key (tenant, id), forward or backward.
 * $1 tenant, $2 search text or NULL (a case-insensitive substring of the id), $3 the last
 * id of the previous page or NULL from the start, $4 limit.
 */
function listRecipientsSql(dir: "asc" | "desc"): string {
  const op = dir === "asc" ? ">" : "<";
  return `
select ${COLUMNS_LIST} from punctual_recipients
where tenant = $1
  and ($2::text is null or strpos(lower(id), lower($2::text)) > 0)
  and ($3::text is null or id ${op} $3::text)
order by id ${dir}
limit $4`;
}

/** API-10: {@link listRecipientsSql} in ascending id order. */
export const LIST_RECIPIENTS_SQL = listRecipientsSql("asc");

/** Result columns of {@link LIST_RECIPIENTS_SQL}. */
export const LIST_RECIPIENTS_COLUMNS = columnsOf<RecipientRow>()(RECIPIENT_KEYS);

/** API-10: {@link listRecipientsSql} in descending id order. */
export const LIST_RECIPIENTS_DESC_SQL = listRecipientsSql("desc");

/** Result columns of {@link LIST_RECIPIENTS_DESC_SQL}. */
export const LIST_RECIPIENTS_DESC_COLUMNS = LIST_RECIPIENTS_COLUMNS;

/** Removes one recipient. $1 tenant, $2 id */
export const DELETE_RECIPIENT_SQL = `
delete from punctual_recipients where tenant = $1 and id = $2`;

/** A recipient to write, as {@link upsertRecipients} takes it (already validated). */
export interface RecipientToWrite {
  id: string;
  tzid: string;
  targets: Record<string, Record<string, unknown>>;
  attributes: Record<string, unknown>;
  preferences: Record<string, unknown>;
}

/**
 * API-10: runs {@link UPSERT_RECIPIENTS_SQL} for `recipients` (distinct ids) of `tenant`.
 * @returns the rows created or changed; an unchanged recipient is not among them.
 */
export function upsertRecipients(
  db: Queryable,
  p: { now: Date | null; tenant: string; recipients: readonly RecipientToWrite[] },
): Promise<RecipientRow[]> {
  const r = p.recipients;
  return rows<RecipientRow>(db, UPSERT_RECIPIENTS_SQL, [
    p.now,
    p.tenant,
    r.map((x) => x.id),
    r.map((x) => x.tzid),
    r.map((x) => JSON.stringify(x.targets)),
    r.map((x) => JSON.stringify(x.attributes)),
    r.map((x) => JSON.stringify(x.preferences)),
  ]);
}

/** API-10: runs {@link RECIPIENTS_BY_ID_SQL}. */
export const recipientsById = rowsStatement<
  RecipientRow,
  { tenant: string; ids: readonly string[] }
>(RECIPIENTS_BY_ID_SQL, (p) => [p.tenant, p.ids]);

/** API-10: runs {@link LIST_RECIPIENTS_SQL} or {@link LIST_RECIPIENTS_DESC_SQL}. */
export const listRecipientRows = orderedRowsStatement<
  RecipientRow,
  {
    tenant: string;
    q: string | null;
    order: "asc" | "desc";
    afterId: string | null;
    limit: number;
  }
>({ asc: LIST_RECIPIENTS_SQL, desc: LIST_RECIPIENTS_DESC_SQL }, (p) => [
  p.tenant,
  p.q,
  p.afterId,
  p.limit,
]);

/** API-10: runs {@link DELETE_RECIPIENT_SQL}; true when the recipient existed. */
export async function deleteRecipient(
  db: Queryable,
  p: { tenant: string; id: string },
): Promise<boolean> {
  return (await execute(db, DELETE_RECIPIENT_SQL, [p.tenant, p.id])) > 0;
}

/**
 * API-14: adds `$5` to the recipient's opt-out list `preferences.optOut.<$4>` (`channels`
 * or `categories`), creating the object and list as needed; a recipient already opted out
 * of it is left alone (same version). Returns the id when it changed the row.
 * $1 now, $2 tenant, $3 id, $4 list name, $5 the name to add
 */
export const OPT_OUT_RECIPIENT_SQL = `
update punctual_recipients as r
set preferences = jsonb_set(
      jsonb_set(r.preferences, '{optOut}', coalesce(r.preferences -> 'optOut', '{}'::jsonb), true),
      array['optOut', $4::text],
      coalesce(r.preferences #> array['optOut', $4::text], '[]'::jsonb) || to_jsonb($5::text),
      true),
    version = r.version + 1, updated_at = ${NOW}
where r.tenant = $2 and r.id = $3
  and not coalesce(r.preferences #> array['optOut', $4::text], '[]'::jsonb) @> to_jsonb(array[$5::text])
returning r.id`;

/** Result columns of {@link OPT_OUT_RECIPIENT_SQL}. */
export const OPT_OUT_RECIPIENT_COLUMNS = columnsOf<{ id: string }>()(["id"]);

/** API-14: runs {@link OPT_OUT_RECIPIENT_SQL}; true when it changed the recipient. */
export async function optOutRecipient(
  db: Queryable,
  p: {
    now: Date | null;
    tenant: string;
    id: string;
    list: "channels" | "categories";
    name: string;
  },
): Promise<boolean> {
  const changed = await rows<{ id: string }>(db, OPT_OUT_RECIPIENT_SQL, [
    p.now,
    p.tenant,
    p.id,
    p.list,
    p.name,
  ]);
  return changed.length > 0;
}
