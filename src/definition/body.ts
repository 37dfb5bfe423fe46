/**
 * A schedule's definition as a request body carries it (API-1): its type, the one
 * normalised spelling of what can be written two ways, the recurrence part the rule
 * engine reads (REC-1), and the body a stored schedule reads back as. Pure: no I/O.
 */
import type { z } from "zod";
import type { createScheduleSchema, ReminderView } from "../contracts/index.js";
import { canonicalTimeZone } from "../recurrence/index.js";
import type { DstPolicy, RecurrenceInput } from "../recurrence/types.js";

/**
 * A schedule body after its shape check (`createScheduleSchema`, defaults filled): what a
 * create validates, stores and hashes. Extend the schema, and this follows.
 */
export type ScheduleBody = z.output<typeof createScheduleSchema>;
/** One reminder of a {@link ScheduleBody}. */
export type ReminderBody = ScheduleBody["reminders"][number];

/** The fields of a schedule body that make its recurrence (REC-1). */
export const RULE_FIELDS = [
  "dtstart",
  "tzid",
  "rrule",
  "rdate",
  "exdate",
  "endsAt",
  "dst",
] as const;

/**
 * API-1: one spelling for what may be written two ways, so views, filters and hashes see
 * one form: the zone as the zone database spells it, the rule without its optional
 * `RRULE:` prefix (a doubled prefix is left as sent: the strict rule check refuses it).
 * Changes `body` in place and returns it.
 * @throws RangeError from `canonicalTimeZone` only for a zone it cannot read (callers
 *   that have not checked the zone yet catch it; the rule check names the zone).
 */
export function normaliseBody<T extends Pick<ScheduleBody, "tzid" | "rrule">>(body: T): T {
  body.tzid = canonicalTimeZone(body.tzid);
  if (typeof body.rrule === "string" && /^\s*RRULE:(?!\s*RRULE:)/i.test(body.rrule)) {
    body.rrule = body.rrule.trim().slice("RRULE:".length).trimStart();
  }
  return body;
}

/** The recurrence of a checked schedule body, as the rule engine reads it (REC-1). */
export function ruleInputOfBody(
  body: Pick<ScheduleBody, (typeof RULE_FIELDS)[number]>,
): RecurrenceInput {
  return {
    dtstart: body.dtstart,
    tzid: body.tzid,
    rrule: body.rrule ?? null,
    rdate: body.rdate,
    exdate: body.exdate,
    endsAt: body.endsAt ?? null,
    dst: body.dst,
  };
}

/**
 * The recurrence fields of a body as it was sent, before any check (`dtstart`, `tzid`,
 * `rrule`, `rdate`, `exdate`, `endsAt`, `dst`), or null when it has no `dtstart` text.
 * Only reads: values of the wrong type are left out for the checks to name.
 */
export function ruleInputOfRaw(raw: unknown): RecurrenceInput | null {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return null;
  const body = raw as Record<string, unknown>;
  if (typeof body.dtstart !== "string") return null;
  const texts = (v: unknown): string[] =>
    Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
  return {
    dtstart: body.dtstart,
    tzid: typeof body.tzid === "string" ? body.tzid : "UTC",
    rrule: typeof body.rrule === "string" ? body.rrule : null,
    rdate: texts(body.rdate),
    exdate: texts(body.exdate),
    endsAt: typeof body.endsAt === "string" ? body.endsAt : null,
    ...(body.dst && typeof body.dst === "object" && !Array.isArray(body.dst)
      ? { dst: { ...(body.dst as Partial<DstPolicy>) } }
      : {}),
  };
}

/** The recurrence columns of a stored schedule row (`punctual_schedules`). */
export interface StoredRuleColumns {
  dtstart: string;
  tzid: string;
  rrule: string | null;
  rdate: string[];
  exdate: string[];
  ends_at: Date | null;
  dst_gap: DstPolicy["gap"];
  dst_overlap: DstPolicy["overlap"];
}

/** The recurrence of a stored schedule row, as the rule engine reads it (REC-1). */
export function ruleInputOfRow(row: StoredRuleColumns): RecurrenceInput {
  return {
    dtstart: row.dtstart,
    tzid: row.tzid,
    rrule: row.rrule,
    rdate: row.rdate,
    exdate: row.exdate,
    endsAt: row.ends_at?.toISOString() ?? null,
    dst: { gap: row.dst_gap, overlap: row.dst_overlap },
  };
}

/** A stored reminder row's columns (`punctual_reminders`), as a body reads them back. */
export interface StoredReminderColumns {
  key: string;
  offset_duration: string;
  channel: string;
  target: Record<string, unknown>;
  on_lost_lease: "retry" | "in_doubt" | null;
  max_attempts: number;
  template: ReminderView["template"];
  rate_limit_key: string | null;
  quiet_hours: ReminderView["quietHours"];
  priority: "normal" | "critical" | null;
  /** API-13: the reminder's category, or null (absent in rows of older releases). */
  category?: string | null;
  /** DEL-19: the reminder's digest settings, or null (absent in rows of older releases). */
  digest?: { windowMs: number; key?: string; maxItems?: number } | null;
}

/**
 * The body a stored schedule reads back as (DEL-9: an edit's patch is merged onto it):
 * its view's definition fields and its reminders with their targets unredacted, each
 * optional field present only when stored, so the body checks to what was stored.
 */
export function bodyOfStored(
  view: Pick<
    ScheduleBody,
    "dtstart" | "tzid" | "rdate" | "exdate" | "misfire" | "graceMs" | "perpetual"
  > & {
    rrule: string | null;
    endsAt: string | null;
    expiresAt: string | null;
    dst: DstPolicy;
    catchUp: unknown;
    payload: unknown;
    title: string | null;
  },
  reminders: readonly StoredReminderColumns[],
): Record<string, unknown> {
  return {
    dtstart: view.dtstart,
    tzid: view.tzid,
    rrule: view.rrule,
    rdate: view.rdate,
    exdate: view.exdate,
    endsAt: view.endsAt,
    expiresAt: view.expiresAt,
    dst: view.dst,
    misfire: view.misfire,
    graceMs: view.graceMs,
    catchUp: view.catchUp,
    perpetual: view.perpetual,
    payload: view.payload,
    title: view.title,
    reminders: reminders.map((r) => ({
      key: r.key,
      offset: r.offset_duration,
      channel: r.channel,
      target: r.target,
      ...(r.on_lost_lease
        ? { delivery: r.on_lost_lease === "retry" ? "at-least-once" : "at-most-once" }
        : {}),
      maxAttempts: r.max_attempts,
      ...(r.template ? { template: r.template } : {}),
      ...(r.rate_limit_key ? { rateLimitKey: r.rate_limit_key } : {}),
      ...(r.quiet_hours ? { quietHours: r.quiet_hours } : {}),
      ...(r.priority ? { priority: r.priority } : {}),
      ...(r.category ? { category: r.category } : {}),
      ...(r.digest ? { digest: r.digest } : {}),
    })),
  };
}
