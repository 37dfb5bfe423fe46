/**
 * The recipient of a claimed delivery, judged at send time (API-11, API-13).
 *
 * Right before a delivery for a recipient is sent, the registry is read again (one
 * primary-key read; rows without a recipient never come here), so a change made a moment
 * before the send counts: an opt-out of the reminder's channel or category makes it
 * `skipped` with reason `OPTED_OUT` unless the reminder is `priority: "critical"`, which
 * goes past it and records so on the row (`bypassed`); a reminder without a target of its
 * own uses the recipient's target for its channel, and one with none is `skipped`,
 * `NO_TARGET`; a recipient that left the schedule or the registry is `skipped`,
 * `recipient_removed`. Each skip is fenced like the settle.
 */
import type { Clock } from "../clock/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { Database } from "../store/database.js";
import {
  recipientAtSend,
  recordBypass,
  skipClaimed,
  type ClaimedDelivery,
  type RecipientAtSendRow,
} from "../store/deliveries/index.js";

/** What to do with a delivery for a recipient. */
export type RecipientVerdict =
  | {
      action: "send";
      target: unknown;
      recipient: { id: string; tzid: string; attributes: Record<string, unknown> };
      /** API-13: what the critical reminder goes past (`OPTED_OUT`), or null. */
      bypassed: "OPTED_OUT" | null;
      /** API-13: the reminder's category, or null. */
      category: string | null;
    }
  | { action: "skip"; reason: "NO_TARGET" | "OPTED_OUT" | "recipient_removed" };

/** A string array of an opt-out list, or empty. */
function names(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}

/**
 * API-11 / API-13: the pure verdict for one delivery, from the registry as read at send
 * time, the reminder's own target, channel, category and priority.
 */
export function judgeRecipient(
  row: Pick<
    RecipientAtSendRow,
    "tzid" | "targets" | "attributes" | "preferences" | "member" | "category" | "priority"
  >,
  delivery: { recipientId: string; channel: string; target: unknown },
): RecipientVerdict {
  if (!row.member || row.tzid === null) return { action: "skip", reason: "recipient_removed" };
  const optOut = (row.preferences?.optOut ?? {}) as { channels?: unknown; categories?: unknown };
  const optedOut =
    names(optOut.channels).includes(delivery.channel) ||
    (row.category !== null && names(optOut.categories).includes(row.category));
  const critical = row.priority === "critical";
  if (optedOut && !critical) return { action: "skip", reason: "OPTED_OUT" };
  const own = delivery.target;
  const hasOwn = own !== null && typeof own === "object" && Object.keys(own as object).length > 0;
  const target = hasOwn ? own : (row.targets?.[delivery.channel] ?? null);
  if (target === null) return { action: "skip", reason: "NO_TARGET" };
  return {
    action: "send",
    target,
    recipient: { id: delivery.recipientId, tzid: row.tzid, attributes: row.attributes ?? {} },
    bypassed: optedOut ? "OPTED_OUT" : null,
    category: row.category,
  };
}

/** Dependencies of {@link RecipientGate}. */
export interface RecipientGateDeps {
  db: Database;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  /** This process's lease owner (the fence of the skip). */
  owner: string;
}

/** Reads and applies the verdict for claimed rows of recipients (see the module comment). */
export class RecipientGate {
  readonly #d: RecipientGateDeps;

  constructor(deps: RecipientGateDeps) {
    this.#d = deps;
  }

  /**
   * The verdict for `row` (a row with a recipient), applied: a skip is written (fenced;
   * a row no longer held is left alone) and counted, a bypass recorded on the row.
   * @throws the database's error when the registry cannot be read (the caller lets the
   * send wait for recovery rather than send to a target it could not check).
   */
  async judge(row: ClaimedDelivery): Promise<RecipientVerdict> {
    const recipientId = row.recipient_id!;
    const read = await recipientAtSend(this.#d.db, {
      tenant: row.tenant,
      recipientId,
      scheduleId: row.schedule_id,
      reminderKey: row.reminder_key,
    });
    const verdict = judgeRecipient(read, {
      recipientId,
      channel: row.channel,
      target: row.target,
    });
    const now = this.#d.clock.sqlNow();
    const fence = { now, owner: this.#d.owner, id: row.id, attempt: row.attempt };
    if (verdict.action === "skip") {
      const applied = await skipClaimed(this.#d.db, { ...fence, reason: verdict.reason });
      if (applied) {
        this.#d.metrics.outcomes.inc({ channel: row.channel, outcome: "skipped" });
        this.#d.logger.info(
          { deliveryId: row.id, recipientId, reason: verdict.reason },
          "delivery for a recipient skipped at send",
        );
      }
    } else if (verdict.bypassed !== null) {
      await recordBypass(this.#d.db, { ...fence, what: verdict.bypassed });
    }
    return verdict;
  }
}
