/**
 * `GET /v1/schedules/{id}/recipient-zones` (API-11): the zones of a schedule's recipients,
 * counted, and whether it is floating. Scope `read` (API-2), like every GET.
 */
import { type OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import type { Assert, SchemaMatches } from "./schema-proof.js";
import type { Punctual } from "../app/punctual.js";
import type { RecipientZones } from "../app/recipient-zones.js";
import { tenantOf } from "./auth.js";
import { error, json, securedRoute } from "./route-parts.js";
import { scheduleIdParamSchema } from "./schemas.js";

/** The reply (mirrors `RecipientZones`). */
export const recipientZonesSchema = z
  .object({
    scheduleId: z.string(),
    floating: z
      .boolean()
      .describe("DTSTART and the rule are read in each recipient's own zone (floating time)"),
    recipients: z.number().int().describe("Recipients of the schedule; 0 without recipients"),
    zones: z
      .array(
        z.object({
          tzid: z.string().describe("IANA time zone"),
          recipients: z.number().int().describe("Recipients of the schedule in this zone"),
        }),
      )
      .describe("Most recipients first, then by zone; at most 1,000"),
  })
  .meta({ id: "RecipientZones" });

/** Compile-time proof that the schema and the contract agree. */
export type RecipientZonesSchemaMatchesContract = Assert<
  SchemaMatches<typeof recipientZonesSchema, RecipientZones>
>;

export const recipientZonesRoute = securedRoute({
  method: "get",
  path: "/v1/schedules/{id}/recipient-zones",
  tags: ["recipients"],
  summary: "The time zones of a schedule's recipients, counted (API-11)",
  description:
    "Whether the schedule is floating, how many recipients it has, and their IANA zones with how many recipients each (most first). A schedule without recipients answers 0 and no zones. With `POST /v1/preview` per zone (the zone as `tzid` when floating) it gives the next occurrence per recipient zone.",
  request: { params: scheduleIdParamSchema },
  responses: {
    200: json(recipientZonesSchema, "The zones"),
    404: error("No such schedule"),
  },
});

/** Binds the route to `app`. Authentication and scopes are checked before. */
export function registerRecipientZoneRoutes(app: OpenAPIHono, punctual: Punctual): void {
  app.openapi(recipientZonesRoute, async (c) =>
    c.json(await punctual.scheduleRecipientZones(c.req.valid("param").id, tenantOf(c)), 200),
  );
}
