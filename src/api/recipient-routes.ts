/**
 * Routes of the recipient registry (API-10): `PUT|GET|DELETE /v1/recipients/{id}`,
 * `GET /v1/recipients` (keyset pages) and `POST /v1/recipients:bulk` (a JSON array or
 * NDJSON, one result per row). Registered on the API by {@link registerRecipientRoutes};
 * the bulk route has its own body limit ({@link bulkRecipientsBodyLimit}).
 *
 * Scopes (API-2): `read` for the GET routes, `write` for the others, like schedules.
 */
import { type OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import type { Punctual } from "../app/punctual.js";
import {
  BULK_RECIPIENTS_BODY_BYTES,
  listRecipientsQuerySchema,
  MAX_BULK_RECIPIENTS,
  MAX_RECIPIENT_ID_CHARS,
  recipientBodySchema,
  recipientPreferencesSchema,
  recipientRowSchema,
  type BulkRecipientsSummary,
  type RecipientView,
} from "../contracts/recipients.js";
import { tenantOf } from "./auth.js";
import { errorBody } from "./errors.js";
import { error, json, securedRoute } from "./route-parts.js";
import { HTTPException } from "hono/http-exception";

/** Path of the bulk upsert route. */
export const RECIPIENTS_BULK_PATH = "/v1/recipients:bulk";

/** Media types the bulk route reads. */
export const BULK_MEDIA_TYPES = ["application/json", "application/x-ndjson"] as const;

/**
 * Largest `POST /v1/recipients:bulk` body: 16 MiB, or `api.bodyLimitBytes` when that is
 * larger; every other JSON route keeps `api.bodyLimitBytes` (1 MiB by default).
 */
export function bulkRecipientsBodyLimit(apiBodyLimitBytes: number): number {
  return Math.max(apiBodyLimitBytes, BULK_RECIPIENTS_BODY_BYTES);
}

const instantText = z.string().describe("ISO 8601 instant in UTC, e.g. 2027-01-04T08:00:00.000Z");

/** A recipient as the API returns it (mirrors `RecipientView`). */
export const recipientViewSchema = z
  .object({
    id: z.string(),
    tzid: z.string().describe("IANA time zone"),
    targets: z
      .record(z.string(), z.record(z.string(), z.unknown()))
      .describe("One target per channel; secrets redacted"),
    attributes: z.record(z.string(), z.unknown()),
    preferences: recipientPreferencesSchema,
    version: z.number().int().describe("Grows by one at each change"),
    createdAt: instantText,
    updatedAt: instantText,
  })
  .meta({ id: "Recipient" });

const recipientPageSchema = z
  .object({
    items: z.array(recipientViewSchema),
    nextCursor: z.string().nullable().describe("Continues the same order and q; null at the end"),
  })
  .meta({ id: "RecipientPage" });

const bulkResultSchema = z
  .object({
    index: z.number().int().describe("Row position from 0 (NDJSON: among non-blank lines)"),
    id: z.string().nullable(),
    status: z.enum(["created", "updated", "error"]),
    error: z
      .object({
        code: z.string(),
        message: z.string(),
        issues: z
          .array(
            z.object({ field: z.string(), message: z.string(), value: z.unknown().optional() }),
          )
          .optional(),
      })
      .optional(),
  })
  .meta({ id: "RecipientBulkResult" });

const bulkSummarySchema = z
  .object({
    created: z.number().int(),
    updated: z.number().int(),
    errors: z.number().int(),
    results: z.array(bulkResultSchema),
  })
  .meta({ id: "RecipientBulkSummary" });

const idParamSchema = z.object({
  id: z
    .string()
    .min(1)
    .max(1_000)
    .describe(
      `Recipient id: 1–${MAX_RECIPIENT_ID_CHARS} letters, digits or _ . : @ + -, starting with a letter or digit`,
    ),
});

export const putRecipientRoute = securedRoute({
  method: "put",
  path: "/v1/recipients/{id}",
  tags: ["recipients"],
  summary: "Create or replace a recipient (API-10)",
  description:
    "Replaces the whole recipient: its IANA zone, one target per channel (each checked by its channel: webhook URL and SSRF rules, e-mail addresses, Slack and Discord webhook URLs), free attributes (at most 16 KiB as JSON) and preferences (opt-outs, a quiet window). A bad field is a 400 naming it and its value, and nothing is stored. A write equal to the stored recipient changes nothing (same version).",
  request: {
    params: idParamSchema,
    body: { required: true, content: { "application/json": { schema: recipientBodySchema } } },
  },
  responses: {
    201: json(recipientViewSchema, "Created"),
    200: json(recipientViewSchema, "Replaced (or unchanged: same version)"),
    400: error("Validation failed; `issues` names each bad field"),
    413: error("Body too large"),
    415: error("Body is not JSON"),
  },
});

export const getRecipientRoute = securedRoute({
  method: "get",
  path: "/v1/recipients/{id}",
  tags: ["recipients"],
  summary: "Read a recipient (API-10)",
  request: { params: idParamSchema },
  responses: {
    200: json(recipientViewSchema, "The recipient"),
    404: error("No such recipient in the caller's tenant"),
  },
});

export const listRecipientsRoute = securedRoute({
  method: "get",
  path: "/v1/recipients",
  tags: ["recipients"],
  summary: "List recipients by id, one keyset page at a time (API-10)",
  description:
    "By id in byte order (`order=asc`, the default, or `desc`); `q` keeps the ids containing it (case-insensitive). `nextCursor` continues the same order and `q`; a page also ends early, with a cursor, before its items pass 4 MiB of JSON.",
  request: { query: listRecipientsQuerySchema },
  responses: {
    200: json(recipientPageSchema, "A page"),
    400: error("Bad query field or cursor"),
  },
});

export const deleteRecipientRoute = securedRoute({
  method: "delete",
  path: "/v1/recipients/{id}",
  tags: ["recipients"],
  summary: "Remove a recipient (API-10)",
  request: { params: idParamSchema },
  responses: {
    204: { description: "Removed" },
    404: error("No such recipient in the caller's tenant"),
  },
});

export const bulkRecipientsRoute = securedRoute({
  method: "post",
  path: RECIPIENTS_BULK_PATH,
  tags: ["recipients"],
  summary: "Create or replace many recipients, one result per row (API-10)",
  description:
    `The body is a JSON array of recipients, each with its \`id\` (\`Content-Type: application/json\`), or one recipient per line (\`Content-Type: application/x-ndjson\`; blank lines are skipped). At most ${MAX_BULK_RECIPIENTS.toLocaleString("en")} rows (more: 400, nothing stored); the body may be up to 16 MiB (or \`api.bodyLimitBytes\` when larger). ` +
    "Each row is checked like a `PUT` body and written on its own: a bad row is reported with status `error` and the issues a `PUT` would name, and the other rows are written. An id given twice is written from its first row; the later rows are errors.",
  request: {
    body: {
      required: true,
      content: {
        "application/json": {
          schema: {
            type: "array",
            maxItems: MAX_BULK_RECIPIENTS,
            items: { $ref: "#/components/schemas/RecipientRow" },
          },
        },
        "application/x-ndjson": {
          schema: { type: "string", description: "One RecipientRow as JSON per line" },
        },
      },
    },
  },
  responses: {
    200: json(bulkSummarySchema, "One result per row"),
    400: error("Not an array, no rows, or more than 10,000 rows (nothing stored)"),
    413: error("Body larger than the bulk limit"),
    415: error("Body sent with another Content-Type"),
  },
});

/** The bare media type of a Content-Type header, lower case. */
function mediaTypeOf(header: string | undefined): string {
  return ((header ?? "").split(";")[0] ?? "").trim().toLowerCase();
}

const scheduleRecipientsResultSchema = z
  .object({
    added: z.number().int().describe("Recipients added by this page (already there: not counted)"),
    removed: z.number().int().describe("Recipients removed by this page"),
    cancelled: z.number().int().describe("Waiting deliveries of removed recipients, cancelled"),
    recipients: z.number().int().describe("Recipients of the schedule after this page"),
  })
  .meta({ id: "ScheduleRecipientsResult" });

export const putScheduleRecipientsRoute = securedRoute({
  method: "put",
  path: "/v1/schedules/{id}/recipients",
  tags: ["recipients"],
  summary: "Add and remove recipients of a schedule, one page at a time (API-12)",
  description:
    "`{ add?: [ids], remove?: [ids] }`, at most 10,000 ids together; larger audiences in several pages. Added recipients are planned from now (never backfilled); removed ones have their waiting deliveries cancelled. Idempotent. An id the tenant has no recipient for is a 400 naming it, and nothing is stored.",
  request: {
    params: z.object({ id: z.string().describe("Schedule id (UUID)") }),
    body: {
      required: true,
      content: {
        "application/json": {
          schema: z
            .object({
              add: z.array(z.string()).optional(),
              remove: z.array(z.string()).optional(),
            })
            .strict(),
        },
      },
    },
  },
  responses: {
    200: json(scheduleRecipientsResultSchema, "Applied"),
    400: error("Validation failed; `issues` names each bad field"),
    404: error("No such schedule in the caller's tenant"),
  },
});

const scheduleRecipientPageSchema = z
  .object({
    items: z.array(
      z.object({
        id: z.string().describe("Recipient id"),
        addedAt: instantText.describe("When it joined the schedule"),
      }),
    ),
    nextCursor: z.string().nullable().describe("Continues the list; null at the end"),
  })
  .meta({ id: "ScheduleRecipientPage" });

export const listScheduleRecipientsRoute = securedRoute({
  method: "get",
  path: "/v1/schedules/{id}/recipients",
  tags: ["recipients"],
  summary: "List the recipients of a schedule, one page at a time (API-12)",
  description:
    "By recipient id (byte order), `limit` per page (1–1000, default 100); pass the previous page's `nextCursor` as `cursor` for the next. A schedule without recipients lists none.",
  request: {
    params: z.object({ id: z.string().describe("Schedule id (UUID)") }),
    query: z.object({
      limit: z.string().optional().describe("Page size, 1–1000 (default 100)"),
      cursor: z.string().optional().describe("The previous page's nextCursor"),
    }),
  },
  responses: {
    200: json(scheduleRecipientPageSchema, "One page"),
    400: error("A bad limit or cursor"),
    404: error("No such schedule in the caller's tenant"),
  },
});

/** Binds the recipient routes to `app`. Authentication and scopes are checked before. */
export function registerRecipientRoutes(app: OpenAPIHono, punctual: Punctual): void {
  // A new object schema made here, after @hono/zod-openapi has extended zod: a schema
  // made before that (the contract's, depending on import order) has no `.openapi`.
  app.openAPIRegistry.register("RecipientRow", z.object(recipientRowSchema.shape));

  app.openapi(putRecipientRoute, async (c) => {
    // The raw body: the service validates it whole (and fills the defaults).
    const raw: unknown = await c.req.json();
    const { recipient, created } = await punctual.putRecipient(
      c.req.valid("param").id,
      raw,
      tenantOf(c),
    );
    return c.json(recipient, created ? 201 : 200);
  });

  app.openapi(getRecipientRoute, async (c) =>
    c.json(await punctual.getRecipient(c.req.valid("param").id, tenantOf(c)), 200),
  );

  app.openapi(listRecipientsRoute, async (c) =>
    c.json(await punctual.listRecipients(c.req.valid("query"), tenantOf(c)), 200),
  );

  app.openapi(deleteRecipientRoute, async (c) => {
    await punctual.removeRecipient(c.req.valid("param").id, tenantOf(c));
    return c.body(null, 204);
  });

  app.openapi(putScheduleRecipientsRoute, async (c) => {
    const raw: unknown = await c.req.json();
    return c.json(
      await punctual.putScheduleRecipients(c.req.valid("param").id, raw, tenantOf(c)),
      200,
    );
  });

  app.openapi(listScheduleRecipientsRoute, async (c) =>
    c.json(
      await punctual.listScheduleRecipients(
        c.req.valid("param").id,
        c.req.valid("query"),
        tenantOf(c),
      ),
      200,
    ),
  );

  app.openapi(bulkRecipientsRoute, async (c) => {
    const mediaType = mediaTypeOf(c.req.header("content-type"));
    if (!(BULK_MEDIA_TYPES as readonly string[]).includes(mediaType)) {
      return c.json(
        errorBody(
          "UNSUPPORTED_MEDIA_TYPE",
          `Send the rows with Content-Type: ${BULK_MEDIA_TYPES.join(" (an array) or ")} (one per line) (got ${mediaType || "none"}).`,
        ),
        415,
      );
    }
    // NDJSON stays text (the service reads it line by line); JSON is parsed here.
    const body: unknown =
      mediaType === "application/x-ndjson" ? await c.req.text() : await jsonBodyOf(c.req);
    return c.json(await punctual.bulkUpsertRecipients(body, tenantOf(c)), 200);
  });
}

// The view schemas and the contract's interfaces must not drift apart.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const viewMatches: Same<z.output<typeof recipientViewSchema>, RecipientView> = true;
const bulkMatches: Same<z.output<typeof bulkSummarySchema>, BulkRecipientsSummary> = true;
void viewMatches;
void bulkMatches;

/**
 * The request's JSON body. A body that does not parse is a 400 `INVALID_JSON` naming the
 * parser's position (API-7), not the parser's own error, which the API would answer 500.
 * @throws HTTPException 400 for a body that is not JSON.
 */
async function jsonBodyOf(req: { json(): Promise<unknown> }): Promise<unknown> {
  try {
    return await req.json();
  } catch (cause) {
    throw new HTTPException(400, { message: "Malformed JSON in request body", cause });
  }
}
