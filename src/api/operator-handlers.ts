/**
 * Handlers of the operator routes (API-9, operator-routes.ts), bound by `createApi`.
 */
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Punctual } from "../app/punctual.js";
import {
  backfillScheduleRoute,
  bulkRedriveRoute,
  bulkResolveRoute,
  triggerScheduleRoute,
  upsertScheduleByIdRoute,
  upsertScheduleRoute,
  DEFAULT_UPSERT_SOURCE,
} from "./operator-routes.js";
import { tenantOf } from "./auth.js";

/** Binds the operator routes on `app`, calling `punctual` in the caller's tenant (API-2). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the app's env type is the caller's
export function registerOperatorRoutes(app: OpenAPIHono<any>, punctual: Punctual): void {
  app.openapi(triggerScheduleRoute, async (c) => {
    const triggerId = c.req.valid("header")["idempotency-key"];
    const result = await punctual.triggerSchedule(
      c.req.valid("param").id,
      c.req.valid("json") ?? {},
      { ...tenantOf(c), ...(triggerId ? { triggerId } : {}) },
    );
    if (!result.created) {
      c.header("Idempotent-Replayed", "true");
      return c.json(result, 200);
    }
    return c.json(result, 201);
  });

  app.openapi(backfillScheduleRoute, async (c) =>
    c.json(
      await punctual.backfillSchedule(c.req.valid("param").id, c.req.valid("json"), tenantOf(c)),
      200,
    ),
  );

  app.openapi(bulkRedriveRoute, async (c) =>
    c.json(await punctual.redriveDeliveries(c.req.valid("json"), tenantOf(c)), 200),
  );

  app.openapi(bulkResolveRoute, async (c) =>
    c.json(await punctual.resolveDeliveries(c.req.valid("json"), tenantOf(c)), 200),
  );

  /** API-9: the upsert of both routes (two-part path, or the default source). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- Hono's context of either route
  const upsert = async (c: any, source: string, externalId: string, input: unknown) => {
    const result = await punctual.upsertScheduleByExternalId(
      source,
      externalId,
      input,
      tenantOf(c),
    );
    const reply = {
      ...result.schedule,
      changed: result.changed,
      realigned: result.realigned,
      ...(result.warnings.length ? { warnings: result.warnings } : {}),
    };
    c.header("Location", `/v1/schedules/${result.schedule.id}`);
    c.header("ETag", `"${result.schedule.version}"`);
    return c.json(reply, result.created ? 201 : 200);
  };
  app.openapi(upsertScheduleRoute, async (c) => {
    const { source, externalId } = c.req.valid("param");
    return upsert(c, source, externalId, c.req.valid("json"));
  });
  app.openapi(upsertScheduleByIdRoute, async (c) =>
    upsert(c, DEFAULT_UPSERT_SOURCE, c.req.valid("param").externalId, c.req.valid("json")),
  );
}
