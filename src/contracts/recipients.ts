/**
 * API-10: the recipient registry's request and response shapes, shared by the API, the
 * CLI and the library.
 *
 * A recipient is someone (or something) reminders are for, per tenant, under an id of
 * the caller's choosing: their time zone, one target per channel, free attributes and
 * delivery preferences. The shapes and size limits are checked here; that the zone
 * exists and that each target passes its channel's own validation (webhook URL and its
 * SSRF checks, e-mail addresses, Slack and Discord webhook URLs) is checked where the
 * channels are known (`src/app/recipients.ts`).
 */
import { z } from "zod";
import {
  hasUnstorableText,
  isUnstorableText,
  jsonBytes,
  jsonDepth,
  listOrderSchema,
  MAX_PAYLOAD_DEPTH,
  pageLimitSchema,
  quietHoursSchema,
  RECIPIENT_ID_PATTERN,
} from "./index.js";

/** Longest recipient id, characters. */
export const MAX_RECIPIENT_ID_CHARS = 200;

/** A recipient id: a letter or digit, then letters, digits, `_ . : @ + -`; 1–200 characters. */
export { RECIPIENT_ID_PATTERN };

/** Largest `attributes` of a recipient, bytes of its JSON text (UTF-8). */
export const MAX_RECIPIENT_ATTRIBUTES_BYTES = 16_384;

/** Most targets (channels) of one recipient. */
export const MAX_RECIPIENT_TARGETS = 16;

/** Largest target of one channel, bytes of its JSON text (UTF-8). */
export const MAX_RECIPIENT_TARGET_BYTES = 4_096;

/** Most entries of each opt-out list (`channels`, `categories`). */
export const MAX_OPT_OUT_ENTRIES = 10;

/** Most rows of one `POST /v1/recipients:bulk` body. */
export const MAX_BULK_RECIPIENTS = 10_000;

/**
 * Largest `POST /v1/recipients:bulk` body, bytes (16 MiB), or `api.bodyLimitBytes` when
 * that is larger: 10,000 rows of about 1.6 KiB each.
 */
export const BULK_RECIPIENTS_BODY_BYTES = 16 * 1024 * 1024;

const UNSTORABLE_MESSAGE =
  "must not contain NUL characters or unpaired UTF-16 surrogates (they cannot be stored)";

/** API-10: a recipient id. */
export const recipientIdSchema = z
  .string()
  .regex(
    RECIPIENT_ID_PATTERN,
    "must be 1–200 letters, digits or _ . : @ + -, starting with a letter or digit",
  );

/** A channel name or an opt-out category: 1–64 letters, digits, `_ . : -`. */
const nameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/, "must be 1–64 letters, digits, _ . : -");

/** A JSON object nested at most {@link MAX_PAYLOAD_DEPTH} levels, at most `maxBytes` as JSON. */
function boundedObject(maxBytes: number) {
  return z
    .record(z.string(), z.unknown())
    .refine((v) => jsonDepth(v) <= MAX_PAYLOAD_DEPTH, {
      message: `must not nest objects or arrays deeper than ${MAX_PAYLOAD_DEPTH} levels`,
      abort: true,
    })
    .superRefine((v, ctx) => {
      const bytes = jsonBytes(v);
      if (bytes > maxBytes) {
        ctx.addIssue({
          code: "custom",
          message: `must be at most ${maxBytes} bytes as JSON (is ${bytes})`,
          abort: true,
        });
      }
    })
    .refine((v) => !hasUnstorableText(v), UNSTORABLE_MESSAGE);
}

/** Distinct entries: a name listed twice is refused. */
function distinctNames() {
  return z
    .array(nameSchema)
    .max(MAX_OPT_OUT_ENTRIES)
    .refine((v) => new Set(v).size === v.length, "lists a name twice");
}

/** API-10: what a recipient opted out of. */
export const optOutSchema = z
  .object({
    /** Channel names (`email`, `slack`, …): channels of this server. */
    channels: distinctNames().optional(),
    /** Categories of reminders (`digest`, `marketing`, …): names of the caller's. */
    categories: distinctNames().optional(),
  })
  .strict();

/**
 * API-10: a recipient's quiet window, the shape of a reminder's (DEL-15); `tzid` may be
 * left out and is then the recipient's own zone.
 */
export const recipientQuietHoursSchema = quietHoursSchema.partial({ tzid: true });

/** API-10: a recipient's delivery preferences. Unknown keys are refused. */
export const recipientPreferencesSchema = z
  .object({
    optOut: optOutSchema.optional(),
    quietHours: recipientQuietHoursSchema.optional(),
  })
  .strict();

/**
 * API-10: one target per channel name (at most {@link MAX_RECIPIENT_TARGETS}), each an
 * object of at most {@link MAX_RECIPIENT_TARGET_BYTES} bytes as JSON; what each must
 * hold is its channel's to say.
 */
export const recipientTargetsSchema = z
  .record(nameSchema, boundedObject(MAX_RECIPIENT_TARGET_BYTES))
  .refine((v) => Object.keys(v).length <= MAX_RECIPIENT_TARGETS, {
    message: `must name at most ${MAX_RECIPIENT_TARGETS} channels`,
  });

/** `PUT /v1/recipients/{id}` body: the whole recipient (the path names it). */
export const recipientBodySchema = z
  .object({
    /** The recipient's IANA time zone, e.g. `Asia/Tokyo`. */
    tzid: z
      .string()
      .min(1)
      .max(64)
      .refine((v) => !isUnstorableText(v), UNSTORABLE_MESSAGE),
    /** One target per channel name; default none. */
    targets: recipientTargetsSchema.default({}),
    /** Free JSON object of the caller's, at most 16 KiB as JSON; default `{}`. */
    attributes: boundedObject(MAX_RECIPIENT_ATTRIBUTES_BYTES).default({}),
    /** Delivery preferences; default `{}`. */
    preferences: recipientPreferencesSchema.default({}),
  })
  .strict();

/** One row of `POST /v1/recipients:bulk`: a recipient with its `id`. */
export const recipientRowSchema = recipientBodySchema.extend({ id: recipientIdSchema });

/** A recipient as the API takes it. */
export type RecipientInput = z.input<typeof recipientBodySchema>;
/** A recipient after validation of its shape, defaults filled in. */
export type RecipientBody = z.output<typeof recipientBodySchema>;

/** `GET /v1/recipients` query. */
export const listRecipientsQuerySchema = z
  .object({
    /** A case-insensitive substring of the id. */
    q: z.string().min(1).max(MAX_RECIPIENT_ID_CHARS).optional(),
    /** By id (byte order): `asc` (the default) or `desc`. */
    order: listOrderSchema,
    limit: pageLimitSchema(),
    /** Opaque cursor from the previous page's `nextCursor` (same order and `q`). */
    cursor: z.string().max(1_000).optional(),
  })
  .strict();

/** A recipient as the API returns it (target secrets redacted). */
export interface RecipientView {
  id: string;
  tzid: string;
  /** One target per channel; secrets (a webhook's `secret`, Slack and Discord URL paths) redacted. */
  targets: Record<string, Record<string, unknown>>;
  attributes: Record<string, unknown>;
  preferences: z.output<typeof recipientPreferencesSchema>;
  /** Grows by one at each change. */
  version: number;
  createdAt: string;
  updatedAt: string;
}

/** A page of `GET /v1/recipients`. */
export interface RecipientPage {
  items: RecipientView[];
  /** Continues the same order and `q`; null on the last page. */
  nextCursor: string | null;
}

/** The outcome of one row of a bulk upsert. */
export interface BulkRecipientResult {
  /** The row's position in the body, from 0 (NDJSON: among its non-blank lines). */
  index: number;
  /** The row's id; null when it had none that could be read. */
  id: string | null;
  /** `created`, `updated` (also when it changed nothing), or `error` (nothing stored for it). */
  status: "created" | "updated" | "error";
  /** Why the row was refused: the error body of a single `PUT`. */
  error?: {
    code: string;
    message: string;
    issues?: Array<{ field: string; message: string; value?: unknown }>;
  };
}

/** What `POST /v1/recipients:bulk` answers. */
export interface BulkRecipientsSummary {
  created: number;
  updated: number;
  errors: number;
  /** One per row, in body order. */
  results: BulkRecipientResult[];
}
