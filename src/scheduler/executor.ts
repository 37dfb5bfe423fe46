/**
 * The executor: sends claimed rows under the concurrency limit (DEL-2, DEL-16, CH-4).
 *
 * Rows arrive from the producer in claim order and wait in a local queue for a free
 * slot. Immediately before each send the executor checks the lease left on the row
 * (database clock, see {@link HeldBook}); below the safety margin it never starts the
 * send — a worker that wakes from a stall after its lease ran out must not re-send what
 * another worker may already have sent — and drops the row for recovery to judge.
 *
 * While a send runs, the lease keeper renews its lease; a watchdog aborts the send a
 * safety margin before the lease it knows of ends (renewals push the watchdog back), so a
 * slow but healthy send is sent once and a send whose lease cannot be renewed stops
 * before another worker may take it. The send's own budget is the channel's timeout,
 * independent of the lease. The result goes through the pure {@link decideOutcome} and
 * on to the completer.
 *
 * DEL-13: a row claimed under a rate limit carries its slot ({@link HeldRow.sendAt},
 * database clock); it waits in the queue until then, rows behind it that are ready go
 * past it, and one timer wakes the queue at the earliest slot. The check is made again
 * when the timer fires (a timer may fire a little early), so no send starts before its
 * slot; a row whose slot passed while this process stalled goes as soon as it can.
 */
import type { CancelTimer, Clock } from "../clock/index.js";
import type {
  Channel,
  ChannelDelivery,
  SendResult as ChannelSendResult,
} from "../channels/types.js";
import type { SchedulerOptions } from "../config/index.js";
import { PermanentError } from "../errors/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import { HeldBook, type HeldRow } from "./held.js";
import type { Completer } from "./completer.js";
import { decideOutcome, type SendResult } from "./outcome.js";
import { targetHost, type Admission, type CircuitBreaker } from "./circuits.js";
import type { QuietRetries } from "./quiet-retry.js";
import type { RecipientGate } from "./recipient-gate.js";
import { OwnAbortReason, SendAbort } from "./send-abort.js";
import { traceSendEnded, traceSendStarted } from "./tracing.js";

export interface ExecutorDeps {
  clock: Clock;
  channels: ReadonlyMap<string, Channel>;
  options: SchedulerOptions;
  logger: Logger;
  metrics: Metrics;
  book: HeldBook;
  completer: Completer;
  /** Called whenever a send slot frees (the producer may refill). */
  onSlotFree: () => void;
  /** CH-7: the circuits per tenant and host; without it every send goes. */
  circuits?: CircuitBreaker;
  /** DEL-15: moves a retry out of its reminder's quiet window; without it retries keep their backoff time. */
  quietRetries?: QuietRetries;
  /** API-11 / API-13: judges rows for a recipient at send; without it they go as claimed. */
  recipients?: RecipientGate;
}

/** A channel's labelled metric children, looked up once per channel, not per send. */
interface ChannelMetrics {
  lateness: { observe(value: number): void };
  retryLateness: { observe(value: number): void };
  /** `punctual_attempts_total` children by outcome, made on first use. */
  attempts: Map<string, { inc(value?: number): void }>;
}

/** Safety margin kept on a lease before a send starts or while it runs, ms. */
export function leaseMarginMs(options: SchedulerOptions): number {
  return Math.min(options.leaseMarginMs, Math.floor(options.leaseMs / 4));
}

export class Executor {
  readonly #d: ExecutorDeps;
  readonly #queue: HeldRow[] = [];
  #sending = 0;
  #completions = 0;
  #rateWindowStart: number | null = null;
  #ratePerMs: number | null = null;
  /** DEL-13: wakes the queue at the earliest slot of a row waiting for one. */
  #paceTimer: CancelTimer | null = null;
  /** When {@link #paceTimer} fires, process clock ms. */
  #paceAt = 0;
  /** Labelled metric children by channel name (bounded by the channels rows name). */
  readonly #channelMetrics = new Map<string, ChannelMetrics>();

  constructor(deps: ExecutorDeps) {
    this.#d = deps;
  }

  /** Rows claimed and waiting for a slot. */
  get queued(): number {
    return this.#queue.length;
  }

  /** DEL-13: queued rows whose rate-limit slot is still ahead (database clock). */
  get waitingForSlot(): number {
    const localNow = this.#d.clock.now();
    return this.#queue.filter((h) => HeldBook.slotWait(h, localNow) > 0).length;
  }

  /** Sends in flight. */
  get sending(): number {
    return this.#sending;
  }

  /**
   * Recent completion rate, sends per ms (null until measured). The producer sizes its
   * prefetch from it, so a claimed row waits about one prefetch window, never a lease.
   */
  get ratePerMs(): number | null {
    return this.#ratePerMs;
  }

  /** Queues claimed rows and starts as many as slots allow. */
  enqueue(rows: readonly HeldRow[]): void {
    this.#queue.push(...rows);
    this.pump();
  }

  /** Takes every row that has not started (shutdown: they are released, not sent). */
  takeQueued(): HeldRow[] {
    this.#paceTimer?.();
    this.#paceTimer = null;
    return this.#queue.splice(0, this.#queue.length);
  }

  /** Removes one queued row (its lease was lost). Returns whether it was queued. */
  unqueue(held: HeldRow): boolean {
    const i = this.#queue.indexOf(held);
    if (i < 0) return false;
    this.#queue.splice(i, 1);
    return true;
  }

  /** Starts queued rows while slots are free, each rate-limited row not before its slot. */
  pump(): void {
    const margin = leaseMarginMs(this.#d.options);
    let i = 0;
    let wakeAt: number | null = null;
    while (this.#sending < this.#d.options.concurrency && i < this.#queue.length) {
      const candidate = this.#queue[i] as HeldRow;
      const localNow = this.#d.clock.now();
      if (candidate.sendAt !== null) {
        const waitMs = HeldBook.slotWait(candidate, localNow);
        if (waitMs > 0) {
          // DEL-13: not before its slot; rows behind it may be ready.
          const at = localNow + waitMs;
          wakeAt = wakeAt === null ? at : Math.min(wakeAt, at);
          i++;
          continue;
        }
      }
      const held = this.#queue.splice(i, 1)[0] as HeldRow;
      const left = HeldBook.leaseLeft(held, localNow);
      if (left <= margin) {
        // DEL-16: never start a send on a lease that may already belong to someone else.
        this.#d.metrics.claimsReleased.inc({ reason: "lease_low" });
        this.#d.logger.warn(
          { deliveryId: held.row.id, attempt: held.row.attempt, leaseLeftMs: Math.round(left) },
          "too little lease left to start the send (this worker stalled or lost the database): left for recovery",
        );
        this.#d.book.delete(held.row.id);
        continue;
      }
      this.#start(held);
    }
    if (wakeAt !== null) this.#armPace(wakeAt);
  }

  /** Arms the queue's wake-up for `at` (process clock ms) unless one is due sooner. */
  #armPace(at: number): void {
    if (this.#paceTimer && this.#paceAt <= at) return;
    this.#paceTimer?.();
    this.#paceAt = at;
    this.#paceTimer = this.#d.clock.setTimer(
      Math.max(0, Math.ceil(at - this.#d.clock.now())),
      () => {
        this.#paceTimer = null;
        this.pump();
      },
    );
  }

  /**
   * (Re)arms the watchdog of a sending row from the lease it knows of: the send is
   * aborted a safety margin before the lease ends, unless a renewal moves it first.
   */
  armWatchdog(held: HeldRow): void {
    if (held.phase !== "sending" || !held.abort) return;
    held.watchdog?.();
    const margin = leaseMarginMs(this.#d.options);
    const delay = HeldBook.leaseLeft(held, this.#d.clock.now()) - margin;
    const abort = held.abort;
    if (delay <= 0) {
      abort.abort(new OwnAbortReason("lease about to end and not renewed: send aborted"));
      return;
    }
    held.watchdog = this.#d.clock.setTimer(delay, () => {
      held.watchdog = null;
      abort.abort(new OwnAbortReason("lease about to end and not renewed: send aborted"));
    });
  }

  #start(held: HeldRow): void {
    held.phase = "sending";
    held.abort = new SendAbort();
    this.#sending++;
    this.armWatchdog(held);
    void this.#run(held);
  }

  /** One send from start to settle queue, then the slot is free again. Never rejects. */
  async #run(held: HeldRow): Promise<void> {
    try {
      await this.#send(held);
    } finally {
      this.#sending--;
      this.#countCompletion();
      this.pump();
      this.#d.onSlotFree();
    }
  }

  #metricsOf(channel: string): ChannelMetrics {
    let m = this.#channelMetrics.get(channel);
    if (!m) {
      const { metrics } = this.#d;
      m = {
        lateness: metrics.lateness.labels(channel),
        retryLateness: metrics.retryLateness.labels(channel),
        attempts: new Map(),
      };
      this.#channelMetrics.set(channel, m);
    }
    return m;
  }

  #countAttempt(m: ChannelMetrics, channel: string, outcome: string): void {
    let child = m.attempts.get(outcome);
    if (!child) {
      child = this.#d.metrics.attempts.labels(channel, outcome);
      m.attempts.set(outcome, child);
    }
    child.inc();
  }

  #countCompletion(): void {
    const now = this.#d.clock.now();
    this.#completions++;
    if (this.#rateWindowStart === null) {
      this.#rateWindowStart = now;
      this.#completions = 0;
      return;
    }
    const elapsed = now - this.#rateWindowStart;
    if (elapsed >= 250) {
      const rate = this.#completions / elapsed;
      this.#ratePerMs = this.#ratePerMs === null ? rate : 0.5 * this.#ratePerMs + 0.5 * rate;
      this.#rateWindowStart = now;
      this.#completions = 0;
    }
  }

  async #send(held: HeldRow): Promise<void> {
    const { row } = held;
    const o = this.#d.options;
    const clock = this.#d.clock;
    const abort = held.abort as SendAbort;
    const channel = this.#d.channels.get(row.channel);
    // API-11 / API-13: a row for a recipient is judged now, against the registry as it is.
    let target = row.target;
    let recipient: ChannelDelivery["recipient"];
    let category: string | null = null;
    let gateError: unknown = null;
    if (row.recipient_id != null && this.#d.recipients) {
      try {
        const verdict = await this.#d.recipients.judge(row);
        if (verdict.action === "skip") {
          held.watchdog?.();
          held.watchdog = null;
          held.abort = null;
          this.#d.book.delete(row.id);
          return;
        }
        target = verdict.target;
        recipient = verdict.recipient;
        category = verdict.category;
      } catch (err) {
        // Not sent to a target that could not be checked: a transient failure, retried.
        gateError = err;
      }
    }
    const circuits = this.#d.circuits;
    const host = circuits && gateError === null ? targetHost(target) : null;
    if (circuits && host !== null && (await this.#waitsForCircuit(circuits, host, held))) return;
    const startedAt = HeldBook.dbNow(held, clock.now());
    const metrics = this.#metricsOf(row.channel);
    // OPS-13: a first attempt (a retry after a Retry-After deferral repeats the attempt
    // number, so it counts as the attempt it repeats) and retries have separate histograms.
    (row.attempt - row.deferrals <= 1 ? metrics.lateness : metrics.retryLateness).observe(
      Math.max(0, startedAt - row.due_at.getTime()) / 1000,
    );
    const delivery: ChannelDelivery = {
      deliveryKey: row.delivery_key,
      scheduleId: row.schedule_id,
      reminderKey: row.reminder_key,
      occurrenceAt: row.occurrence_at,
      dueAt: row.due_at,
      // DEL-13: the attempt this try spends; a try after a Retry-After deferral repeats it.
      attempt: row.attempt - row.deferrals,
      late: row.late,
      payload: row.payload,
      target,
      template: row.template ?? null,
      tzid: row.tzid,
      channel: row.channel,
      tenant: row.tenant,
    };
    if (recipient) delivery.recipient = recipient;
    if (category !== null) delivery.category = category;
    const traceParent = traceSendStarted(held);
    if (traceParent !== undefined) delivery.traceParent = traceParent;
    const timeoutMs = channel?.timeoutMs ?? o.sendTimeoutMs;
    let result: SendResult;
    let cancelDeadline: (() => void) | null = null;
    try {
      if (gateError !== null) throw gateError;
      if (!channel) throw new PermanentError(`no channel named "${row.channel}" in this process`);
      // The send or its deadline, whichever settles first (one promise per send, not a race
      // of two): a channel that ignores the abort still stops counting at the deadline.
      const sent = await new Promise<ChannelSendResult | "deadline">((resolve, reject) => {
        cancelDeadline = clock.setTimer(timeoutMs, () => {
          abort.abort(new Error("send deadline reached"));
          resolve("deadline");
        });
        // Promise.resolve: a channel written without `async` may return a plain value
        // (it is the same promise, not a copy, when send returns a native one).
        Promise.resolve(
          channel.send(delivery, {
            idempotencyKey: row.delivery_key,
            // Read on demand: a channel that never looks costs no AbortController.
            get signal() {
              return abort.signal;
            },
            timeoutMs,
            // OPS-9: timestamps the receiver checks (webhook-timestamp) come from the database clock.
            now: () => HeldBook.dbNow(held, clock.now()),
          }),
        ).then(resolve, reject);
      });
      result =
        sent === "deadline"
          ? { kind: "deadline", message: `send did not finish within ${timeoutMs} ms` }
          : { kind: "sent", status: sent.status ?? null, messageId: sent.messageId ?? null };
    } catch (err) {
      result = { kind: "failed", error: err, aborted: abort.aborted };
    } finally {
      (cancelDeadline as (() => void) | null)?.();
      held.watchdog?.();
      held.watchdog = null;
    }
    const decision = decideOutcome(
      result,
      {
        failures: row.failures,
        maxAttempts: row.max_attempts,
        onLostLease: row.on_lost_lease,
        deferrals: row.deferrals,
        firstAttemptAtMs: row.first_attempt_at?.getTime() ?? null,
      },
      {
        backoffBaseMs: o.backoffBaseMs,
        backoffCapMs: o.backoffCapMs,
        rateLimitMaxDeferrals: o.rateLimitMaxDeferrals,
        rateLimitMaxAgeMs: o.rateLimitMaxAgeMs,
        rateLimitMaxDelayMs: o.rateLimitMaxDelayMs,
      },
      HeldBook.dbNow(held, clock.now()),
    );
    if (decision.log) {
      this.#d.logger[decision.log.level](
        { deliveryId: row.id, deliveryKey: row.delivery_key, ...decision.log.fields },
        decision.log.message,
      );
    }
    // DEL-15: a retry that would land in the reminder's quiet window waits for its end.
    if (decision.state === "retry" && decision.runAt && this.#d.quietRetries) {
      const until = await this.#d.quietRetries.defer(row, decision.runAt, clock.sqlNow());
      if (until) decision.runAt = until;
    }
    traceSendEnded(held, decision);
    this.#countAttempt(metrics, row.channel, decision.outcome);
    // CH-7: counted once the settle applied (awaited by the completer, so a drained
    // scheduler has recorded it), and only then: a stale outcome (lease ended before the
    // outcome was known, or the settle fenced out because the row was recovered or
    // reclaimed) says more about this worker's stall than about the host, and must not
    // open a healthy host's circuit. No DB work for a host without trouble unless the send
    // failed; none at all without a host.
    // Nor does a send this worker aborted itself (its lease running out with the
    // database away, a lost lease, shutdown): the host did nothing wrong.
    const leaseHeld = HeldBook.leaseLeft(held, clock.now()) > 0;
    const ownAbort = abort.aborted && abort.reason instanceof OwnAbortReason;
    const onApplied =
      circuits && host !== null && leaseHeld && !ownAbort
        ? () => circuits.record(row.tenant, host, decision.outcome)
        : undefined;
    held.phase = "settling";
    held.abort = null;
    this.#d.completer.add(
      {
        id: row.id,
        attempt: row.attempt,
        startedAt: new Date(startedAt),
        state: decision.state,
        runAt: decision.runAt,
        reason: decision.reason,
        error: decision.error,
        failure: decision.failure,
        deferral: decision.deferral,
        outcome: decision.outcome,
        status: decision.status,
        messageId: decision.messageId,
      },
      onApplied,
    );
  }

  /**
   * CH-7: when the host's circuit is open, gives the row back unsent (no attempt spent)
   * to wait for the next probe, and returns true. A database error here lets the send go:
   * the circuit spares the host, it never loses a delivery.
   */
  async #waitsForCircuit(circuits: CircuitBreaker, host: string, held: HeldRow): Promise<boolean> {
    const { row } = held;
    let gate: Admission;
    try {
      gate = await circuits.admit(row.tenant, host, HeldBook.dbNow(held, this.#d.clock.now()));
    } catch (err) {
      this.#d.logger.warn({ err, host }, "could not read the circuit; sending");
      return false;
    }
    if (gate.send) return false;
    try {
      await circuits.defer(row.tenant, host, { id: row.id, attempt: row.attempt }, gate.until);
    } catch (err) {
      this.#d.logger.warn({ err, host }, "could not give back a row for an open circuit; sending");
      return false;
    }
    held.watchdog?.();
    held.watchdog = null;
    held.abort = null;
    this.#d.book.delete(row.id);
    return true;
  }

  /** Aborts every send in flight (forced shutdown). */
  abortAll(reason: string): void {
    for (const held of this.#d.book.all()) {
      if (held.phase === "sending") held.abort?.abort(new OwnAbortReason(reason));
    }
  }
}
