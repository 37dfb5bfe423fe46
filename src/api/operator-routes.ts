/**
 * Route definitions of the operator actions (API-9): trigger now, backfill, bulk redrive
 * and resolve, upsert by external id. `createApi` binds a handler to each, as for the
 * routes of routes.ts; they appear in the same OpenAPI document. (Purge is the `purge`
 * query parameter of `DELETE /v1/schedules/{id}`, in routes.ts.)
 */
import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { DELIVERY_STATE_VALUES } from "../contracts/index.js";
import {
  backfillInputSchema,
  bulkRedriveInputSchema,
  bulkResolveInputSchema,
  triggerInputSchema,
  upsertScheduleSchema,
} from "../contracts/operator.js";
import { deliveryViewSchema, scheduleIdParamSchema, scheduleViewSchema } from "./schemas.js";
import { body, common, error, json, secured, securedRoute } from "./route-parts.js";

/** `POST /v1/schedules/{id}/trigger` reply. */
export const triggerResultSchema = z
  .object({
    triggerId: z.string().describe("The Idempotency-Key sent, or a new UUID"),
    created: z.boolean().describe("False on a replay of a trigger id: nothing new was created"),
    deliveries: z
      .array(deliveryViewSchema)
      .describe(
        "One per reminder; for a schedule for recipients one per (reminder, recipient), the first 100 by id",
      ),
    total: z
      .number()
      .int()
      .optional()
      .describe("API-11: a schedule for recipients: how many deliveries the trigger made in all"),
  })
  .meta({ id: "TriggerResult" });

/** `POST /v1/schedules/{id}/backfill` reply. */
export const backfillResultSchema = z
  .object({
    dryRun: z.boolean(),
    created: z.number().int().describe("Deliveries created (dry run: that would be)"),
    existing: z.number().int().describe("Occurrences that already have a delivery, kept as it is"),
    existingByState: z.record(z.string(), z.number().int()),
    items: z.array(
      z.object({
        deliveryKey: z.string(),
        reminderKey: z.string(),
        occurrenceAt: z.string(),
        dueAt: z.string(),
        recipientId: z
          .string()
          .optional()
          .describe("API-11: the recipient of the delivery (a schedule for recipients)"),
        existing: z.enum(DELIVERY_STATE_VALUES).nullable(),
      }),
    ),
  })
  .meta({ id: "BackfillResult" });

/** Reply of the bulk redrive and resolve. */
export const bulkResultSchema = z
  .object({
    dryRun: z.boolean(),
    count: z.number().int().describe("Deliveries changed (dry run: that match, in all)"),
    remaining: z.number().int().describe("Matching deliveries left past `limit`: call again"),
    sample: z.array(deliveryViewSchema).describe("The first ones, by id"),
  })
  .meta({ id: "BulkResult" });

/** `PUT /v1/schedules/by-external-id/{source}/{externalId}` reply. */
export const upsertResultSchema = scheduleViewSchema.extend({
  changed: z.boolean().describe("False when the stored definition was already this one"),
  realigned: z
    .object({ deleted: z.number().int(), moved: z.number().int(), created: z.number().int() })
    .nullable(),
  warnings: z.array(z.string()).optional(),
});

/** `DELETE /v1/schedules/{id}?purge=true` reply. */
export const purgeResultSchema = z
  .object({
    id: z.string(),
    purged: z.object({
      schedules: z.number().int(),
      deliveries: z.number().int(),
      attempts: z.number().int(),
    }),
  })
  .meta({ id: "PurgeResult" });

/** `DELETE /v1/schedules/{id}` query. */
export const cancelQuerySchema = z.object({
  purge: z
    .enum(["true", "false"])
    .optional()
    .describe(
      "`true`: delete the schedule with its deliveries and attempts for good (data-protection requests); default: cancel and keep it",
    ),
});

const triggerHeadersSchema = z.object({
  "idempotency-key": z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe("The trigger id: a retried trigger with the same key sends nothing more"),
});

export const triggerScheduleRoute = securedRoute({
  method: "post",
  path: "/v1/schedules/{id}/trigger",
  tags: ["schedules"],
  summary: "Send a schedule once more now, with its own delivery key (API-9)",
  description:
    "Creates one delivery per reminder (or only `reminderKey`), due now, whose key is derived from the trigger id and differs from every occurrence's key; the scheduled deliveries are left alone, and an edit's realign keeps it. With an `Idempotency-Key` header (the trigger id), a retried request creates nothing more and answers 200 with the first deliveries (`Idempotent-Replayed: true`).",
  request: {
    params: scheduleIdParamSchema,
    headers: triggerHeadersSchema,
    body: body(triggerInputSchema, false),
  },
  responses: {
    201: json(triggerResultSchema, "Triggered"),
    200: json(triggerResultSchema, "Replay of a trigger id: the deliveries it created"),
    400: error("`reminderKey` is not a reminder of the schedule"),
    404: error("No such schedule"),
    409: error("The schedule is not active"),
  },
});

export const backfillScheduleRoute = securedRoute({
  method: "post",
  path: "/v1/schedules/{id}/backfill",
  tags: ["schedules"],
  summary: "Plan the occurrences of a past range that have no delivery yet (API-9)",
  description:
    "Occurrences in [from, to) get a delivery, due now (late), unless they already have one in any state: a sent occurrence is never sent twice (the key is deterministic). " +
    "Refused with 400 naming the field: `to` in the future, not after `from`, a range longer than `maxExpansionDays` or of more than 10,000 deliveries; `from` older than the retention of finished deliveries. " +
    "With `dryRun: true` nothing is written and `items` lists what would be.",
  request: { params: scheduleIdParamSchema, body: body(backfillInputSchema) },
  responses: {
    200: json(backfillResultSchema, "What the backfill created (or would)"),
    400: error("Bad range; `issues` names `from` or `to`"),
    404: error("No such schedule"),
    409: error("The schedule is cancelled or invalid"),
  },
});

export const bulkRedriveRoute = securedRoute({
  method: "post",
  path: "/v1/deliveries/redrive",
  tags: ["deliveries"],
  summary: "Redrive every dead or in-doubt delivery a filter matches (API-9, DEL-12)",
  description:
    "Filters: `state` (dead or in_doubt; default both), `reason`, `channel`, `scheduleId`, `source`, and the due time in [`from`, `to`). At most `limit` (default 1,000, at most 10,000) per call, lowest ids first, each with its delivery key kept; `remaining` says how many are left. With `dryRun: true` nothing changes: the count and a sample.",
  request: { body: body(bulkRedriveInputSchema) },
  responses: {
    200: json(bulkResultSchema, "What was redriven (or would be)"),
    400: error("Bad filter; `issues` names the field"),
  },
});

export const bulkResolveRoute = securedRoute({
  method: "post",
  path: "/v1/deliveries/resolve",
  tags: ["deliveries"],
  summary: "Resolve every in-doubt delivery or open dead letter a filter matches (API-9, DEL-12)",
  description:
    "`outcome` `sent` (they arrived) or `dead` (acknowledged, reason `resolved`); the filters, `limit` and `dryRun` are those of `POST /v1/deliveries/redrive`.",
  request: { body: body(bulkResolveInputSchema) },
  responses: {
    200: json(bulkResultSchema, "What was resolved (or would be)"),
    400: error("Bad outcome or filter; `issues` names the field"),
  },
});

/** The path's external id of an upsert (API-9). */
const externalIdParam = z.string().min(1).max(1_000).describe("Your id of the record");

/** The answers of an upsert by external id (API-9), with or without a source in the path. */
const upsertResponses = {
  201: json(upsertResultSchema, "Created"),
  200: json(upsertResultSchema, "Updated (or unchanged)"),
  400: error("Validation failed; `issues` names each bad field"),
  409: error("The schedule with this external id is cancelled"),
  ...common,
};

export const upsertScheduleRoute = createRoute({
  method: "put",
  path: "/v1/schedules/by-external-id/{source}/{externalId}",
  tags: ["schedules"],
  summary: "Create or update a schedule by your own id (API-9)",
  description:
    "The body is the whole schedule (as for a create, without `source` and `externalId`, which the path gives). Creates it (201) or replaces the existing one's definition, realigning its waiting deliveries (200; fields left out take their defaults). An unchanged body writes nothing (`changed: false`). Concurrent requests for one id make one schedule. A cancelled schedule answers 409: purge it first, or use another id.",
  security: secured,
  request: {
    params: z.object({
      source: z.string().min(1).max(200).describe("Your system's name for the records"),
      externalId: externalIdParam,
    }),
    body: body(upsertScheduleSchema),
  },
  responses: upsertResponses,
});

/** The source a `by-external-id/{externalId}` upsert (no source in the path) is stored under. */
export const DEFAULT_UPSERT_SOURCE = "api";

export const upsertScheduleByIdRoute = createRoute({
  method: "put",
  path: "/v1/schedules/by-external-id/{externalId}",
  tags: ["schedules"],
  summary: "Create or update a schedule by your own id, in the default source `api` (API-9)",
  description:
    "The same as `PUT /v1/schedules/by-external-id/api/{externalId}`: for callers with one system of record, whose ids need no source. Everything else (body, `debounce`, replies) is as for the two-part path.",
  security: secured,
  request: {
    params: z.object({
      externalId: externalIdParam,
    }),
    body: body(upsertScheduleSchema),
  },
  responses: upsertResponses,
});
