/**
 * The completer: settles finished sends in batches (DEL-2, DEL-14). Every outcome that
 * arrives while a settle is in flight joins the next one, so one statement records many
 * outcomes and their attempts; under a burst the batch grows by itself, idle it is one.
 *
 * A settle that fails (database away) keeps its outcomes and tries again every
 * {@link SETTLE_RETRY_MS} (the lease keeper renews the leases meanwhile). An outcome this
 * worker knows is kept past its lease too, for {@link SETTLE_KEEP_AFTER_LEASE_MS}: the
 * settle is fenced by owner and attempt, not by the lease's time, so once the database is
 * back it is recorded unless another worker's recovery took the row first (then it
 * changes nothing and is logged). Dropping it at the lease's end, as an outage longer
 * than the lease would, left every such row to recovery, which re-sent what was already
 * sent (DEL-2, DEL-5). After the keep, it is given up loudly: recovery then retries it
 * with the same key or marks it in doubt. A settle that lost its lease changes nothing;
 * its attempt is still recorded, the loss is logged and counted.
 */
import type { Clock } from "../clock/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { StreakLogger } from "../observability/error-log.js";
import type { Database } from "../store/database.js";
import { settleDeliveries, type SettleInput } from "../store/deliveries/index.js";
import { HeldBook } from "./held.js";
import { traceSettled } from "./tracing.js";

/** Wait between two tries of a failed settle, ms. */
export const SETTLE_RETRY_MS = 500;
/**
 * How long a known outcome is kept for its settle after its lease ended (database away
 * longer than the lease), ms. Memory is bounded by the rows the worker holds.
 */
export const SETTLE_KEEP_AFTER_LEASE_MS = 10 * 60_000;
/** Most outcomes one settle statement records. */
export const SETTLE_BATCH_MAX = 1_000;

export interface CompleterDeps {
  db: Database;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  owner: string;
  book: HeldBook;
  streak: StreakLogger;
  /**
   * Runs one settle statement for a batch (the producer's, so a claim can ride on it);
   * default: a plain {@link settleDeliveries}.
   */
  settle?: (batch: readonly SettleInput[]) => Promise<Set<number>>;
}

export class Completer {
  readonly #d: CompleterDeps;
  #queue: SettleInput[] = [];
  #flushing: Promise<void> | null = null;
  #scheduled = false;
  #retryTimer: (() => void) | null = null;
  #idleWaiters: Array<() => void> = [];
  /** Ids whose outcome is kept past its lease (warned once each). */
  readonly #pastLease = new Set<number>();
  /** `punctual_deliveries_total` children by channel and final state, made on first use. */
  readonly #outcomes = new Map<string, Map<string, { inc(value?: number): void }>>();

  constructor(deps: CompleterDeps) {
    this.#d = deps;
  }

  /** Outcomes waiting to be recorded. */
  get pending(): number {
    return this.#queue.length;
  }

  /** Whether a settle is queued or running (a claim can ride on the next one). */
  get busy(): boolean {
    return this.#queue.length > 0 || this.#flushing !== null;
  }

  /** Callbacks to run once an outcome's settle applied (see {@link Completer.add}). */
  readonly #onApplied = new Map<SettleInput, () => Promise<void>>();

  /**
   * Queues one outcome; it is recorded with whatever else finishes meanwhile. `onApplied`
   * runs (awaited before {@link Completer.idle} resolves) only when the settle changed the
   * row: never for an outcome fenced out (lease lost, recovered or reclaimed meanwhile)
   * or given up.
   */
  add(item: SettleInput, onApplied?: () => Promise<void>): void {
    this.#queue.push(item);
    if (onApplied) this.#onApplied.set(item, onApplied);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled || this.#flushing || this.#retryTimer) return;
    this.#scheduled = true;
    // Gather every outcome that completes in this turn of the event loop.
    setImmediate(() => {
      this.#scheduled = false;
      void this.flush();
    });
  }

  /** Records what is queued now (and what arrives while it runs). Never throws. */
  flush(): Promise<void> {
    if (this.#flushing) return this.#flushing;
    this.#retryTimer?.();
    this.#retryTimer = null;
    this.#flushing = this.#run().finally(() => {
      this.#flushing = null;
      if (this.#queue.length === 0) {
        const waiters = this.#idleWaiters;
        this.#idleWaiters = [];
        for (const w of waiters) w();
      }
    });
    return this.#flushing;
  }

  /** Resolves once nothing is queued or being recorded. */
  idle(): Promise<void> {
    if (this.#queue.length === 0 && !this.#flushing) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Stops retrying on a timer (shutdown); queued outcomes stay for a last {@link flush}. */
  stopRetrying(): void {
    this.#retryTimer?.();
    this.#retryTimer = null;
  }

  async #run(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, SETTLE_BATCH_MAX);
      try {
        const settled = this.#d.settle
          ? await this.#d.settle(batch)
          : await settleDeliveries(this.#d.db, this.#d.clock.sqlNow(), this.#d.owner, batch);
        this.#d.streak.success();
        for (const b of batch) {
          this.#pastLease.delete(b.id);
          traceSettled(this.#d.book.get(b.id), b.state, settled.has(b.id));
          const onApplied = this.#onApplied.get(b);
          this.#onApplied.delete(b);
          if (onApplied && settled.has(b.id)) {
            // The settle is done: a failure here must not send the batch back for another
            // settle, so it is logged and the circuit misses this one outcome.
            try {
              await onApplied();
            } catch (err) {
              this.#d.logger.warn(
                { deliveryId: b.id, err },
                "could not record the outcome in the host's circuit breaker",
              );
            }
          }
          if (!settled.has(b.id)) {
            this.#d.metrics.leaseLost.inc();
            this.#d.logger.warn(
              { deliveryId: b.id, attempt: b.attempt, outcome: b.outcome },
              "settle found the lease lost (recovered or reclaimed meanwhile): changed nothing",
            );
            this.#d.book.delete(b.id);
            continue;
          }
          // OPS-13: a delivery counts once, by the process whose settle made it final.
          if (b.state !== "retry") {
            this.#outcomeCounter(this.#d.book.get(b.id)?.row.channel ?? "unknown", b.state).inc();
          }
          this.#d.book.delete(b.id);
        }
      } catch (err) {
        this.#d.streak.failure(err, { batch: batch.length });
        this.#keepWhileLeased(batch);
        if (this.#queue.length > 0) {
          this.#retryTimer = this.#d.clock.setTimer(SETTLE_RETRY_MS, () => {
            this.#retryTimer = null;
            void this.flush();
          });
        }
        return;
      }
    }
  }

  /** The labelled counter of one channel and final outcome, looked up once, not per row. */
  #outcomeCounter(channel: string, outcome: string): { inc(value?: number): void } {
    let byOutcome = this.#outcomes.get(channel);
    if (!byOutcome) {
      byOutcome = new Map();
      this.#outcomes.set(channel, byOutcome);
    }
    let child = byOutcome.get(outcome);
    if (!child) {
      child = this.#d.metrics.outcomes.labels(channel, outcome);
      byOutcome.set(outcome, child);
    }
    return child;
  }

  /**
   * DEL-2 / DEL-5: a failed settle keeps its outcomes while their lease lasts and for
   * {@link SETTLE_KEEP_AFTER_LEASE_MS} after it (the fenced settle still records them if
   * no recovery took the rows meanwhile); after that recovery decides.
   */
  #keepWhileLeased(batch: SettleInput[]): void {
    const now = this.#d.clock.now();
    const kept: SettleInput[] = [];
    for (const b of batch) {
      const held = this.#d.book.get(b.id);
      const left = held ? HeldBook.leaseLeft(held, now) : -Infinity;
      if (left > -SETTLE_KEEP_AFTER_LEASE_MS) {
        if (left <= 0 && !this.#pastLease.has(b.id)) {
          this.#pastLease.add(b.id);
          this.#d.logger.warn(
            { deliveryId: b.id, attempt: b.attempt, outcome: b.outcome },
            "the lease ended before the outcome could be recorded (database away): keeping it; it is recorded once the database is back unless another worker recovered the row first",
          );
        }
        kept.push(b);
        continue;
      }
      this.#d.logger.error(
        { deliveryId: b.id, attempt: b.attempt, outcome: b.outcome },
        "could not record the outcome long after the lease ended; recovery will retry it with the same key or mark it in doubt",
      );
      this.#pastLease.delete(b.id);
      this.#onApplied.delete(b);
      this.#d.book.delete(b.id);
    }
    this.#queue.unshift(...kept);
  }
}
