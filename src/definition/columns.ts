/**
 * A checked schedule body as the store writes it: the definition columns of
 * `punctual_schedules` and the rows of `punctual_reminders` (API-1). Pure.
 */
import { ruleInputOfBody, type ReminderBody, type ScheduleBody } from "./body.js";

/** The definition columns of a schedule, as the store writes them. */
export interface DefinitionColumns {
  dtstart: string;
  tzid: string;
  rrule: string | null;
  rdate: readonly string[];
  exdate: readonly string[];
  /** Whether it has more than one occurrence (a rule or RDATEs). */
  recurring: boolean;
  /** ISO 8601 instants or null. */
  endsAt: string | null;
  expiresAt: string | null;
  dstGap: "shift" | "skip";
  dstOverlap: "earlier" | "later";
  misfire: "skip" | "latest" | "all";
  graceMs: number;
  perpetual: boolean;
  /** The payload as JSON text. */
  payloadJson: string;
  /** DEL-17: catch-up bounds as JSON text, or null (absent: null). Not written by bulk creates. */
  catchUpJson?: string | null;
  /** The schedule's title (at most 500 characters, validated before), or null (absent: null). */
  title?: string | null;
}

/** A reminder row to write. */
export interface ReminderColumns {
  key: string;
  /** ISO 8601 duration, signed. */
  offset: string;
  channel: string;
  /** The target as JSON text. */
  targetJson: string;
  /** DEL-6 override; null: the channel decides. */
  onLostLease: "retry" | "in_doubt" | null;
  maxAttempts: number;
  /** CH-6: the template as JSON text, or null (absent: null). */
  templateJson?: string | null;
  /** DEL-13: the limiter key, or null (absent: null, the channel name). */
  rateLimitKey?: string | null;
  /** DEL-15: the quiet window as JSON text, or null (absent: null). Not written by bulk creates. */
  quietHoursJson?: string | null;
  /** DEL-15: `critical` bypasses quiet hours; null or absent: normal. */
  priority?: "normal" | "critical" | null;
  /** API-13: the reminder's category; null or absent: none. */
  category?: string | null;
  /** DEL-19: the digest settings as JSON text, or null (absent: null). */
  digestJson?: string | null;
}

/** The definition columns of a checked body. */
export function definitionColumns(body: ScheduleBody): DefinitionColumns {
  const { dst: _dst, ...rule } = ruleInputOfBody(body);
  return {
    ...rule,
    tzid: body.tzid,
    rrule: rule.rrule ?? null,
    rdate: body.rdate,
    exdate: body.exdate,
    recurring: Boolean(body.rrule) || body.rdate.length > 0,
    endsAt: rule.endsAt ?? null,
    expiresAt: body.expiresAt ?? null,
    dstGap: body.dst?.gap ?? "shift",
    dstOverlap: body.dst?.overlap ?? "earlier",
    misfire: body.misfire,
    graceMs: body.graceMs,
    perpetual: body.perpetual,
    payloadJson: JSON.stringify(body.payload ?? null),
    catchUpJson: body.catchUp ? JSON.stringify(body.catchUp) : null,
    title: body.title ?? null,
  };
}

/**
 * The reminder rows of a checked body.
 * @param defaultMaxAttempts the configured `maxAttempts` a reminder without one gets.
 */
export function reminderColumns(
  reminders: readonly ReminderBody[],
  defaultMaxAttempts: number,
): ReminderColumns[] {
  return reminders.map((r) => ({
    key: r.key,
    offset: r.offset,
    channel: r.channel,
    targetJson: JSON.stringify(r.target ?? {}),
    onLostLease:
      r.delivery === "at-least-once" ? "retry" : r.delivery === "at-most-once" ? "in_doubt" : null,
    maxAttempts: r.maxAttempts ?? defaultMaxAttempts,
    templateJson: r.template ? JSON.stringify(r.template) : null,
    rateLimitKey: r.rateLimitKey ?? null,
    quietHoursJson: r.quietHours ? JSON.stringify(r.quietHours) : null,
    priority: r.priority === "critical" ? "critical" : null,
    category: r.category ?? null,
    digestJson: r.digest ? JSON.stringify(r.digest) : null,
  }));
}
