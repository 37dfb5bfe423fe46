/**
 * Routes of the shared rate limits (DEL-13) and the per-host circuits (CH-7):
 * `PUT /v1/rate-limits/{key}`, `GET /v1/rate-limits`, `DELETE /v1/rate-limits/{key}`,
 * `GET /v1/circuits`. Registered on the API by {@link registerRateLimitRoutes}.
 */
import { type OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import type { Punctual } from "../app/punctual.js";
import { tenantOf } from "./auth.js";
import { rateLimitInputSchema } from "../contracts/rate-limits.js";
import { circuitViewSchema, rateLimitViewSchema } from "./rate-limit-schemas.js";
import { error, json, securedRoute } from "./route-parts.js";

const keyParamSchema = z.object({
  key: z
    .string()
    .min(1)
    .max(64)
    .describe("Rate-limit key: a channel name or a reminder's rateLimitKey"),
});

export const putRateLimitRoute = securedRoute({
  method: "put",
  path: "/v1/rate-limits/{key}",
  tags: ["rate limits"],
  summary: "Create or change a rate limit shared by every process (DEL-13)",
  description:
    "Deliveries whose reminder names this key (rateLimitKey, default its channel name) are claimed at most ratePerSecond per second across every process, at most burst at once after a quiet spell, and at most concurrency at once. Every process applies the change from its next pass.",
  request: {
    params: keyParamSchema,
    body: { required: true, content: { "application/json": { schema: rateLimitInputSchema } } },
  },
  responses: {
    200: json(rateLimitViewSchema, "The limit"),
    400: error("Bad key or body"),
  },
});

export const listRateLimitsRoute = securedRoute({
  method: "get",
  path: "/v1/rate-limits",
  tags: ["rate limits"],
  summary: "Rate limits by key, with their tokens now (DEL-13)",
  responses: {
    200: json(z.object({ items: z.array(rateLimitViewSchema) }), "The limits"),
  },
});

export const deleteRateLimitRoute = securedRoute({
  method: "delete",
  path: "/v1/rate-limits/{key}",
  tags: ["rate limits"],
  summary: "Remove a rate limit (DEL-13)",
  request: { params: keyParamSchema },
  responses: {
    204: { description: "Removed" },
    404: error("No such rate limit"),
  },
});

export const listCircuitsRoute = securedRoute({
  method: "get",
  path: "/v1/circuits",
  tags: ["operations"],
  summary:
    "The caller's tenant's circuits of target hosts that are open, half-open or counting failures (CH-7)",
  responses: {
    200: json(z.object({ items: z.array(circuitViewSchema) }), "The circuits"),
  },
});

/** Binds the rate-limit and circuit routes to `app`. */
export function registerRateLimitRoutes(app: OpenAPIHono, punctual: Punctual): void {
  app.openapi(putRateLimitRoute, async (c) =>
    c.json(
      await punctual.setRateLimit(c.req.valid("param").key, c.req.valid("json"), tenantOf(c)),
      200,
    ),
  );
  app.openapi(listRateLimitsRoute, async (c) =>
    c.json({ items: await punctual.listRateLimits(tenantOf(c)) }, 200),
  );
  app.openapi(deleteRateLimitRoute, async (c) => {
    await punctual.removeRateLimit(c.req.valid("param").key, tenantOf(c));
    return c.body(null, 204);
  });
  app.openapi(listCircuitsRoute, async (c) =>
    c.json({ items: await punctual.listCircuits(tenantOf(c)) }, 200),
  );
}
