/**
 * HTTP request and response shapes, defined once with zod and shared by the API (which
 * generates its OpenAPI document from them), the CLI and the dashboard (API-1).
 * Field names are a public contract: keep them.
 */
import { rateLimitKeySchema } from "./rate-limits.js";
import { z } from "zod";
import { DELIVERY_STATES, offsetRefusal, SCHEDULE_STATES } from "../domain/index.js";

const isoDuration = /^[+-]?P(?!$)(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+S)?)?$/;

/** ISO 8601 duration with an optional sign: `-PT15M`, `PT0S`, `-P1D`, `P1W`. */
export const offsetSchema = z
  .string()
  .max(40)
  .regex(isoDuration, { error: (issue) => offsetRefusal(issue.input) });

/** Earliest instant any date input may name: 0001-01-01T00:00:00Z (epoch ms). */
export const MIN_INSTANT_MS = -62_135_596_800_000;
/** Latest instant any date input may name: 9999-12-31T23:59:59.999Z (epoch ms). */
export const MAX_INSTANT_MS = 253_402_300_799_999;

/** Whether epoch milliseconds `ms` fall in years 0001–9999 (UTC), the range of every date input. */
export function isInstantInRange(ms: number): boolean {
  return Number.isFinite(ms) && ms >= MIN_INSTANT_MS && ms <= MAX_INSTANT_MS;
}

const RANGE_MESSAGE = "must be in the years 0001 to 9999 (UTC)";

/**
 * An ISO 8601 instant with `Z` or an offset, in the years 0001–9999 once read in UTC: year
 * 0, a negative year or one past 9999 is a 400 naming the field, never a server error.
 */
export const instantSchema = z.iso
  .datetime({ offset: true, message: "must be an ISO 8601 instant with Z or an offset" })
  .refine((v) => isInstantInRange(Date.parse(v)), RANGE_MESSAGE);

const instant = instantSchema;

/** Deepest nesting accepted in a payload (objects and arrays). */
export const MAX_PAYLOAD_DEPTH = 32;

/** Nesting depth of a JSON value, computed without recursion (safe on hostile input). */
export function jsonDepth(value: unknown): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== "object") continue;
    max = Math.max(max, depth + 1);
    if (max > MAX_PAYLOAD_DEPTH) return max;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return max;
}

/** A NUL, or a UTF-16 surrogate without its pair: text PostgreSQL cannot store. */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Whether `text` holds a character PostgreSQL's text and jsonb types refuse. */
export function isUnstorableText(text: string): boolean {
  return UNSTORABLE.test(text);
}

/**
 * Whether any string of a JSON value, key or value, holds a character PostgreSQL refuses
 * (NUL, unpaired surrogate). Walks without recursion (safe on hostile input); call it
 * after the depth check.
 */
export function hasUnstorableText(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "string") {
      if (isUnstorableText(v)) return true;
    } else if (v !== null && typeof v === "object") {
      for (const [k, child] of Object.entries(v)) {
        if (isUnstorableText(k)) return true;
        stack.push(child);
      }
    }
  }
  return false;
}

const UNSTORABLE_MESSAGE =
  "must not contain NUL characters or unpaired UTF-16 surrogates (they cannot be stored)";

/** A string PostgreSQL can store (no NUL, no unpaired surrogate). */
const storableText = () => z.string().refine((v) => !isUnstorableText(v), UNSTORABLE_MESSAGE);

/**
 * Largest payload, in bytes of its JSON text (UTF-8), whatever way it comes in: the API,
 * the CLI, the library, a calendar import (API-1, API-5). Lists show a payload only up to
 * {@link LIST_FIELD_MAX_BYTES}; the single read shows it whole.
 */
export const MAX_PAYLOAD_BYTES = 65_536;

/**
 * Largest payload, template or target a list item carries, bytes of its JSON text: a
 * larger one is left out of the item and marked (`payloadTruncated`, `templateTruncated`,
 * `targetTruncated`: true) (API-3); `GET /v1/schedules/{id}` shows it whole.
 */
export const LIST_FIELD_MAX_BYTES = 2_048;

/**
 * Most characters of a delivery's `lastError` a list item carries (API-3): a longer one is
 * cut there and marked `lastErrorTruncated: true`; `GET /v1/deliveries/{id}` shows it as
 * stored. 500 characters are at most about 3 KiB of JSON text (6 bytes for an escaped
 * control character).
 */
export const LIST_ERROR_MAX_CHARS = 500;

/**
 * Most characters of an error message stored with a delivery and its attempt (`lastError`,
 * `attempts[].error`): the settle keeps the first 2,000 (API-3). A channel's error can quote
 * tenant data (a template error names the value it could not format), so without a bound
 * one delivery's history could hold megabytes.
 */
export const MAX_ERROR_CHARS = 2_000;

/** Most RDATEs or EXDATEs a list item carries; more: `[]` and `rdateTruncated`/`exdateTruncated` (API-3). */
export const LIST_MAX_DATES = 100;

/**
 * Most bytes of the items of one list page (`GET /v1/schedules`), JSON text: a page ends
 * early (with `nextCursor`) rather than pass it (API-3). One item is at most about
 * 300 KiB (50 reminders with fields at the list limits), so a page always has one.
 */
export const LIST_PAGE_MAX_BYTES = 4 * 1024 * 1024;

/** Length of `text` in UTF-8 bytes, counted without allocating (an unpaired surrogate: 3). */
export function utf8Bytes(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/**
 * Size of a JSON value as JSON text, UTF-8 bytes (`undefined`: 0). Call it after the depth
 * check ({@link jsonDepth}): `JSON.stringify` recurses.
 */
export function jsonBytes(value: unknown): number {
  const text = JSON.stringify(value) as string | undefined;
  return text === undefined ? 0 : utf8Bytes(text);
}

/** Any JSON value, nested at most {@link MAX_PAYLOAD_DEPTH} levels, with storable text only. */
export const payloadSchema = z
  .unknown()
  .refine((v) => jsonDepth(v) <= MAX_PAYLOAD_DEPTH, {
    message: `must not nest objects or arrays deeper than ${MAX_PAYLOAD_DEPTH} levels`,
    abort: true,
  })
  .superRefine((v, ctx) => {
    const bytes = jsonBytes(v);
    if (bytes > MAX_PAYLOAD_BYTES)
      ctx.addIssue({
        code: "custom",
        message: `must be at most ${MAX_PAYLOAD_BYTES} bytes as JSON (is ${bytes})`,
        abort: true,
      });
  })
  .refine((v) => !hasUnstorableText(v), UNSTORABLE_MESSAGE);

/** DTSTART: local date-time (`2027-01-04T09:00:00`, read in `tzid`), a date, or an instant. */
export const dtstartSchema = z
  .string()
  .regex(
    /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:?\d{2})?)?$/,
    "must be a local date-time 2027-01-04T09:00:00, a date 2027-01-04, or an instant 2027-01-04T08:00:00Z",
  )
  // An instant is read in UTC; a local time or a date is checked where its zone is known.
  .refine(
    (v) => !/(Z|[+-]\d{2}:?\d{2})$/.test(v) || isInstantInRange(Date.parse(v)),
    RANGE_MESSAGE,
  );

export const webhookTargetSchema = z
  .object({
    url: z.url({ protocol: /^https?$/, message: "must be an http(s) URL" }),
    secret: z.string().min(1).optional(),
  })
  .strict();

/** Longest template field, characters (CH-6). */
const MAX_TEMPLATE_CHARS = 65_536;

/**
 * CH-6: a reminder's Liquid templates. The shape is checked here; that each parses and
 * renders (with the line of the first error) is checked where the channels are known.
 */
export const templateSchema = z
  .object({
    subject: storableText().max(MAX_TEMPLATE_CHARS).optional(),
    text: storableText().max(MAX_TEMPLATE_CHARS).optional(),
    html: storableText().max(MAX_TEMPLATE_CHARS).optional(),
  })
  .strict();

const quietTime = z
  .string()
  .regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be a 24-hour time "HH:MM", e.g. "22:00"');

/**
 * DEL-15: a reminder's quiet window `{ tzid, start, end, days? }`: a delivery due inside
 * it (wall-clock time in `tzid`, `[start, end)`, crossing midnight when `start > end`) is
 * deferred to the window's end. `days` names the days a window STARTS on (RFC 5545
 * weekday names); absent: every day. That the zone exists and start differs from end is
 * checked where the schedule is validated.
 */
export const quietHoursSchema = z
  .object({
    tzid: storableText().min(1).max(64),
    start: quietTime,
    end: quietTime,
    days: z
      .array(z.enum(["MO", "TU", "WE", "TH", "FR", "SA", "SU"]))
      .min(1)
      .max(7)
      .optional(),
  })
  .strict();

/**
 * DEL-17: catch-up bounds of a schedule under misfire `all`: `windowMs` (missed
 * occurrences due longer ago than this are recorded `skipped`, reason `stale`) and
 * `paceMs` (catch-up sends of one reminder spread this far apart, oldest first).
 */
export const catchUpSchema = z
  .object({
    windowMs: z.number().int().min(0).max(31_622_400_000).optional(),
    paceMs: z.number().int().min(0).max(86_400_000).optional(),
  })
  .strict();

/** DEL-19: shortest and longest digest window, ms (1 s and 24 h). */
export const DIGEST_WINDOW_MIN_MS = 1_000;
export const DIGEST_WINDOW_MAX_MS = 86_400_000;
/** DEL-19: most items of one digest; the default. */
export const DIGEST_MAX_ITEMS_LIMIT = 1_000;
export const DIGEST_DEFAULT_MAX_ITEMS = 50;

/**
 * DEL-19: a reminder's digest `{ windowMs, key?, maxItems? }`: its deliveries with the same
 * key (per tenant and channel; default the recipient, else the channel and target) that
 * fall due within `windowMs` of the first are sent as one message with `items`, at the
 * first one's due time + `windowMs`, or as soon as `maxItems` (default 50) are due.
 */
export const digestSchema = z
  .object({
    windowMs: z
      .number()
      .int("must be a whole number of milliseconds")
      .min(DIGEST_WINDOW_MIN_MS, "must be between 1000 (1 s) and 86400000 (24 h) milliseconds")
      .max(DIGEST_WINDOW_MAX_MS, "must be between 1000 (1 s) and 86400000 (24 h) milliseconds"),
    key: storableText().min(1).max(200).optional(),
    maxItems: z
      .number()
      .int("must be a whole number")
      .min(1, `must be between 1 and ${DIGEST_MAX_ITEMS_LIMIT}`)
      .max(DIGEST_MAX_ITEMS_LIMIT, `must be between 1 and ${DIGEST_MAX_ITEMS_LIMIT}`)
      .optional(),
  })
  .strict();

/** One reminder of a schedule. */
export const reminderInputSchema = z
  .object({
    key: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/, "must be 1–64 letters, digits, _ . : -")
      .default("default"),
    offset: offsetSchema.default("PT0S"),
    channel: z.string().min(1).max(64).default("webhook"),
    /** Channel target, e.g. `{ url, secret? }` for `webhook`; checked by the channel. */
    target: z
      .record(z.string(), z.unknown())
      .refine((v) => jsonDepth(v) <= MAX_PAYLOAD_DEPTH, {
        message: `must not nest objects or arrays deeper than ${MAX_PAYLOAD_DEPTH} levels`,
        abort: true,
      })
      .refine((v) => !hasUnstorableText(v), UNSTORABLE_MESSAGE)
      .optional(),
    /**
     * DEL-6: after a crash mid-send, `at-most-once` (default for channels that do not
     * de-duplicate) makes the delivery `in_doubt`; `at-least-once` retries it.
     */
    delivery: z.enum(["at-most-once", "at-least-once"]).nullable().optional(),
    maxAttempts: z.number().int().min(1).max(100).optional(),
    /**
     * CH-6: `{ subject?, text?, html? }` Liquid templates the channel renders. `null` (as a
     * read shows a reminder without templates) is the same as leaving it out.
     */
    template: templateSchema.nullable().optional(),
    /**
     * DEL-11: a reminder kind of the registry; its fields fill the ones this reminder
     * leaves out (copied when the schedule is written). The reminder key defaults to it.
     */
    kind: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/, "must be 1–64 letters, digits, _ . : -")
      .optional(),
    /**
     * DEL-13: the rate limit this reminder's deliveries count against; default its channel
     * name (`null`, as a read shows it, is the same as leaving it out).
     */
    rateLimitKey: rateLimitKeySchema.nullable().optional(),
    /** DEL-15: the recipient's quiet window; deliveries due inside it wait for its end. */
    quietHours: quietHoursSchema.nullable().optional(),
    /**
     * DEL-15 / API-13: `critical` is sent on time even inside quiet hours, and to a
     * recipient who opted out of its channel or category. Default `normal`.
     */
    priority: z.enum(["normal", "critical"]).optional(),
    /** API-13: what kind of reminder this is (`digest`, …): recipients may opt out of it. */
    category: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/, "must be 1–64 letters, digits, _ . : -")
      .optional(),
    /** DEL-19: send this reminder's deliveries in digests (`null`: none). */
    digest: digestSchema.nullable().optional(),
  })
  .strict();

/** Most recipient ids in one request body (API-11); larger audiences go in pages. */
export const MAX_SCHEDULE_RECIPIENTS = 10_000;

/** A recipient id (API-10): a letter or digit, then letters, digits, `_ . : @ + -`; 1–200 characters. */
export const RECIPIENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,199}$/;

/** API-11: one recipient id in a list of a schedule's recipients. */
const recipientIdInListSchema = z
  .string()
  .regex(
    RECIPIENT_ID_PATTERN,
    "must be 1–200 letters, digits or _ . : @ + -, starting with a letter or digit",
  );

/** API-11: recipient ids of a schedule, at most {@link MAX_SCHEDULE_RECIPIENTS}, each once. */
export const scheduleRecipientsSchema = z
  .array(recipientIdInListSchema)
  .max(MAX_SCHEDULE_RECIPIENTS, {
    message: `must list at most ${MAX_SCHEDULE_RECIPIENTS} recipients; add more with PUT /v1/schedules/{id}/recipients`,
  });

/** API-12: recipient ids of one page of `PUT /v1/schedules/{id}/recipients`. */
export const recipientsPageIdsSchema = z
  .array(recipientIdInListSchema)
  .max(MAX_SCHEDULE_RECIPIENTS, {
    message: `a page holds at most ${MAX_SCHEDULE_RECIPIENTS} ids; send more pages`,
  });

export const dstSchema = z
  .object({
    gap: z.enum(["shift", "skip"]).default("shift"),
    overlap: z.enum(["earlier", "later"]).default("earlier"),
  })
  .strict();

/**
 * Longest text of an imported event's SUMMARY and LOCATION, characters (API-5): an event
 * with a longer one is not imported (skipped, with a warning naming its UID, the field and
 * its length), as the API refuses a field over its limit. The title keeps the first
 * {@link MAX_TITLE_CHARS} characters of the SUMMARY.
 */
export const MAX_EVENT_TEXT_CHARS = 2_000;

/**
 * Longest DESCRIPTION of an imported event, characters (API-5): a longer one is not
 * imported (as {@link MAX_EVENT_TEXT_CHARS}); the payload keeps its first 1,000.
 */
export const MAX_EVENT_DESCRIPTION_CHARS = 65_536;

/** Longest external id (an imported event's UID), characters (API-5). */
export const MAX_EXTERNAL_ID_CHARS = 1_000;

/** Longest schedule title, characters (API-1; also checked by the column, migration 0016). */
export const MAX_TITLE_CHARS = 500;

/**
 * Control characters (C0, DEL, C1): a title is one line of text for people; terminal
 * escapes, bells, carriage returns and line feeds in one would reach every operator's
 * terminal and log that prints it.
 */
export const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/;

/** API-1: a schedule's title: 1–{@link MAX_TITLE_CHARS} characters, not blank, no control characters. */
const titleSchema = storableText()
  .min(1)
  .max(MAX_TITLE_CHARS)
  .superRefine((v, ctx) => {
    if (v.length === 0 || isUnstorableText(v)) return; // named by min(1) / storableText
    if (v.trim() === "") ctx.addIssue({ code: "custom", message: "must not be blank" });
    else if (CONTROL_CHARACTERS.test(v))
      ctx.addIssue({
        code: "custom",
        message: "must not contain control characters (tabs, line breaks, escape sequences)",
      });
  });

/** `POST /v1/schedules` body. */
export const createScheduleSchema = z
  .object({
    dtstart: dtstartSchema,
    tzid: storableText().min(1).max(64).default("UTC"),
    rrule: storableText().min(1).max(2_048).nullable().optional(),
    rdate: z.array(dtstartSchema).max(1_000).default([]),
    exdate: z.array(dtstartSchema).max(10_000).default([]),
    endsAt: instant.nullable().optional(),
    expiresAt: instant.nullable().optional(),
    dst: dstSchema.optional(),
    misfire: z.enum(["skip", "latest", "all"]).default("skip"),
    graceMs: z.number().int().min(0).max(604_800_000).default(900_000),
    /** DEL-17: catch-up window and pacing; only with misfire `all`. */
    catchUp: catchUpSchema.nullable().optional(),
    perpetual: z.boolean().default(false),
    payload: payloadSchema.optional(),
    reminders: z.array(reminderInputSchema).min(1).max(50),
    /** API-1: what a person calls the schedule (shown in lists); null or absent: none. */
    title: titleSchema.nullable().optional(),
    /**
     * API-11: the schedule is sent to each of these recipients (ids of the registry); a
     * reminder without a target uses the recipient's target for its channel.
     */
    recipients: scheduleRecipientsSchema.optional(),
    /**
     * API-11: `dtstart` (a local date-time) and the rule are read in each recipient's own
     * zone (RFC 5545 §3.3.5 floating time); needs `recipients` and refuses a `tzid`.
     */
    floating: z.boolean().optional(),
    /** For imports: the calendar/source and the event UID. */
    source: storableText().min(1).max(200).optional(),
    externalId: storableText().min(1).max(MAX_EXTERNAL_ID_CHARS).optional(),
  })
  .strict();

/** `PATCH /v1/schedules/{id}` body: any subset of the create fields. */
export const updateScheduleSchema = createScheduleSchema
  .omit({ source: true, externalId: true })
  .partial()
  .strict();

/**
 * What `createSchedule` takes (API-1), as the HTTP body of `POST /v1/schedules`: `dtstart`
 * (local time with `tzid`, or an instant), an optional `rrule`, `reminders` (key, offset,
 * channel, target), and the policies (DST, misfire, expiry). See docs/api.md.
 */
export type CreateScheduleInput = z.input<typeof createScheduleSchema>;
export type CreateSchedule = z.output<typeof createScheduleSchema>;
export type UpdateScheduleInput = z.input<typeof updateScheduleSchema>;
export type ReminderInput = z.output<typeof reminderInputSchema>;

/** Schedule and delivery states as the API names them (the domain's closed sets). */
export const SCHEDULE_STATE_VALUES = SCHEDULE_STATES;
/**
 * States a schedule view shows: the stored ones, and `finished` for an `active` schedule
 * with no occurrence left to plan and every delivery final (shown, not stored; the
 * `state` filter of lists takes these values too: `active` leaves out finished ones).
 */
export const SCHEDULE_VIEW_STATE_VALUES = [...SCHEDULE_STATES, "finished"] as const;
export const DELIVERY_STATE_VALUES = DELIVERY_STATES;

/** A reminder as returned by the API (target secrets redacted). */
export interface ReminderView {
  key: string;
  offset: string;
  channel: string;
  target: Record<string, unknown>;
  delivery: "at-most-once" | "at-least-once" | null;
  maxAttempts: number;
  /** CH-6: the reminder's templates, or null. */
  template: { subject?: string; text?: string; html?: string } | null;
  /** DEL-13: the reminder's rate-limit key; null: its channel name. */
  rateLimitKey: string | null;
  /** DEL-15: the quiet window, or null. */
  quietHours: {
    tzid: string;
    start: string;
    end: string;
    days?: Array<"MO" | "TU" | "WE" | "TH" | "FR" | "SA" | "SU">;
  } | null;
  /** DEL-15: `critical` bypasses quiet hours (and, API-13, a recipient's opt-outs). */
  priority: "normal" | "critical";
  /** API-13: the reminder's category; absent when it has none. */
  category?: string;
  /** DEL-19: the reminder's digest settings; absent when it has none. */
  digest?: { windowMs: number; key?: string; maxItems?: number };
  /**
   * API-3: present (true) on a list item whose template is larger than
   * {@link LIST_FIELD_MAX_BYTES}: `template` is then null there; the single read has it.
   */
  templateTruncated?: true;
  /** API-3: as `templateTruncated`, for a target: `target` is then `{}` in the list. */
  targetTruncated?: true;
}

/** A schedule as returned by the API. Instants are ISO 8601 UTC with `Z`. */
export interface ScheduleView {
  id: string;
  version: number;
  state: (typeof SCHEDULE_VIEW_STATE_VALUES)[number];
  invalidReason: string | null;
  /** DTSTART as given (local, all-day date, or an instant with `Z` or an offset). */
  dtstart: string;
  /**
   * DTSTART in one form whatever it was given as: its wall clock in `tzid` with the
   * zone's UTC offset then (`2027-01-04T09:00:00+01:00`), or the date of an all-day
   * schedule; null when the stored value cannot be read.
   */
  dtstartLocal: string | null;
  /**
   * The zone of `dtstart` and the rule; null on a floating schedule (API-11), which has
   * no zone of its own.
   */
  tzid: string | null;
  /**
   * API-11: present (true) on a floating schedule for recipients: `dtstart` and the rule
   * are read in each recipient's own zone (RFC 5545 §3.3.5), and `tzid` is null.
   */
  floating?: true;
  /** API-11: how many recipients a schedule for recipients has; single reads only. */
  recipientCount?: number;
  rrule: string | null;
  rdate: string[];
  exdate: string[];
  endsAt: string | null;
  expiresAt: string | null;
  dst: { gap: "shift" | "skip"; overlap: "earlier" | "later" };
  misfire: "skip" | "latest" | "all";
  graceMs: number;
  /** DEL-17: catch-up bounds under misfire `all`, or null. */
  catchUp: { windowMs?: number; paceMs?: number } | null;
  perpetual: boolean;
  payload: unknown;
  /**
   * API-3: present (true) on a list item whose payload is larger than
   * {@link LIST_FIELD_MAX_BYTES}: `payload` is then null there; the single read has it.
   */
  payloadTruncated?: true;
  /** API-3: present (true) on a list item with more than {@link LIST_MAX_DATES} RDATEs: `rdate` is then `[]` there. */
  rdateTruncated?: true;
  /** API-3: as `rdateTruncated`, for EXDATEs. */
  exdateTruncated?: true;
  reminders: ReminderView[];
  /** What a person calls it (an imported event's SUMMARY), or null. */
  title: string | null;
  source: string | null;
  externalId: string | null;
  createdAt: string;
  updatedAt: string;
  cancelledAt: string | null;
}

/** A delivery as returned by the API. */
export interface DeliveryView {
  id: number;
  deliveryKey: string;
  scheduleId: string;
  reminderKey: string;
  occurrenceAt: string;
  dueAt: string;
  runAt: string;
  state: (typeof DELIVERY_STATE_VALUES)[number];
  /**
   * Attempts spent in this round: claims so far minus Retry-After deferrals (DEL-13) minus
   * the attempts of earlier rounds; at most `maxAttempts` once settled.
   */
  attempt: number;
  /** DEL-12: 1 for the first attempts, then one more per redrive ("attempt 1 of 3, round 2"). */
  round: number;
  failures: number;
  maxAttempts: number;
  /** Tries deferred by a receiver's Retry-After, spending no attempt (DEL-13). */
  deferrals: number;
  channel: string;
  leaseOwner: string | null;
  leaseExpiresAt: string | null;
  sentAt: string | null;
  finishedAt: string | null;
  reason: string | null;
  /** The error of the latest failed attempt while not sent; null once `sent` (the attempts keep it). */
  lastError: string | null;
  /**
   * In lists only: `lastError` is longer than {@link LIST_ERROR_MAX_CHARS} and was cut
   * there; the single read has it as stored (API-3).
   */
  lastErrorTruncated?: true;
  late: boolean;
  /** DEL-15: the instant a delivery due in quiet hours was deferred to (`runAt` started there), or null. */
  deferredUntil: string | null;
  /** DEL-15: why it was deferred (`QUIET_HOURS`), or null. */
  deferredReason: string | null;
  /** API-11: the recipient it is for; absent on deliveries of schedules without recipients. */
  recipientId?: string;
  /**
   * API-13: what its critical reminder went past (`QUIET_HOURS`: a quiet window it was due
   * in; `OPTED_OUT`: the recipient's opt-out); absent when nothing.
   */
  bypassed?: string[];
  /** DEL-19: the digest key of a digest member; absent on other deliveries. */
  digestKey?: string;
  /**
   * DEL-19: the digest (`dg_…`) the member was sent in (or is being sent in, `grouped`),
   * the idempotency key of that message; absent until its digest is formed.
   */
  digestId?: string;
  createdAt: string;
  updatedAt: string;
}

/** One recorded attempt (DEL-14). */
export interface AttemptView {
  attempt: number;
  worker: string;
  startedAt: string;
  endedAt: string;
  outcome: string;
  settled: boolean;
  status: number | null;
  messageId: string | null;
  error: string | null;
}

/** Largest `limit` of a list page. */
export const MAX_PAGE_LIMIT = 1_000;

/**
 * API-3: a page size: a whole number from 1 to `max`, as a number or as digits only (a
 * query string: `1e2`, `0x10`, ` 5`, `5.0` are refused). Accepts a number too, so a query
 * parsed once (at the route) parses again unchanged. Absent: `fallback`.
 */
export function pageLimitSchema(max = MAX_PAGE_LIMIT, fallback = 100) {
  return z
    .union([z.number(), z.string()])
    .transform((v, ctx) => {
      const n = typeof v === "number" ? v : /^[0-9]{1,9}$/.test(v) ? Number(v) : Number.NaN;
      if (!Number.isSafeInteger(n) || n < 1 || n > max) {
        ctx.issues.push({
          code: "custom",
          message: `must be a whole number from 1 to ${max}, digits only`,
          input: v,
        });
        return z.NEVER;
      }
      return n;
    })
    .default(fallback)
    .meta({ description: `Page size: 1 to ${max} (default ${fallback})` });
}

/**
 * API-3: listing order by the stable key: `asc` (oldest first) or `desc` (newest first).
 * `oldest` and `newest` are accepted as their older spellings.
 */
export const listOrderSchema = z
  .enum(["asc", "desc", "oldest", "newest"])
  .default("asc")
  .transform((o): "asc" | "desc" => (o === "newest" || o === "desc" ? "desc" : "asc"));

/**
 * API-3: `total=true` also answers `total` (`{ value, exact }`): how many rows the filters
 * match, exact when that is cheap to count, else the planner's estimate (`exact: false`).
 */
const listTotalSchema = z
  .union([z.boolean(), z.enum(["true", "false"]).transform((v) => v === "true")])
  .optional()
  .meta({ description: "Also answer `total`, the rows the filters match (exact or estimated)" });

/** An instant bound of a list filter: ISO 8601 with an offset. */
const instantBound = z.iso.datetime({
  offset: true,
  message: "must be an ISO 8601 instant with an offset, e.g. 2027-01-05T08:00:00Z",
});

/** `GET /v1/deliveries` query. */
export const listDeliveriesQuerySchema = z
  .object({
    scheduleId: z.uuid().optional(),
    state: z.enum(DELIVERY_STATE_VALUES).optional(),
    /** API-3: only the deliveries of schedules with this source (an import's calendar name). */
    source: z.string().min(1).max(200).optional(),
    /** API-3: only the deliveries sent through this channel. */
    channel: z.string().min(1).max(200).optional(),
    /** API-3: only the deliveries due at or after this instant. */
    dueFrom: instantBound.optional(),
    /** API-3: only the deliveries due before this instant. */
    dueTo: instantBound.optional(),
    /** API-3: by id: `asc` (oldest first, the default) or `desc` (newest first). */
    order: listOrderSchema,
    total: listTotalSchema,
    limit: pageLimitSchema(),
    /** Opaque cursor from the previous page's `nextCursor` (same order and filters). */
    cursor: z.string().max(1_000).optional(),
    /** Older keyset form: the rows past this id in the listing order. */
    after: z
      .union([z.number().int().min(0), z.string().regex(/^[0-9]{1,18}$/, "digits only")])
      .transform(Number)
      .optional(),
  })
  .strict();

/** `GET /v1/schedules` query. */
export const listSchedulesQuerySchema = z
  .object({
    /** `active` leaves out the finished ones; `finished` is the active ones with nothing left. */
    state: z.enum(SCHEDULE_VIEW_STATE_VALUES).optional(),
    /** API-3: only the schedules of this source (an import's calendar name, an upsert's system). */
    source: z.string().min(1).max(200).optional(),
    /** API-3: a case-insensitive substring of the title or the external id. */
    q: z.string().min(1).max(200).optional(),
    /** API-3: by creation: `asc` (oldest first, the default) or `desc` (newest first). */
    order: listOrderSchema,
    total: listTotalSchema,
    limit: pageLimitSchema(),
    /** Opaque cursor from the previous page's `nextCursor` (same order and filters). */
    cursor: z.string().max(1_000).optional(),
  })
  .strict();

/** `GET /v1/imports` query (API-3, API-5). */
export const listImportsQuerySchema = z
  .object({
    /** Only the imports of this source (the calendar's name). */
    source: z.string().min(1).max(200).optional(),
    /** Only the imports written at or after this instant. */
    importedFrom: instantBound.optional(),
    /** Only the imports written before this instant. */
    importedTo: instantBound.optional(),
    /** By id: `asc` (oldest first, the default) or `desc` (newest first). */
    order: listOrderSchema,
    limit: pageLimitSchema(),
    /** Opaque cursor from the previous page's `nextCursor` (same order and filters). */
    cursor: z.string().max(1_000).optional(),
  })
  .strict();

/**
 * One calendar import, as `GET /v1/imports` lists it (API-5): `running` from the moment its
 * file was read (an asynchronous import: from its request) with its progress, then
 * `succeeded` or `failed`. The counts are those written so far.
 */
export interface ImportRunView {
  id: number;
  source: string;
  status: "running" | "succeeded" | "failed";
  /** When it started, ISO 8601; null for imports recorded before progress was. */
  startedAt: string | null;
  /** When it ended (its writes finished, or it failed), ISO 8601; while running, its start. */
  importedAt: string;
  /** Events read from the file (overrides included); 0 until read. */
  events: number;
  created: number;
  updated: number;
  unchanged: number;
  cancelled: number;
  skipped: number;
  warnings: number;
  /**
   * Per chunk (OPS-12): chunks committed of how many, changes (creates, updates, cancels)
   * written of how many. All 0 until the events are compared with what is stored.
   */
  progress: { chunksDone: number; chunksTotal: number; changesDone: number; changesTotal: number };
  /** Why a failed import failed (`abandoned: …` when its process died); else null. */
  error: string | null;
}

/**
 * One import with its lists, as `GET /v1/imports/{id}` answers it (API-5): the skipped
 * events, the warning texts and the zones, once the file is read (else null).
 */
export interface ImportView extends ImportRunView {
  details: {
    skipped: { uid: string | null; line: number | null; reason: string }[];
    warnings: string[];
    calendarTzid: string | null;
    floatingTzid: string;
  } | null;
}

/** `GET /v1/instances` query (API-3, OPS-3). */
export const listInstancesQuerySchema = z
  .object({
    /** `running` (not stopped; a stale one included) or `stopped`. */
    state: z.enum(["running", "stopped"]).optional(),
    /** Only this role (`start`, `worker`). */
    role: z.string().min(1).max(100).optional(),
    /** By start: `asc` (oldest first, the default) or `desc` (latest first). */
    order: listOrderSchema,
    limit: pageLimitSchema(),
    /** Opaque cursor from the previous page's `nextCursor` (same order and filters). */
    cursor: z.string().max(1_000).optional(),
  })
  .strict();

/** Error body of every 4xx/5xx reply. */
export interface ErrorBody {
  error: {
    code: string;
    message: string;
    issues?: Array<{ field: string; message: string; value?: unknown }>;
    /** `RESOURCE_BUSY` (503, Retry-After): the path of the resource another transaction holds locked. */
    resource?: string;
  };
}
