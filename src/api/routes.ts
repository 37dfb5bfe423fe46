/**
 * Route definitions of the HTTP API (API-1): method, path, request and response schemas.
 * `createApi` binds a handler to each; the OpenAPI document is generated from these.
 */
import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import {
  createScheduleSchema,
  listDeliveriesQuerySchema,
  listImportsQuerySchema,
  listInstancesQuerySchema,
  listSchedulesQuerySchema,
  updateScheduleSchema,
} from "../contracts/index.js";
import {
  cancelledScheduleSchema,
  createdScheduleSchema,
  createHeadersSchema,
  deliveryDetailSchema,
  deliveryIdParamSchema,
  deliveryListSchema,
  deliveryViewSchema,
  dryRunResultSchema,
  importIdParamSchema,
  importListSchema,
  importQuerySchema,
  importSummarySchema,
  importViewSchema,
  instanceListSchema,
  livenessSchema,
  previewInputSchema,
  previewItemSchema,
  readinessSchema,
  resolveBodySchema,
  scheduleIdParamSchema,
  scheduleListSchema,
  scheduleViewSchema,
  statusSchema,
  updatedScheduleSchema,
  updateHeadersSchema,
} from "./schemas.js";
import { cancelQuerySchema, purgeResultSchema } from "./operator-routes.js";
import { scheduleReadSchema } from "./missed-schemas.js";

export { body, common, error, json, secured } from "./route-parts.js";
import { body, common, error, json, secured, securedRoute } from "./route-parts.js";

export const createScheduleRoute = securedRoute({
  method: "post",
  path: "/v1/schedules",
  tags: ["schedules"],
  summary: "Create a schedule with its reminders",
  description:
    "Creates a one-off or recurring schedule. With an `Idempotency-Key` header, a retried request with the same body returns the first schedule (200, `Idempotent-Replayed: true`); the same key with another body is refused (422).",
  request: { headers: createHeadersSchema, body: body(createScheduleSchema) },
  responses: {
    201: json(createdScheduleSchema, "Created"),
    200: json(
      createdScheduleSchema,
      "Idempotent replay: the schedule created by the first request",
    ),
    400: error("Validation failed; `issues` names each bad field"),
    413: error("Body too large"),
    415: error("Body is not JSON"),
    422: error("Idempotency-Key reused with a different body"),
  },
});

export const listSchedulesRoute = securedRoute({
  method: "get",
  path: "/v1/schedules",
  tags: ["schedules"],
  summary: "List schedules by creation, a keyset page (API-3)",
  request: { query: listSchedulesQuerySchema },
  responses: {
    200: json(scheduleListSchema, "A page of schedules"),
    400: error("Bad query parameter"),
  },
});

export const getScheduleRoute = securedRoute({
  method: "get",
  path: "/v1/schedules/{id}",
  tags: ["schedules"],
  summary: "Read a schedule, with what its rule called for lately beside what was sent",
  request: { params: scheduleIdParamSchema },
  responses: {
    200: json(scheduleReadSchema, "The schedule and its missed occurrences (OPS-13)"),
    404: error("No such schedule"),
  },
});

export const updateScheduleRoute = securedRoute({
  method: "patch",
  path: "/v1/schedules/{id}",
  tags: ["schedules"],
  summary: "Edit a schedule (DEL-9)",
  description:
    "Fields left out keep their value; `reminders`, when given, replaces the list. Waiting deliveries are realigned with the new occurrences in the same transaction. Send `If-Match` with the version you read: a newer version answers 412.",
  request: {
    params: scheduleIdParamSchema,
    headers: updateHeadersSchema,
    body: body(updateScheduleSchema),
  },
  responses: {
    200: json(updatedScheduleSchema, "The edited schedule"),
    400: error("Validation failed; `issues` names each bad field"),
    404: error("No such schedule"),
    409: error("The schedule is cancelled"),
    412: error("If-Match names an older version (STALE_VERSION)"),
  },
});

export const cancelScheduleRoute = securedRoute({
  method: "delete",
  path: "/v1/schedules/{id}",
  tags: ["schedules"],
  summary: "Cancel a schedule (DEL-10), or purge it with `?purge=true` (API-9)",
  description:
    "Cancels the schedule and every waiting delivery in one transaction; a send in flight finishes and is recorded. Idempotent. The cancelled schedule is kept. " +
    "With `purge=true` the schedule is deleted for good with its reminders, deliveries and attempts (a data-protection request); the reply counts what was deleted (`PurgeResult`).",
  request: { params: scheduleIdParamSchema, query: cancelQuerySchema },
  responses: {
    200: json(
      z.union([cancelledScheduleSchema, purgeResultSchema]),
      "The cancelled schedule, or with `purge=true` what was deleted",
    ),
    404: error("No such schedule"),
  },
});

export const pauseScheduleRoute = securedRoute({
  method: "post",
  path: "/v1/schedules/{id}/pause",
  tags: ["schedules"],
  summary: "Pause a schedule (DEL-10)",
  request: { params: scheduleIdParamSchema },
  responses: {
    200: json(scheduleViewSchema, "The paused schedule"),
    404: error("No such schedule"),
    409: error("The schedule cannot be paused in its state"),
  },
});

export const resumeScheduleRoute = securedRoute({
  method: "post",
  path: "/v1/schedules/{id}/resume",
  tags: ["schedules"],
  summary: "Resume a paused schedule; missed occurrences follow its misfire policy (REC-6)",
  request: { params: scheduleIdParamSchema },
  responses: {
    200: json(scheduleViewSchema, "The resumed schedule"),
    404: error("No such schedule"),
    409: error("The schedule cannot be resumed in its state"),
  },
});

export const listDeliveriesRoute = securedRoute({
  method: "get",
  path: "/v1/deliveries",
  tags: ["deliveries"],
  summary: "List deliveries by id, a keyset page; `state=dead` pages the dead letters (API-3)",
  request: { query: listDeliveriesQuerySchema },
  responses: {
    200: json(deliveryListSchema, "A page of deliveries"),
    400: error("Bad query parameter"),
  },
});

export const getDeliveryRoute = securedRoute({
  method: "get",
  path: "/v1/deliveries/{id}",
  tags: ["deliveries"],
  summary: "Read a delivery with its attempts (DEL-12, DEL-14)",
  request: { params: deliveryIdParamSchema },
  responses: {
    200: json(deliveryDetailSchema, "The delivery and its attempts"),
    404: error("No such delivery"),
  },
});

export const redriveDeliveryRoute = securedRoute({
  method: "post",
  path: "/v1/deliveries/{id}/redrive",
  tags: ["deliveries"],
  summary: "Send a dead or in-doubt delivery again, with the same delivery key (DEL-12)",
  request: { params: deliveryIdParamSchema },
  responses: {
    200: json(deliveryViewSchema, "The delivery, waiting to be sent"),
    404: error("No such delivery"),
    409: error("The delivery is neither dead nor in doubt"),
  },
});

export const resolveDeliveryRoute = securedRoute({
  method: "post",
  path: "/v1/deliveries/{id}/resolve",
  tags: ["deliveries"],
  summary: "Settle an in-doubt delivery as sent or dead (DEL-12)",
  request: { params: deliveryIdParamSchema, body: body(resolveBodySchema) },
  responses: {
    200: json(deliveryViewSchema, "The settled delivery"),
    400: error("Bad outcome"),
    404: error("No such delivery"),
    409: error("The delivery is not in doubt"),
  },
});

export const previewRoute = securedRoute({
  method: "post",
  path: "/v1/preview",
  tags: ["recurrence"],
  summary: "Preview occurrences of a rule (REC-7)",
  description:
    "Computes occurrences in [after, before), at most `count` (default 10), with the code the scheduler uses. Nothing is stored.",
  request: { body: body(previewInputSchema) },
  responses: {
    200: json(previewItemSchema.array(), "Occurrences, ascending"),
    400: error("Bad rule, zone or bound; `issues` names the part"),
  },
});

/**
 * Media types `POST /v1/imports` accepts for the calendar: `text/calendar` only (API-7).
 * `text/plain` would let any web page post a calendar without a CORS preflight.
 */
export const IMPORT_MEDIA_TYPES = ["text/calendar"];

export const importRoute = securedRoute({
  method: "post",
  path: "/v1/imports",
  tags: ["imports"],
  summary: "Import an iCalendar file: one schedule per event UID (API-5, DEL-9, DEL-10)",
  description:
    "The body is the calendar itself, sent as `Content-Type: text/calendar` (any other type, or none, is 415), options are query parameters. " +
    "Re-importing the same file under the same `source` changes nothing; an edited file updates the changed schedules (their waiting deliveries realigned) and cancels the schedules of events gone from it. " +
    "An event that cannot be imported is listed in `skipped` with its UID, line and reason, and the rest imports; a body that is not iCalendar is refused (400, field `file`). " +
    "This route accepts bodies up to the import limit (20 MiB, or `api.bodyLimitBytes` when larger) instead of `api.bodyLimitBytes`. " +
    "With `dryRun=true` nothing is stored and the reply lists every delivery whose occurrence falls in [from, to), planned as the scheduler would with its clock at `from`. " +
    "With `async=true` (or the header `Prefer: respond-async`) the reply is 202 at once, the import's record with `Location: /v1/imports/{id}`; the import goes on after the request, and `GET /v1/imports/{id}` shows its progress per chunk and, at the end, `succeeded` or `failed` with the error (a file that is not iCalendar included).",
  request: {
    query: importQuerySchema,
    body: {
      required: true,
      description: "The iCalendar file (RFC 5545), UTF-8",
      content: Object.fromEntries(IMPORT_MEDIA_TYPES.map((type) => [type, { schema: z.string() }])),
    },
  },
  responses: {
    200: json(
      z.union([importSummarySchema, dryRunResultSchema]),
      "What the import did (`ImportSummary`), or with `dryRun=true` the deliveries it would plan (`ImportDryRun`)",
    ),
    202: {
      description:
        "`async=true`: the import started; its record (`ImportView`, status `running`), to follow at `Location`",
      headers: z.object({ location: z.string().describe("`/v1/imports/{id}`") }),
      content: { "application/json": { schema: importViewSchema } },
    },
    400: error(
      "Bad parameter (`source`, `remind.N`, `tzid`, `target`, `from`, `to`, `async` …) or a body that is not iCalendar or breaks a limit (field `file`)",
    ),
    413: error("Body larger than the import limit"),
    415: error("Body sent with another Content-Type"),
  },
});

export const listImportsRoute = securedRoute({
  method: "get",
  path: "/v1/imports",
  tags: ["imports"],
  summary: "List the calendar imports written, by id, a keyset page (API-3, API-5)",
  description:
    "One item per import that was written (dry runs and files refused as a whole leave none), with what it did. Filters: `source`, `importedFrom` / `importedTo` (ISO 8601 instants with an offset: written at or after, before).",
  request: { query: listImportsQuerySchema },
  responses: {
    200: json(importListSchema, "A page of imports"),
    400: error("Bad query parameter, or a `cursor` of another order or filter set"),
  },
});

export const getImportRoute = securedRoute({
  method: "get",
  path: "/v1/imports/{id}",
  tags: ["imports"],
  summary: "Read one calendar import: its status and progress per chunk (API-5, OPS-12)",
  description:
    "`status` is `running`, `succeeded` or `failed` (with `error`); `progress` counts the chunks committed and the changes written of their totals, the counts what was written so far; `details` holds the skipped events, the warning texts and the zones once the file is read. " +
    "A running import whose process died is `failed` (`abandoned: …`) once its lease (60 s) expires.",
  request: { params: importIdParamSchema },
  responses: {
    200: json(importViewSchema, "The import"),
    404: error("No such import"),
  },
});

export const listInstancesRoute = securedRoute({
  method: "get",
  path: "/v1/instances",
  tags: ["operations"],
  summary: "List every stored scheduler instance by start, a keyset page (API-3, OPS-3)",
  description:
    "Every instance row retention has not pruned yet (`GET /v1/status` shows at most 100 of the last hour). Filters: `state` (`running`, `stopped`), `role`. The operator's key only.",
  request: { query: listInstancesQuerySchema },
  responses: {
    200: json(instanceListSchema, "A page of instances"),
    400: error("Bad query parameter, or a `cursor` of another order or filter set"),
  },
});

export const statusRoute = createRoute({
  method: "get",
  path: "/v1/status",
  tags: ["operations"],
  summary: "Instances, heartbeats, backlog, in-doubt and dead counts",
  security: secured,
  responses: { 200: json(statusSchema, "Status"), ...common },
});

export const healthzRoute = createRoute({
  method: "get",
  path: "/healthz",
  tags: ["operations"],
  summary: "Liveness: 200 while the process runs (OPS-4)",
  responses: { 200: json(livenessSchema, "Alive") },
});

export const readyzRoute = createRoute({
  method: "get",
  path: "/readyz",
  tags: ["operations"],
  summary: "Readiness: database reachable, schema current, last scheduler pass fresh (OPS-4)",
  responses: {
    200: json(readinessSchema, "Ready"),
    503: json(readinessSchema, "Not ready; `checks` and `detail` say why"),
  },
});

export const metricsRoute = createRoute({
  method: "get",
  path: "/metrics",
  tags: ["operations"],
  summary: "Prometheus metrics (OPS-3)",
  security: secured,
  responses: {
    200: {
      description: "Prometheus text exposition format",
      content: { "text/plain": { schema: z.string() } },
    },
    401: common[401],
    403: common[403],
  },
});

export const webhookSecretRoute = securedRoute({
  method: "get",
  path: "/v1/webhook-secret",
  tags: ["operations"],
  summary:
    "The default webhook signing secret (CH-1), to verify signatures of targets without their own",
  description:
    "`source` is `configured` (PUNCTUAL_WEBHOOK_SECRET) or `generated` (created once and kept in the database). " +
    "Answered only with the API key, or, when no key is configured, with the local token `punctual start` writes in its data folder (what `punctual webhook-secret` on the same machine presents); otherwise 403 SECRET_NEEDS_KEY.",
  responses: {
    200: json(
      z.object({ secret: z.string(), source: z.enum(["configured", "generated"]) }),
      "The secret in use",
    ),
    403: error(
      "No API key is configured and the request did not present the local token (SECRET_NEEDS_KEY), or a web-safety refusal",
    ),
  },
});
