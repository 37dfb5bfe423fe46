/**
 * The digest sweep (DEL-19), part of each maintenance pass after the misfire sweep:
 *
 * 1. recovery: digests whose lease expired go back to `retry` (same id, same members) where
 *    the channel de-duplicates or the reminder chose at-least-once, else `in_doubt` with
 *    every member (DEL-6);
 * 2. claim: digests whose retry time has come, then the digests that are ready to form
 *    (their first member's due time + window has come, or `maxItems` members are due),
 *    formed and claimed in one statement under the formers' lock;
 * 3. send: each held digest once, under the lease it was claimed with (never started with
 *    less than the safety margin left: given back instead), its id as the idempotency key,
 *    its items read as they are now; the outcome decided by `decideOutcome` as a
 *    delivery's, and settled fenced, the members with it.
 *
 * A digest is sent within one pass of its time (`pollMs`, the safety-net poll); a digest's
 * send is bounded by the channel's timeout, which stays below the lease (the lease is not
 * renewed during a digest send: a channel timeout at or above `leaseMs − leaseMarginMs` is
 * cut to it).
 */
import type { Clock } from "../clock/index.js";
import type { Channel, ChannelDelivery, SendResult } from "../channels/types.js";
import type { SchedulerOptions } from "../config/index.js";
import { PermanentError } from "../errors/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { Database } from "../store/database.js";
import {
  claimDigestRetries,
  digestItems,
  formDigests,
  recipientAtSend,
  recoverDigests,
  releaseDigest,
  settleDigest,
  type ClaimedDigest,
  type DigestItemRow,
} from "../store/deliveries/index.js";
import { decideOutcome, type SendResult as OutcomeInput } from "./outcome.js";
import { judgeRecipient } from "./recipient-gate.js";

/** What the digest sweep needs. */
export interface DigestDeps {
  db: Database;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  options: SchedulerOptions;
  channels: ReadonlyMap<string, Channel>;
  /** This process's lease owner. */
  owner: string;
  /** OPS-6: true once the process is stopping: no further digests are claimed. */
  stopping?: () => boolean;
}

/**
 * Most digests one claim takes: twice the digests in flight, so the last of a batch starts
 * about two sends after its claim, well inside its lease (a digest's lease is not renewed;
 * with 100 per claim under load, the tail of a batch found its lease nearly spent and was
 * given back, docs/benchmarks.md).
 */
export const DIGEST_BATCH = 32;

/** Most digests one pass sends (the rest wait for the next pass). */
const DIGESTS_PER_PASS = 2_000;

/** Most digests sent at once by one process. */
const DIGEST_CONCURRENCY = 16;

/** What one digest sweep did. */
export interface DigestSweepReport {
  recovered: number;
  sent: number;
  /** Digests settled otherwise (retry, dead, in doubt, skipped) or given back. */
  other: number;
}

/**
 * Runs one digest sweep (see the module comment). Errors of one digest's send are its
 * outcome; a database error ends the sweep (OPS-1) and the held digests come back through
 * recovery after their lease.
 */
export async function digestSweep(d: DigestDeps): Promise<DigestSweepReport> {
  const report: DigestSweepReport = { recovered: 0, sent: 0, other: 0 };
  const recovered = await recoverDigests(d.db, d.clock.sqlNow(), d.options.recoverBatch, 0);
  for (const r of recovered) {
    report.recovered++;
    d.metrics.attempts.inc({ channel: r.channel, outcome: "lease_expired" });
    const fields = { digestId: r.id, state: r.state, members: r.member_count };
    if (r.state === "retry") {
      d.logger.warn(fields, "digest lease expired mid-send: retrying with the same digest id");
    } else {
      d.metrics.outcomes.inc({ channel: r.channel, outcome: r.state }, r.members_finished);
      d.logger.error(
        fields,
        r.state === "in_doubt"
          ? "digest lease expired mid-send: the digest and its members are in doubt; resolve or redrive them"
          : "digest lease expired on its last attempt: dead (SEND_FAILED)",
      );
    }
  }
  const channels = [...d.channels.keys()];
  let taken = 0;
  while (taken < DIGESTS_PER_PASS && !d.stopping?.()) {
    const startedAt = d.clock.now();
    const p = {
      now: d.clock.sqlNow(),
      owner: d.owner,
      leaseMs: d.options.leaseMs,
      limit: DIGEST_BATCH,
      channels,
    };
    const held: ClaimedDigest[] = [...(await claimDigestRetries(d.db, p))];
    if (held.length < DIGEST_BATCH) {
      held.push(...(await formDigests(d.db, { ...p, limit: DIGEST_BATCH - held.length })));
    }
    if (held.length === 0) break;
    taken += held.length;
    let next = 0;
    const worker = async () => {
      while (next < held.length) {
        const g = held[next++]!;
        const sent = await sendDigest(d, g, startedAt);
        if (sent) report.sent++;
        else report.other++;
      }
    };
    await Promise.all(
      Array.from({ length: Math.min(DIGEST_CONCURRENCY, held.length) }, () => worker()),
    );
    if (held.length < DIGEST_BATCH) break;
  }
  return report;
}

/** The message of a digest: the first item's schedule, reminder and template; every item. */
function digestDelivery(
  g: ClaimedDigest,
  items: readonly DigestItemRow[],
  target: unknown,
): ChannelDelivery {
  const first = items[0]!;
  return {
    deliveryKey: g.id,
    scheduleId: first.schedule_id,
    reminderKey: first.reminder_key,
    occurrenceAt: first.occurrence_at,
    dueAt: first.due_at,
    attempt: g.attempt,
    late: false,
    payload: null,
    target,
    template: first.template ?? null,
    tzid: first.tzid,
    channel: g.channel,
    tenant: g.tenant,
    digest: {
      id: g.id,
      key: g.digest_key,
      items: items.map((i) => ({
        deliveryId: i.id,
        deliveryKey: i.delivery_key,
        scheduleId: i.schedule_id,
        title: i.title,
        reminderKey: i.reminder_key,
        occurrenceAt: i.occurrence_at,
        dueAt: i.due_at,
        payload: i.payload ?? null,
      })),
    },
  };
}

/**
 * Sends one held digest and settles it. Returns true when it settled `sent`.
 * @param claimedAtMs the process clock just before the claim (lease arithmetic: the lease
 *   is counted from then, so a slow reply makes it look shorter, never longer; DEL-16).
 */
async function sendDigest(d: DigestDeps, g: ClaimedDigest, claimedAtMs: number): Promise<boolean> {
  const o = d.options;
  const clock = d.clock;
  const offset = g.db_now.getTime() - claimedAtMs;
  const dbNow = () => clock.now() + offset;
  const margin = Math.min(o.leaseMarginMs, o.leaseMs / 4);
  const leaseLeft = () => g.lease_expires_at.getTime() - dbNow();
  const fields = { digestId: g.id, digestKey: g.digest_key, attempt: g.attempt };
  const items = await digestItems(d.db, g.id);
  const channel = d.channels.get(g.channel);
  const startedAt = new Date(dbNow());
  let target: unknown = items[0]?.target ?? null;
  let recipient: ChannelDelivery["recipient"];
  let result: OutcomeInput | null = null;
  let skip: string | null = null;
  if (items.length === 0) {
    result = {
      kind: "failed",
      error: new PermanentError("the digest has no members left"),
      aborted: false,
    };
  } else if (!channel) {
    result = {
      kind: "failed",
      error: new PermanentError(`no channel named "${g.channel}" in this process`),
      aborted: false,
    };
  } else if (items[0]!.recipient_id !== null) {
    // API-11 / API-13: a digest for a recipient goes to the recipient's target now.
    const first = items[0]!;
    const verdict = judgeRecipient(
      await recipientAtSend(d.db, {
        tenant: g.tenant,
        recipientId: first.recipient_id!,
        scheduleId: first.schedule_id,
        reminderKey: first.reminder_key,
      }),
      { recipientId: first.recipient_id!, channel: g.channel, target: first.target },
    );
    if (verdict.action === "skip") skip = verdict.reason;
    else {
      target = verdict.target;
      recipient = verdict.recipient;
    }
  }
  if (skip !== null) {
    const s = await settleDigest(d.db, clock.sqlNow(), d.owner, {
      id: g.id,
      attempt: g.attempt,
      state: "skipped",
      runAt: null,
      reason: skip,
      error: null,
      failure: 0,
      startedAt,
      status: null,
      messageId: null,
    });
    if (s.settled === 0) d.logger.warn(fields, "digest lease lost before its skip was recorded");
    else d.metrics.outcomes.inc({ channel: g.channel, outcome: "skipped" }, s.members);
    return false;
  }
  if (result === null && leaseLeft() < margin) {
    // DEL-16: never start a send this worker may no longer own.
    await releaseDigest(d.db, clock.sqlNow(), d.owner, g);
    return false;
  }
  if (result === null) {
    const delivery = digestDelivery(g, items, target);
    if (recipient) delivery.recipient = recipient;
    const timeoutMs = Math.max(
      1,
      Math.min(channel!.timeoutMs ?? o.sendTimeoutMs, leaseLeft() - margin),
    );
    const abort = new AbortController();
    let cancel: (() => void) | null = null;
    try {
      const sent = await new Promise<SendResult | "deadline">((resolve, reject) => {
        cancel = clock.setTimer(timeoutMs, () => {
          abort.abort(new Error("digest send deadline reached"));
          resolve("deadline");
        });
        Promise.resolve(
          channel!.send(delivery, {
            idempotencyKey: g.id,
            signal: abort.signal,
            timeoutMs,
            now: dbNow,
          }),
        ).then(resolve, reject);
      });
      result =
        sent === "deadline"
          ? { kind: "deadline", message: `digest send did not finish within ${timeoutMs} ms` }
          : { kind: "sent", status: sent.status ?? null, messageId: sent.messageId ?? null };
    } catch (err) {
      result = { kind: "failed", error: err, aborted: abort.signal.aborted };
    } finally {
      (cancel as (() => void) | null)?.();
    }
  }
  const decision = decideOutcome(
    result!,
    {
      failures: g.failures,
      maxAttempts: g.max_attempts,
      onLostLease: g.on_lost_lease,
      deferrals: 0,
      firstAttemptAtMs: null,
    },
    {
      backoffBaseMs: o.backoffBaseMs,
      backoffCapMs: o.backoffCapMs,
      rateLimitMaxDeferrals: o.rateLimitMaxDeferrals,
      rateLimitMaxAgeMs: o.rateLimitMaxAgeMs,
      rateLimitMaxDelayMs: o.rateLimitMaxDelayMs,
    },
    dbNow(),
  );
  if (decision.log) {
    d.logger[decision.log.level]({ ...fields, ...decision.log.fields }, decision.log.message);
  }
  d.metrics.attempts.inc({ channel: g.channel, outcome: decision.outcome });
  const settled = await settleDigest(d.db, clock.sqlNow(), d.owner, {
    id: g.id,
    attempt: g.attempt,
    state: decision.state,
    runAt: decision.runAt,
    reason: decision.reason,
    error: decision.error,
    failure: decision.failure,
    startedAt,
    status: decision.status,
    messageId: decision.messageId,
  });
  if (settled.settled === 0) {
    d.metrics.leaseLost.inc();
    d.logger.warn(fields, "digest lease lost before its outcome was recorded; nothing changed");
    return false;
  }
  if (decision.state !== "retry") {
    d.metrics.outcomes.inc({ channel: g.channel, outcome: decision.state }, settled.members);
  }
  return decision.state === "sent";
}
