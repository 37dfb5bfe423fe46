/**
 * The scheduler (OPS-1): a delivery pipeline plus maintenance services.
 *
 *   producer ──► executor ──► completer          (src/scheduler/{producer,executor,completer}.ts)
 *   claims ahead   sends under    settles in
 *   of need        the limit      batches
 *        └──── lease keeper renews what is held ────┘   (lease-keeper.ts)
 *
 *   maintenance, every `pollMs` or when woken:
 *   heartbeat → settings → recover (+ orphaned claims) → plan → misfire → digest (DEL-19:
 *   recover and claim; the digest sends run on, off the pass) → retention and gauges
 *   (own cadences)
 *
 * Wake-ups are event-driven and coalesced: a freed send slot refills the producer only
 * when the held rows fall to half the target; a claim that came back short arms one
 * timer for the next admissible row or lease expiry (never a zero-delay loop: a due row
 * that could not be claimed backs off); LISTEN/NOTIFY and new schedules kick the
 * producer; the poll remains as a safety net.
 *
 * Tests drive it step by step with {@link Scheduler.tick} and {@link Scheduler.drain} on
 * a TestClock; {@link Scheduler.start} runs it on its own.
 */
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type { Clock, CancelTimer } from "../clock/index.js";
import type { Channel } from "../channels/types.js";
import type { SchedulerOptions } from "../config/index.js";
import { isRetryableDatabaseError, PunctualError } from "../errors/index.js";
import { StreakLogger } from "../observability/error-log.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { Database } from "../store/database.js";
import { nextWake, releaseClaims } from "../store/deliveries/index.js";
import { markInstanceStopped } from "../store/operations.js";
import { Completer } from "./completer.js";
import { Executor } from "./executor.js";
import { HeldBook } from "./held.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { Limiter } from "./limiter.js";
import { CircuitBreaker } from "./circuits.js";
import { QuietRetries } from "./quiet-retry.js";
import { planSweep, misfireSweep } from "./plan.js";
import { audienceSweep } from "./audience.js";
import { DigestSender } from "./digests.js";
import { RecipientGate } from "./recipient-gate.js";
import { Producer } from "./producer.js";
import { SingleFlight } from "./single-flight.js";
import { heartbeat, passSucceeded, type HeartbeatState } from "./services/heartbeat.js";
import { clusterGauges } from "./services/gauges.js";
import { recover } from "./services/recover.js";
import { retention } from "./services/retention.js";
import type { ServiceContext } from "./services/service.js";
import { LiveSettings, settingsSweep } from "./services/settings.js";

/** What one tick did (tests and `punctual status` read it). */
export interface TickReport {
  recovered: number;
  planned: number;
  skipped: number;
  claimed: number;
  /** Set when a sweep failed and ended the tick. */
  failedSweep: string | null;
  /**
   * DEL-19: digests recovered, and claimed and started in this tick (their sends run on,
   * off the pass; `drain()` waits for them).
   */
  digests?: { recovered: number; started: number };
}

export interface SchedulerDeps {
  db: Database;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  channels: ReadonlyMap<string, Channel>;
  options: SchedulerOptions;
  /** Release version, recorded in the instances table. */
  version: string;
  /** `start` (API + scheduler) or `worker`. */
  role: string;
  /**
   * Database-held settings this process applies (OPS-11); its `options` replace
   * `options` above. Default: live settings over `options`, without a webhook secret.
   */
  settings?: LiveSettings;
}

function emptyReport(): TickReport {
  return { recovered: 0, planned: 0, skipped: 0, claimed: 0, failedSweep: null };
}

/** Lease owner of this process: `host#pid#nonce` (a restarted process never reuses one). */
export function makeOwnerId(): string {
  return `${hostname()}#${process.pid}#${randomBytes(4).toString("hex")}`;
}

/** First back-off when due rows exist that this worker could not claim, ms. */
const EMPTY_CLAIM_BACKOFF_MS = 10;

/**
 * One scheduler instance. `start()` runs the loop on its own; tests drive it with
 * `tick()` and `drain()` on a TestClock instead.
 */
export class Scheduler {
  readonly owner: string;
  readonly #d: SchedulerDeps;
  readonly #log: Logger;
  readonly #ctx: ServiceContext;
  readonly #book = new HeldBook();
  readonly #executor: Executor;
  readonly #completer: Completer;
  readonly #keeper: LeaseKeeper;
  readonly #producer: Producer;
  readonly #limiter: Limiter;
  readonly #circuits: CircuitBreaker;
  readonly #heartbeat: HeartbeatState = { skewMs: 0 };
  readonly #streaks = new Map<string, StreakLogger>();
  readonly #channelNames: string[];
  #running = false;
  #stopping = false;
  /** Set by stop(), cleared by start(): tick() refuses to run in between. */
  #stopped = false;
  readonly #maintenance: SingleFlight;
  readonly #claims: SingleFlight;
  /** DEL-19: claims of digests when a digest slot frees (coalesced). */
  readonly #digestClaims: SingleFlight;
  readonly #digests: DigestSender;
  #pollTimer: CancelTimer | null = null;
  #wakeTimer: CancelTimer | null = null;
  #emptyBackoffMs = 0;
  #unlisten: (() => Promise<void>) | null = null;
  #lastRetention = Number.NEGATIVE_INFINITY;
  #lastGauges = Number.NEGATIVE_INFINITY;
  readonly #settings: LiveSettings;
  #dbFailures = 0;
  #lastPassAt: number | null = null;
  #lastTickAt: number | null = null;
  #lastTickMs: number | null = null;
  /** Whether the last claim attempt failed: a pass is not successful while dispatch fails. */
  #dispatchFailing = false;
  /** Claim attempts that failed in a row; 0 after a successful one. */
  #claimFailures = 0;

  constructor(given: SchedulerDeps) {
    // OPS-11: every part reads the live options, which a settings change updates in place.
    this.#settings = given.settings ?? new LiveSettings(given.options);
    const deps = { ...given, options: this.#settings.options };
    this.#d = deps;
    const live = () => this.#running && !this.#stopping;
    this.#maintenance = new SingleFlight(
      () => this.#maintainOnce(),
      live,
      () => {
        this.#pollTimer?.();
        this.#pollTimer = null;
      },
    );
    this.#claims = new SingleFlight(
      () => this.#fillOnce(),
      live,
      () => {
        this.#wakeTimer?.();
        this.#wakeTimer = null;
      },
    );
    this.#digestClaims = new SingleFlight(() => this.#claimDigests(), live);
    this.owner = makeOwnerId();
    this.#log = deps.logger.child({ component: "scheduler", owner: this.owner });
    const { db, clock, metrics, options } = deps;
    this.#channelNames = [...deps.channels.keys()];
    this.#ctx = {
      db,
      clock,
      logger: this.#log,
      metrics,
      options,
      owner: this.owner,
      version: deps.version,
      role: deps.role,
    };
    this.#completer = new Completer({
      db,
      clock,
      logger: this.#log,
      metrics,
      owner: this.owner,
      book: this.#book,
      streak: this.#streak("settle"),
      settle: (batch) => this.#producer.settle(batch),
    });
    this.#circuits = new CircuitBreaker({
      db,
      clock,
      logger: this.#log,
      metrics,
      owner: this.owner,
      policy: {
        failures: options.circuitFailures,
        backoffMs: options.circuitBackoffMs,
        maxBackoffMs: options.circuitMaxBackoffMs,
      },
      probeTurnMs: options.sendTimeoutMs,
    });
    this.#digests = new DigestSender({
      db,
      clock,
      logger: this.#log,
      metrics,
      options,
      channels: deps.channels,
      owner: this.owner,
      // OPS-6: a stopping process claims no further digests.
      stopping: () => this.#stopping,
      onSlotFree: () => this.#digestClaims.request(),
      // DEL-13 / CH-7: a digest obeys its limiter and its host's circuit as a delivery does.
      circuits: this.#circuits,
      limited: (limiter) => this.#limiter.isLimited(limiter),
    });
    this.#executor = new Executor({
      clock,
      channels: deps.channels,
      options,
      logger: this.#log,
      metrics,
      book: this.#book,
      completer: this.#completer,
      onSlotFree: () => this.#onSlotFree(),
      circuits: this.#circuits,
      quietRetries: new QuietRetries({ db, logger: this.#log, owner: this.owner }),
      recipients: new RecipientGate({
        db,
        clock,
        logger: this.#log,
        metrics: deps.metrics,
        owner: this.owner,
      }),
    });
    this.#keeper = new LeaseKeeper({
      db,
      clock,
      options,
      logger: this.#log,
      metrics,
      owner: this.owner,
      book: this.#book,
      executor: this.#executor,
      streak: this.#streak("renew"),
    });
    this.#limiter = new Limiter({
      db,
      clock,
      logger: this.#log,
      metrics,
      owner: this.owner,
      channels: this.#channelNames,
    });
    this.#producer = new Producer({
      db,
      clock,
      options,
      logger: this.#log,
      metrics,
      owner: this.owner,
      channels: this.#channelNames,
      book: this.#book,
      executor: this.#executor,
      keeper: this.#keeper,
      mayRide: () => this.#running && !this.#stopping && this.#claimFailures === 0,
      onRide: (claimed, exhausted) => this.#onRide(claimed, exhausted),
      limiter: this.#limiter,
    });
  }

  /**
   * Process-clock time of the last successful pass, ms (null before the first): every
   * maintenance sweep succeeded, the pass was recorded, and the last claim attempt did not
   * fail. Health and the last-pass metric read this (OPS-3, OPS-4).
   */
  get lastPassAt(): number | null {
    return this.#lastPassAt;
  }

  /** Process-clock time the last maintenance tick started, successful or not, ms. */
  get lastTickAt(): number | null {
    return this.#lastTickAt;
  }

  /** The database-held settings this process runs on (OPS-11). */
  get settings(): LiveSettings {
    return this.#settings;
  }

  /** Duration of the last maintenance pass, ms (null before the first). */
  get lastTickMs(): number | null {
    return this.#lastTickMs;
  }

  /** Estimated database-clock minus process-clock, ms (OPS-9). */
  get skewMs(): number {
    return this.#heartbeat.skewMs;
  }

  /** Number of sends in flight (deliveries; digests apart: {@link digestsInFlight}). */
  get inFlight(): number {
    return this.#executor.sending;
  }

  /** DEL-19: digest sends in flight (claimed, not yet settled), off the maintenance pass. */
  get digestsInFlight(): number {
    return this.#digests.inFlight;
  }

  /**
   * Rows this process holds: claimed and queued, sending, or waiting for their settle;
   * each digest in flight counts as one (DEL-19).
   */
  get held(): number {
    return this.#book.size + this.#digests.inFlight;
  }

  /**
   * DEL-13: held rows waiting in the queue for their rate-limit slot (claimed ahead of it);
   * on a test clock they go only once the clock reaches their slot.
   */
  get waitingForSlot(): number {
    return this.#executor.waitingForSlot;
  }

  /** Whether the loop runs (between start() and stop()). */
  get running(): boolean {
    return this.#running;
  }

  /** Starts the loop: listens for wake-ups and runs the first pass now. */
  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    this.#stopping = false;
    this.#stopped = false;
    this.#producer.resume();
    this.#keeper.resume();
    this.#digests.resume();
    await this.#listen();
    this.#requestMaintenance();
  }

  async #listen(): Promise<void> {
    try {
      this.#unlisten = await this.#d.db.listen(
        "punctual_wake",
        () => this.wake(false),
        () => {
          // The listening connection died (database restart): listen again on a later pass.
          this.#unlisten = null;
          this.#log.warn("LISTEN connection lost; relying on timers and the poll until it is back");
        },
      );
    } catch (err) {
      this.#log.warn({ err }, "LISTEN failed; relying on timers and the poll");
    }
  }

  /**
   * Requests work as soon as possible, coalesced with what runs: the producer claims what
   * is due; `full` also asks for a maintenance pass (planning, recovery…).
   */
  wake(full = true): void {
    if (!this.#running || this.#stopping) return;
    this.#kick();
    if (full) this.#requestMaintenance();
  }

  #streak(what: string): StreakLogger {
    let s = this.#streaks.get(what);
    if (!s) {
      s = new StreakLogger(this.#log, what, this.#d.options.errorLogEveryTicks);
      this.#streaks.set(what, s);
    }
    return s;
  }

  // ── maintenance ────────────────────────────────────────────────────────────────────

  #requestMaintenance(): void {
    this.#maintenance.request();
  }

  /** One maintenance pass of the running loop, then the poll timer and a claim. */
  async #maintainOnce(): Promise<void> {
    let report: TickReport;
    try {
      report = await this.#maintain();
    } catch (err) {
      this.#log.error({ err }, "maintenance pass crashed");
      report = emptyReport();
      report.failedSweep = "maintenance";
    }
    if (!this.#running || this.#stopping) return;
    if (!this.#maintenance.pending) this.#armPoll(report);
    // While claims fail, their own backoff timer retries them: a claim kicked from here
    // would fail at once, ask for maintenance again (orphans suspected) and spin (OPS-8).
    if (this.#claimFailures === 0) this.#kick();
  }

  #armPoll(report: TickReport): void {
    const o = this.#d.options;
    // OPS-8: back off while the database is away, up to 30 s.
    const delay = report.failedSweep
      ? Math.min(30_000, o.pollMs * 2 ** Math.min(this.#dbFailures, 5))
      : o.pollMs;
    this.#pollTimer?.();
    this.#pollTimer = this.#d.clock.setTimer(delay, () => {
      this.#pollTimer = null;
      this.#requestMaintenance();
    });
  }

  /**
   * heartbeat → recover → plan → misfire → retention; a failed sweep ends the pass. A pass
   * whose sweeps all succeeded (and while dispatch is not failing) is recorded as the last
   * successful one, in the database and in memory; the heartbeat at its start only stamps
   * that a tick started (OPS-4: a worker that ticks but fails goes stale).
   */
  async #maintain(): Promise<TickReport> {
    const started = performance.now();
    this.#lastTickAt = this.#d.clock.now();
    this.#d.metrics.lastTick.set(
      { instance: this.owner },
      (this.#lastTickAt + this.#heartbeat.skewMs) / 1000,
    );
    const report = emptyReport();
    const sweeps: Array<[string, () => Promise<void>]> = [
      ["heartbeat", () => heartbeat(this.#ctx, this.#heartbeat, this.#streak("clock-skew"))],
      // DEL-13 / OPS-11 / CH-7: limits and circuits of every process, from this pass on.
      ["limits", () => this.#limiter.refresh().then(() => this.#circuits.refresh())],
      ["settings", () => settingsSweep({ ...this.#ctx, settings: this.#settings })],
      ["recover", async () => void (report.recovered = await this.recover())],
      ["plan", async () => void (report.planned = await planSweep(this.#planDeps()))],
      // API-11: schedules for recipients, planned per recipient.
      ["plan", async () => void (report.planned += await audienceSweep(this.#planDeps()))],
      ["misfire", async () => void (report.skipped = await misfireSweep(this.#planDeps()))],
      // DEL-19: digests recovered, formed and claimed; their sends run on, off the pass.
      ["digest", async () => void (report.digests = await this.#digests.sweep())],
      ["retention", () => this.#retention()],
      ["gauges", () => this.#gauges()],
    ];
    for (const [name, run] of sweeps) {
      if (this.#stopping && name !== "heartbeat") break;
      if (!(await this.#sweep(name, run, report))) break;
    }
    if (!report.failedSweep) {
      if (this.#running && !this.#stopping && this.#unlisten === null) await this.#listen();
      this.#dbFailures = 0;
      const durationMs = performance.now() - started;
      if (
        !this.#dispatchFailing &&
        (await this.#sweep("heartbeat", () => passSucceeded(this.#ctx, durationMs), report))
      ) {
        this.#lastPassAt = this.#d.clock.now();
        this.#d.metrics.lastPass.set(
          { instance: this.owner },
          (this.#lastPassAt + this.#heartbeat.skewMs) / 1000,
        );
      }
    }
    this.#lastTickMs = performance.now() - started;
    this.#d.metrics.tickDuration.observe(this.#lastTickMs / 1000);
    return report;
  }

  async #sweep(name: string, run: () => Promise<void>, report: TickReport): Promise<boolean> {
    try {
      await run();
      this.#streak(name).success();
      return true;
    } catch (err) {
      this.#d.metrics.sweepFailures.inc({ sweep: name });
      this.#streak(name).failure(err, { sweep: name });
      report.failedSweep = name;
      if (isRetryableDatabaseError(err)) this.#dbFailures++;
      return false;
    }
  }

  #planDeps() {
    const { db, clock, metrics, options, channels } = this.#d;
    return { db, clock, logger: this.#log, metrics, options, channels };
  }

  /** DEL-19: claims digests into slots freed since the last pass (errors end in the streak log). */
  async #claimDigests(): Promise<void> {
    try {
      await this.#digests.fill();
      this.#streak("digest").success();
    } catch (err) {
      this.#d.metrics.sweepFailures.inc({ sweep: "digest" });
      this.#streak("digest").failure(err, { sweep: "digest" });
    }
  }

  async #retention(): Promise<void> {
    const now = this.#d.clock.now();
    if (now - this.#lastRetention < this.#d.options.retentionEveryMs) return;
    this.#lastRetention = now;
    await retention(this.#ctx);
  }

  async #gauges(): Promise<void> {
    const now = this.#d.clock.now();
    if (now - this.#lastGauges < this.#d.options.gaugesEveryMs) return;
    this.#lastGauges = now;
    await clusterGauges(this.#ctx);
  }

  /**
   * DEL-6: recovers expired leases (any worker's), and gives back this worker's orphaned
   * claims (DEL-16). Returns how many expired leases it recovered.
   */
  async recover(): Promise<number> {
    // This process's own give-backs first: recovery on another connection would otherwise
    // race one (an expired lease it is already handing back unsent).
    await this.#producer.quiet();
    // Outcomes this process knows but could not record yet (database away) go first:
    // recovering its own expired rows would re-send what it already sent (DEL-2).
    if (this.#completer.pending > 0) await this.#completer.flush();
    const recovered = await recover(this.#ctx);
    await this.#producer.releaseOrphans();
    return recovered;
  }

  /**
   * DEL-16: renews the lease of every held row and digest in flight now (the keeper and
   * the digest sender also do it on their own); joins a renewal already under way.
   */
  async renewLeases(): Promise<void> {
    await Promise.all([this.#keeper.renew(), this.#digests.renew()]);
  }

  // ── dispatch ───────────────────────────────────────────────────────────────────────

  /**
   * DEL-2: claims due rows up to the held target and starts their sends.
   * Returns the number claimed. Sends run on; `drain()` waits for them.
   */
  async dispatch(): Promise<number> {
    if (this.#stopping) return 0;
    return (await this.#producer.fill()).claimed;
  }

  #onSlotFree(): void {
    if (!this.#running || this.#stopping) return;
    // The freed slot's outcome is about to be settled: the claim rides on that statement
    // (Producer.settle) unless a claim is already on its way.
    if (this.#completer.busy) return;
    if (this.#producer.wantsMore()) this.#kick();
  }

  /** After a claim rode on a settle: claim on, or arm the wake-up when it came back short. */
  #onRide(claimed: number, exhausted: boolean): void {
    if (!this.#running || this.#stopping) return;
    this.#dispatchFailing = false;
    if (claimed > 0) this.#emptyBackoffMs = 0;
    if (!exhausted) {
      if (this.#producer.wantsMore()) this.#kick();
      return;
    }
    // Like a short claim of the fill loop: one timer for the next admissible row.
    if (!this.#claims.pending && !this.#claims.current) void this.#armWake(claimed === 0);
  }

  /** Coalesced claim: one fill at a time, one follow-up at most. */
  #kick(): void {
    this.#claims.request();
  }

  async #fillOnce(): Promise<void> {
    try {
      const { claimed, exhausted } = await this.#producer.fill();
      this.#dispatchFailing = false;
      this.#claimFailures = 0;
      this.#streak("dispatch").success();
      if (this.#producer.orphansSuspected) this.#requestMaintenance();
      if (claimed > 0) this.#emptyBackoffMs = 0;
      if (exhausted && !this.#claims.pending) await this.#armWake(claimed === 0);
    } catch (err) {
      this.#dispatchFailing = true;
      this.#claimFailures++;
      this.#d.metrics.sweepFailures.inc({ sweep: "dispatch" });
      this.#streak("dispatch").failure(err, { sweep: "dispatch" });
      if (this.#producer.orphansSuspected) this.#requestMaintenance();
      // OPS-8: back off, doubling from twice the poll up to 30 s, while claims fail.
      const exponent = Math.min(this.#claimFailures, 5);
      this.#setWakeTimer(Math.min(30_000, this.#d.options.pollMs * 2 ** exponent));
    }
  }

  /** Arms the timer for the next admissible row or lease expiry (bounded by the poll). */
  async #armWake(claimedNothing: boolean): Promise<void> {
    const o = this.#d.options;
    let delay = o.pollMs;
    let recoverAt: number | null = null;
    try {
      const row = await nextWake(this.#d.db, this.#d.clock.sqlNow(), this.#channelNames);
      if (row) {
        const now = row.db_now.getTime();
        if (row.next_run_at) {
          const until = row.next_run_at.getTime() - now;
          if (until > 0) {
            delay = Math.min(delay, until);
            this.#emptyBackoffMs = 0;
          } else if (this.#limiter.wakeHintMs() !== null) {
            // DEL-13: due rows held back by a rate limit: look again when a token is due
            // (counted on the database clock from the bucket's read, not from now).
            delay = Math.min(delay, this.#limiter.wakeHintMs(now) as number);
          } else if (claimedNothing) {
            // Due rows this worker could not claim (others hold their locks): back off,
            // doubling, rather than spin.
            this.#emptyBackoffMs = Math.min(
              o.pollMs,
              Math.max(EMPTY_CLAIM_BACKOFF_MS, this.#emptyBackoffMs * 2),
            );
            delay = Math.min(delay, this.#emptyBackoffMs);
          } else {
            delay = 0;
          }
        }
        if (row.next_lease_expiry) {
          recoverAt = Math.max(0, row.next_lease_expiry.getTime() - now);
        }
      }
    } catch (err) {
      this.#streak("wake").failure(err);
    }
    if (recoverAt !== null && recoverAt < o.pollMs) {
      // A lease ends before the next poll: recover it on time (DEL-6).
      this.#pollTimer?.();
      this.#pollTimer = this.#d.clock.setTimer(recoverAt, () => {
        this.#pollTimer = null;
        this.#requestMaintenance();
      });
    }
    this.#setWakeTimer(delay);
  }

  #setWakeTimer(delay: number): void {
    if (!this.#running || this.#stopping) return;
    this.#wakeTimer?.();
    this.#wakeTimer = this.#d.clock.setTimer(delay, () => {
      this.#wakeTimer = null;
      this.#kick();
    });
  }

  /**
   * Runs one full pass: heartbeat → recover → plan → misfire → retention → dispatch.
   * A sweep whose database work fails ends the pass (OPS-1).
   * @throws PunctualError (code `SCHEDULER_STOPPED`) after stop(), until start() again:
   *   a stopped scheduler no longer renews leases or retries settles, so a pass would
   *   claim rows it cannot look after.
   */
  async tick(): Promise<TickReport> {
    if (this.#stopped) {
      throw new PunctualError(
        "SCHEDULER_STOPPED",
        "scheduler.tick() was called after stop(): start() the scheduler again, or create a new one",
      );
    }
    const report = await this.#maintain();
    if (report.failedSweep || this.#stopping) return report;
    this.#dispatchFailing = !(await this.#sweep(
      "dispatch",
      async () => void (report.claimed = await this.dispatch()),
      report,
    ));
    return report;
  }

  /**
   * Waits until every held row and every digest in flight (DEL-19) has been sent and
   * settled (tests, shutdown), or until `enough()` holds: it is checked before each wait
   * and each time a row or digest leaves (the testing kit stops once only sends waiting on
   * its test clock are held). Rows waiting for their rate-limit slot
   * ({@link waitingForSlot}) are not waited for: they go when the clock reaches their slot.
   */
  async drain(enough?: () => boolean): Promise<void> {
    const idle = () =>
      this.#book.size <= this.#executor.waitingForSlot && this.#digests.inFlight === 0;
    while (!idle() && !enough?.()) {
      const changed = Promise.race([this.#book.changed(), this.#digests.changed()]);
      await this.#completer.flush();
      if (idle() || enough?.()) break;
      await changed;
    }
    await this.#completer.idle();
  }

  /**
   * OPS-13: runs the gauges sweep now, off its cadence: computes and stores the cluster
   * gauges when this process holds (or wins) their lease, else reads the stored ones.
   * `/metrics` never calls it: it serves what the last sweep set.
   */
  async refreshGauges(): Promise<void> {
    this.#lastGauges = this.#d.clock.now();
    await clusterGauges(this.#ctx);
  }

  /**
   * OPS-6, DEL-16: stops claiming, gives back at once the rows it will not send, lets
   * in-flight sends (digests too, DEL-19) finish within `graceMs`, then aborts the rest
   * (their outcome is settled as unknown: retry on idempotent channels, in doubt
   * otherwise), records every outcome, and marks the instance stopped.
   */
  async stop(graceMs: number = this.#d.options.shutdownGraceMs): Promise<void> {
    this.#stopped = true;
    // A scheduler driven by tick() (never started) may still hold rows: stop them too.
    if (!this.#running && this.#book.size === 0 && this.#digests.inFlight === 0) return;
    this.#stopping = true;
    this.#producer.stop();
    // The grace period starts now, before anything is awaited.
    let cancelGrace: CancelTimer | null = null;
    const graceOver = new Promise<true>((resolve) => {
      if (graceMs <= 0) resolve(true);
      else cancelGrace = this.#d.clock.setTimer(graceMs, () => resolve(true));
    });
    this.#pollTimer?.();
    this.#pollTimer = null;
    this.#wakeTimer?.();
    this.#wakeTimer = null;
    await this.#unlisten?.().catch(() => undefined);
    this.#unlisten = null;
    await this.#maintenance.current;
    await this.#claims.current;
    await this.#digestClaims.current;
    await this.#releaseQueued();
    if (this.#executor.sending > 0 || this.#digests.inFlight > 0) {
      const timedOut = await Promise.race([this.#sendsDone().then(() => false), graceOver]);
      if (timedOut) {
        this.#log.warn(
          { inFlight: this.#executor.sending, digestsInFlight: this.#digests.inFlight },
          "shutdown deadline reached: aborting in-flight sends",
        );
        this.#executor.abortAll("shutting down");
        this.#digests.abortAll("shutting down");
        await Promise.race([
          this.#sendsDone(),
          new Promise<void>((resolve) => setTimeout(resolve, 2_000).unref()),
        ]);
      }
    }
    (cancelGrace as CancelTimer | null)?.();
    this.#completer.stopRetrying();
    await this.#completer.flush();
    await this.#producer.releaseOrphans().catch(() => undefined);
    this.#keeper.stop();
    this.#digests.stop();
    await markInstanceStopped(this.#d.db, this.#d.clock.sqlNow(), this.owner).catch(
      () => undefined,
    );
    this.#running = false;
    this.#stopping = false;
  }

  /** Resolves once no send (delivery or digest, DEL-19) is in flight. */
  async #sendsDone(): Promise<void> {
    while (this.#executor.sending > 0) await this.#book.changed();
    await this.#digests.idle();
  }

  /** DEL-16: claimed rows that never started go back at once, not a lease later. */
  async #releaseQueued(): Promise<void> {
    const queued = this.#executor.takeQueued();
    if (queued.length === 0) return;
    try {
      const released = await releaseClaims(
        this.#d.db,
        this.#d.clock.sqlNow(),
        this.owner,
        queued.map((h) => ({ id: h.row.id, attempt: h.row.attempt })),
      );
      this.#d.metrics.claimsReleased.inc({ reason: "shutdown" }, released.length);
      this.#log.info({ released: released.length }, "gave back claims not yet started");
    } catch (err) {
      this.#log.warn(
        { err, rows: queued.length },
        "could not give back unstarted claims; their leases expire and recovery takes them",
      );
    }
    for (const h of queued) this.#book.delete(h.row.id);
  }
}
