/**
 * The completer: settles finished sends in batches (DEL-2, DEL-14). Every outcome that
 * arrives while a settle is in flight joins the next one, so one statement records many
 * outcomes and their attempts; under a burst the batch grows by itself, idle it is one.
 *
 * A settle that fails (database away) keeps its outcomes and tries again every
 * {@link SETTLE_RETRY_MS}, as long as their leases last (the lease keeper renews them
 * meanwhile); an outcome whose lease ran out is given up loudly: recovery then retries
 * it with the same key or marks it in doubt (DEL-5). A settle that lost its lease changes
 * nothing; its attempt is still recorded, the loss is logged and counted.
 */
import type { Clock } from "../clock/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { StreakLogger } from "../observability/error-log.js";
import type { Database } from "../store/database.js";
import { settleDeliveries, type SettleInput } from "../store/deliveries.js";
import { HeldBook } from "./held.js";

/** Wait between two tries of a failed settle, ms. */
export const SETTLE_RETRY_MS = 500;
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

  /** Queues one outcome; it is recorded with whatever else finishes meanwhile. */
  add(item: SettleInput): void {
    this.#queue.push(item);
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
            const channel = this.#d.book.get(b.id)?.row.channel ?? "unknown";
            this.#d.metrics.outcomes.inc({ channel, outcome: b.state });
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

  /** DEL-5: a failed settle keeps its outcomes while their lease lasts; after that recovery decides. */
  #keepWhileLeased(batch: SettleInput[]): void {
    const now = this.#d.clock.now();
    const kept: SettleInput[] = [];
    for (const b of batch) {
      const held = this.#d.book.get(b.id);
      if (held && HeldBook.leaseLeft(held, now) > 0) {
        kept.push(b);
        continue;
      }
      this.#d.logger.error(
        { deliveryId: b.id, attempt: b.attempt, outcome: b.outcome },
        "could not record the outcome before the lease ended; recovery will retry it with the same key or mark it in doubt",
      );
      this.#d.book.delete(b.id);
    }
    this.#queue.unshift(...kept);
  }
}
