/**
 * The producer: claims due rows in batches ahead of need (DEL-2, DEL-13, DEL-16).
 *
 * It keeps up to `concurrency + prefetch target` rows held (queued or sending) and
 * refills when that falls to half, so a freed slot never claims alone and the executor
 * never waits on a round trip. The prefetch target follows the executor's measured
 * completion rate: about {@link PREFETCH_WINDOW_MS} (300 ms) of work, at most
 * `options.prefetch`, and `min(prefetch, concurrency)` before a rate is known. So the
 * most a crash can strand is `concurrency + prefetch` rows (what is sending plus what
 * is queued), and a queued row waits about one prefetch window, far below its lease.
 *
 * Claims are serialized: one claim statement at a time, coalesced requests. When a claim
 * fails with a connection error its reply may have been lost after the statement
 * committed; the next {@link releaseOrphans} (run by the recover service every pass,
 * and at once after such a failure) gives those rows back for others to claim.
 */
import type { Clock } from "../clock/index.js";
import type { SchedulerOptions } from "../config/index.js";
import { isRetryableDatabaseError } from "../errors/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { Database } from "../store/database.js";
import {
  claimDeliveries,
  releaseClaims,
  releaseOrphans,
  settleAndClaim,
  settleDeliveries,
  type ClaimedDelivery,
  type SettleInput,
} from "../store/deliveries/index.js";
import { leaseMarginMs, type Executor } from "./executor.js";
import { HeldBook, type HeldRow } from "./held.js";
import { traceClaimed } from "./tracing.js";
import type { LeaseKeeper } from "./lease-keeper.js";
import type { Limiter } from "./limiter.js";

/**
 * How much work, in ms of measured throughput, the prefetch aims to hold. 300 ms: under a
 * burst a claim then takes ~150 rows instead of ~50 (each statement's fixed cost shared
 * by three times the rows; database CPU per delivery −30 % measured here,
 * docs/benchmarks.md), and a prefetched row still waits well under a second, far below
 * any lease (at least 1 s; 60 s by default).
 */
export const PREFETCH_WINDOW_MS = 300;

export interface ProducerDeps {
  db: Database;
  clock: Clock;
  options: SchedulerOptions;
  logger: Logger;
  metrics: Metrics;
  owner: string;
  channels: readonly string[];
  book: HeldBook;
  executor: Executor;
  keeper: LeaseKeeper;
  /**
   * Whether a claim may ride on a settle now ({@link Producer.settle}); the scheduler
   * allows it while its loop runs (tests that step it by hand claim only when they ask).
   */
  mayRide?: () => boolean;
  /** Called after a claim rode on a settle: `exhausted` when it came back short. */
  onRide?: (claimed: number, exhausted: boolean) => void;
  /** DEL-13: claims the rows of rate-limited keys; without it every row is unlimited. */
  limiter?: Limiter;
}

/** What {@link Producer} did with one claim's rows: handed to the executor, or given back. */
interface Taken {
  live: number;
  late: number;
}

/** What one {@link Producer.fill} did. */
export interface FillResult {
  /** Rows handed to the executor (rows given back because their reply was late do not count). */
  claimed: number;
  /** The last claim came back short: nothing more is admissible right now. */
  exhausted: boolean;
}

export class Producer {
  readonly #d: ProducerDeps;
  #serial: Promise<unknown> = Promise.resolve();
  #stopped = false;
  /** A claim statement (alone or riding on a settle) is in flight. */
  #claiming = false;
  /** A claim failed in a way that may have lost its reply: release orphans soon. */
  orphansSuspected = false;
  /**
   * DEL-16: the most rows a claim may take while claim replies come back too late to
   * send on (null: `claimBatch`). Halved by each claim that had to give rows back, doubled
   * back by each claim that did not, so a worker whose round trips outlast the lease
   * margin does not hold a full batch at a time out of other workers' reach.
   */
  #lateCap: number | null = null;

  constructor(deps: ProducerDeps) {
    this.#d = deps;
  }

  /** Rows this process aims to hold beyond its send slots. */
  prefetchTarget(): number {
    const o = this.#d.options;
    const rate = this.#d.executor.ratePerMs;
    if (rate === null) return Math.min(o.prefetch, o.concurrency);
    return Math.min(o.prefetch, Math.ceil(rate * PREFETCH_WINDOW_MS));
  }

  /** Rows held that have not finished sending (queued + sending). */
  #active(): number {
    return this.#d.executor.queued + this.#d.executor.sending;
  }

  /** Whether a claim now would be worth its round trip. */
  wantsMore(): boolean {
    if (this.#stopped) return false;
    const target = this.#d.options.concurrency + this.prefetchTarget();
    const active = this.#active();
    return active === 0 || target - active >= Math.max(1, Math.floor(target / 2));
  }

  /** Stops claiming (shutdown). */
  stop(): void {
    this.#stopped = true;
  }

  /** Allows claiming again after {@link stop}. */
  resume(): void {
    this.#stopped = false;
  }

  /**
   * Resolves once every claim, give-back and orphan release queued so far has finished
   * (never rejects). Recovery waits for it, so this process's own give-back in flight is
   * not raced by its recovery statement on another connection.
   */
  quiet(): Promise<void> {
    return this.#serial.then(() => undefined);
  }

  #serialized<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#serial.then(fn, fn);
    this.#serial = run.catch(() => undefined);
    return run;
  }

  /**
   * Claims until the held target is reached or a claim comes back short, handing each
   * batch to the executor. Throws the database error of a failed claim.
   */
  fill(): Promise<FillResult> {
    return this.#serialized(async () => {
      this.#claiming = true;
      try {
        return await this.#fill();
      } finally {
        this.#claiming = false;
      }
    });
  }

  /** Rows a claim now should take (0: none wanted). */
  #want(): number {
    const o = this.#d.options;
    const target = o.concurrency + this.prefetchTarget();
    return Math.max(0, Math.min(this.#claimCap(), target - this.#active()));
  }

  /** The most rows one claim may take now: `claimBatch`, or less after late replies. */
  #claimCap(): number {
    const batch = this.#d.options.claimBatch;
    return this.#lateCap === null ? batch : Math.min(batch, this.#lateCap);
  }

  /**
   * Hands claimed rows to the executor. `sentAt`: the process clock read before the claim
   * statement was sent (DEL-16: a stall between statement and reply shortens the lease this
   * worker believes, never lengthens it).
   */
  #take(rows: readonly ClaimedDelivery[], sentAt: number): Taken {
    if (rows.length === 0) return { live: 0, late: 0 };
    const repliedAt = this.#d.clock.now();
    const held = this.#d.book.add(rows, sentAt, repliedAt);
    const margin = leaseMarginMs(this.#d.options);
    const late = held.filter((h) => HeldBook.leaseLeft(h, repliedAt) <= margin);
    if (late.length > 0) {
      this.#lateCap = Math.max(1, Math.floor(rows.length / 2));
      this.#giveBackLate(late, repliedAt - sentAt);
    } else if (this.#lateCap !== null) {
      const doubled = this.#lateCap * 2;
      this.#lateCap = doubled >= this.#d.options.claimBatch ? null : doubled;
    }
    const live = late.length > 0 ? held.filter((h) => !late.includes(h)) : held;
    traceClaimed(live, repliedAt - sentAt);
    if (live.length > 0) {
      this.#d.executor.enqueue(live);
      this.#d.keeper.ensure();
    }
    return { live: live.length, late: late.length };
  }

  /**
   * DEL-16: rows whose claim reply came back with less than the safety margin of lease
   * left (this worker stalled between statement and reply, or the round trip was slower
   * than the lease allows) are never sent; they are given back at once (fenced, no attempt
   * spent), so another worker, or this one's next claim, takes them without waiting for
   * recovery. One warning per claim, and `punctual_claims_released_total{reason="lease_low"}`.
   */
  #giveBackLate(late: readonly HeldRow[], roundTripMs: number): void {
    const d = this.#d;
    for (const h of late) d.book.delete(h.row.id);
    d.metrics.claimsReleased.inc({ reason: "lease_low" }, late.length);
    d.logger.warn(
      {
        rows: late.length,
        deliveryIds: late.slice(0, 20).map((h) => h.row.id),
        roundTripMs: Math.round(roundTripMs),
        leaseMs: d.options.leaseMs,
      },
      "a claim came back with too little lease left to start a send (this worker stalled, or it or the database is overloaded): gave its rows back unsent",
    );
    const fenced = late.map((h) => ({ id: h.row.id, attempt: h.row.attempt }));
    void this.#serialized(() => releaseClaims(d.db, d.clock.sqlNow(), d.owner, fenced)).catch(
      () => {
        // Still claimed under this owner and no longer held: the orphan release takes them.
        this.orphansSuspected = true;
      },
    );
  }

  /**
   * DEL-2: settles `batch` (for the completer), with this process's next claim riding on
   * the same statement when it wants rows, may ride ({@link ProducerDeps.mayRide}) and no
   * claim is in flight: one statement and one commit per batch instead of two under a
   * burst. Otherwise a plain settle. Returns the ids whose outcome was recorded; throws
   * the database error (the settle's outcomes are then not recorded, and the claim, if
   * its reply was lost, is an orphan released soon).
   */
  async settle(batch: readonly SettleInput[]): Promise<Set<number>> {
    const d = this.#d;
    const plain = () => settleDeliveries(d.db, d.clock.sqlNow(), d.owner, batch);
    if (this.#stopped || this.#claiming || !(d.mayRide?.() ?? false) || !this.wantsMore()) {
      return plain();
    }
    return this.#serialized(async () => {
      const want = this.#stopped ? 0 : this.#want();
      if (want === 0) return plain();
      this.#claiming = true;
      let result;
      let sentAt = d.clock.now();
      try {
        result = await settleAndClaim(d.db, d.clock.sqlNow(), d.owner, batch, {
          leaseMs: d.options.leaseMs,
          limit: want,
          channels: d.channels,
          limited: d.limiter?.limiters ?? [],
          onSent: () => (sentAt = d.clock.now()),
        });
      } catch (err) {
        if (isRetryableDatabaseError(err)) this.orphansSuspected = true;
        throw err;
      } finally {
        this.#claiming = false;
      }
      const taken = this.#take(result.claimed, sentAt);
      // DEL-13: rows of limited keys are claimed by the next fill, under their buckets.
      const limitedKeys = (d.limiter?.limiters.length ?? 0) > 0;
      // DEL-16: a reply too late to send on ends the claiming like a short claim does:
      // the next one waits for the wake-up (backing off), so other workers get the rows.
      d.onRide?.(taken.live, taken.late > 0 || (result.claimed.length < want && !limitedKeys));
      return result.settled;
    });
  }

  async #fill(): Promise<FillResult> {
    const o = this.#d.options;
    let claimed = 0;
    for (;;) {
      if (this.#stopped) return { claimed, exhausted: false };
      const target = o.concurrency + this.prefetchTarget();
      const want = Math.min(this.#claimCap(), target - this.#active());
      if (want <= 0) return { claimed, exhausted: false };
      let rows;
      // DEL-16: the process clock before the statement leaves (refined once a connection
      // is in hand, so waiting for one does not count against the lease).
      let sentAt = this.#d.clock.now();
      try {
        rows = await claimDeliveries(this.#d.db, {
          now: this.#d.clock.sqlNow(),
          owner: this.#d.owner,
          leaseMs: o.leaseMs,
          limit: want,
          channels: this.#d.channels,
          limited: this.#d.limiter?.limiters ?? [],
          onSent: () => (sentAt = this.#d.clock.now()),
        });
      } catch (err) {
        if (isRetryableDatabaseError(err)) this.orphansSuspected = true;
        throw err;
      }
      const taken = this.#take(rows, sentAt);
      claimed += taken.live;
      // DEL-16: rows given back because the reply came too late: claim no more now (the
      // give-back runs next, and the wake-up backs off while nothing was taken), and the
      // next claim is smaller.
      if (taken.late > 0) return { claimed, exhausted: true };
      // DEL-13: then rows of limited keys, under their shared buckets.
      const limiter = this.#d.limiter;
      if (limiter && limiter.limiters.length > 0 && rows.length < want) {
        let more;
        const limitedSentAt = this.#d.clock.now();
        try {
          more = await limiter.claim({ limit: want - rows.length, leaseMs: o.leaseMs });
        } catch (err) {
          if (isRetryableDatabaseError(err)) this.orphansSuspected = true;
          throw err;
        }
        const takenMore = this.#take(more, limitedSentAt);
        claimed += takenMore.live;
        if (takenMore.late > 0) return { claimed, exhausted: true };
        if (rows.length + more.length < want) return { claimed, exhausted: true };
        continue;
      }
      if (rows.length < want) return { claimed, exhausted: true };
    }
  }

  /**
   * DEL-16: gives back rows claimed under this owner that this process does not hold
   * (a claim whose reply was lost). Serialized with claims, so a claim in flight is never
   * mistaken for an orphan. Returns how many were given back.
   */
  releaseOrphans(): Promise<number> {
    return this.#serialized(async () => {
      const released = await releaseOrphans(
        this.#d.db,
        this.#d.clock.sqlNow(),
        this.#d.owner,
        this.#d.book.ids(),
      );
      this.orphansSuspected = false;
      if (released.length > 0) {
        this.#d.metrics.claimsReleased.inc({ reason: "orphan" }, released.length);
        this.#d.logger.warn(
          { released: released.length },
          "gave back claims whose reply was lost with the connection",
        );
      }
      return released.length;
    });
  }
}
