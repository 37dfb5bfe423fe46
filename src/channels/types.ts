/**
 * The Channel port: how a delivery leaves punctual. Adapters live beside this file.
 *
 * A channel's `send` either resolves (the side effect happened: settle as `sent`) or
 * throws one of the steering errors of `src/errors/`:
 * - `PermanentError`: never retried (DEL-5), the delivery is dead now;
 * - `TransientError`: retried with backoff while attempts remain (DEL-4);
 * - `RateLimitedError`: retried after `retryAfterMs`, spending no attempt (DEL-13).
 * Any other thrown value counts as transient.
 */
import type { ReminderTemplate } from "./template.js";

/** DEL-19: one item of a digest: a member delivery. */
export interface DigestItem {
  /** The member delivery's id and key. */
  deliveryId: number;
  deliveryKey: string;
  scheduleId: string;
  /** The schedule's title, or null. */
  title: string | null;
  reminderKey: string;
  occurrenceAt: Date;
  dueAt: Date;
  /** The schedule's payload (any JSON), as it is at send time. */
  payload: unknown;
}

/** DEL-19: what makes a {@link ChannelDelivery} a digest: one message for many deliveries. */
export interface DigestOfDelivery {
  /** The digest id (`dg_…`): the idempotency key of the message. */
  id: string;
  /** The digest key its members share (per tenant and channel). */
  key: string;
  /** The members, oldest due first; each is in this digest only. */
  items: DigestItem[];
}

/** What a channel receives about one delivery. Instants are `Date`s (UTC). */
export interface ChannelDelivery {
  /** Stable idempotency key of (schedule, reminder, occurrence); never changes across attempts. */
  deliveryKey: string;
  scheduleId: string;
  reminderKey: string;
  /** The occurrence this reminder is about. */
  occurrenceAt: Date;
  /** When the reminder was due (occurrence + offset, after quiet-hour deferral). */
  dueAt: Date;
  /**
   * The attempt this try spends, 1-based (at most the reminder's `maxAttempts`). A try after
   * a Retry-After deferral repeats the number: a deferral spends no attempt (DEL-13).
   */
  attempt: number;
  /**
   * True when the first attempt started more than 1 s after the due time (set at the first
   * claim, or by the misfire sweep when it keeps a missed occurrence); a retry does not set it.
   */
  late: boolean;
  /** The schedule's payload (any JSON). */
  payload: unknown;
  /** The reminder's channel target, already validated by `validateTarget`. */
  target: unknown;
  /** The reminder's template (CH-6), when it has one; render it with `renderTemplate`. */
  template?: ReminderTemplate | null;
  /** The schedule's IANA time zone (the default zone of template date filters). */
  tzid?: string;
  /** The reminder's channel name. */
  channel?: string;
  /**
   * API-11: the recipient of a schedule for recipients, read at send time (its id, IANA
   * zone and attributes); absent otherwise. `target` is then the reminder's own target or
   * else the recipient's target for this channel.
   */
  recipient?: { id: string; tzid: string; attributes: Record<string, unknown> };
  /**
   * API-13: the reminder's category, when it has one and the delivery is for a recipient
   * (what a one-click unsubscribe opts out of, API-14).
   */
  category?: string;
  /**
   * The schedule's tenant (API-2), set by the scheduler: a channel with per-tenant rules
   * (e-mail's allowed senders) checks them again at send. Absent when a channel is called
   * directly: then only the rules for every tenant apply.
   */
  tenant?: string;
  /**
   * OPS-15: the W3C traceparent of this send's span, when an OpenTelemetry SDK records it
   * (absent otherwise). The webhook channel sends it as the `traceparent` header, e-mail
   * as `X-Trace-Id` (the trace id alone), so a receiver's own spans join the trace.
   */
  traceParent?: string;
  /**
   * DEL-19: set when this is a digest: `deliveryKey` is then the digest id, the schedule,
   * reminder, occurrence and template are the first item's, and `payload` is null (each
   * item carries its own).
   */
  digest?: DigestOfDelivery;
}

/** Per-send context. */
export interface SendContext {
  /** Equal to `deliveryKey`: pass it to the receiver (webhook-id, Message-ID …). */
  idempotencyKey: string;
  /**
   * Aborted when the send's budget is spent, a safety margin before a lease that could
   * not be renewed ends, when the lease is lost, and on forced shutdown.
   */
  signal: AbortSignal;
  /** Budget for this send in milliseconds (the channel's `timeoutMs`, else the default). */
  timeoutMs: number;
  /**
   * The database clock's estimate of "now", epoch ms (OPS-9): use it for timestamps the
   * receiver checks (e.g. `webhook-timestamp`), so a worker with a skewed clock still
   * signs in time. Set by the scheduler; absent when a channel is called directly.
   */
  now?: () => number;
}

/** What a successful send reports. */
export interface SendResult {
  /** The receiver's message id, when it returns one (recorded in the attempt, DEL-14). */
  messageId?: string | null;
  /** HTTP status or protocol code, recorded in the attempt. */
  status?: number | null;
}

/** Who a target is checked for (API-2): rules of the operator that differ per tenant. */
export interface TargetContext {
  /** The schedule's tenant; absent: only the rules for every tenant apply. */
  tenant?: string;
}

/** A delivery channel (CH-*). */
export interface Channel {
  /** Name used in reminders: `webhook`, `log`, … */
  readonly name: string;
  /**
   * True when the receiver de-duplicates by idempotency key, so a send whose outcome is
   * unknown (crash, lost lease) may be retried with the same key (DEL-6). False makes
   * such deliveries `in_doubt` unless the reminder opts into at-least-once.
   */
  readonly idempotent: boolean;
  /**
   * Budget of one send, ms; when absent the scheduler's `sendTimeoutMs` applies. The
   * lease is renewed while the send runs, so this may exceed the lease (DEL-16).
   */
  readonly timeoutMs?: number;
  /**
   * DEL-19: true when the channel renders a digest (`delivery.digest`, its `items`) as one
   * message; a reminder with `digest` on a channel without it is refused at create.
   */
  readonly digests?: boolean;
  /**
   * Checks a reminder's target when a schedule is created or edited, for the schedule's
   * tenant (`context.tenant`: e-mail's allowed senders differ per tenant).
   * @throws ValidationError naming `target.<field>`.
   */
  validateTarget(target: unknown, context?: TargetContext): void;
  /** Sends one delivery. Must honour `ctx.signal`. */
  send(delivery: ChannelDelivery, ctx: SendContext): Promise<SendResult>;
}

/** What every channel says about one delivery, as JSON: instants ISO 8601 UTC with `Z`. */
export interface ReminderMessage {
  deliveryKey: string;
  scheduleId: string;
  reminderKey: string;
  occurrenceAt: string;
  dueAt: string;
  attempt: number;
  late: boolean;
  payload: unknown;
  /** DEL-19: the digest id, when the message is a digest. */
  digestId?: string;
  /** DEL-19: the digest's items, when the message is a digest (instants ISO 8601 UTC). */
  items?: ReminderMessageItem[];
}

/** DEL-19: one item of a digest message, as JSON. */
export interface ReminderMessageItem {
  deliveryId: number;
  deliveryKey: string;
  scheduleId: string;
  title: string | null;
  reminderKey: string;
  occurrenceAt: string;
  dueAt: string;
  payload: unknown;
}

/** DEL-19: the items of a digest as JSON. */
export function digestItemsJson(digest: DigestOfDelivery): ReminderMessageItem[] {
  return digest.items.map((i) => ({
    deliveryId: i.deliveryId,
    deliveryKey: i.deliveryKey,
    scheduleId: i.scheduleId,
    title: i.title,
    reminderKey: i.reminderKey,
    occurrenceAt: i.occurrenceAt.toISOString(),
    dueAt: i.dueAt.toISOString(),
    payload: i.payload ?? null,
  }));
}

/** The {@link ReminderMessage} of a delivery (`payload` null when the schedule has none). */
export function reminderMessage(delivery: ChannelDelivery): ReminderMessage {
  return {
    deliveryKey: delivery.deliveryKey,
    scheduleId: delivery.scheduleId,
    reminderKey: delivery.reminderKey,
    occurrenceAt: delivery.occurrenceAt.toISOString(),
    dueAt: delivery.dueAt.toISOString(),
    attempt: delivery.attempt,
    late: delivery.late,
    payload: delivery.payload ?? null,
    ...(delivery.digest
      ? { digestId: delivery.digest.id, items: digestItemsJson(delivery.digest) }
      : {}),
  };
}
