/**
 * `/v1/api-keys` (API-2): create, list and revoke tenant keys. The operator's key manages
 * every tenant's keys; a tenant key with the `admin` scope manages its own tenant's.
 */
import { type OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import { API_KEY_SCOPES, createApiKeySchema, listApiKeysQuerySchema } from "../app/api-keys.js";
import type { Punctual } from "../app/punctual.js";
import { ForbiddenError } from "../errors/index.js";
import { callerOf } from "./auth.js";
import { body, error, json, securedRoute } from "./route-parts.js";

const apiKeyViewSchema = z
  .object({
    id: z.string(),
    tenant: z.string(),
    name: z.string(),
    scopes: z.array(z.enum(API_KEY_SCOPES)),
    prefix: z.string().describe("The key's first characters, to tell keys apart"),
    createdAt: z.string(),
    revokedAt: z.string().nullable(),
    lastUsedAt: z.string().nullable(),
  })
  .openapi("ApiKey");

const createdApiKeySchema = apiKeyViewSchema
  .extend({ key: z.string().describe("The key itself: shown this once, stored only as a hash") })
  .openapi("CreatedApiKey");

const listQuerySchema = listApiKeysQuerySchema
  .extend({
    tenant: z.string().max(64).optional().describe("Only this tenant's keys (operator's key)"),
    revoked: z.enum(["true", "false"]).optional().describe("Include revoked keys"),
  })
  .strict();

const keyIdParamSchema = z.object({ id: z.string().min(1).max(64).describe("Key id (UUID)") });

export const createApiKeyRoute = securedRoute({
  method: "post",
  path: "/v1/api-keys",
  tags: ["api keys"],
  summary: "Create an API key for a tenant (API-2)",
  description:
    "Answers the key once; only its SHA-256 is stored. `tenant` defaults to the caller's; a tenant key (admin scope) creates keys for its own tenant only.",
  request: { body: body(createApiKeySchema) },
  responses: {
    201: json(createdApiKeySchema, "Created; `key` is shown this once"),
    400: error("Bad tenant, scopes or name"),
  },
});

export const listApiKeysRoute = securedRoute({
  method: "get",
  path: "/v1/api-keys",
  tags: ["api keys"],
  summary: "List API keys (without the keys), one keyset page (API-3)",
  description:
    "By creation: `order=asc` (oldest first, the default) or `desc`; `limit` 1–1000 (default 100); `cursor` the previous page's `nextCursor` (a cursor of another order, tenant or `revoked`, or altered, is a 400 naming `cursor`).",
  request: { query: listQuerySchema },
  responses: {
    200: json(
      z.object({
        items: z.array(apiKeyViewSchema),
        nextCursor: z
          .string()
          .nullable()
          .describe("Pass as `cursor` (same order and filters) for the next page; null at the end"),
      }),
      "Keys",
    ),
    400: error("Bad `limit`, `order` or `cursor`"),
  },
});

export const revokeApiKeyRoute = securedRoute({
  method: "delete",
  path: "/v1/api-keys/{id}",
  tags: ["api keys"],
  summary: "Revoke an API key: the next request with it is 401",
  request: { params: keyIdParamSchema },
  responses: {
    200: json(apiKeyViewSchema, "Revoked (idempotent)"),
    404: error("No such key in the caller's tenant"),
  },
});

/** Binds the `/v1/api-keys` routes. Authentication and the `admin` scope are checked before. */
export function registerApiKeyRoutes(app: OpenAPIHono, punctual: Punctual): void {
  app.openapi(createApiKeyRoute, async (c) => {
    const caller = callerOf(c);
    const input = c.req.valid("json");
    if (!caller.root && input.tenant !== undefined && input.tenant !== caller.tenant) {
      throw new ForbiddenError("a tenant key creates keys for its own tenant only");
    }
    return c.json(await punctual.createApiKey(input, { tenant: caller.tenant }), 201);
  });

  app.openapi(listApiKeysRoute, async (c) => {
    const caller = callerOf(c);
    const query = c.req.valid("query");
    const tenant = caller.root ? (query.tenant ?? null) : caller.tenant;
    const { tenant: _t, revoked, ...paging } = query;
    return c.json(
      await punctual.listApiKeyPage({ tenant, includeRevoked: revoked === "true" }, paging),
      200,
    );
  });

  app.openapi(revokeApiKeyRoute, async (c) => {
    const caller = callerOf(c);
    const { id } = c.req.valid("param");
    return c.json(
      await punctual.revokeApiKey(id, { tenant: caller.root ? null : caller.tenant }),
      200,
    );
  });
}
