/**
 * Response schemas of a schedule's missed occurrences (OPS-13, API-9): the `missed` member
 * of `GET /v1/schedules/{id}`, for the OpenAPI document. The assertion at the end fails to
 * compile if the schema and `MissedOccurrencesView` of the contracts drift apart.
 */
import { z } from "zod";
import type { Assert, SchemaMatches } from "./schema-proof.js";
import type { MissedOccurrencesView } from "../contracts/missed.js";
import { scheduleViewSchema } from "./schemas.js";

const instant = z.string().describe("ISO 8601 instant in UTC");

/** A skipped occurrence. */
export const missedOccurrenceSchema = z
  .object({
    deliveryId: z.number().int(),
    reminderKey: z.string(),
    occurrenceAt: instant,
    dueAt: instant,
    reason: z
      .string()
      .describe("stale (missed beyond its grace, REC-6) or expired (past the schedule's expiry)"),
  })
  .meta({ id: "MissedOccurrence" });

/** `missed` of a schedule read: what the rule called for in the window beside what was sent. */
export const missedOccurrencesSchema = z
  .object({
    from: instant.describe(
      "Start of the window: 7 days before `to`, for a series not before the schedule was created",
    ),
    to: instant.describe("End of the window: now"),
    expected: z
      .number()
      .int()
      .describe(
        "Deliveries the rule and reminders call for (one per occurrence and reminder), due in the window",
      ),
    complete: z
      .boolean()
      .describe(
        "False when the expansion stopped at its bound (10,000 occurrences): `expected` is a lower bound",
      ),
    sent: z.number().int(),
    skipped: z
      .record(z.string(), z.number().int())
      .describe("Skipped deliveries by reason: stale, expired"),
    waiting: z.number().int().describe("Pending, retrying, claimed or paused"),
    failed: z.number().int().describe("Dead or in doubt"),
    cancelled: z.number().int(),
    unrecorded: z
      .number()
      .int()
      .describe("Expected but with no delivery in the window (e.g. deleted by retention)"),
    items: z
      .array(missedOccurrenceSchema)
      .describe("The most recent skipped occurrences (at most 20, any age), newest first"),
  })
  .meta({ id: "MissedOccurrences" });

/** `GET /v1/schedules/{id}` reply: the schedule and its missed occurrences. */
export const scheduleReadSchema = scheduleViewSchema
  .extend({ missed: missedOccurrencesSchema })
  .meta({ id: "ScheduleRead" });

/** Compile-time proof that the schema and the contract agree. */
export type MissedSchemaMatchesContract = Assert<
  SchemaMatches<typeof missedOccurrencesSchema, MissedOccurrencesView>
>;
