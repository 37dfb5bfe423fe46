/**
 * Routes of a tenant's own webhook signing secret (CH-1, API-2):
 * `GET`, `POST` (set or rotate) and `DELETE /v1/tenant-webhook-secret`, each for the
 * caller's tenant and with the `admin` scope. Registered by {@link registerWebhookSecretRoutes}.
 */
import { type OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import type { Punctual } from "../app/punctual.js";
import { rotateTenantWebhookSecretSchema } from "../contracts/webhook-secrets.js";
import { tenantOf } from "./auth.js";
import { error, json, securedRoute } from "./route-parts.js";

const tenantSecretViewSchema = z
  .object({
    tenant: z.string(),
    secret: z.string().describe("whsec_<base64>: signs this tenant's webhooks"),
    overlapUntil: z
      .string()
      .nullable()
      .describe("Until when the secret it replaced still signs beside it; null: no overlap"),
  })
  .meta({ id: "TenantWebhookSecret" });

const PATH = "/v1/tenant-webhook-secret";

export const getTenantWebhookSecretRoute = securedRoute({
  method: "get",
  path: PATH,
  tags: ["operations"],
  summary: "The caller's tenant's own webhook signing secret (CH-1)",
  description:
    "404 when the tenant has none: then the operator's default secret signs its webhooks. A target's own `secret` wins over both.",
  responses: {
    200: json(tenantSecretViewSchema, "The secret"),
    404: error("The tenant has no secret of its own"),
  },
});

export const rotateTenantWebhookSecretRoute = securedRoute({
  method: "post",
  path: PATH,
  tags: ["operations"],
  summary: "Set or rotate the caller's tenant's own webhook signing secret (CH-1)",
  description:
    "The new secret (`secret`, default a random 32-byte one) signs the tenant's webhooks from every process's next pass; the secret that signed until now (its previous one, or the default on a first one) still signs beside it for `overlapSeconds` (default 86400, at most 30 days), one `v1,` signature each.",
  request: {
    body: {
      required: true,
      content: { "application/json": { schema: rotateTenantWebhookSecretSchema } },
    },
  },
  responses: {
    200: json(tenantSecretViewSchema, "The new secret"),
    400: error("Bad secret or overlapSeconds"),
  },
});

export const deleteTenantWebhookSecretRoute = securedRoute({
  method: "delete",
  path: PATH,
  tags: ["operations"],
  summary: "Remove the caller's tenant's own secret: the default signs its webhooks again (CH-1)",
  responses: {
    204: { description: "Removed" },
    404: error("The tenant has no secret of its own"),
  },
});

/** Binds the tenant webhook-secret routes to `app`. */
export function registerWebhookSecretRoutes(app: OpenAPIHono, punctual: Punctual): void {
  app.openapi(getTenantWebhookSecretRoute, async (c) =>
    c.json(await punctual.getTenantWebhookSecret(tenantOf(c)), 200),
  );
  app.openapi(rotateTenantWebhookSecretRoute, async (c) =>
    c.json(await punctual.rotateTenantWebhookSecret(c.req.valid("json"), tenantOf(c)), 200),
  );
  app.openapi(deleteTenantWebhookSecretRoute, async (c) => {
    await punctual.removeTenantWebhookSecret(tenantOf(c));
    return c.body(null, 204);
  });
}
