/**
 * API keys per tenant (API-2). `PUNCTUAL_API_KEY` is the operator's key; the keys made
 * here belong to one tenant each and carry scopes (`read`, `write`, `admin`; see
 * migration 0015). A key is `pk_` and 32 random bytes in base64url; only its SHA-256 is
 * stored, so it is shown once, when created.
 */
import { createHash, randomBytes } from "node:crypto";
import { z } from "zod";
import { NotFoundError } from "../errors/index.js";
import {
  authenticateApiKey,
  insertApiKey,
  listApiKeys as listApiKeyRows,
  revokeApiKey as revokeApiKeyRow,
  type ApiKeyRow,
  type ApiKeyScope,
} from "../store/api-keys.js";
import { deleteApiKeySessions } from "../store/sessions.js";
import { listOrderSchema, pageLimitSchema } from "../contracts/index.js";
import type { AppContext } from "./context.js";
import { cursorPart, decodeCursor, keysetPage, type CursorScope } from "./cursor.js";
import { parseInput } from "./input.js";

/** Scopes a key may carry, weakest first. */
export const API_KEY_SCOPES = ["read", "write", "admin"] as const satisfies readonly ApiKeyScope[];

/** A tenant name: 1–64 letters, digits, `.`, `_` or `-`. */
export const tenantNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,64}$/, "must be 1–64 letters, digits, '.', '_' or '-'");

/** `POST /v1/api-keys` body. `tenant` defaults to the caller's own. */
export const createApiKeySchema = z
  .object({
    tenant: tenantNameSchema.optional(),
    scopes: z.array(z.enum(API_KEY_SCOPES)).min(1).max(3),
    name: z
      .string()
      .min(1)
      .max(200)
      .regex(/^[^\u0000-\u001f]*$/, "must not contain control characters"),
  })
  .strict();

/** A key as the API shows it (never the key itself, never its hash). */
export interface ApiKeyView {
  id: string;
  tenant: string;
  name: string;
  scopes: ApiKeyScope[];
  /** The key's first characters, to tell keys apart. */
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

/** A new key: its view and, this once, the key. */
export interface CreatedApiKey extends ApiKeyView {
  key: string;
}

/** Who a presented key is. */
export interface ApiKeyIdentity {
  id: string;
  tenant: string;
  scopes: ReadonlySet<ApiKeyScope>;
}

/** How many characters of a key lists show. */
const PREFIX_LENGTH = 10;

/** The stored form of a key: hex SHA-256. */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

function toView(row: ApiKeyRow): ApiKeyView {
  return {
    id: row.id,
    tenant: row.tenant,
    name: row.name,
    scopes: [...row.scopes],
    prefix: row.prefix,
    createdAt: row.created_at.toISOString(),
    revokedAt: row.revoked_at?.toISOString() ?? null,
    lastUsedAt: row.last_used_at?.toISOString() ?? null,
  };
}

/**
 * Creates a key for `tenant` (the caller checks that it may). Scopes are stored as a set.
 * @throws ValidationError naming `tenant`, `scopes` or `name`.
 */
export async function createApiKey(
  app: AppContext,
  input: unknown,
  defaults: { tenant: string },
): Promise<CreatedApiKey> {
  const value = parseInput(createApiKeySchema, input);
  const key = `pk_${randomBytes(32).toString("base64url")}`;
  const row = await insertApiKey(app.db, {
    now: app.now(),
    tenant: value.tenant ?? defaults.tenant,
    name: value.name,
    scopes: API_KEY_SCOPES.filter((s) => value.scopes.includes(s)),
    keyHash: hashApiKey(key),
    prefix: key.slice(0, PREFIX_LENGTH),
  });
  return { ...toView(row!), key };
}

/** `GET /v1/api-keys` paging query (API-3): order, page size, cursor. */
export const listApiKeysQuerySchema = z
  .object({
    /** By creation: `asc` (oldest first, the default) or `desc` (newest first). */
    order: listOrderSchema,
    limit: pageLimitSchema(),
    /** Opaque cursor from the previous page's `nextCursor` (same order and filters). */
    cursor: z.string().max(1_000).optional(),
  })
  .strict();

/**
 * One keyset page (API-3) of the keys of one tenant (or of every tenant with
 * `tenant: null`) by creation (created_at, then id), `order` `asc` (oldest first, the
 * default) or `desc`. `nextCursor` (null on the last page) continues the same order,
 * tenant and revoked filter.
 * @throws ValidationError a bad `limit` or `order`, or a `cursor` of another listing.
 */
export async function listApiKeyPage(
  app: AppContext,
  options: { tenant: string | null; includeRevoked?: boolean },
  query: unknown = {},
): Promise<{ items: ApiKeyView[]; nextCursor: string | null }> {
  const q = parseInput(listApiKeysQuerySchema, query);
  const includeRevoked = options.includeRevoked ?? false;
  const scope: CursorScope = {
    list: "api-keys",
    order: q.order,
    tenant: options.tenant,
    revoked: includeRevoked,
  };
  const [afterCreatedAt, afterId] =
    q.cursor === undefined
      ? [null, null]
      : (decodeCursor(q.cursor, scope, [cursorPart.instant, cursorPart.uuid]) as [string, string]);
  const rows = await listApiKeyRows(app.db, {
    tenant: options.tenant,
    includeRevoked,
    afterCreatedAt,
    afterId,
    limit: q.limit,
    order: q.order,
  });
  return keysetPage(rows, q.limit, scope, (r) => [r.created_at_cursor, r.id], toView);
}

/**
 * The keys of one tenant (or of every tenant with `tenant: null`), oldest first: the
 * first 1,000 ({@link listApiKeyPage} pages past them).
 */
export async function listApiKeys(
  app: AppContext,
  options: { tenant: string | null; includeRevoked?: boolean },
): Promise<ApiKeyView[]> {
  return (await listApiKeyPage(app, options, { limit: 1_000 })).items;
}

/**
 * Revokes a key at once: the next request with it is 401, and the dashboard sessions
 * opened with it end (API-6). Idempotent.
 * @throws NotFoundError when no such key is visible (another tenant's key included).
 */
export async function revokeApiKey(
  app: AppContext,
  id: string,
  options: { tenant: string | null },
): Promise<ApiKeyView> {
  if (!z.uuid().safeParse(id).success) throw new NotFoundError("api key", id);
  const row = await app.db.transaction(async (tx) => {
    const revoked = await revokeApiKeyRow(tx, { now: app.now(), id, tenant: options.tenant });
    if (revoked) await deleteApiKeySessions(tx, revoked.id);
    return revoked;
  });
  if (!row) throw new NotFoundError("api key", id);
  return toView(row);
}

/** The live key presented, or null (unknown or revoked). */
export async function identifyApiKey(app: AppContext, key: string): Promise<ApiKeyIdentity | null> {
  if (key.length > 200) return null;
  const row = await authenticateApiKey(app.db, { now: app.now(), keyHash: hashApiKey(key) });
  return row ? { id: row.id, tenant: row.tenant, scopes: new Set(row.scopes) } : null;
}
