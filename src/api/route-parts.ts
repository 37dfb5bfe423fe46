/**
 * The parts every OpenAPI route description of the API shares (API-1): a JSON response of
 * a schema, an error response, the bearer-token requirement, the errors any authenticated
 * route can return, and a JSON request body; {@link securedRoute} declares an
 * authenticated route with the first two. One home, so each route module (which
 * `routes.ts` may itself import) describes them alike.
 */
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import type { z } from "zod";
import { errorBodySchema } from "./schemas.js";

/** A JSON response of `schema`. */
export const json = <T extends z.ZodType>(schema: T, description: string) => ({
  description,
  content: { "application/json": { schema } },
});

/** An error response (`{ error: { code, message, issues? } }`). */
export const error = (description: string) => json(errorBodySchema, description);

/** The bearer-token security requirement. */
export const secured = [{ bearerAuth: [] }];

/** Errors any authenticated route can return. */
export const common = {
  401: error(
    "Missing or wrong bearer token (when an API key is configured, or a key that is unknown or revoked)",
  ),
  403: error(
    "Refused by the web-safety checks (API-7): a Host that is not allowed (HOST_NOT_ALLOWED) or, without an API key, a write from another site (CROSS_SITE_REQUEST); or a key whose scopes do not allow the route (INSUFFICIENT_SCOPE, API-2)",
  ),
  500: error("Internal error"),
  503: error(
    "Another transaction (a stalled worker) held a lock the request needs past the lock timeout (RESOURCE_BUSY, OPS-8): nothing was changed; retry after `Retry-After` seconds. `resource` names the path",
  ),
};

/** A JSON request body of `schema`, required unless `required` is false. */
export const body = <T extends z.ZodType>(schema: T, required = true) => ({
  required,
  content: { "application/json": { schema } },
});

/**
 * An authenticated route (API-2): `route` with the bearer-token requirement
 * ({@link secured}) and the errors any authenticated route can return ({@link common});
 * a response of the route's own with the same status replaces the common one.
 */
export function securedRoute<const R extends Omit<RouteConfig, "security">>(route: R) {
  return createRoute({ ...route, security: secured, responses: { ...common, ...route.responses } });
}
