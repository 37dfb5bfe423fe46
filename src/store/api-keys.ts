/**
 * API keys per tenant (API-2): statements over `punctual_api_keys`. Only a SHA-256 of
 * each key is stored; `$1` is "now" where present (NULL: the database clock).
 */
import { NOW } from "./deliveries/sql.js";
import { instantCursorSql, instantIdKeysetSql, type WithInstantCursor } from "./keyset.js";
import { columnsOf, firstRowStatement, orderedRowsStatement } from "./statement.js";

/** Scopes a key may carry (see migration 0015 for what each allows). */
export type ApiKeyScope = "read" | "write" | "admin";

/** A row of `punctual_api_keys` without its hash. */
export interface ApiKeyRow {
  id: string;
  tenant: string;
  name: string;
  scopes: ApiKeyScope[];
  prefix: string;
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

const API_KEY_COLUMNS_LIST = `id, tenant, name, scopes, prefix, created_at, revoked_at, last_used_at`;

/** Result columns of the statements that return {@link ApiKeyRow}s. */
export const API_KEY_ROW_KEYS = columnsOf<ApiKeyRow>()([
  "id",
  "tenant",
  "name",
  "scopes",
  "prefix",
  "created_at",
  "revoked_at",
  "last_used_at",
]);

/** $1 now, $2 tenant, $3 name, $4 scopes, $5 key hash (hex SHA-256), $6 prefix. */
export const INSERT_API_KEY_SQL = `
insert into punctual_api_keys (tenant, name, scopes, key_hash, prefix, created_at)
values ($2, $3, $4::text[], $5, $6, ${NOW})
returning ${API_KEY_COLUMNS_LIST}`;
export const INSERT_API_KEY_COLUMNS = API_KEY_ROW_KEYS;

/** Stores a new key's hash; returns the row (never the key). */
export const insertApiKey = firstRowStatement<
  ApiKeyRow,
  {
    now: Date | null;
    tenant: string;
    name: string;
    scopes: readonly ApiKeyScope[];
    keyHash: string;
    prefix: string;
  }
>(INSERT_API_KEY_SQL, (p) => [p.now, p.tenant, p.name, p.scopes, p.keyHash, p.prefix]);

/**
 * $1 now, $2 key hash. The live (not revoked) key with that hash, stamping when it was
 * last used (at most once a minute, so a busy client does not write on every request).
 */
export const AUTHENTICATE_API_KEY_SQL = `
with found as (
  select id from punctual_api_keys where key_hash = $2 and revoked_at is null
), touched as (
  update punctual_api_keys k set last_used_at = ${NOW}
  from found
  where k.id = found.id
    and (k.last_used_at is null or k.last_used_at < ${NOW} - interval '1 minute')
)
select ${API_KEY_COLUMNS_LIST} from punctual_api_keys
where id = (select id from found)`;
export const AUTHENTICATE_API_KEY_COLUMNS = API_KEY_ROW_KEYS;

/** The live key with this hash, or null (unknown or revoked). */
export const authenticateApiKey = firstRowStatement<
  ApiKeyRow,
  { now: Date | null; keyHash: string }
>(AUTHENTICATE_API_KEY_SQL, (p) => [p.now, p.keyHash]);

/**
 * API-2, API-3: one keyset page of keys by (created_at, id), in `dir` order. Parameters:
 * $1 tenant (NULL: every tenant), $2 include revoked keys, $3 the last row's created_at
 * (full precision) or NULL from the start, $4 its id, $5 limit. The bound is a row
 * comparison with an infinite default, so the page is a range scan of
 * `punctual_api_keys_tenant` (tenant, created_at) for one tenant, forward or backward.
 */
function listApiKeysSql(dir: "asc" | "desc"): string {
  const keyset = instantIdKeysetSql("created_at", "uuid", ["$3", "$4"], dir);
  return `
select ${API_KEY_COLUMNS_LIST}, ${instantCursorSql("created_at")}
from punctual_api_keys
where ($1::text is null or tenant = $1) and ($2::boolean or revoked_at is null)
  and ${keyset.bound}
${keyset.orderBy}
limit $5`;
}

/** A key of a list page, with its keyset cursor. */
export type ListedApiKeyRow = WithInstantCursor<ApiKeyRow, "created_at">;

const LISTED_API_KEY_ROW_KEYS = columnsOf<ListedApiKeyRow>()([
  ...API_KEY_ROW_KEYS,
  "created_at_cursor",
]);

/** {@link listApiKeysSql} oldest first. */
export const LIST_API_KEYS_SQL = listApiKeysSql("asc");
export const LIST_API_KEYS_COLUMNS = LISTED_API_KEY_ROW_KEYS;
/** {@link listApiKeysSql} newest first. */
export const LIST_API_KEYS_DESC_SQL = listApiKeysSql("desc");
export const LIST_API_KEYS_DESC_COLUMNS = LISTED_API_KEY_ROW_KEYS;

/** One page of the keys of one tenant, or of all tenants with `tenant: null`. */
export const listApiKeys = orderedRowsStatement<
  ListedApiKeyRow,
  {
    tenant: string | null;
    includeRevoked: boolean;
    /** Keyset cursor: `created_at` (full precision, ISO) and id of the last row seen, or null. */
    afterCreatedAt?: string | null;
    afterId?: string | null;
    limit?: number;
    order?: "asc" | "desc";
  }
>({ asc: LIST_API_KEYS_SQL, desc: LIST_API_KEYS_DESC_SQL }, (p) => [
  p.tenant,
  p.includeRevoked,
  p.afterCreatedAt ?? null,
  p.afterId ?? null,
  p.limit ?? 1_000,
]);

/**
 * $1 now, $2 key id, $3 tenant (NULL: any). Revokes the key (idempotent: a revoked key
 * keeps its first revocation time); no row when no such key is visible to the caller.
 */
export const REVOKE_API_KEY_SQL = `
update punctual_api_keys set revoked_at = coalesce(revoked_at, ${NOW})
where id = $2::uuid and ($3::text is null or tenant = $3)
returning ${API_KEY_COLUMNS_LIST}`;
export const REVOKE_API_KEY_COLUMNS = API_KEY_ROW_KEYS;

/** Revokes one key; null when the caller cannot see it. */
export const revokeApiKey = firstRowStatement<
  ApiKeyRow,
  { now: Date | null; id: string; tenant: string | null }
>(REVOKE_API_KEY_SQL, (p) => [p.now, p.id, p.tenant]);
