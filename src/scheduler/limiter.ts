/**
 * DEL-13: the scheduler's side of the shared rate limits.
 *
 * The limits live in the database (src/store/rate-limits.ts). Each maintenance pass
 * reloads them ({@link Limiter.refresh}), so a limit set, changed or removed through any
 * process applies to every process from its next pass (OPS-11); between passes the
 * buckets themselves are always read under lock at claim time, so a changed rate or cap
 * takes effect on the next claim of that key everywhere.
 *
 * The producer's main claim leaves out the rows of the limited keys
 * ({@link Limiter.limiters}) and, when it wants more, asks {@link Limiter.claim}, which
 * runs one locked claim per key that has due rows: the keys its buckets held back last
 * time, and the keys of the due rows one walk of the claim index finds
 * (`DUE_LIMITERS_SQL`). A limit without due rows costs a claim nothing, however many
 * there are. Each row it returns carries its slot
 * (`send_at`, database clock), up to a short lookahead ahead of the claim; the executor
 * holds the row until then (see src/store/rate-limits.ts, "Pacing"). When a bucket or a
 * cap held rows back, {@link Limiter.wakeHintMs} tells the scheduler when to ask again:
 * {@link PACE_WAKE_EARLY_MS} before the key's next slot, so it neither spins nor sleeps a
 * whole poll, and a wake-up that runs late by less than that loses no slot.
 */
import type { Clock } from "../clock/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { Database } from "../store/database.js";
import {
  allRateLimits,
  claimLimited,
  dueLimiters,
  PACE_WAKE_EARLY_MS,
  type PacedDelivery,
  type RateLimitRow,
} from "../store/rate-limits.js";

/** Wait before looking again at a key held back by its concurrency cap, ms. */
const CAP_RETRY_MS = 50;

/** Shortest wait the hint gives, ms (a token due sooner is taken a little late). */
const MIN_HINT_MS = 5;

/** Fewest due rows of limited keys one claim's walk reads to find their keys. */
const DUE_WALK_MIN_ROWS = 100;

export interface LimiterDeps {
  db: Database;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  owner: string;
  channels: readonly string[];
}

/** Parameters of one {@link Limiter.claim}. */
export interface LimiterClaim {
  /** Most rows wanted, over every key. */
  limit: number;
  /** Lease length, ms. */
  leaseMs: number;
}

export class Limiter {
  readonly #d: LimiterDeps;
  #limits = new Map<string, RateLimitRow>();
  #limiters: string[] = [];
  /** Keys a bucket or cap held back while due rows waited: tried first by the next claim. */
  readonly #held = new Set<string>();
  /** Round-robin start, so no key starves another when the batch is small. */
  #next = 0;
  #hintMs: number | null = null;
  /** The same hint as a database-clock instant, epoch ms (see {@link Limiter.wakeHintMs}). */
  #wakeAtMs: number | null = null;

  constructor(deps: LimiterDeps) {
    this.#d = deps;
  }

  /** The limiters (`tenant/key`) that have a limit, as of the last refresh. */
  get limiters(): readonly string[] {
    return this.#limiters;
  }

  /** DEL-13: whether `limiter` (`tenant/key`) has a limit, as of the last refresh. */
  isLimited(limiter: string): boolean {
    return this.#limits.has(limiter);
  }

  /**
   * When a bucket or a cap last held due rows back: how long until it is worth claiming
   * again, ms; null when nothing was held back.
   *
   * With `dbNowMs` (the database clock's "now" of a later statement, epoch ms) the wait
   * counts from the instant the bucket was read, not from the caller's look: the claim's
   * commit and the wake-up query that ran since are taken off, so a worker that keeps a
   * bucket busy asks {@link PACE_WAKE_EARLY_MS} before the key's next slot rather than
   * that much later. The lead is what a late wake-up may cost without losing a slot;
   * later than that, the tokens past the burst are lost for good.
   */
  wakeHintMs(dbNowMs?: number): number | null {
    if (dbNowMs !== undefined && this.#wakeAtMs !== null) {
      return Math.max(MIN_HINT_MS, this.#wakeAtMs - dbNowMs);
    }
    return this.#hintMs;
  }

  /** OPS-11: reloads every limit from the database and updates the token gauge. */
  async refresh(): Promise<void> {
    const limits = await allRateLimits(this.#d.db, this.#d.clock.sqlNow());
    this.#limits = new Map(limits.map((l) => [l.limiter, l]));
    this.#limiters = limits.map((l) => l.limiter);
    for (const k of this.#held) if (!this.#limits.has(k)) this.#held.delete(k);
    this.#d.metrics.rateLimitTokens.reset();
    for (const l of limits) {
      this.#d.metrics.rateLimitTokens.set({ key: l.limiter }, Number(l.tokens));
    }
  }

  /**
   * Claims due rows of the limited keys, at most `limit` in all, each key under its bucket
   * and cap, each row with its slot (`send_at`: never send it earlier). Throws the
   * database error of a failed claim (rows claimed before it are returned by none: the
   * caller's orphan release gives them back).
   */
  async claim(p: LimiterClaim): Promise<PacedDelivery[]> {
    const out: PacedDelivery[] = [];
    this.#hintMs = null;
    this.#wakeAtMs = null;
    if (this.#limits.size === 0) return out;
    // The keys with due rows: those held back last time (their rows still wait), then
    // those of the oldest due rows of every other limited key.
    const held = [...this.#held];
    const found = await dueLimiters(this.#d.db, {
      now: this.#d.clock.sqlNow(),
      channels: this.#d.channels,
      limited: this.#limiters,
      skip: held,
      rows: Math.max(DUE_WALK_MIN_ROWS, p.limit),
    });
    const keys = [...held, ...found];
    const n = keys.length;
    if (n === 0) return out;
    const start = this.#next % n;
    this.#next = (start + 1) % n;
    for (let i = 0; i < n && out.length < p.limit; i++) {
      const limiter = keys[(start + i) % n] as string;
      const l = this.#limits.get(limiter);
      if (!l) {
        this.#held.delete(limiter);
        continue;
      }
      const result = await claimLimited(this.#d.db, {
        now: this.#d.clock.sqlNow(),
        owner: this.#d.owner,
        leaseMs: p.leaseMs,
        limit: p.limit - out.length,
        channels: this.#d.channels,
        tenant: l.tenant,
        key: l.key,
      });
      out.push(...result.rows);
      const bucket = result.bucket;
      this.#held.delete(limiter);
      if (!bucket) continue;
      const tokensLeft = Math.max(0, Number(bucket.tokens) - result.rows.length);
      this.#d.metrics.rateLimitTokens.set({ key: l.limiter }, tokensLeft);
      if (result.rows.length < result.allowed) continue; // nothing more is due for this key
      if (result.allowed >= p.limit - (out.length - result.rows.length)) continue; // not held back
      // Held back by the bucket or the cap while due rows may wait.
      this.#held.add(limiter);
      this.#d.metrics.rateLimitThrottled.inc({ key: l.limiter });
      const capped =
        bucket.concurrency !== null &&
        bucket.concurrency - Number(bucket.busy) <= result.allowed &&
        result.byTokens > result.allowed;
      const readAt = new Date(bucket.read_at).getTime();
      // The key's next slot: the token after the last one this claim took, counted on the
      // bucket's own instants (CLAIM_LIMITED_SQL's update), so the wake-up is not pushed
      // back by the time the commit and the wake-up query took.
      const rate = Number(bucket.rate_per_second);
      const k = result.rows.length;
      const owed = Math.max(0, k - Number(bucket.tokens));
      const left = Math.max(0, Number(bucket.tokens) - k);
      const nextSlotMs =
        new Date(bucket.tokens_at).getTime() + ((owed + Math.max(0, 1 - left)) / rate) * 1000;
      const atMs = capped ? readAt + CAP_RETRY_MS : nextSlotMs - PACE_WAKE_EARLY_MS;
      const waitMs = Math.max(MIN_HINT_MS, atMs - readAt);
      this.#hintMs = this.#hintMs === null ? waitMs : Math.min(this.#hintMs, waitMs);
      this.#wakeAtMs = this.#wakeAtMs === null ? atMs : Math.min(this.#wakeAtMs, atMs);
    }
    return out;
  }
}
