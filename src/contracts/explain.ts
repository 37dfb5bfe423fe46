/**
 * OPS-16: the explanation of a schedule's occurrences — `GET /v1/schedules/{id}/explain`,
 * `GET /v1/deliveries/{id}/explain`, `punctual schedules explain`. One entry per
 * occurrence × reminder (× recipient, once schedules have recipients) that the rule
 * expects in the window or that a stored delivery row records, with a verdict, the reason
 * for it and the timeline of what happened.
 */
import { z } from "zod";
import { pageLimitSchema } from "./index.js";

/**
 * What became of one expected or recorded delivery:
 * - `sent`: the channel took it (or an operator resolved it as sent);
 * - `pending`: waiting for its due time, or being sent now;
 * - `deferred`: past its due time and held for a known reason (quiet hours `QUIET_HOURS`,
 *   an empty rate-limit bucket `RATE_LIMITED`, an open circuit of its target host
 *   `CIRCUIT_OPEN`, a Retry-After reply `RETRY_AFTER`, a paused schedule `PAUSED`) or
 *   waiting to retry (`RETRY`);
 * - `skipped`: will never be sent, by a rule (a `stale` misfire, the expiry, …);
 * - `failed`: dead after its attempts (or a permanent error);
 * - `in_doubt`: the lease was lost mid-send and the channel cannot say whether it arrived;
 * - `cancelled`: the schedule was cancelled, the reminder removed, or an edit moved it away;
 * - `not_planned`: the rule expects it, no delivery row exists; `reason` says why.
 */
export const EXPLAIN_VERDICTS = [
  "sent",
  "pending",
  "deferred",
  "skipped",
  "failed",
  "in_doubt",
  "cancelled",
  "not_planned",
] as const;
/** One of {@link EXPLAIN_VERDICTS}. */
export type ExplainVerdict = (typeof EXPLAIN_VERDICTS)[number];

/**
 * Why an expected delivery has no row (`not_planned`): the schedule is paused
 * (`schedule_paused`), quarantined (`schedule_invalid: <its reason>`) or cancelled
 * (`schedule_cancelled`); the occurrence is before the schedule existed
 * (`before_schedule_existed`); planning has not reached it yet
 * (`beyond_planning_horizon`); it lies past the expansion cap of an unbounded series
 * (`cap_reached`, REC-5 / OPS-12); or nothing explains the gap (`not_recorded`: a row
 * removed by retention or a purge, or an occurrence an edit added in the past).
 */
export const NOT_PLANNED_REASONS = [
  "schedule_paused",
  "schedule_invalid",
  "schedule_cancelled",
  "before_schedule_existed",
  "beyond_planning_horizon",
  "cap_reached",
  "not_recorded",
] as const;

/** Kinds of timeline event, oldest first in `events`. */
export const EXPLAIN_EVENT_TYPES = [
  "planned",
  "claimed",
  "digested",
  "attempt",
  "deferred",
  "sent",
  "skipped",
  "failed",
  "in_doubt",
  "cancelled",
  "redrive",
  "resolve",
] as const;

/** One event of an entry's timeline. Fields that do not apply to its `type` are left out. */
export interface ExplainEvent {
  /** One of {@link EXPLAIN_EVENT_TYPES}. */
  type: (typeof EXPLAIN_EVENT_TYPES)[number];
  /** When it happened, ISO 8601 UTC. */
  at: string;
  /**
   * Who: the scheduler process (instance id) that claimed or tried it, or the operator
   * (`api-key:<id>`, `session:<…>`, `local`) of a redrive or resolve. Planning does not
   * record its process: `unknown` on `planned`.
   */
  by?: string;
  /** `attempt`: its number (the fencing token, DEL-2). */
  attempt?: number;
  /** `attempt`: when the try ended, ISO 8601 UTC. */
  endedAt?: string;
  /** `attempt`: `sent`, `transient`, `permanent`, `rate_limited`, `lease_expired` or `timeout`. */
  outcome?: string;
  /** `attempt`: false when the settle found the lease lost (the try changed nothing). */
  settled?: boolean;
  /** `attempt`: the channel's status code (the HTTP status of a webhook). */
  status?: number;
  /** `attempt`: the error the channel reported, classified by `outcome`. */
  error?: string;
  /** `claimed`: when the lease runs out, ISO 8601 UTC. */
  leaseExpiresAt?: string;
  /** `deferred`: until when, ISO 8601 UTC (an open circuit's next probe, a bucket's next token, …). */
  until?: string;
  /** `deferred`, `skipped`, `failed`, `in_doubt`, `cancelled`, `resolve`: the stable reason code. */
  reason?: string;
  /**
   * DEL-19: `digested` (the member was frozen into a digest: when, which, how many items),
   * and `sent`, `failed`, `in_doubt`, `skipped` of a digest member: the digest id (`dg_…`),
   * the idempotency key of the one message that carried it.
   */
  digestId?: string;
  /** DEL-19: `digested`: how many items the digest has. */
  items?: number;
}

/** One occurrence × reminder (× recipient) of the window. */
export interface ExplainEntry {
  /** The occurrence of the rule (or the instant a trigger asked for), ISO 8601 UTC. */
  occurrenceAt: string;
  reminderKey: string;
  /**
   * The recipient, when the schedule has recipients (one entry per recipient); left out
   * otherwise.
   */
  recipientId?: string;
  /** When the reminder is due: the occurrence plus the reminder's offset, ISO 8601 UTC. */
  dueAt: string;
  verdict: ExplainVerdict;
  /** The stable reason code of the verdict, or null (`sent`, a `pending` row on time). */
  reason: string | null;
  /** The delivery row, when one exists. */
  deliveryId: number | null;
  /** True for a row an operator triggered (not an occurrence of the rule, API-9). */
  triggered: boolean;
  /** DEL-19: the digest it was sent in (or is being sent in); absent otherwise. */
  digestId?: string;
  /** The timeline, oldest first. */
  events: ExplainEvent[];
}

/** `GET /v1/schedules/{id}/explain` reply: one page of the window's entries. */
export interface ScheduleExplanation {
  scheduleId: string;
  /** The schedule's state now. */
  state: string;
  /** Start of the window (inclusive, on `dueAt`), ISO 8601 UTC. */
  from: string;
  /** End of the window (exclusive, on `dueAt`), ISO 8601 UTC. */
  to: string;
  /** Entries ordered by occurrence, then reminder key, then delivery id. */
  entries: ExplainEntry[];
  /** Cursor of the next page (same window), or null on the last page. */
  nextCursor: string | null;
  /**
   * False when only recorded rows are listed: the rule could not be expanded (an invalid
   * schedule whose rule does not parse), or the schedule is for recipients (its rows are
   * listed per recipient; no `not_planned` entry is computed for them). True otherwise.
   */
  complete: boolean;
}

/** `GET /v1/deliveries/{id}/explain` reply. */
export interface DeliveryExplanation {
  scheduleId: string;
  entry: ExplainEntry;
}

/** Longest explain window (OPS-12): 366 days, ms. */
export const EXPLAIN_MAX_WINDOW_MS = 366 * 86_400_000;
/** Default window start: this long before now, ms (7 days). */
export const EXPLAIN_DEFAULT_BACK_MS = 7 * 86_400_000;
/** Default window end: this long after now, ms (1 day). */
export const EXPLAIN_DEFAULT_AHEAD_MS = 86_400_000;
/** Most entries of one page. */
export const EXPLAIN_MAX_LIMIT = 10_000;

const instant = z.iso.datetime({
  offset: true,
  message: "must be an ISO 8601 instant with an offset, e.g. 2027-01-05T08:00:00Z",
});

/** `GET /v1/schedules/{id}/explain` query. */
export const explainQuerySchema = z
  .object({
    /** Window start on the due time (inclusive); default 7 days before now. */
    from: instant.optional(),
    /** Window end on the due time (exclusive); default 1 day after now. At most 366 days after `from`. */
    to: instant.optional(),
    /** Entries per page, 1–10,000; default 1,000. */
    limit: pageLimitSchema(EXPLAIN_MAX_LIMIT, 1_000),
    /** Opaque cursor from the previous page's `nextCursor` (same window). */
    cursor: z.string().max(1_000).optional(),
  })
  .strict();

/** `GET /v1/schedules/{id}/explain` query, as callers give it. */
export type ExplainQuery = z.input<typeof explainQuerySchema>;
