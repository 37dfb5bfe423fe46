/**
 * The scheduler loop (OPS-1). Each tick runs its sweeps in a fixed order:
 *
 *   heartbeat → recover → plan (+ misfire) → dispatch → retention
 *
 * Dispatch claims at most the free send slots, starts the sends outside any transaction,
 * and returns; each send settles on its own, fenced by (id, attempt, state, owner), in
 * small batches. Between ticks one timer is armed for the next due row (so a reminder
 * fires within milliseconds of its due time), LISTEN/NOTIFY wakes the loop when another
 * process adds work, and a slow poll remains as a safety net.
 *
 * Errors on one item never stop the others; a sweep whose database work failed ends the
 * tick (no sweep runs on a rolled-back view); failures are logged per streak (OPS-2)
 * and the loop keeps retrying with backoff while the database is away (OPS-8).
 */
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type { Clock, CancelTimer } from "../clock/index.js";
import type { Channel, ChannelDelivery } from "../channels/types.js";
import type { SchedulerOptions } from "../config/index.js";
import { backoffMs } from "../domain/index.js";
import {
  PermanentError,
  RateLimitedError,
  TransientError,
  isRetryableDatabaseError,
} from "../errors/index.js";
import { StreakLogger } from "../observability/error-log.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { Database } from "../store/database.js";
import {
  CLAIM_SQL,
  NEXT_WAKE_SQL,
  RECOVER_SQL,
  SETTLE_SQL,
  type ClaimedDelivery,
  type SettleInput,
} from "../store/deliveries.js";
import {
  ACQUIRE_LEASE_SQL,
  GAUGES_SQL,
  HEARTBEAT_SQL,
  INSTANCE_STOPPED_SQL,
  RETENTION_SQL,
  VACUUM_SQL,
} from "../store/operations.js";
import { planSweep, misfireSweep } from "./plan.js";

/** What one tick did (tests and `punctual status` read it). */
export interface TickReport {
  recovered: number;
  planned: number;
  skipped: number;
  claimed: number;
  /** Set when a sweep failed and ended the tick. */
  failedSweep: string | null;
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
}

function emptyReport(): TickReport {
  return { recovered: 0, planned: 0, skipped: 0, claimed: 0, failedSweep: null };
}

/** Lease owner of this process: `host#pid#nonce` (a restarted process never reuses one). */
export function makeOwnerId(): string {
  return `${hostname()}#${process.pid}#${randomBytes(4).toString("hex")}`;
}

interface InFlight {
  row: ClaimedDelivery;
  promise: Promise<void>;
  abort: AbortController;
}

const SETTLE_RETRY_MS = 500;

/**
 * One scheduler instance. `start()` runs the loop on its own; tests drive it with
 * `tick()` and `drain()` on a TestClock instead.
 */
export class Scheduler {
  readonly owner: string;
  readonly #d: SchedulerDeps;
  readonly #log: Logger;
  readonly #inFlight = new Map<number, InFlight>();
  #pendingSettles: Array<SettleInput & { leaseExpiresAt: number; channel: string }> = [];
  #settleScheduled = false;
  #settling: Promise<void> = Promise.resolve();
  #running = false;
  #stopping = false;
  #tickPromise: Promise<TickReport> | null = null;
  #wakeRequested = false;
  #fullRequested = false;
  /** The last claim filled every free slot: more due rows may be waiting. */
  #slotBound = false;
  #lastFullAt = Number.NEGATIVE_INFINITY;
  #timer: CancelTimer | null = null;
  #unlisten: (() => Promise<void>) | null = null;
  #lastRetention = 0;
  #dbFailures = 0;
  #lastPassAt: number | null = null;
  #skewMs = 0;
  #streaks = new Map<string, StreakLogger>();
  #channelNames: string[];

  constructor(deps: SchedulerDeps) {
    this.#d = deps;
    this.owner = makeOwnerId();
    this.#log = deps.logger.child({ component: "scheduler", owner: this.owner });
    this.#channelNames = [...deps.channels.keys()];
  }

  /** Process-clock time of the last completed pass, ms (null before the first). */
  get lastPassAt(): number | null {
    return this.#lastPassAt;
  }

  /** Estimated database-clock minus process-clock, ms (OPS-9). */
  get skewMs(): number {
    return this.#skewMs;
  }

  /** Number of sends in flight. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Whether the loop runs (between start() and stop()). */
  get running(): boolean {
    return this.#running;
  }

  /** Starts the loop: listens for wake-ups and runs the first tick now. */
  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    this.#stopping = false;
    await this.#listen();
    this.wake();
  }

  async #listen(): Promise<void> {
    try {
      this.#unlisten = await this.#d.db.listen(
        "punctual_wake",
        () => this.wake(),
        () => {
          // The listening connection died (database restart): listen again on a later tick.
          this.#unlisten = null;
          this.#log.warn("LISTEN connection lost; relying on timers and the poll until it is back");
        },
      );
    } catch (err) {
      this.#log.warn({ err }, "LISTEN failed; relying on timers and the poll");
    }
  }

  /**
   * Requests a pass as soon as possible (coalesced with a running one). `full` asks for
   * every sweep (new schedules, NOTIFY, the poll); otherwise (a send slot came free, a
   * row fell due) dispatch alone runs, unless the last full tick is older than `pollMs`.
   */
  wake(full = true): void {
    if (!this.#running || this.#stopping) return;
    if (full) this.#fullRequested = true;
    if (this.#tickPromise) {
      this.#wakeRequested = true;
      return;
    }
    this.#cancelTimer();
    const runFull =
      this.#fullRequested || this.#d.clock.now() - this.#lastFullAt >= this.#d.options.pollMs;
    this.#fullRequested = false;
    const pass: Promise<TickReport> = runFull ? this.tick() : this.#dispatchPass();
    this.#tickPromise = pass
      .catch((err) => {
        this.#log.error({ err }, "tick crashed");
        return null;
      })
      .then((report) => {
        this.#tickPromise = null;
        if (!this.#running || this.#stopping) return;
        if (this.#wakeRequested) {
          this.#wakeRequested = false;
          this.wake(false);
          return;
        }
        void this.#armTimer(report);
      }) as Promise<TickReport>;
  }

  /** Dispatch alone (a send slot came free, or a planned row fell due). */
  async #dispatchPass(): Promise<TickReport> {
    const report = emptyReport();
    try {
      report.claimed = await this.dispatch();
      this.#streak("dispatch").success();
    } catch (err) {
      this.#d.metrics.sweepFailures.inc({ sweep: "dispatch" });
      this.#streak("dispatch").failure(err, { sweep: "dispatch" });
      report.failedSweep = "dispatch";
      if (isRetryableDatabaseError(err)) this.#dbFailures++;
    }
    return report;
  }

  #cancelTimer(): void {
    this.#timer?.();
    this.#timer = null;
  }

  /** Arms the timer for the next due row, the next lease expiry, or the poll. */
  async #armTimer(report: TickReport | null): Promise<void> {
    const o = this.#d.options;
    let delay = o.pollMs;
    if (report?.failedSweep) {
      // OPS-8: back off while the database is away, up to 30 s.
      delay = Math.min(30_000, o.pollMs * 2 ** Math.min(this.#dbFailures, 5));
    } else {
      try {
        const { rows } = await this.#d.db.query<{
          next_run_at: Date | null;
          next_lease_expiry: Date | null;
          db_now: Date;
        }>(NEXT_WAKE_SQL, [this.#d.clock.sqlNow(), this.#channelNames]);
        const row = rows[0];
        if (row) {
          const now = row.db_now.getTime();
          for (const at of [row.next_run_at, row.next_lease_expiry]) {
            if (at) delay = Math.min(delay, Math.max(0, at.getTime() - now));
          }
        }
      } catch (err) {
        this.#streak("wake").failure(err);
      }
    }
    if (!this.#running || this.#stopping || this.#tickPromise) return;
    this.#cancelTimer();
    this.#timer = this.#d.clock.setTimer(delay, () => {
      this.#timer = null;
      this.wake(false);
    });
  }

  #streak(what: string): StreakLogger {
    let s = this.#streaks.get(what);
    if (!s) {
      s = new StreakLogger(this.#log, what, this.#d.options.errorLogEveryTicks);
      this.#streaks.set(what, s);
    }
    return s;
  }

  /**
   * Runs one tick: heartbeat → recover → plan → misfire → dispatch → retention.
   * A sweep whose database work fails ends the tick (OPS-1).
   */
  async tick(): Promise<TickReport> {
    const started = performance.now();
    this.#lastFullAt = this.#d.clock.now();
    const report = emptyReport();
    const sweeps: Array<[string, () => Promise<void>]> = [
      ["heartbeat", () => this.#heartbeat(started)],
      ["recover", async () => void (report.recovered = await this.recover())],
      ["plan", async () => void (report.planned = await this.#plan())],
      ["misfire", async () => void (report.skipped = await this.#misfire())],
      ["dispatch", async () => void (report.claimed = await this.dispatch())],
      ["retention", () => this.#retention()],
    ];
    for (const [name, run] of sweeps) {
      if (this.#stopping && name !== "heartbeat") break;
      try {
        await run();
        this.#streak(name).success();
      } catch (err) {
        this.#d.metrics.sweepFailures.inc({ sweep: name });
        this.#streak(name).failure(err, { sweep: name });
        report.failedSweep = name;
        if (isRetryableDatabaseError(err)) this.#dbFailures++;
        break;
      }
    }
    if (!report.failedSweep) {
      if (this.#running && !this.#stopping && this.#unlisten === null) await this.#listen();
      this.#dbFailures = 0;
      this.#lastPassAt = this.#d.clock.now();
      this.#d.metrics.lastPass.set(
        { instance: this.owner },
        (this.#lastPassAt + this.#skewMs) / 1000,
      );
    }
    this.#d.metrics.tickDuration.observe((performance.now() - started) / 1000);
    return report;
  }

  async #heartbeat(started: number): Promise<void> {
    const before = this.#d.clock.now();
    const { rows } = await this.#d.db.query<{ db_now: Date; db_clock: Date }>(HEARTBEAT_SQL, [
      this.#d.clock.sqlNow(),
      this.owner,
      hostname(),
      process.pid,
      this.#d.version,
      this.#d.role,
      performance.now() - started,
    ]);
    const after = this.#d.clock.now();
    const row = rows[0];
    if (row && this.#d.clock.sqlNow() === null) {
      // OPS-9: skew = database clock − midpoint of the round trip on our clock.
      this.#skewMs = row.db_clock.getTime() - (before + after) / 2;
      this.#d.metrics.clockSkew.set(Math.abs(this.#skewMs) / 1000);
      if (Math.abs(this.#skewMs) > this.#d.options.clockSkewWarnMs) {
        this.#streak("clock-skew").failure(
          new Error(
            `process clock differs from the database clock by ${Math.round(this.#skewMs)} ms`,
          ),
        );
      } else {
        this.#streak("clock-skew").success();
      }
    }
  }

  /** DEL-6: recovers expired leases. Returns how many rows it recovered. */
  async recover(): Promise<number> {
    const { rows } = await this.#d.db.query<{
      id: number;
      state: string;
      delivery_key: string;
      schedule_id: string;
      channel: string;
    }>(RECOVER_SQL, [this.#d.clock.sqlNow(), this.#d.options.recoverBatch, 0]);
    for (const row of rows) {
      this.#d.metrics.deliveries.inc({ channel: row.channel, outcome: "lease_expired" });
      const fields = {
        deliveryId: row.id,
        deliveryKey: row.delivery_key,
        scheduleId: row.schedule_id,
        state: row.state,
      };
      if (row.state === "in_doubt") {
        this.#log.error(
          fields,
          "lease expired mid-send: delivery is in doubt (it may or may not have been sent); resolve or redrive it",
        );
      } else if (row.state === "dead") {
        this.#log.error(
          fields,
          "lease expired on the last attempt: delivery is dead (SEND_FAILED)",
        );
      } else {
        this.#log.warn(fields, "lease expired mid-send: retrying with the same delivery key");
      }
    }
    return rows.length;
  }

  #planDeps() {
    const { db, clock, metrics, options, channels } = this.#d;
    return { db, clock, logger: this.#log, metrics, options, channels };
  }

  async #plan(): Promise<number> {
    return planSweep(this.#planDeps());
  }

  async #misfire(): Promise<number> {
    return misfireSweep(this.#planDeps());
  }

  /**
   * DEL-2: claims due rows for the free send slots and starts their sends.
   * Returns the number claimed. Sends run on; `drain()` waits for them.
   */
  async dispatch(): Promise<number> {
    const o = this.#d.options;
    let total = 0;
    // Claim again while batches come back full and slots remain.
    for (;;) {
      if (this.#stopping) break;
      const free = Math.min(o.concurrency - this.#inFlight.size, o.claimBatch);
      if (free <= 0) break;
      const { rows } = await this.#d.db.query<ClaimedDelivery>(CLAIM_SQL, [
        this.#d.clock.sqlNow(),
        this.owner,
        o.leaseMs,
        free,
        this.#channelNames,
      ]);
      for (const row of rows) this.#start(row);
      total += rows.length;
      this.#slotBound = rows.length === free;
      if (rows.length < free) break;
    }
    if (!this.#stopping && o.concurrency - this.#inFlight.size <= 0) this.#slotBound = true;
    return total;
  }

  /** Estimated database "now", ms. */
  #dbNow(): number {
    return this.#d.clock.now() + this.#skewMs;
  }

  #start(row: ClaimedDelivery): void {
    const abort = new AbortController();
    const entry: InFlight = { row, abort, promise: Promise.resolve() };
    this.#inFlight.set(row.id, entry);
    entry.promise = this.#send(row, abort).finally(() => {
      this.#inFlight.delete(row.id);
      // A slot is free: claim again if the last claim was limited by slots.
      if (this.#running && !this.#stopping && this.#slotBound) this.wake(false);
    });
  }

  async #send(row: ClaimedDelivery, abort: AbortController): Promise<void> {
    const o = this.#d.options;
    const channel = this.#d.channels.get(row.channel);
    const startedAt = this.#dbNow();
    const leaseLeft = row.lease_expires_at.getTime() - startedAt;
    // Stop waiting a safety margin before the lease ends, so the settle lands in time.
    const deadlineMs = Math.max(
      0,
      Math.min(o.sendTimeoutMs, leaseLeft - Math.min(5_000, leaseLeft / 4)),
    );
    this.#d.metrics.lateness.observe(
      { channel: row.channel },
      Math.max(0, startedAt - row.due_at.getTime()) / 1000,
    );
    const delivery: ChannelDelivery = {
      deliveryKey: row.delivery_key,
      scheduleId: row.schedule_id,
      reminderKey: row.reminder_key,
      occurrenceAt: row.occurrence_at,
      dueAt: row.due_at,
      attempt: row.attempt,
      late: row.late,
      payload: row.payload,
      target: row.target,
    };
    let settle: Omit<SettleInput, "id" | "attempt" | "startedAt">;
    let cancelDeadline: CancelTimer | null = null;
    try {
      if (!channel) throw new PermanentError(`no channel named "${row.channel}" in this process`);
      const deadline = new Promise<"deadline">((resolve) => {
        cancelDeadline = this.#d.clock.setTimer(deadlineMs, () => {
          abort.abort(new Error("send deadline reached"));
          resolve("deadline");
        });
      });
      const result = await Promise.race([
        channel.send(delivery, {
          idempotencyKey: row.delivery_key,
          signal: abort.signal,
          timeoutMs: deadlineMs,
        }),
        deadline,
      ]);
      if (result === "deadline") {
        settle = this.#unknownOutcome(
          row,
          "timeout",
          `send did not finish within ${deadlineMs} ms`,
        );
      } else {
        settle = {
          state: "sent",
          runAt: null,
          reason: null,
          error: null,
          failure: 0,
          outcome: "sent",
          status: result.status ?? null,
          messageId: result.messageId ?? null,
        };
      }
    } catch (err) {
      settle = this.#classifyFailure(row, err, abort.signal.aborted);
    } finally {
      (cancelDeadline as CancelTimer | null)?.();
    }
    this.#d.metrics.deliveries.inc({ channel: row.channel, outcome: settle.outcome });
    await this.#queueSettle({
      ...settle,
      id: row.id,
      attempt: row.attempt,
      startedAt: new Date(startedAt),
      leaseExpiresAt: row.lease_expires_at.getTime(),
      channel: row.channel,
    });
  }

  /** The send may or may not have happened (DEL-5): retry only where that is safe. */
  #unknownOutcome(
    row: ClaimedDelivery,
    outcome: "timeout" | "transient",
    message: string,
  ): Omit<SettleInput, "id" | "attempt" | "startedAt"> {
    if (row.on_lost_lease === "in_doubt") {
      this.#log.error(
        { deliveryId: row.id, deliveryKey: row.delivery_key, error: message },
        "send outcome unknown on a channel without idempotency: delivery is in doubt",
      );
      return {
        state: "in_doubt",
        runAt: null,
        reason: "OUTCOME_UNKNOWN",
        error: message,
        failure: 1,
        outcome,
        status: null,
        messageId: null,
      };
    }
    return this.#retryOrDead(row, message, outcome, null);
  }

  #retryOrDead(
    row: ClaimedDelivery,
    message: string,
    outcome: "transient" | "timeout",
    status: number | null,
  ): Omit<SettleInput, "id" | "attempt" | "startedAt"> {
    const o = this.#d.options;
    const failures = row.failures + 1;
    if (failures >= row.max_attempts) {
      this.#log.error(
        { deliveryId: row.id, deliveryKey: row.delivery_key, attempts: failures, error: message },
        "delivery failed on its last attempt: dead (SEND_FAILED)",
      );
      return {
        state: "dead",
        runAt: null,
        reason: "SEND_FAILED",
        error: message,
        failure: 1,
        outcome,
        status,
        messageId: null,
      };
    }
    const delay = backoffMs(failures, { baseMs: o.backoffBaseMs, capMs: o.backoffCapMs });
    this.#log.warn(
      {
        deliveryId: row.id,
        deliveryKey: row.delivery_key,
        failures,
        retryInMs: delay,
        error: message,
      },
      "send failed; will retry",
    );
    return {
      state: "retry",
      runAt: new Date(this.#dbNow() + delay),
      reason: null,
      error: message,
      failure: 1,
      outcome,
      status,
      messageId: null,
    };
  }

  /** DEL-4 / DEL-5 / DEL-13: one failure, classified once, costs at most one attempt. */
  #classifyFailure(
    row: ClaimedDelivery,
    err: unknown,
    aborted: boolean,
  ): Omit<SettleInput, "id" | "attempt" | "startedAt"> {
    const message = err instanceof Error ? err.message : String(err);
    const status = (err as { status?: unknown })?.status;
    const statusNum = typeof status === "number" ? status : null;
    if (err instanceof RateLimitedError) {
      return {
        state: "retry",
        runAt: new Date(this.#dbNow() + err.retryAfterMs),
        reason: null,
        error: message,
        failure: 0,
        outcome: "rate_limited",
        status: statusNum,
        messageId: null,
      };
    }
    if (err instanceof PermanentError) {
      this.#log.error(
        { deliveryId: row.id, deliveryKey: row.delivery_key, error: message, code: err.code },
        "permanent failure: delivery is dead",
      );
      return {
        state: "dead",
        runAt: null,
        reason: "PERMANENT",
        error: message,
        failure: 1,
        outcome: "permanent",
        status: statusNum,
        messageId: null,
      };
    }
    if (aborted) return this.#unknownOutcome(row, "timeout", message);
    // DEL-5: a timeout or a connection lost after the request left may have delivered it.
    if (err instanceof TransientError && err.maybeDelivered) {
      return this.#unknownOutcome(
        row,
        err.code === "SEND_TIMEOUT" ? "timeout" : "transient",
        message,
      );
    }
    return this.#retryOrDead(row, message, "transient", statusNum);
  }

  async #queueSettle(
    item: SettleInput & { leaseExpiresAt: number; channel: string },
  ): Promise<void> {
    this.#pendingSettles.push(item);
    if (!this.#settleScheduled) {
      this.#settleScheduled = true;
      // Batch every outcome that completes in this turn of the event loop.
      this.#settling = new Promise<void>((resolve) => setImmediate(resolve)).then(() =>
        this.#flushSettles(),
      );
    }
    await this.#settling;
    // A failed flush leaves items queued; keep trying while their lease lasts.
    while (this.#pendingSettles.includes(item)) {
      await new Promise<void>((resolve) => {
        const cancel = this.#d.clock.setTimer(SETTLE_RETRY_MS, resolve);
        if (this.#stopping) {
          cancel();
          resolve();
        }
      });
      await this.#flushSettles();
      if (this.#stopping && this.#pendingSettles.includes(item)) break;
    }
  }

  async #flushSettles(): Promise<void> {
    this.#settleScheduled = false;
    const batch = this.#pendingSettles;
    if (batch.length === 0) return;
    this.#pendingSettles = [];
    const now = this.#dbNow();
    try {
      const { rows } = await this.#d.db.query<{ id: number }>(SETTLE_SQL, [
        this.#d.clock.sqlNow(),
        this.owner,
        batch.map((b) => b.id),
        batch.map((b) => b.attempt),
        batch.map((b) => b.state),
        batch.map((b) => b.runAt),
        batch.map((b) => b.reason),
        batch.map((b) => b.error?.slice(0, 2_000) ?? null),
        batch.map((b) => b.failure),
        batch.map((b) => b.startedAt),
        batch.map((b) => b.outcome),
        batch.map((b) => b.status),
        batch.map((b) => b.messageId),
      ]);
      this.#streak("settle").success();
      const settled = new Set(rows.map((r) => r.id));
      for (const b of batch) {
        if (!settled.has(b.id)) {
          this.#d.metrics.leaseLost.inc();
          this.#log.warn(
            { deliveryId: b.id, attempt: b.attempt, outcome: b.outcome },
            "settle found the lease lost (recovered or reclaimed meanwhile): changed nothing",
          );
        }
      }
    } catch (err) {
      this.#streak("settle").failure(err, { batch: batch.length });
      // DEL-5: the side effect may have happened; keep the outcome while the lease lasts.
      // After that, recovery decides (retry with the same key, or in doubt), loudly.
      for (const b of batch) {
        if (b.leaseExpiresAt > now) this.#pendingSettles.push(b);
        else
          this.#log.error(
            { deliveryId: b.id, attempt: b.attempt, outcome: b.outcome },
            "could not record the outcome before the lease ended; recovery will retry it with the same key or mark it in doubt",
          );
      }
    }
  }

  /** Waits until every in-flight send has settled (tests, shutdown). */
  async drain(): Promise<void> {
    while (this.#inFlight.size > 0) {
      await Promise.allSettled([...this.#inFlight.values()].map((f) => f.promise));
    }
    await this.#settling;
  }

  async #retention(): Promise<void> {
    const o = this.#d.options;
    const now = this.#d.clock.now();
    if (now - this.#lastRetention < o.retentionEveryMs) return;
    this.#lastRetention = now;
    // DEL-8: retention runs once cluster-wide per period: whoever holds the lease.
    const { rows: held } = await this.#d.db.query(ACQUIRE_LEASE_SQL, [
      this.#d.clock.sqlNow(),
      "punctual.retention",
      this.owner,
      o.retentionEveryMs,
    ]);
    if (held.length === 0) return;
    await this.#d.db.query(RETENTION_SQL, [
      this.#d.clock.sqlNow(),
      o.retentionDays * 86_400_000,
      10_000,
    ]);
    if (this.#d.db.engine === "pglite") {
      for (const sql of VACUUM_SQL) await this.#d.db.query(sql);
    }
  }

  /** Refreshes the gauges of /metrics (due backlog, overdue, in doubt, dead). */
  async refreshGauges(): Promise<void> {
    const { rows } = await this.#d.db.query<{
      due_backlog: number;
      overdue: number;
      in_doubt: number;
      dead: number;
    }>(GAUGES_SQL, [this.#d.clock.sqlNow(), 15 * 60_000]);
    const g = rows[0];
    if (!g) return;
    this.#d.metrics.dueBacklog.set(g.due_backlog);
    this.#d.metrics.overdue.set(g.overdue);
    this.#d.metrics.inDoubt.set(g.in_doubt);
    this.#d.metrics.dead.set(g.dead);
  }

  /**
   * OPS-6: stops claiming, lets in-flight sends finish within `graceMs`, then aborts the
   * rest (their outcome is settled as unknown: retry on idempotent channels, in doubt
   * otherwise), records every outcome, and marks the instance stopped.
   */
  async stop(graceMs: number = this.#d.options.shutdownGraceMs): Promise<void> {
    if (!this.#running) return;
    this.#stopping = true;
    this.#cancelTimer();
    await this.#unlisten?.().catch(() => undefined);
    this.#unlisten = null;
    await this.#tickPromise?.catch(() => undefined);
    if (this.#inFlight.size > 0) {
      let cancel: CancelTimer | null = null;
      const timedOut = await Promise.race([
        this.drain().then(() => false),
        new Promise<boolean>((resolve) => {
          cancel = this.#d.clock.setTimer(graceMs, () => resolve(true));
        }),
      ]);
      (cancel as CancelTimer | null)?.();
      if (timedOut) {
        this.#log.warn(
          { inFlight: this.#inFlight.size },
          "shutdown deadline reached: aborting in-flight sends",
        );
        for (const f of this.#inFlight.values()) f.abort.abort(new Error("shutting down"));
        await Promise.race([
          this.drain(),
          new Promise<void>((resolve) => setTimeout(resolve, 2_000).unref()),
        ]);
      }
    }
    await this.#flushSettles().catch(() => undefined);
    await this.#d.db
      .query(INSTANCE_STOPPED_SQL, [this.#d.clock.sqlNow(), this.owner])
      .catch(() => undefined);
    this.#running = false;
    this.#stopping = false;
  }
}
