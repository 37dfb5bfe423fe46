/**
 * Routes of the explanation (OPS-16): `GET /v1/schedules/{id}/explain` (one page of a
 * window's entries) and `GET /v1/deliveries/{id}/explain` (one delivery's entry).
 * Registered by {@link registerExplainRoutes}; scope `read` (API-2), like every GET.
 */
import { type OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import type { Assert, SchemaMatches } from "./schema-proof.js";
import type { Punctual } from "../app/punctual.js";
import {
  EXPLAIN_EVENT_TYPES,
  EXPLAIN_VERDICTS,
  explainQuerySchema,
  type DeliveryExplanation,
  type ExplainEntry,
  type ScheduleExplanation,
} from "../contracts/explain.js";
import { NotFoundError } from "../errors/index.js";
import { tenantOf } from "./auth.js";
import { error, json, securedRoute } from "./route-parts.js";
import { deliveryIdParamSchema, scheduleIdParamSchema } from "./schemas.js";

const instantText = z.string().describe("ISO 8601 instant in UTC, e.g. 2027-01-04T08:00:00.000Z");

/** One event of a timeline (mirrors `ExplainEvent`). */
export const explainEventSchema = z
  .object({
    type: z.enum(EXPLAIN_EVENT_TYPES),
    at: instantText,
    by: z.string().optional().describe("The process (instance id) or operator"),
    attempt: z.number().int().optional(),
    endedAt: instantText.optional(),
    outcome: z.string().optional(),
    settled: z.boolean().optional(),
    status: z.number().int().optional(),
    error: z.string().optional(),
    leaseExpiresAt: instantText.optional(),
    until: instantText.optional(),
    reason: z.string().optional(),
    digestId: z
      .string()
      .optional()
      .describe("DEL-19: the digest (dg_…) of a digest member: the message's idempotency key"),
    items: z.number().int().optional().describe("DEL-19: `digested`: the digest's item count"),
  })
  .meta({ id: "ExplainEvent" });

/** One entry (mirrors `ExplainEntry`). */
export const explainEntrySchema = z
  .object({
    occurrenceAt: instantText,
    reminderKey: z.string(),
    recipientId: z.string().optional(),
    dueAt: instantText,
    verdict: z.enum(EXPLAIN_VERDICTS),
    reason: z.string().nullable(),
    deliveryId: z.number().int().nullable(),
    triggered: z.boolean(),
    digestId: z
      .string()
      .optional()
      .describe("DEL-19: the digest it was sent in (or is being sent in)"),
    events: z.array(explainEventSchema),
  })
  .meta({ id: "ExplainEntry" });

/** `GET /v1/schedules/{id}/explain` reply. */
export const scheduleExplanationSchema = z
  .object({
    scheduleId: z.string(),
    state: z.string(),
    from: instantText,
    to: instantText,
    entries: z.array(explainEntrySchema),
    nextCursor: z.string().nullable(),
    complete: z.boolean(),
  })
  .meta({ id: "ScheduleExplanation" });

/** `GET /v1/deliveries/{id}/explain` reply. */
export const deliveryExplanationSchema = z
  .object({ scheduleId: z.string(), entry: explainEntrySchema })
  .meta({ id: "DeliveryExplanation" });

/** Compile-time proof that the schemas and the contract agree. */
export type ExplainSchemasMatchContract = [
  Assert<SchemaMatches<typeof explainEntrySchema, ExplainEntry>>,
  Assert<SchemaMatches<typeof scheduleExplanationSchema, ScheduleExplanation>>,
  Assert<SchemaMatches<typeof deliveryExplanationSchema, DeliveryExplanation>>,
];

export const explainScheduleRoute = securedRoute({
  method: "get",
  path: "/v1/schedules/{id}/explain",
  tags: ["schedules"],
  summary: "Why each occurrence did or did not fire, with its timeline (OPS-16)",
  description:
    "One entry per occurrence × reminder the rule expects with a due time in `[from, to)` (default: 7 days ago to 1 day ahead; at most 366 days), or that a delivery row records there, ordered by occurrence, reminder key, delivery id; one page of `limit` entries (default 1,000, at most 10,000), `nextCursor` for the next.",
  request: { params: scheduleIdParamSchema, query: explainQuerySchema },
  responses: {
    200: json(scheduleExplanationSchema, "One page of the window's entries"),
    400: error("`from` after `to`, a window over 366 days, a bad `limit` or `cursor`"),
    404: error("No such schedule"),
  },
});

export const explainDeliveryRoute = securedRoute({
  method: "get",
  path: "/v1/deliveries/{id}/explain",
  tags: ["deliveries"],
  summary: "One delivery's verdict and timeline (OPS-16)",
  request: { params: deliveryIdParamSchema },
  responses: {
    200: json(deliveryExplanationSchema, "The delivery's entry"),
    404: error("No such delivery"),
  },
});

/** Binds the explain routes to `app`. Authentication and scopes are checked before. */
export function registerExplainRoutes(app: OpenAPIHono, punctual: Punctual): void {
  app.openapi(explainScheduleRoute, async (c) =>
    c.json(
      await punctual.explainSchedule(c.req.valid("param").id, c.req.valid("query"), tenantOf(c)),
      200,
    ),
  );
  app.openapi(explainDeliveryRoute, async (c) => {
    const text = c.req.valid("param").id;
    const id = /^[1-9]\d{0,15}$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isSafeInteger(id)) throw new NotFoundError("delivery", text);
    return c.json(await punctual.explainDelivery(id, tenantOf(c)), 200);
  });
}
