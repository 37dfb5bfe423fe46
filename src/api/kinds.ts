/**
 * Reminder kinds over HTTP (DEL-11): `GET /v1/reminder-kinds`,
 * `GET|PUT|DELETE /v1/reminder-kinds/{key}`. Routes and response schemas live here;
 * `createApi` registers them with {@link registerReminderKindRoutes}.
 */
import { type OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import type { Punctual } from "../app/punctual.js";
import { tenantOf } from "./auth.js";
import { reminderKindBodySchema, type ReminderKindView } from "../contracts/kinds.js";
import { error, json, securedRoute } from "./route-parts.js";
import { templateViewSchema } from "./schemas.js";

const instantText = z.string().describe("ISO 8601 instant in UTC, e.g. 2027-01-04T08:00:00.000Z");

/** A reminder kind as the API returns it (mirrors `ReminderKindView`). */
export const reminderKindViewSchema = z
  .object({
    key: z.string(),
    channel: z.string(),
    offset: z.string().describe("Default offset, ISO 8601 duration, e.g. -PT15M"),
    target: z.record(z.string(), z.unknown()).nullable().describe("Secrets redacted"),
    template: templateViewSchema.nullable(),
    seriesOnly: z.boolean(),
    enabled: z.boolean(),
    version: z.number().int(),
    createdAt: instantText,
    updatedAt: instantText,
  })
  .meta({ id: "ReminderKind" });

const kindKeyParamSchema = z.object({
  key: z.string().min(1).max(64).describe("Kind key: 1–64 letters, digits, _ . : -"),
});

export const listReminderKindsRoute = securedRoute({
  method: "get",
  path: "/v1/reminder-kinds",
  tags: ["reminder kinds"],
  summary: "List reminder kinds (DEL-11)",
  responses: {
    200: json(z.object({ items: z.array(reminderKindViewSchema) }), "Every kind, by key"),
  },
});

export const getReminderKindRoute = securedRoute({
  method: "get",
  path: "/v1/reminder-kinds/{key}",
  tags: ["reminder kinds"],
  summary: "Read a reminder kind",
  request: { params: kindKeyParamSchema },
  responses: {
    200: json(reminderKindViewSchema, "The kind"),
    404: error("No such kind"),
  },
});

export const putReminderKindRoute = securedRoute({
  method: "put",
  path: "/v1/reminder-kinds/{key}",
  tags: ["reminder kinds"],
  summary: "Create or replace a reminder kind (DEL-11)",
  description:
    "Validated like a reminder: a channel of the server, a valid offset, a target the channel accepts, templates that render. Reminders written afterwards that name the kind copy its fields; reminders already written keep theirs.",
  request: {
    params: kindKeyParamSchema,
    body: { required: true, content: { "application/json": { schema: reminderKindBodySchema } } },
  },
  responses: {
    201: json(reminderKindViewSchema, "Created"),
    200: json(reminderKindViewSchema, "Replaced (or unchanged: same version)"),
    400: error("Validation failed; `issues` names each bad field"),
  },
});

export const deleteReminderKindRoute = securedRoute({
  method: "delete",
  path: "/v1/reminder-kinds/{key}",
  tags: ["reminder kinds"],
  summary: "Remove a reminder kind",
  description: "Reminders written from it keep their copied fields and keep sending.",
  request: { params: kindKeyParamSchema },
  responses: {
    204: { description: "Removed" },
    404: error("No such kind"),
  },
});

/** Registers the reminder-kind routes on the API app (the caller's auth applies). */
export function registerReminderKindRoutes(app: OpenAPIHono, punctual: Punctual): void {
  app.openapi(listReminderKindsRoute, async (c) =>
    c.json({ items: await punctual.listReminderKinds(tenantOf(c)) }, 200),
  );
  app.openapi(getReminderKindRoute, async (c) =>
    c.json(await punctual.getReminderKind(c.req.valid("param").key, tenantOf(c)), 200),
  );
  app.openapi(putReminderKindRoute, async (c) => {
    // The raw body: the service validates it (and fills the defaults) once more.
    const raw: unknown = await c.req.json();
    const { kind, created } = await punctual.putReminderKind(
      c.req.valid("param").key,
      raw,
      tenantOf(c),
    );
    return c.json(kind, created ? 201 : 200);
  });
  app.openapi(deleteReminderKindRoute, async (c) => {
    await punctual.removeReminderKind(c.req.valid("param").key, tenantOf(c));
    return c.body(null, 204);
  });
}

// The view schema and the contract's interface must not drift apart.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const viewMatches: Same<z.output<typeof reminderKindViewSchema>, ReminderKindView> = true;
void viewMatches;
