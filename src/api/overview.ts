/**
 * `GET /v1/overview` (API-6): the caller's tenant at a glance, for the dashboard's first
 * page — its delivery gauges and, minute by minute over the last hour, how many
 * deliveries were sent and how late. Scoped by tenant like every delivery read (a tenant
 * key with `read` sees its own tenant only); the cluster's instances and heartbeats stay
 * in the operator's `GET /v1/status`.
 */
import { createRoute, z, type OpenAPIHono } from "@hono/zod-openapi";
import type { Punctual } from "../app/punctual.js";
import { readTenantActivity } from "../store/activity.js";
import { tenantOf } from "./auth.js";
import { errorBodySchema } from "./schemas.js";

/** Length of the per-minute window, ms (one hour). */
export const OVERVIEW_WINDOW_MS = 3_600_000;
/** A waiting delivery more than this late is overdue, ms (the rule of `GET /v1/status`). */
const OVERDUE_MS = 15 * 60_000;

/** `GET /v1/overview` reply. */
export const overviewSchema = z
  .object({
    tenant: z.string(),
    now: z.string().describe("The instant the figures were read at (ISO 8601 UTC)"),
    windowMs: z.number().int().describe("Length of the `perMinute` window, ms"),
    deliveries: z.object({
      dueBacklog: z.number().int(),
      overdue: z.number().int().describe("Waiting or claimed, due more than 15 minutes ago"),
      inDoubt: z.number().int(),
      dead: z.number().int().describe("Dead letters not resolved by hand"),
    }),
    perMinute: z
      .array(
        z.object({
          minute: z.string().describe("Start of the minute (ISO 8601 UTC)"),
          sent: z.number().int(),
          avgLatenessMs: z.number().describe("Mean of sentAt - dueAt, ms"),
          maxLatenessMs: z.number(),
        }),
      )
      .describe("Minutes of the window with at least one send, oldest first"),
  })
  .meta({ id: "Overview" });

/** The reply of `GET /v1/overview`. */
export type OverviewView = z.infer<typeof overviewSchema>;

export const overviewRoute = createRoute({
  method: "get",
  path: "/v1/overview",
  tags: ["operations"],
  summary: "The tenant's delivery gauges and sends per minute over the last hour (API-6)",
  security: [{ bearerAuth: [] }],
  responses: {
    200: {
      description: "Gauges and per-minute activity",
      content: { "application/json": { schema: overviewSchema } },
    },
    401: {
      description: "Missing or wrong bearer token",
      content: { "application/json": { schema: errorBodySchema } },
    },
  },
});

/** Registers `GET /v1/overview` on the API. */
export function registerOverviewRoute(app: OpenAPIHono, punctual: Punctual): void {
  app.openapi(overviewRoute, async (c) => {
    const { tenant } = tenantOf(c);
    const pinned = punctual.clock.sqlNow();
    const { gauges, perMinute } = await readTenantActivity(punctual.db, {
      now: pinned,
      tenant,
      overdueMs: OVERDUE_MS,
      windowMs: OVERVIEW_WINDOW_MS,
    });
    const num = (v: number | string | null | undefined) => Number(v ?? 0);
    const body: OverviewView = {
      tenant,
      now: new Date(pinned?.getTime() ?? punctual.clock.now()).toISOString(),
      windowMs: OVERVIEW_WINDOW_MS,
      deliveries: {
        dueBacklog: num(gauges?.due_backlog),
        overdue: num(gauges?.overdue),
        inDoubt: num(gauges?.in_doubt),
        dead: num(gauges?.dead),
      },
      perMinute: perMinute.map((r) => ({
        minute: r.minute.toISOString(),
        sent: num(r.sent),
        avgLatenessMs: Math.round(num(r.avg_lateness_ms)),
        maxLatenessMs: Math.round(num(r.max_lateness_ms)),
      })),
    };
    return c.json(body, 200);
  });
}
