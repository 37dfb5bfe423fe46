/**
 * Request shapes of the operator actions (API-9): trigger now, backfill, bulk redrive and
 * resolve, upsert by external id, purge. Field names are a public contract: keep them.
 */
import { z } from "zod";
import { DELIVERY_REASONS } from "../domain/index.js";
import { createScheduleSchema, dtstartSchema, instantSchema, isUnstorableText } from "./index.js";

const instant = instantSchema;

const text = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((v) => !isUnstorableText(v), "must not contain NUL or lone surrogates");

/** Most deliveries one backfill may create (the planner's per-pass expansion limit). */
export const MAX_BACKFILL_DELIVERIES = 10_000;
/** Most deliveries one bulk redrive or resolve changes; call again for the rest. */
export const MAX_BULK_LIMIT = 10_000;
/** Deliveries a bulk action changes by default. */
export const DEFAULT_BULK_LIMIT = 1_000;
/** Deliveries a dry run shows. */
export const BULK_SAMPLE_SIZE = 10;

/** `POST /v1/schedules/{id}/trigger` body (optional). */
export const triggerInputSchema = z
  .object({
    /** Only this reminder; default every reminder of the schedule. */
    reminderKey: text(64).optional(),
  })
  .strict();

/** `POST /v1/schedules/{id}/backfill` body: occurrences in [from, to). */
export const backfillInputSchema = z
  .object({
    from: instant,
    to: instant,
    /** Only this reminder; default every reminder of the schedule. */
    reminderKey: text(64).optional(),
    /** List what would be created, change nothing. */
    dryRun: z.boolean().default(false),
  })
  .strict();

const bulkFilterShape = {
  reason: z.enum(DELIVERY_REASONS).optional(),
  channel: text(64).optional(),
  scheduleId: z.uuid().optional(),
  /** The schedule's `source` (an import's calendar name, an upsert's source). */
  source: text(200).optional(),
  /** Due at or after this instant. */
  from: instant.optional(),
  /** Due before this instant. */
  to: instant.optional(),
  dryRun: z.boolean().default(false),
  limit: z.number().int().min(1).max(MAX_BULK_LIMIT).default(DEFAULT_BULK_LIMIT),
};

/** `POST /v1/deliveries/redrive` body: which dead or in-doubt deliveries to send again. */
export const bulkRedriveInputSchema = z
  .object({ state: z.enum(["dead", "in_doubt"]).optional(), ...bulkFilterShape })
  .strict();

/** `POST /v1/deliveries/resolve` body: which in-doubt deliveries or dead letters to settle. */
export const bulkResolveInputSchema = z
  .object({
    outcome: z.enum(["sent", "dead"]),
    state: z.enum(["dead", "in_doubt"]).optional(),
    ...bulkFilterShape,
  })
  .strict();

/** Shortest debounce window (DEL-18): 100 ms. */
export const MIN_DEBOUNCE_WINDOW_MS = 100;
/** Longest debounce window (DEL-18): 24 h, ms. */
export const MAX_DEBOUNCE_WINDOW_MS = 86_400_000;
/** Longest debounce delay cap (DEL-18): 7 days, ms. */
export const MAX_DEBOUNCE_DELAY_MS = 7 * 86_400_000;

/**
 * DEL-18: `debounce` of an upsert: each upsert within `windowMs` of the last moves the
 * one-off's due time to now + `windowMs`, never past the burst's first upsert +
 * `maxDelayMs` (≥ `windowMs`).
 */
export const debounceSchema = z
  .object({
    windowMs: z
      .number()
      .int()
      .min(MIN_DEBOUNCE_WINDOW_MS)
      .max(MAX_DEBOUNCE_WINDOW_MS)
      .describe("Quiet time after the last upsert before the reminder is due, ms (100 ms–24 h)"),
    maxDelayMs: z
      .number()
      .int()
      .min(MIN_DEBOUNCE_WINDOW_MS)
      .max(MAX_DEBOUNCE_DELAY_MS)
      .describe("Latest due time after a burst's first upsert, ms (≥ windowMs, ≤ 7 days)"),
  })
  .strict()
  .refine((d) => d.maxDelayMs >= d.windowMs, {
    message: "maxDelayMs must be at least windowMs",
    path: ["maxDelayMs"],
  });

/** `debounce` of an upsert (DEL-18). */
export type DebounceInput = z.infer<typeof debounceSchema>;

/**
 * `PUT /v1/schedules/by-external-id/{source}/{externalId}` body: the whole schedule, and
 * optionally `debounce` (DEL-18; a one-off only, whose `dtstart` it then sets).
 */
export const upsertScheduleSchema = createScheduleSchema
  .omit({ source: true, externalId: true })
  .extend({
    dtstart: dtstartSchema
      .optional()
      .describe("Required, except with `debounce` (DEL-18), which sets it"),
    debounce: debounceSchema.optional(),
  })
  .strict()
  .superRefine((body, ctx) => {
    if (body.dtstart === undefined && body.debounce === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["dtstart"],
        message: "is required (unless debounce sets it)",
      });
    }
  });

/** `POST /v1/schedules/{id}/trigger` body (API-9): optionally one `reminderKey`. */
export type TriggerInput = z.input<typeof triggerInputSchema>;
/** `POST /v1/schedules/{id}/backfill` body (API-9): the past range `[from, to)` and `dryRun`. */
export type BackfillInput = z.input<typeof backfillInputSchema>;
/** `POST /v1/deliveries/redrive` body (API-9): the filters, `limit` and `dryRun`. */
export type BulkRedriveInput = z.input<typeof bulkRedriveInputSchema>;
/** `POST /v1/deliveries/resolve` body (API-9): the filters, the `outcome`, `limit` and `dryRun`. */
export type BulkResolveInput = z.input<typeof bulkResolveInputSchema>;
/** `PUT /v1/schedules/by-external-id/{source}/{externalId}` body (API-9): a schedule definition. */
export type UpsertScheduleInput = z.input<typeof upsertScheduleSchema>;
