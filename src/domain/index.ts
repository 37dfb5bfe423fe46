/**
 * Vocabulary of punctual. The same word means the same thing in code, SQL and docs.
 *
 * - **schedule**: what a user asks for: DTSTART + zone, optional recurrence, an optional
 *   `endsAt`, a state, a payload and one or more reminders.
 * - **reminder**: an offset (ISO 8601 duration, `-PT15M`) relative to each occurrence,
 *   a channel and its target.
 * - **occurrence**: one instant produced by the schedule's recurrence.
 * - **delivery**: one row per (schedule, reminder, occurrence), the unit sent exactly once;
 *   its **delivery key** never changes and is the idempotency key given to channels.
 * - **attempt**: one try at sending a delivery, with its outcome.
 * - **lease**: a time-limited claim on a delivery by one worker (owner, expiry on the
 *   database clock); the claim's attempt number is the fencing token.
 */
import { createHash } from "node:crypto";

/** Lifecycle of a schedule. `invalid`: its stored rule no longer parses (REC-3). */
export const SCHEDULE_STATES = ["active", "paused", "cancelled", "invalid"] as const;
/** One of {@link SCHEDULE_STATES}. */
export type ScheduleState = (typeof SCHEDULE_STATES)[number];

/**
 * Lifecycle of a delivery (docs/architecture.md, "Delivery states"). Waiting states:
 * `pending` (never tried) and `retry` are claimable once due (DEL-3); `paused` holds the
 * waiting rows of a paused or quarantined schedule until it resumes (DEL-10). A digest
 * member (DEL-19) waits `pending` outside the claim index until its digest is formed, then
 * is `grouped`: frozen into that digest until the digest settles.
 */
export const DELIVERY_STATES = [
  "pending",
  "claimed",
  "retry",
  "paused",
  "grouped",
  "sent",
  "dead",
  "in_doubt",
  "skipped",
  "cancelled",
] as const;
/** One of {@link DELIVERY_STATES}. */
export type DeliveryState = (typeof DELIVERY_STATES)[number];

/** States from which nothing moves on its own (an operator may redrive dead / in_doubt). */
export const FINAL_DELIVERY_STATES: readonly DeliveryState[] = [
  "sent",
  "dead",
  "in_doubt",
  "skipped",
  "cancelled",
];

/**
 * Legal transitions: the delivery state machine (docs/architecture.md, "Delivery states",
 * is generated from it). The store's statements only ever perform these: in the test
 * suite a trigger generated from this table refuses any other change of `state` (and any
 * insert in a state not in {@link DELIVERY_INITIAL_STATES}), so every integration test
 * checks the machine. The CHECK constraints of the schema tie lease and timestamp
 * columns to each state.
 */
export const DELIVERY_TRANSITIONS: Readonly<Record<DeliveryState, readonly DeliveryState[]>> = {
  // DEL-19: a digest member is `grouped` when its digest is formed (its membership frozen).
  pending: ["claimed", "grouped", "paused", "skipped", "cancelled"],
  retry: ["claimed", "grouped", "paused", "skipped", "cancelled"],
  // Back to waiting: a retry, a recovered lease, a released claim; held or cancelled when
  // the schedule was paused or cancelled (or the reminder removed) meanwhile.
  // API-11 / API-13: skipped at send when its recipient has no target, opted out or left.
  claimed: ["sent", "retry", "pending", "paused", "dead", "in_doubt", "skipped", "cancelled"],
  // DEL-10: resume puts held rows back (`pending` if never tried, else `retry`).
  paused: ["pending", "retry", "cancelled"],
  // DEL-19: a member ends with its digest's outcome: sent, dead, in doubt with the others, or
  // skipped with them (a recipient without a target or opted out, judged at send).
  grouped: ["sent", "dead", "in_doubt", "skipped"],
  sent: [],
  // DEL-12: redrive; resolve `sent` when the operator learns it arrived after all (the
  // resolve of a dead letter as `dead` only marks it `resolved`, no change of state).
  dead: ["pending", "paused", "sent"],
  in_doubt: ["pending", "paused", "sent", "dead"],
  skipped: [],
  // An edit that brings an occurrence back reopens it; an import that revives its schedule.
  cancelled: ["retry", "pending"],
};

/**
 * The transitions the ledger row (`punctual_deliveries.state`) makes, derived from
 * {@link DELIVERY_TRANSITIONS}: since migration 0050 a claim writes only the delivery's
 * queue row (its lease), so the ledger never stores `claimed` (it reads as `claimed` through
 * the view `punctual_delivery_rows` while the lease is held). A held row's ledger state moves
 * straight from its waiting state (`pending`, `retry`) to where the claim's outcome takes
 * it; a claim given back leaves it where it was (so `claimed → pending` is no stored move,
 * nor `retry → pending`). The test suite's transition trigger enforces this table.
 */
export const DELIVERY_STORED_TRANSITIONS: Readonly<
  Record<DeliveryState, readonly DeliveryState[]>
> = storedTransitions();

function storedTransitions(): Record<DeliveryState, readonly DeliveryState[]> {
  const out = {} as Record<DeliveryState, readonly DeliveryState[]>;
  for (const from of DELIVERY_STATES) {
    if (from === "claimed") {
      out[from] = [];
      continue;
    }
    const own = DELIVERY_TRANSITIONS[from].filter((to) => to !== "claimed");
    const held = DELIVERY_TRANSITIONS[from].includes("claimed")
      ? DELIVERY_TRANSITIONS.claimed.filter((to) => to !== "pending" && to !== from)
      : [];
    out[from] = [...new Set([...own, ...held])];
  }
  return out;
}

/**
 * The states a delivery row is created in: `pending` (planned, triggered or backfilled
 * for an active schedule) or `paused` (planned or backfilled while its schedule is paused).
 */
export const DELIVERY_INITIAL_STATES: readonly DeliveryState[] = ["pending", "paused"];

/** Whether `from → to` is a legal delivery transition. */
export function canTransition(from: DeliveryState, to: DeliveryState): boolean {
  return DELIVERY_TRANSITIONS[from].includes(to);
}

/** Whether the ledger row may move `from → to` ({@link DELIVERY_STORED_TRANSITIONS}). */
export function canStoreTransition(from: DeliveryState, to: DeliveryState): boolean {
  return DELIVERY_STORED_TRANSITIONS[from].includes(to);
}

/** What recovery does with a claim whose lease expired before it settled (DEL-6). */
export type LostLeasePolicy = "retry" | "in_doubt";

/** Why a delivery is dead, skipped or in doubt. Stable codes. */
export const DELIVERY_REASONS = [
  "SEND_FAILED",
  "PERMANENT",
  "RATE_LIMITED",
  "LEASE_EXPIRED",
  "OUTCOME_UNKNOWN",
  "stale",
  "expired",
  "schedule_cancelled",
  "reminder_removed",
  "realigned",
  "resolved",
  // API-11: the recipient has no target for the reminder's channel.
  "NO_TARGET",
  // API-13: the recipient opted out of the reminder's channel or category.
  "OPTED_OUT",
  // API-12: the recipient left the schedule or the registry.
  "recipient_removed",
] as const;
export type DeliveryReason = (typeof DELIVERY_REASONS)[number];

/**
 * The delivery key of (schedule, reminder, occurrence): `dk_` + 32 hex characters of
 * SHA-256 over the three parts. Stable forever; used as the unique key of the deliveries
 * table and as the idempotency key given to channels (webhook-id, Message-ID).
 *
 * API-11: a delivery for a recipient hashes the recipient id too (a fourth part), so each
 * person gets each occurrence once; without one the key is that of the three parts.
 *
 * @param occurrenceAt the occurrence instant (the key uses its ISO 8601 UTC form).
 * @param recipientId the recipient the delivery is for (API-11), or absent.
 */
export function deliveryKey(
  scheduleId: string,
  reminderKey: string,
  occurrenceAt: Date,
  recipientId?: string | null,
): string {
  const parts = `${scheduleId}\u0000${reminderKey}\u0000${occurrenceAt.toISOString()}`;
  const hash = createHash("sha256")
    .update(recipientId == null ? parts : `${parts}\u0000${recipientId}`)
    .digest("hex");
  return `dk_${hash.slice(0, 32)}`;
}

/**
 * API-11 / DEL-9: the delivery key of an occurrence of a **floating** schedule for one
 * recipient. A floating occurrence is a local date-time read in the recipient's zone
 * (RFC 5545 §3.3.5), so the key hashes that local date-time, not the instant: the same
 * occurrence ("2027-01-04 at 09:00") of the same reminder for the same recipient is one
 * delivery whatever zone the recipient is in when it is planned. A zone change then moves
 * a waiting delivery (same key, new instant) and never plans a second one for an
 * occurrence already sent or in flight in the old zone. `dk_` + 32 hex characters of
 * SHA-256 over the schedule id, reminder key, `floating:` + local date-time and the
 * recipient id; it never equals a key of {@link deliveryKey} (whose third part is an
 * instant ending in `Z`).
 *
 * @param occurrenceLocal the occurrence's wall-clock time in the zone it was planned in,
 *   `YYYY-MM-DDTHH:mm:ss` (or `YYYY-MM-DD` for a date-only schedule), after the DST
 *   policy (REC-2): a spring-forward gap shifted to 03:30 is `…T03:30:00`.
 */
export function floatingDeliveryKey(
  scheduleId: string,
  reminderKey: string,
  occurrenceLocal: string,
  recipientId: string,
): string {
  const hash = createHash("sha256")
    .update(
      `${scheduleId}\u0000${reminderKey}\u0000floating:${occurrenceLocal}\u0000${recipientId}`,
    )
    .digest("hex");
  return `dk_${hash.slice(0, 32)}`;
}

/**
 * Retry delay after the `failures`-th failure (DEL-4): min(base · 2^(failures−1), cap),
 * then full jitter in [delay/2, delay]. `random` is injectable for tests.
 *
 * @param failures 1-based count of failures so far.
 * @returns milliseconds.
 */
export function backoffMs(
  failures: number,
  options: { baseMs: number; capMs: number; random?: () => number },
): number {
  const exp = Math.min(options.baseMs * 2 ** Math.max(0, failures - 1), options.capMs);
  const r = (options.random ?? Math.random)();
  return Math.round(exp / 2 + (exp / 2) * r);
}

/** The farthest a reminder offset may reach, in nominal days (about 100 years). */
export const MAX_OFFSET_DAYS = 36_600;

/**
 * Why `text` is not a reminder offset, in words a user can act on (API-1: name the real
 * reason, not only the grammar). Offsets are signed RFC 5545 §3.3.6 durations: weeks alone,
 * or days and/or hours, minutes and whole seconds. Call it for a text already refused;
 * it names, in this order, months or years (no fixed length), a fraction, then the
 * grammar with examples.
 */
export function offsetRefusal(text: unknown): string {
  const example = "such as -PT15M, PT0S, -P1D, P1W or -P1DT2H";
  if (typeof text !== "string") return `must be an ISO 8601 duration ${example}`;
  const body = text.trim().toUpperCase();
  const datePart = body.split("T")[0] ?? "";
  if (/^[+-]?P.*\d(Y|M)/.test(datePart)) {
    return "has months or years, which have no fixed length (RFC 5545 §3.3.6 durations have none): use days or weeks, e.g. -P30D or -P4W";
  }
  if (/\d[.,]\d/.test(body)) {
    return "has a fraction, which RFC 5545 §3.3.6 durations do not allow: use whole units, e.g. PT1S";
  }
  return `must be an ISO 8601 duration ${example}`;
}
