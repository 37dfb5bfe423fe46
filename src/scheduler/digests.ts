/**
 * The digest sweep and sender (DEL-19). Each maintenance pass, after the misfire sweep:
 *
 * 1. recovery: digests whose lease expired go back to `retry` (same id, same members) where
 *    the channel de-duplicates or the reminder chose at-least-once, else `in_doubt` with
 *    every member (DEL-6);
 * 2. claim, up to the free digest slots (`digestConcurrency`): digests whose retry time
 *    has come, then the digests that are ready to form (their first member's due time +
 *    window has come, or `maxItems` members are due), formed and claimed in one statement
 *    under the formers' lock;
 * 3. each claimed digest is handed to the {@link DigestSender}, which sends it **off the
 *    pass**: the pass never waits for a receiver, so a digest whose receiver hangs until
 *    the send timeout holds neither the other digests nor recovery nor the misfire sweep.
 *
 * A digest obeys the limits an ordinary send obeys, checked once its items are read and
 * before it is sent: it takes one token and one concurrency slot of its members' limiter
 * (DEL-13; one digest message is one send), then its host's circuit admits it (CH-7, the
 * probe rule of an ordinary send); without them it is given back unsent (`RATE_LIMITED`
 * or `CIRCUIT_OPEN`, fenced, its lease released, no attempt spent, the same id and
 * members). A Retry-After reply defers it as a delivery (`RETRY_AFTER`, no attempt spent,
 * the same deferral budget), and its transient failures count toward its host's circuit.
 *
 * A digest send has the guarantees of an ordinary send: it never starts with less than
 * the safety margin of lease left (given back instead); its lease is renewed, fenced,
 * every third of the lease while it runs (DEL-16: a digest send slower than the lease
 * reaches the receiver once), and a watchdog aborts it a margin before a lease that could
 * not be renewed ends; its budget is the channel's timeout; its id is the idempotency
 * key; its outcome is decided by `decideOutcome` as a delivery's and settled fenced, the
 * members with it, each failed try recorded as an attempt of every member (DEL-14). A
 * stopping process claims no further digests and drains (or, past its grace period,
 * aborts and settles) the ones in flight (OPS-6). When a send frees a slot while ready
 * digests were left unclaimed, the scheduler claims again without waiting for the poll.
 */
import type { CancelTimer, Clock } from "../clock/index.js";
import type { Channel, ChannelDelivery, SendResult } from "../channels/types.js";
import type { SchedulerOptions } from "../config/index.js";
import { PermanentError } from "../errors/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { Database } from "../store/database.js";
import {
  admitDigest,
  claimDigestRetries,
  deferDigest,
  digestItems,
  formDigests,
  recipientAtSend,
  recoverDigests,
  releaseDigest,
  renewDigestLeases,
  settleDigest,
  type ClaimedDigest,
  type DigestItemRow,
} from "../store/deliveries/index.js";
import { circuitName, targetHost, type Admission, type CircuitBreaker } from "./circuits.js";
import { leaseMarginMs } from "./executor.js";
import { decideOutcome, type SendResult as OutcomeInput } from "./outcome.js";
import { judgeRecipient } from "./recipient-gate.js";
import { RenewalSchedule } from "./renewal.js";
import { OwnAbortReason, SendAbort } from "./send-abort.js";

/** What the digest sweep and sender need. */
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
  /**
   * Called when a digest send ends and frees its slot while the last claim left ready
   * digests unclaimed (all slots were taken): the scheduler claims again.
   */
  onSlotFree?: () => void;
  /** CH-7: the circuits per tenant and host; without it every digest goes. */
  circuits?: CircuitBreaker;
  /**
   * DEL-13: whether a limiter (`tenant/key`) has a limit, as of the last refresh; without
   * it no digest is limited.
   */
  limited?: (limiter: string) => boolean;
}

/**
 * Most digests one claim statement takes (fewer when fewer slots are free): a claim's
 * fixed cost is shared by up to this many, and the lease of each starts at its claim.
 */
export const DIGEST_BATCH = 32;

/** Most digests one pass claims (the rest wait for a freed slot or the next pass). */
const DIGESTS_PER_PASS = 2_000;

/** What one digest sweep did. */
export interface DigestSweepReport {
  /** Digests whose expired lease was recovered. */
  recovered: number;
  /** Digests claimed and handed to the sender (their sends run on, off the pass). */
  started: number;
}

/** One digest this process is sending, with what it knows of its lease. */
interface HeldDigest {
  readonly g: ClaimedDigest;
  /** Lease expiry, database clock epoch ms. */
  leaseExpiresAt: number;
  /**
   * Database clock minus the process clock read just before the claim or renewal was
   * sent, ms: the lease left is never overstated (DEL-16).
   */
  offsetMs: number;
  /** Aborts the send while it runs. */
  abort: SendAbort | null;
  /** Aborts the send a safety margin before the lease ends, unless renewed first. */
  watchdog: CancelTimer | null;
}

/**
 * The digests one process sends, off the maintenance pass, at most `digestConcurrency`
 * at once; their leases renewed while they run (DEL-16).
 */
export class DigestSender {
  readonly #d: DigestDeps;
  readonly #held = new Map<string, HeldDigest>();
  readonly #renewal: RenewalSchedule;
  #stopped = false;
  /** The last claim took every free slot: ready digests may be left. */
  #saturated = false;
  #changed: { promise: Promise<void>; resolve: () => void } | null = null;

  constructor(deps: DigestDeps) {
    this.#d = deps;
    this.#renewal = new RenewalSchedule(
      deps.clock,
      () => this.#renewEveryMs,
      () => this.#renew(),
      () => this.#held.size > 0,
    );
  }

  /** Digest sends in flight (claimed and not yet settled). */
  get inFlight(): number {
    return this.#held.size;
  }

  /** Free digest slots. */
  get free(): number {
    return Math.max(0, this.#d.options.digestConcurrency - this.#held.size);
  }

  /**
   * Resolves at the next change of the digests in flight (one started or settled); every
   * caller until then shares one promise, so waiting often costs nothing more.
   */
  changed(): Promise<void> {
    if (!this.#changed) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.#changed = { promise, resolve };
    }
    return this.#changed.promise;
  }

  #notify(): void {
    const changed = this.#changed;
    this.#changed = null;
    changed?.resolve();
  }

  /** Resolves once no digest send is in flight. */
  async idle(): Promise<void> {
    while (this.#held.size > 0) await this.changed();
  }

  /**
   * One digest sweep (see the module comment): recovery, then claims up to the free
   * slots; the sends run on. A database error ends the sweep (OPS-1): it throws, and the
   * digests it claimed and handed on are sent all the same.
   */
  async sweep(): Promise<DigestSweepReport> {
    const d = this.#d;
    const report: DigestSweepReport = { recovered: 0, started: 0 };
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
    report.started = await this.fill();
    return report;
  }

  /**
   * Claims digests (retries first, then those ready to form) up to the free slots and
   * starts their sends. Returns how many it started. Claims nothing once stopping.
   * @throws the database's error when a claim fails (the digests started before it run on).
   */
  async fill(): Promise<number> {
    const d = this.#d;
    const channels = [...d.channels.keys()];
    let taken = 0;
    this.#saturated = false;
    while (taken < DIGESTS_PER_PASS && !d.stopping?.() && !this.#stopped) {
      const want = Math.min(DIGEST_BATCH, this.free, DIGESTS_PER_PASS - taken);
      if (want === 0) {
        this.#saturated = true;
        break;
      }
      // DEL-16: read before the statement is sent; the lease is counted from then.
      const sentAt = d.clock.now();
      const p = {
        now: d.clock.sqlNow(),
        owner: d.owner,
        leaseMs: d.options.leaseMs,
        limit: want,
        channels,
      };
      const claimed: ClaimedDigest[] = [...(await claimDigestRetries(d.db, p))];
      if (claimed.length < want) {
        claimed.push(...(await formDigests(d.db, { ...p, limit: want - claimed.length })));
      }
      for (const g of claimed) this.#start(g, sentAt);
      taken += claimed.length;
      if (claimed.length < want) break;
    }
    return taken;
  }

  #start(g: ClaimedDigest, sentAt: number): void {
    const held: HeldDigest = {
      g,
      leaseExpiresAt: g.lease_expires_at.getTime(),
      offsetMs: g.db_now.getTime() - sentAt,
      abort: null,
      watchdog: null,
    };
    this.#held.set(g.id, held);
    this.#ensureRenewal();
    this.#notify();
    void this.#run(held);
  }

  /** One digest from send to settle; never rejects. */
  async #run(held: HeldDigest): Promise<void> {
    const fields = { digestId: held.g.id, digestKey: held.g.digest_key, attempt: held.g.attempt };
    try {
      await this.#send(held);
    } catch (err) {
      // A database error reading the items or settling: the lease runs out and recovery
      // decides (retry with the same id, or in doubt), as for a crash.
      this.#d.logger.error(
        { ...fields, err },
        "digest send could not be settled; its lease expires and recovery takes it",
      );
    } finally {
      held.watchdog?.();
      held.watchdog = null;
      held.abort = null;
      this.#held.delete(held.g.id);
      if (this.#held.size === 0) this.#renewal.disarm();
      this.#notify();
      if (this.#saturated && !this.#d.stopping?.() && !this.#stopped) this.#d.onSlotFree?.();
    }
  }

  /** The lease left on a held digest at process-clock time `localNow`, ms (database clock). */
  static #leaseLeft(held: HeldDigest, localNow: number): number {
    return held.leaseExpiresAt - (localNow + held.offsetMs);
  }

  /** (Re)arms the watchdog of a sending digest from the lease it knows of. */
  #armWatchdog(held: HeldDigest): void {
    if (!held.abort) return;
    held.watchdog?.();
    const abort = held.abort;
    const delay =
      DigestSender.#leaseLeft(held, this.#d.clock.now()) - leaseMarginMs(this.#d.options);
    const fire = () =>
      abort.abort(new OwnAbortReason("digest lease about to end and not renewed: send aborted"));
    if (delay <= 0) {
      held.watchdog = null;
      fire();
      return;
    }
    held.watchdog = this.#d.clock.setTimer(delay, () => {
      held.watchdog = null;
      fire();
    });
  }

  /** Renewal period, ms: a third of the lease, as the lease keeper's. */
  get #renewEveryMs(): number {
    return Math.max(100, Math.floor(this.#d.options.leaseMs / 3));
  }

  #ensureRenewal(): void {
    if (!this.#stopped) this.#renewal.ensure();
  }

  /**
   * DEL-16: renews the lease of every digest in flight now, fenced (coalesced with a
   * renewal in flight). A digest the renewal no longer finds (recovered elsewhere, or its
   * lease ran out) has its send aborted. Never throws: a failed renewal leaves the
   * watchdogs to abort sends before their leases end.
   */
  renew(): Promise<void> {
    return this.#renewal.renew();
  }

  async #renew(): Promise<void> {
    const d = this.#d;
    const held = [...this.#held.values()];
    if (held.length === 0) return;
    const sentAt = d.clock.now();
    let renewed;
    try {
      renewed = await renewDigestLeases(
        d.db,
        d.clock.sqlNow(),
        d.owner,
        d.options.leaseMs,
        held.map((h) => ({ id: h.g.id, attempt: h.g.attempt })),
      );
    } catch (err) {
      d.logger.warn({ err, digests: held.length }, "could not renew digest leases");
      return;
    }
    const byId = new Map(renewed.map((r) => [r.id, r]));
    for (const h of held) {
      if (this.#held.get(h.g.id) !== h) continue; // settled meanwhile
      const r = byId.get(h.g.id);
      if (r && DigestSender.#leaseLeft(h, sentAt) > 0) {
        h.leaseExpiresAt = r.lease_expires_at.getTime();
        h.offsetMs = r.db_now.getTime() - sentAt;
        this.#armWatchdog(h);
        continue;
      }
      if (r) continue; // ran out before the renewal left: not extended (DEL-16)
      if (!h.abort) continue; // not sending (reading its items, or settling): its fence decides
      d.metrics.claimsReleased.inc({ reason: "lease_lost" });
      d.logger.warn(
        { digestId: h.g.id, attempt: h.g.attempt },
        "digest lease lost before the send finished (recovered elsewhere): aborting its send",
      );
      h.abort.abort(new OwnAbortReason("digest lease lost: another worker may own it now"));
    }
  }

  /** OPS-6: aborts every digest send in flight (forced shutdown); each settles as unknown. */
  abortAll(reason: string): void {
    for (const h of this.#held.values()) h.abort?.abort(new OwnAbortReason(reason));
  }

  /** Stops renewing and claiming (shutdown); digests in flight keep the lease they have. */
  stop(): void {
    this.#stopped = true;
    this.#renewal.stop();
  }

  /** Allows claims and renewals again after {@link stop}. */
  resume(): void {
    this.#stopped = false;
    this.#renewal.resume();
    this.#ensureRenewal();
  }

  /** Sends one held digest and settles it. */
  async #send(held: HeldDigest): Promise<void> {
    const d = this.#d;
    const g = held.g;
    const o = d.options;
    const clock = d.clock;
    const dbNow = () => clock.now() + held.offsetMs;
    const margin = leaseMarginMs(o);
    const fields = { digestId: g.id, digestKey: g.digest_key, attempt: g.attempt };
    const items = await digestItems(d.db, g.id);
    const channel = d.channels.get(g.channel);
    const startedAt = new Date(dbNow());
    let target: unknown = items[0]?.target ?? null;
    let recipient: ChannelDelivery["recipient"];
    let result: OutcomeInput | null = null;
    let skip: string | null = null;
    let sendAbort: SendAbort | null = null;
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
        outcome: null,
        deferral: 0,
      });
      if (s.settled === 0) d.logger.warn(fields, "digest lease lost before its skip was recorded");
      else d.metrics.outcomes.inc({ channel: g.channel, outcome: "skipped" }, s.members);
      return;
    }
    // DEL-13: a token and a slot of the members' limiter, as an ordinary send takes at its
    // claim; CH-7: then the circuit of the target's host, as an ordinary send at its start.
    if (result === null && (await this.#waitsForLimit(held))) return;
    const host = result === null && d.circuits ? targetHost(target) : null;
    if (host !== null && (await this.#waitsForCircuit(d.circuits!, host, held))) return;
    if (result === null && DigestSender.#leaseLeft(held, clock.now()) <= margin) {
      // DEL-16: never start a send this worker may no longer own.
      d.metrics.claimsReleased.inc({ reason: "lease_low" });
      await releaseDigest(d.db, clock.sqlNow(), d.owner, g);
      return;
    }
    if (result === null) {
      const delivery = digestDelivery(g, items, target);
      if (recipient) delivery.recipient = recipient;
      // The channel's budget, independent of the lease: the lease is renewed meanwhile.
      const timeoutMs = channel!.timeoutMs ?? o.sendTimeoutMs;
      const abort = new SendAbort();
      sendAbort = abort;
      held.abort = abort;
      this.#armWatchdog(held);
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
              get signal() {
                return abort.signal;
              },
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
        result = { kind: "failed", error: err, aborted: abort.aborted };
      } finally {
        (cancel as (() => void) | null)?.();
        held.watchdog?.();
        held.watchdog = null;
        held.abort = null;
      }
    }
    const decision = decideOutcome(
      result!,
      {
        failures: g.failures,
        maxAttempts: g.max_attempts,
        onLostLease: g.on_lost_lease,
        deferrals: g.deferrals,
        firstAttemptAtMs: g.first_attempt_at?.getTime() ?? null,
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
      outcome: decision.outcome,
      deferral: decision.deferral,
    });
    if (settled.settled === 0) {
      d.metrics.leaseLost.inc();
      d.logger.warn(fields, "digest lease lost before its outcome was recorded; nothing changed");
      return;
    }
    if (decision.state !== "retry") {
      d.metrics.outcomes.inc({ channel: g.channel, outcome: decision.state }, settled.members);
    }
    // CH-7: the host's answer counts toward its circuit as an ordinary send's does: once the
    // settle applied, only for a send that reached the channel, not when this worker's
    // lease ran out first or it aborted the send itself (the host did nothing wrong).
    const sendAbortNow = sendAbort as SendAbort | null;
    if (host !== null && sendAbortNow !== null) {
      const leaseHeld = DigestSender.#leaseLeft(held, clock.now()) > 0;
      const ownAbort = sendAbortNow.aborted && sendAbortNow.reason instanceof OwnAbortReason;
      if (leaseHeld && !ownAbort) await d.circuits!.record(g.tenant, host, decision.outcome);
    }
  }

  /**
   * DEL-13: takes a token and a concurrency slot of the digest's limiter
   * ({@link admitDigest}); when there is none now, the digest is given back (`RATE_LIMITED`
   * until its token's instant or a slot's wait, its lease released, no attempt spent) and
   * this returns true. A database error here lets the digest go, as when the limit was
   * read: the digest is not lost, and its lease still fences its settle.
   */
  async #waitsForLimit(held: HeldDigest): Promise<boolean> {
    const d = this.#d;
    const g = held.g;
    if (g.limiter === null || !d.limited?.(g.limiter)) return false;
    let admitted;
    try {
      admitted = await admitDigest(d.db, {
        now: d.clock.sqlNow(),
        owner: d.owner,
        id: g.id,
        attempt: g.attempt,
        limiter: g.limiter,
        slotAt: g.slot_at,
      });
    } catch (err) {
      d.logger.warn(
        { err, digestId: g.id, limiter: g.limiter },
        "could not read the rate limit; sending",
      );
      return false;
    }
    if (admitted.send) return false;
    if (admitted.lost) {
      d.logger.warn({ digestId: g.id }, "digest lease lost before its rate limit was taken");
      return true;
    }
    d.metrics.rateLimitThrottled.inc({ key: g.limiter });
    d.logger.debug(
      { digestId: g.id, limiter: g.limiter, until: admitted.until },
      "digest waits for its rate limit (RATE_LIMITED)",
    );
    return true;
  }

  /**
   * CH-7: when the host's circuit is open, gives the digest back unsent (`CIRCUIT_OPEN`
   * until the next probe, its lease released, no attempt spent) and returns true; the
   * probe is taken as an ordinary send takes it ({@link CircuitBreaker.admit}). A database
   * error here lets the send go: the circuit spares the host, it never loses a digest.
   */
  async #waitsForCircuit(
    circuits: CircuitBreaker,
    host: string,
    held: HeldDigest,
  ): Promise<boolean> {
    const d = this.#d;
    const g = held.g;
    let gate: Admission;
    try {
      gate = await circuits.admit(g.tenant, host, d.clock.now() + held.offsetMs);
    } catch (err) {
      d.logger.warn({ err, host }, "could not read the circuit; sending");
      return false;
    }
    if (gate.send) return false;
    let back: boolean;
    try {
      back = await deferDigest(d.db, d.clock.sqlNow(), d.owner, {
        id: g.id,
        attempt: g.attempt,
        until: gate.until,
        reason: "CIRCUIT_OPEN",
        // A token taken for this try is spent, as an ordinary row's claimed token is.
        slotAt: null,
      });
    } catch (err) {
      d.logger.warn({ err, host }, "could not give back a digest for an open circuit; sending");
      return false;
    }
    if (back) d.metrics.circuitDeferred.inc({ host: circuitName(g.tenant, host) });
    return true;
  }
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
    // DEL-13: the attempt this try spends; a try after a Retry-After deferral repeats it.
    attempt: g.attempt - g.deferrals,
    // Late when any member is: its digest was formed more than 1 s past the window's end
    // (a window that held an item back on purpose does not make it late).
    late: items.some((i) => i.late),
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
