/**
 * Dashboard sessions in the database (API-6, API-2): a login opens a session whose random
 * id goes to the browser in a cookie; only the id's SHA-256 is stored (migration 0017),
 * so every API process sharing the database knows every session.
 *
 * - Expiry is sliding: a session unused for {@link SESSION_IDLE_MS} ends (each request
 *   moves the end; the store writes that at most once a minute). Expired rows are deleted
 *   by the retention pass.
 * - A session of a tenant key ends when the key is revoked (refused at once, and deleted
 *   with the revocation) or deleted; a session of the operator's key ends when the
 *   operator's key changes.
 * - One key holds at most {@link MAX_SESSIONS_PER_KEY} sessions: a login past that ends
 *   the key's least recently used one.
 * - The CSRF token of a session is derived from its id (an HMAC), so it is stored nowhere
 *   and every process computes the same token.
 */
import { createHash, createHmac, randomBytes } from "node:crypto";
import type { ApiKeyScope } from "../store/api-keys.js";
import {
  deleteSession,
  insertSession,
  resolveSession as resolveSessionRow,
} from "../store/sessions.js";
import { DEFAULT_TENANT, type AppContext } from "./context.js";
import { hashApiKey } from "./api-keys.js";

/** A session unused this long ends, ms (12 hours). */
export const SESSION_IDLE_MS = 12 * 3_600_000;

/**
 * Most live sessions one key (a tenant key, or the operator's key) holds: a login past it
 * ends that key's least recently used session, so logins in a loop cannot grow the table
 * without bound. 50 covers a team sharing a key across browsers and devices.
 */
export const MAX_SESSIONS_PER_KEY = 50;

/** Who a session stands for. */
export interface SessionIdentity {
  tenant: string;
  /** The operator's key: every route, any tenant. */
  root: boolean;
  /** A tenant key's scopes (the operator holds all three). */
  scopes: ReadonlySet<ApiKeyScope>;
}

/** What opens a session: the operator's key, or a live tenant key by id. */
export type SessionOwner = { operator: true } | { apiKeyId: string };

const ALL_SCOPES: ReadonlySet<ApiKeyScope> = new Set(["read", "write", "admin"]);
/** A session id: 32 random bytes in base64url (43 characters). */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

/** The stored form of a session id: hex SHA-256. */
function hashSessionId(id: string): string {
  return createHash("sha256").update(id, "utf8").digest("hex");
}

/** The CSRF token of a session: HMAC-SHA256 keyed by the session id, in base64url. */
export function sessionCsrf(id: string): string {
  return createHmac("sha256", id).update("punctual dashboard csrf").digest("base64url");
}

/**
 * Opens a session for `owner`. A session of the operator's key needs one configured
 * (`api.apiKey`).
 * @returns the new session id (for the cookie) and its CSRF token.
 * @throws Error when `owner` is the operator and no operator key is configured.
 */
export async function openSession(
  app: AppContext,
  owner: SessionOwner,
): Promise<{ id: string; csrf: string }> {
  const operatorKey = app.config.api.apiKey;
  if ("operator" in owner && operatorKey === undefined) {
    throw new Error("a session of the operator's key needs api.apiKey to be set");
  }
  const id = randomBytes(32).toString("base64url");
  await insertSession(app.db, {
    now: app.now(),
    idHash: hashSessionId(id),
    apiKeyId: "apiKeyId" in owner ? owner.apiKeyId : null,
    operatorKeyHash: "operator" in owner ? hashApiKey(operatorKey!) : null,
    idleMs: SESSION_IDLE_MS,
    maxPerKey: MAX_SESSIONS_PER_KEY,
  });
  return { id, csrf: sessionCsrf(id) };
}

/**
 * Who the session with this id stands for, or null when there is none: unknown, expired,
 * logged out, its tenant key revoked or deleted, or opened with an operator's key that is
 * no longer this process's. Refreshes the session's expiry.
 */
export async function resolveSession(app: AppContext, id: string): Promise<SessionIdentity | null> {
  if (!SESSION_ID.test(id)) return null;
  const row = await resolveSessionRow(app.db, {
    now: app.now(),
    idHash: hashSessionId(id),
    idleMs: SESSION_IDLE_MS,
  });
  if (!row) return null;
  if (row.operator_key_hash !== null) {
    const operatorKey = app.config.api.apiKey;
    if (operatorKey === undefined || hashApiKey(operatorKey) !== row.operator_key_hash) return null;
    return { tenant: DEFAULT_TENANT, root: true, scopes: ALL_SCOPES };
  }
  if (row.tenant === null || row.scopes === null) return null;
  return { tenant: row.tenant, root: false, scopes: new Set(row.scopes) };
}

/** Ends a session (logout); nothing happens for an unknown id. */
export async function closeSession(app: AppContext, id: string): Promise<void> {
  if (!SESSION_ID.test(id)) return;
  await deleteSession(app.db, hashSessionId(id));
}
