/**
 * Dashboard sessions (API-6, API-2): statements over `punctual_sessions` (migration 0017).
 * Only a SHA-256 of each session id is stored. `$1` is "now" where present (NULL: the
 * database clock).
 */
import type { Queryable } from "./database.js";
import type { ApiKeyScope } from "./api-keys.js";
import { msAfterNow, NOW } from "./deliveries/sql.js";
import { columnsOf, execute, firstRowStatement } from "./statement.js";

/** A live session: what it was opened with, and for a tenant key that key's tenant and scopes. */
export interface SessionRow {
  /** The tenant key, or null for a session of the operator's key. */
  api_key_id: string | null;
  /** Hex SHA-256 of the operator's key the session was opened with, or null. */
  operator_key_hash: string | null;
  /** The tenant key's tenant (null for the operator's key). */
  tenant: string | null;
  /** The tenant key's scopes (null for the operator's key). */
  scopes: ApiKeyScope[] | null;
}

/**
 * $1 now, $2 id hash, $3 tenant key id (or NULL), $4 operator key hash (or NULL),
 * $5 idle limit in ms, $6 most sessions one key keeps (at least 1). Exactly one of $3 and
 * $4 is set (the table checks it). The key's sessions past the newest $6 − 1, least
 * recently used first, are deleted in the same statement: a script that logs in again
 * and again holds at most $6 rows, and the newest logins keep working.
 */
export const INSERT_SESSION_SQL = `
with evicted as (
  delete from punctual_sessions where id_hash in (
    select id_hash from punctual_sessions
    where ($3::uuid is not null and api_key_id = $3::uuid)
       or ($4::text is not null and operator_key_hash = $4::text)
    order by last_used_at desc, created_at desc, id_hash
    offset greatest($6::int - 1, 0)
  )
)
insert into punctual_sessions (id_hash, api_key_id, operator_key_hash, created_at, last_used_at, expires_at)
values ($2, $3::uuid, $4, ${NOW}, ${NOW}, ${msAfterNow("$5")})`;

/** Stores a new session, evicting the key's least recently used past `maxPerKey`. */
export async function insertSession(
  db: Queryable,
  p: {
    now: Date | null;
    idHash: string;
    apiKeyId: string | null;
    operatorKeyHash: string | null;
    idleMs: number;
    /** Most sessions one key keeps, this one included. */
    maxPerKey: number;
  },
): Promise<void> {
  await execute(db, INSERT_SESSION_SQL, [
    p.now,
    p.idHash,
    p.apiKeyId,
    p.operatorKeyHash,
    p.idleMs,
    p.maxPerKey,
  ]);
}

/**
 * $1 now, $2 id hash, $3 idle limit in ms. The session with that hash if it has not
 * expired and its tenant key (if any) is not revoked; its expiry slides to now plus the
 * idle limit (written at most once a minute, so a busy page does not write on every
 * request).
 */
export const RESOLVE_SESSION_SQL = `
with found as (
  select s.id_hash, s.api_key_id, s.operator_key_hash, k.tenant, k.scopes
  from punctual_sessions s
  left join punctual_api_keys k on k.id = s.api_key_id
  where s.id_hash = $2
    and s.expires_at > ${NOW}
    and (s.api_key_id is null or (k.id is not null and k.revoked_at is null))
), touched as (
  update punctual_sessions s
  set last_used_at = ${NOW}, expires_at = ${msAfterNow("$3")}
  from found
  where s.id_hash = found.id_hash and s.last_used_at < ${NOW} - interval '1 minute'
)
select api_key_id, operator_key_hash, tenant, scopes from found`;
export const RESOLVE_SESSION_COLUMNS = columnsOf<SessionRow>()([
  "api_key_id",
  "operator_key_hash",
  "tenant",
  "scopes",
]);

/** The live session with this id hash (refreshed), or null. */
export const resolveSession = firstRowStatement<
  SessionRow,
  { now: Date | null; idHash: string; idleMs: number }
>(RESOLVE_SESSION_SQL, (p) => [p.now, p.idHash, p.idleMs]);

/** $1 id hash. Ends one session (logout). */
export const DELETE_SESSION_SQL = `delete from punctual_sessions where id_hash = $1`;

/** Deletes one session; resolves to the rows deleted (0 or 1). */
export function deleteSession(db: Queryable, idHash: string): Promise<number> {
  return execute(db, DELETE_SESSION_SQL, [idHash]);
}

/** $1 tenant key id. Ends every session opened with that key (it was revoked). */
export const DELETE_API_KEY_SESSIONS_SQL = `delete from punctual_sessions where api_key_id = $1::uuid`;

/** Deletes the sessions of one tenant key; resolves to the rows deleted. */
export function deleteApiKeySessions(db: Queryable, apiKeyId: string): Promise<number> {
  return execute(db, DELETE_API_KEY_SESSIONS_SQL, [apiKeyId]);
}

/** $1 now, $2 most rows. Deletes expired sessions (retention), oldest expiry first. */
export const DELETE_EXPIRED_SESSIONS_SQL = `
delete from punctual_sessions where id_hash in (
  select id_hash from punctual_sessions where expires_at <= ${NOW}
  order by expires_at limit $2
)`;

/** Deletes up to `limit` expired sessions; resolves to the rows deleted. */
export function deleteExpiredSessions(
  db: Queryable,
  p: { now: Date | null; limit: number },
): Promise<number> {
  return execute(db, DELETE_EXPIRED_SESSIONS_SQL, [p.now, p.limit]);
}
