/**
 * Zod schemas of the HTTP API that `src/contracts` does not define: response views,
 * the preview request, the resolve body, path parameters and the error body. The OpenAPI
 * document (`GET /openapi.json`) is generated from these and from the request schemas
 * of `src/contracts`; nothing in it is written by hand.
 *
 * The view schemas mirror the `ScheduleView`, `DeliveryView` and `AttemptView` interfaces
 * of the contracts; the type assertions at the end of this file fail to compile if the
 * two ever drift apart.
 */
import { z } from "zod";
import type { Assert, Equals, SchemaMatches } from "./schema-proof.js";
import { circuitViewSchema } from "./rate-limit-schemas.js";
import {
  DELIVERY_STATE_VALUES,
  SCHEDULE_VIEW_STATE_VALUES,
  dstSchema,
  dtstartSchema,
  instantSchema,
  catchUpSchema,
  quietHoursSchema,
  digestSchema,
  type AttemptView,
  type DeliveryView,
  type ErrorBody,
  type ImportView,
  type ReminderView,
  type ScheduleView,
} from "../contracts/index.js";
import type { ImportSummary } from "../app/import.js";
import type { DryRunDelivery } from "../ical/index.js";
import { MAX_PREVIEW_COUNT } from "../recurrence/index.js";

const instantText = z.string().describe("ISO 8601 instant in UTC, e.g. 2027-01-04T08:00:00.000Z");

/** One problem with one input field. */
export const fieldIssueSchema = z.object({
  field: z.string().describe("Dotted path of the bad field, e.g. `reminders.0.offset`"),
  message: z.string(),
  value: z.unknown().optional(),
});

/** Body of every 4xx and 5xx reply. */
export const errorBodySchema = z
  .object({
    error: z.object({
      code: z
        .string()
        .describe(
          "Stable code: VALIDATION_FAILED, INVALID_JSON, NOT_FOUND, CONFLICT, STALE_VERSION, IDEMPOTENCY_KEY_REUSED, UNAUTHORIZED, HOST_NOT_ALLOWED, CROSS_SITE_REQUEST, SECRET_NEEDS_KEY, PAYLOAD_TOO_LARGE, METHOD_NOT_ALLOWED, RESOURCE_BUSY, …",
        ),
      message: z.string(),
      issues: z.array(fieldIssueSchema).optional(),
      resource: z
        .string()
        .optional()
        .describe(
          "RESOURCE_BUSY (503, with Retry-After): the path of the resource whose lock another transaction held past the lock timeout, e.g. `/v1/schedules/{id}`",
        ),
    }),
  })
  .meta({ id: "ErrorBody" });

/** A reminder's or a reminder kind's template as the API returns it (CH-6). */
export const templateViewSchema = z.object({
  subject: z.string().optional(),
  text: z.string().optional(),
  html: z.string().optional(),
});

/** A reminder as returned by the API (webhook secrets redacted). */
export const reminderViewSchema = z
  .object({
    key: z.string(),
    offset: z.string(),
    channel: z.string(),
    target: z.record(z.string(), z.unknown()),
    delivery: z.enum(["at-most-once", "at-least-once"]).nullable(),
    maxAttempts: z.number().int(),
    template: templateViewSchema.nullable(),
    rateLimitKey: z.string().nullable(),
    quietHours: quietHoursSchema.nullable(),
    priority: z.enum(["normal", "critical"]),
    category: z.string().optional().describe("API-13: the reminder's category, when it has one"),
    digest: digestSchema
      .optional()
      .describe("DEL-19: the reminder's digest settings, when it has them"),
    templateTruncated: z
      .literal(true)
      .optional()
      .describe("In lists only: the template is larger than 2 KiB and left out (null here)"),
    targetTruncated: z
      .literal(true)
      .optional()
      .describe("In lists only: the target is larger than 2 KiB and left out ({} here)"),
  })
  .meta({ id: "Reminder" });

/** A schedule as returned by the API. */
export const scheduleViewSchema = z
  .object({
    id: z.string(),
    version: z.number().int(),
    state: z.enum(SCHEDULE_VIEW_STATE_VALUES),
    invalidReason: z.string().nullable(),
    dtstart: z.string(),
    dtstartLocal: z.string().nullable(),
    tzid: z
      .string()
      .nullable()
      .describe("IANA zone of dtstart and the rule; null on a floating schedule (API-11)"),
    floating: z
      .literal(true)
      .optional()
      .describe(
        "API-11: a floating schedule for recipients (dtstart and rule read in each recipient's zone; tzid null)",
      ),
    recipientCount: z
      .number()
      .int()
      .optional()
      .describe("API-11: how many recipients a schedule for recipients has. Single reads only"),
    rrule: z.string().nullable(),
    rdate: z.array(z.string()),
    exdate: z.array(z.string()),
    endsAt: z.string().nullable(),
    expiresAt: z.string().nullable(),
    dst: z.object({ gap: z.enum(["shift", "skip"]), overlap: z.enum(["earlier", "later"]) }),
    misfire: z.enum(["skip", "latest", "all"]),
    graceMs: z.number().int(),
    catchUp: catchUpSchema.nullable(),
    perpetual: z.boolean(),
    payload: z.unknown(),
    payloadTruncated: z
      .literal(true)
      .optional()
      .describe(
        "In lists only: the payload is larger than 2 KiB as JSON and left out (null here); GET /v1/schedules/{id} has it",
      ),
    rdateTruncated: z
      .literal(true)
      .optional()
      .describe("In lists only: more than 100 RDATEs, left out ([] here)"),
    exdateTruncated: z
      .literal(true)
      .optional()
      .describe("In lists only: more than 100 EXDATEs, left out ([] here)"),
    reminders: z.array(reminderViewSchema),
    title: z
      .string()
      .nullable()
      .describe("What a person calls the schedule (an imported event's SUMMARY), or null"),
    source: z.string().nullable(),
    externalId: z.string().nullable(),
    createdAt: instantText,
    updatedAt: instantText,
    cancelledAt: z.string().nullable(),
  })
  .meta({ id: "Schedule" });

/** `POST /v1/schedules` reply: the schedule, plus warnings (e.g. an unbounded series). */
export const createdScheduleSchema = scheduleViewSchema.extend({
  warnings: z.array(z.string()).optional(),
});

/** `DELETE /v1/schedules/{id}` reply: the schedule and how many waiting deliveries stopped. */
export const cancelledScheduleSchema = scheduleViewSchema.extend({
  cancelledDeliveries: z.number().int(),
});

/** `PATCH /v1/schedules/{id}` reply: the edited schedule and what realignment did (DEL-9). */
export const updatedScheduleSchema = scheduleViewSchema.extend({
  realigned: z.object({
    deleted: z.number().int().describe("Waiting deliveries no longer in the new set, removed"),
    moved: z.number().int(),
    created: z.number().int(),
  }),
  warnings: z.array(z.string()).optional(),
});

/** `PATCH /v1/schedules/{id}` headers. */
export const updateHeadersSchema = z.object({
  "if-match": z
    .string()
    .max(40)
    .optional()
    .describe('The version read before editing, e.g. `"3"`; a newer version answers 412'),
});

/** API-3: `total` of a list asked with `total=true`. */
export const listTotalViewSchema = z
  .object({
    value: z.number().int().describe("Rows the filters match"),
    exact: z
      .boolean()
      .describe(
        "False: more than 10,000 match (or counting took too long) and `value` is the planner's estimate",
      ),
  })
  .meta({ id: "ListTotal" });

/** `GET /v1/schedules` reply. */
export const scheduleListSchema = z.object({
  items: z.array(scheduleViewSchema),
  nextCursor: z.string().nullable().describe("Pass as `cursor` for the next page; null at the end"),
  total: listTotalViewSchema.optional(),
});

/** A delivery as returned by the API. */
export const deliveryViewSchema = z
  .object({
    id: z.number().int(),
    deliveryKey: z.string(),
    scheduleId: z.string(),
    reminderKey: z.string(),
    occurrenceAt: instantText,
    dueAt: instantText,
    runAt: instantText,
    state: z.enum(DELIVERY_STATE_VALUES),
    attempt: z
      .number()
      .int()
      .describe("Attempts spent in this round (Retry-After deferrals not counted)"),
    round: z
      .number()
      .int()
      .describe("1 for the first attempts, then one more per redrive (DEL-12)"),
    failures: z.number().int(),
    maxAttempts: z.number().int(),
    deferrals: z.number().int(),
    channel: z.string(),
    leaseOwner: z.string().nullable(),
    leaseExpiresAt: z.string().nullable(),
    sentAt: z.string().nullable(),
    finishedAt: z.string().nullable(),
    reason: z.string().nullable(),
    lastError: z.string().nullable(),
    lastErrorTruncated: z
      .literal(true)
      .optional()
      .describe(
        "In lists only: lastError is longer than 500 characters and cut there; GET /v1/deliveries/{id} has it as stored",
      ),
    late: z.boolean(),
    deferredUntil: z
      .string()
      .nullable()
      .describe("DEL-15: the end of the quiet window a delivery due inside it was deferred to"),
    deferredReason: z
      .string()
      .nullable()
      .describe("DEL-15: why it was deferred: QUIET_HOURS; null when not deferred"),
    recipientId: z
      .string()
      .optional()
      .describe("API-11: the recipient it is for; absent for schedules without recipients"),
    bypassed: z
      .array(z.string())
      .optional()
      .describe(
        "API-13: what its critical reminder went past: QUIET_HOURS, OPTED_OUT; absent when nothing",
      ),
    digestKey: z
      .string()
      .optional()
      .describe("DEL-19: the digest key of a digest member; absent on other deliveries"),
    digestId: z
      .string()
      .optional()
      .describe(
        "DEL-19: the digest (dg_…) the member was sent in, the message's idempotency key; absent until its digest is formed",
      ),
    createdAt: instantText,
    updatedAt: instantText,
  })
  .meta({ id: "Delivery" });

/** One recorded attempt (DEL-14). */
export const attemptViewSchema = z
  .object({
    attempt: z.number().int(),
    worker: z.string(),
    startedAt: instantText,
    endedAt: instantText,
    outcome: z.string(),
    settled: z.boolean(),
    status: z.number().int().nullable(),
    messageId: z.string().nullable(),
    error: z.string().nullable(),
  })
  .meta({ id: "Attempt" });

/** `GET /v1/deliveries/{id}` reply: the delivery with its attempt history. */
export const deliveryDetailSchema = deliveryViewSchema.extend({
  attempts: z.array(attemptViewSchema),
});

/** `GET /v1/deliveries` reply. */
export const deliveryListSchema = z.object({
  total: listTotalViewSchema.optional(),
  items: z.array(deliveryViewSchema),
  nextCursor: z
    .string()
    .nullable()
    .describe("Pass as `cursor` (same order and filters) for the next page; null at the end"),
  nextAfter: z
    .number()
    .int()
    .nullable()
    .describe("Older form: pass as `after` for the next page; null at the end"),
});

/** `POST /v1/deliveries/{id}/resolve` body (DEL-12). */
export const resolveBodySchema = z.object({ outcome: z.enum(["sent", "dead"]) }).strict();

/** `POST /v1/preview` body (REC-7): the recurrence fields of a schedule plus bounds. */
export const previewInputSchema = z
  .object({
    dtstart: dtstartSchema,
    tzid: z.string().min(1).max(64).default("UTC"),
    rrule: z.string().min(1).max(2_048).nullable().optional(),
    rdate: z.array(dtstartSchema).max(1_000).default([]),
    exdate: z.array(dtstartSchema).max(10_000).default([]),
    endsAt: instantSchema.nullable().optional(),
    dst: dstSchema.optional(),
    after: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .describe("Inclusive lower bound: an instant or a local date-time in tzid"),
    before: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .describe("Exclusive upper bound: an instant or a local date-time in tzid"),
    count: z.number().int().min(1).max(MAX_PREVIEW_COUNT).default(10),
  })
  .strict();

/** One previewed occurrence. */
export const previewItemSchema = z.object({
  instant: instantText,
  local: z.string().describe("Wall clock in tzid: YYYY-MM-DDTHH:mm:ss, or YYYY-MM-DD"),
});

/** Path parameter `{id}` of a schedule. */
export const scheduleIdParamSchema = z.object({
  id: z.string().min(1).max(64).describe("Schedule id (UUID)"),
});

/** Path parameter `{id}` of an import. */
export const importIdParamSchema = z.object({
  id: z.string().min(1).max(20).describe("Import id (positive integer)"),
});

/** Path parameter `{id}` of a delivery. */
export const deliveryIdParamSchema = z.object({
  id: z.string().min(1).max(20).describe("Delivery id (positive integer)"),
});

/** `POST /v1/schedules` headers. */
export const createHeadersSchema = z.object({
  "idempotency-key": z
    .string()
    .min(1)
    .max(255)
    .optional()
    .describe("A retried create with the same key and body returns the first schedule"),
});

/** `GET /healthz` reply. */
export const livenessSchema = z.object({ status: z.literal("ok") });

/** `GET /readyz` reply (OPS-4). */
export const readinessSchema = z.object({
  status: z.enum(["ready", "not_ready"]),
  checks: z.object({ database: z.boolean(), schema: z.boolean(), heartbeat: z.boolean() }),
  lastPassAt: z.string().nullable(),
  detail: z.array(z.string()),
});

/** One scheduler process seen recently. */
export const instanceSchema = z.object({
  id: z.string(),
  host: z.string(),
  pid: z.number().int(),
  version: z.string(),
  role: z.string(),
  startedAt: z.string(),
  lastPassAt: z.string().nullable(),
  /** Start of its last tick, successful or not. */
  lastTickAt: z.string().nullable(),
  /** Duration of its last successful pass, ms (fractional). */
  lastTickMs: z.number().nullable(),
  stoppedAt: z.string().nullable(),
  /** Running, but no tick started within `heartbeatStaleMs`: killed or hung. */
  stale: z.boolean(),
  /** Settings version it runs on (OPS-11). */
  settingsVersion: z.number().int().nullable(),
});

/** Most instances `GET /v1/status` shows (API-3): `GET /v1/instances` pages them all. */
export const STATUS_INSTANCE_LIMIT = 100;

/** `GET /v1/instances` reply (API-3). */
export const instanceListSchema = z.object({
  items: z.array(instanceSchema),
  nextCursor: z
    .string()
    .nullable()
    .describe("Pass as `cursor` (same order and filters) for the next page; null at the end"),
});

/** One written calendar import (API-5). */
export const importRunSchema = z
  .object({
    id: z.number().int(),
    source: z.string(),
    status: z.enum(["running", "succeeded", "failed"]),
    startedAt: z
      .string()
      .nullable()
      .describe("When it started; null for imports recorded before their start was"),
    importedAt: z
      .string()
      .describe("When it ended (its writes finished, or it failed); while running, its start"),
    events: z.number().int().describe("Events read from the file, overrides included"),
    created: z.number().int(),
    updated: z.number().int(),
    unchanged: z.number().int(),
    cancelled: z.number().int(),
    skipped: z.number().int(),
    warnings: z.number().int(),
    progress: z
      .object({
        chunksDone: z.number().int(),
        chunksTotal: z.number().int(),
        changesDone: z.number().int(),
        changesTotal: z.number().int(),
      })
      .describe(
        "Chunks committed of how many, changes (creates, updates, cancels) written of how many; 0 until the events are compared with what is stored",
      ),
    error: z
      .string()
      .nullable()
      .describe("Why a failed import failed (`abandoned: …` when its process died)"),
  })
  .meta({ id: "ImportRun" });

/** `GET /v1/imports` reply (API-3). */
export const importListSchema = z.object({
  items: z.array(importRunSchema),
  nextCursor: z
    .string()
    .nullable()
    .describe("Pass as `cursor` (same order and filters) for the next page; null at the end"),
});

/** `GET /v1/status` reply: what `punctual status` shows. */
export const statusSchema = z.object({
  version: z.string(),
  database: z.object({ engine: z.enum(["pglite", "postgres"]), description: z.string() }),
  ready: z.boolean(),
  checks: z.object({ database: z.boolean(), schema: z.boolean(), heartbeat: z.boolean() }),
  lastPassAt: z.string().nullable(),
  /** Current version of the database-held settings (OPS-11). */
  settingsVersion: z.number().int().nullable(),
  /** At most {@link STATUS_INSTANCE_LIMIT}: running first, then the latest started (API-3). */
  instances: z.array(instanceSchema),
  /** How many instances the status window holds; more than `instances` shows: page them with `GET /v1/instances`. */
  instancesTotal: z.number().int(),
  schedules: z.record(z.string(), z.number().int()),
  deliveries: z.object({
    dueBacklog: z.number().int(),
    overdue: z.number().int(),
    claimed: z.number().int(),
    inDoubt: z.number().int(),
    dead: z.number().int(),
    oldestDueAt: z.string().nullable(),
  }),
  /** CH-7: circuits of target hosts that are open, half-open or counting failures. */
  circuits: z.array(circuitViewSchema),
});

export type StatusView = z.infer<typeof statusSchema>;
export type PreviewRequest = z.output<typeof previewInputSchema>;

// Compile-time proof that the view schemas and the contract interfaces agree.
export type ViewSchemasMatchContracts = [
  Assert<SchemaMatches<typeof reminderViewSchema, ReminderView>>,
  Assert<SchemaMatches<typeof scheduleViewSchema, ScheduleView>>,
  Assert<SchemaMatches<typeof deliveryViewSchema, DeliveryView>>,
  Assert<SchemaMatches<typeof attemptViewSchema, AttemptView>>,
  Assert<Equals<z.infer<typeof errorBodySchema>["error"]["code"], ErrorBody["error"]["code"]>>,
];

// --- iCalendar import (API-5) ----------------------------------------------------------

const booleanText = z.enum(["true", "false"]);
const instantQuery = instantSchema.describe(
  "ISO 8601 instant with `Z` or an offset, e.g. 2027-01-01T00:00:00Z",
);

/**
 * `POST /v1/imports` query: the import options. Booleans are `true`/`false`; `remind`
 * may be repeated (`?remind=-PT15M&remind=-P1D`).
 */
export const importQuerySchema = z
  .object({
    source: z
      .string()
      .min(1)
      .max(200)
      .describe(
        "Calendar id the schedules are scoped to; re-importing under the same source updates them",
      ),
    remind: z
      .union([z.string().max(64), z.array(z.string().max(64)).max(50)])
      .optional()
      .describe(
        "Reminder offset added to every event, ISO 8601 (`-PT15M`, `-P1D`); repeat the parameter for several",
      ),
    useAlarms: booleanText
      .optional()
      .describe("`true` turns the events' VALARMs into reminders (default `false`)"),
    channel: z
      .enum(["webhook", "log"])
      .optional()
      .describe("Channel of every reminder (default `webhook`)"),
    target: z
      .string()
      .min(1)
      .max(2_048)
      .optional()
      .describe("Webhook URL of every reminder (becomes the target `{ url }`)"),
    tzid: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .describe(
        "IANA zone of floating times and all-day dates when the file names none (no X-WR-TIMEZONE); default UTC",
      ),
    dryRun: booleanText
      .optional()
      .describe("`true` stores nothing and answers the deliveries the import would plan"),
    async: booleanText
      .optional()
      .describe(
        "`true` answers 202 at once with the import's record and `Location: /v1/imports/{id}`; follow its progress there (as `Prefer: respond-async` does)",
      ),
    from: instantQuery
      .optional()
      .describe("Dry run: start of the window, inclusive (default: now)"),
    to: instantQuery
      .optional()
      .describe("Dry run: end of the window, exclusive (default: from + 30 days)"),
  })
  .strict();

/** An event the import did not take, with why (lenient with files). */
export const skippedEventSchema = z
  .object({
    uid: z.string().nullable(),
    line: z.number().int().nullable().describe("1-based line of its BEGIN:VEVENT, when known"),
    reason: z.string(),
  })
  .meta({ id: "SkippedEvent" });

/** `POST /v1/imports` reply (API-5, DEL-9, DEL-10). */
export const importSummarySchema = z
  .object({
    source: z.string(),
    created: z.number().int(),
    updated: z.number().int().describe("Changed events; their waiting deliveries were realigned"),
    unchanged: z.number().int(),
    cancelled: z
      .number()
      .int()
      .describe("Schedules of events gone from the file, cancelled with their waiting deliveries"),
    skipped: z.array(skippedEventSchema),
    warnings: z.array(z.string()),
    calendarTzid: z
      .string()
      .nullable()
      .describe("The calendar's own zone (X-WR-TIMEZONE), or null"),
    floatingTzid: z.string().describe("Zone in which floating times and all-day dates were read"),
    schedules: z.array(
      z.object({
        uid: z.string(),
        externalId: z.string(),
        scheduleId: z.string().nullable(),
        action: z.enum(["created", "updated", "unchanged", "cancelled", "skipped"]),
      }),
    ),
  })
  .meta({ id: "ImportSummary" });

/** `GET /v1/imports/{id}` reply, and the 202 of an asynchronous `POST /v1/imports` (API-5). */
export const importViewSchema = importRunSchema
  .extend({
    details: z
      .object({
        skipped: z.array(skippedEventSchema),
        warnings: z.array(z.string()),
        calendarTzid: z.string().nullable(),
        floatingTzid: z.string(),
      })
      .nullable()
      .describe("The skipped events, warning texts and zones, once the file is read"),
  })
  .meta({ id: "ImportView" });

/** One delivery of a dry run, as the scheduler would plan it. */
export const dryRunDeliverySchema = z
  .object({
    uid: z.string(),
    recurrenceId: z
      .string()
      .nullable()
      .describe("RECURRENCE-ID of a moved instance as written in the file; null for plain ones"),
    occurrenceAt: z
      .string()
      .describe("ISO 8601 UTC instant with `Z`, or `YYYY-MM-DD` for an all-day occurrence"),
    dueAt: z.string().describe("ISO 8601 UTC instant with `Z`"),
    reminderKey: z.string(),
  })
  .meta({ id: "DryRunDelivery" });

/** `POST /v1/imports?dryRun=true` reply. */
export const dryRunResultSchema = z
  .object({
    from: instantText,
    to: instantText,
    deliveries: z
      .array(dryRunDeliverySchema)
      .describe("Every delivery whose occurrence falls in [from, to), sorted by dueAt then uid"),
    skipped: z.array(skippedEventSchema),
    warnings: z.array(z.string()),
    events: z.number().int().describe("Schedules the file would become"),
    floatingTzid: z.string(),
  })
  .meta({ id: "ImportDryRun" });

export type ImportQuery = z.output<typeof importQuerySchema>;

/** Compile-time proof that the import schemas and the import's own types agree. */
export type ImportSchemasMatch = [
  Assert<SchemaMatches<typeof importSummarySchema, ImportSummary>>,
  Assert<SchemaMatches<typeof dryRunDeliverySchema, DryRunDelivery>>,
  Assert<SchemaMatches<typeof importViewSchema, ImportView>>,
];
