/**
 * `createTestScheduler()` (API-8): the library's own scheduler on an in-memory database,
 * driven by a test clock instead of real time, with a mock channel that records sends.
 *
 * One test scheduler is one database and, at any moment, one scheduler instance on it.
 * Nothing runs on its own: `tick()` runs one pass (plan, recover, misfire, claim, send,
 * settle) at the clock's instant; `runUntil(instant)` moves the clock forward from one
 * moment where something can happen to the next (a due delivery, a retry, a lease
 * expiry, planning, a send's latency) and ticks at each. `crash()` replaces the instance
 * with a new one on the same database, the way a process killed with SIGKILL and
 * restarted would.
 */
import { createPunctual, type Punctual } from "../app/punctual.js";
import type { Channel } from "../channels/types.js";
import type { ConfigInput } from "../config/index.js";
import { createLogger, type Logger } from "../observability/logger.js";
import type { TickReport } from "../scheduler/scheduler.js";
import type { Database } from "../store/database.js";
import { nextWake } from "../store/deliveries/index.js";
import { nextPlanning } from "../store/planning.js";
import { InstanceClock, ManualClock, toEpochMs, type Instant } from "./clock.js";
import { attachClock, createMockChannel, MockChannel } from "./mock-channel.js";
import { openTemplateDatabase } from "./template.js";

/** Options of {@link createTestScheduler}. */
export interface TestSchedulerOptions {
  /** Where the test clock starts (default: the real current time). */
  now?: Instant;
  /**
   * Channels beside the default mock channel `mock`: your own channels, or more mock
   * channels ({@link createMockChannel}). One named `mock` replaces the default one.
   */
  channels?: Channel[];
  /**
   * Scheduler options, as for `createScheduler` (`leaseMs`, `maxAttempts`, …). The kit
   * plans 7 days ahead by default (`planAheadMs`, 1 hour in production) so `runUntil`
   * crosses long ranges in few steps; what gets sent, and when, is the same.
   */
  scheduler?: NonNullable<ConfigInput["scheduler"]>;
  /** A logger for the scheduler's lines (default: silent). */
  logger?: Logger;
}

/** What a test scheduler adds to the library's scheduler. */
export interface TestControls {
  /**
   * The test clock: `advance(ms)`, `set(instant)` (either direction), `now()`. The
   * database's "now" follows it in every statement.
   */
  readonly clock: ManualClock;
  /**
   * The mock channel called `name` (default `mock`): `.sends` lists what it received,
   * `.script([...])` decides its next answers.
   * @throws TypeError when no mock channel has that name.
   */
  channel(name?: string): MockChannel;
  /**
   * Runs one scheduler pass at the clock's instant and waits until every send it started
   * is settled, except sends still waiting for the clock (scripted latency).
   * @throws Error when a sweep of the pass failed (its database work threw).
   */
  tick(): Promise<void>;
  /**
   * Moves the clock forward to `instant`, stopping and ticking at every moment something
   * can happen on the way (due deliveries, retries, Retry-After, lease expiries, planning,
   * scripted latencies), and once more at `instant`.
   * @throws RangeError when `instant` is before the clock; Error after 100,000 steps.
   */
  runUntil(instant: Instant): Promise<void>;
  /**
   * Drops the scheduler instance the way SIGKILL would: its claims stay in the database
   * (recovered once their lease ends), sends in flight are abandoned, nothing of it writes
   * again. The test scheduler goes on with a new instance on the same database and clock.
   */
  crash(): Promise<void>;
  /** Stops the instance (no grace period) and discards the database. Idempotent. */
  close(): Promise<void>;
}

/**
 * A test scheduler: every method of the library's scheduler (`createSchedule`,
 * `updateSchedule`, `listDeliveries`, …) plus {@link TestControls}. It is not started:
 * the test drives it with `tick()` and `runUntil()`.
 */
export type TestScheduler = Omit<Punctual, "clock" | "close" | "start"> & TestControls;

/** Default plan-ahead of the kit, ms (7 days); see {@link TestSchedulerOptions.scheduler}. */
const KIT_PLAN_AHEAD_MS = 7 * 24 * 3_600_000;
/** Most steps of one `runUntil`: a bound, not a budget any test should come near. */
const MAX_STEPS = 100_000;
const KIT_WEBHOOK_SECRET = "whsec_dGVzdGluZy1raXQtb2YtcHVuY3R1YWw=";

/** A database whose statements fail once the instance using it has crashed. */
function severable(db: Database): { db: Database; sever(): void } {
  let severed = false;
  const dead = () =>
    Object.assign(new Error("this scheduler instance was crashed (testing kit)"), {
      code: "57P01",
    });
  const wrapped: Database = {
    engine: db.engine,
    description: db.description,
    async query(sql, params) {
      if (severed) throw dead();
      // eslint-disable-next-line no-restricted-syntax -- a pass-through of the store's own statements
      return db.query(sql, params);
    },
    async transaction(fn, options) {
      if (severed) throw dead();
      return db.transaction(fn, options);
    },
    async listen(channel, onNotify, onLost) {
      if (severed) throw dead();
      return db.listen(channel, (payload) => (severed ? undefined : onNotify(payload)), onLost);
    },
    // The database belongs to the test scheduler: an instance never closes it.
    async close() {},
  };
  return {
    db: wrapped,
    sever: () => {
      severed = true;
    },
  };
}

interface Instance {
  punctual: Punctual;
  clock: InstanceClock;
  sever(): void;
}

/**
 * Creates a test scheduler on a fresh in-memory database loaded from a migrated template
 * (built once per process), with the test clock at `now` and the mock channel `mock`.
 * Close it when the test ends.
 * @throws ConfigError for invalid scheduler options; ValidationError when two channels share a name.
 */
export async function createTestScheduler(
  options: TestSchedulerOptions = {},
): Promise<TestScheduler> {
  const clock = new ManualClock(options.now ?? Date.now());
  const extra = options.channels ?? [];
  const channels = extra.some((c) => c.name === "mock")
    ? extra
    : [createMockChannel("mock"), ...extra];
  for (const c of channels) if (c instanceof MockChannel) attachClock(c, clock);
  const mocks = channels.filter((c): c is MockChannel => c instanceof MockChannel);
  const logger = options.logger ?? createLogger({ level: "silent" });
  const scheduler = { planAheadMs: KIT_PLAN_AHEAD_MS, ...options.scheduler };
  const database = await openTemplateDatabase();

  async function open(): Promise<Instance> {
    const view = new InstanceClock(clock);
    const link = severable(database);
    const punctual = await createPunctual({
      database: link.db,
      clock: view,
      logger,
      channels,
      scheduler,
      webhookSecret: KIT_WEBHOOK_SECRET,
      role: "test",
    });
    return { punctual, clock: view, sever: link.sever };
  }

  let current: Instance;
  try {
    current = await open();
  } catch (err) {
    await database.close();
    throw err;
  }
  let closed = false;
  const waiting = () => mocks.reduce((n, m) => n + m.waiting, 0);

  async function pass(): Promise<TickReport> {
    if (closed) throw new Error("this test scheduler is closed");
    const s = current.punctual.scheduler;
    const report = await s.tick();
    if (report.failedSweep) {
      throw new Error(`the scheduler's ${report.failedSweep} sweep failed (see its log lines)`);
    }
    await s.drain(() => s.held <= waiting() + s.waitingForSlot);
    return report;
  }

  /** The next instant after now where a pass has work, or null when nothing is pending. */
  async function nextEvent(now: number): Promise<number | null> {
    const s = current.punctual;
    const names = s.channels.names();
    const wake = await nextWake(database, clock.sqlNow(), names);
    const plan = await nextPlanning(database);
    const aheadMs = s.config.scheduler.planAheadMs;
    const candidates = [
      wake?.next_run_at?.getTime(),
      wake?.next_lease_expiry?.getTime(),
      // The sweep plans a schedule once its watermark is less than half the plan-ahead away.
      plan.planned_until ? plan.planned_until.getTime() - aheadMs / 2 + 1 : undefined,
      clock.nextTimerAt() ?? undefined,
    ].filter((t): t is number => t !== undefined && t > now);
    return candidates.length > 0 ? Math.min(...candidates) : null;
  }

  const controls: TestControls = {
    clock,
    channel(name = "mock") {
      const found = mocks.find((m) => m.name === name);
      if (!found) {
        throw new TypeError(
          `no mock channel named ${JSON.stringify(name)}; mock channels: ${mocks.map((m) => m.name).join(", ")}`,
        );
      }
      return found;
    },
    async tick() {
      await pass();
    },
    async runUntil(instant) {
      const target = toEpochMs(instant);
      if (target < clock.now()) {
        throw new RangeError(
          `runUntil(${new Date(target).toISOString()}) is before the clock (${clock.date().toISOString()}); use clock.set() to go back`,
        );
      }
      for (let step = 0; step < MAX_STEPS; step++) {
        const report = await pass();
        const now = clock.now();
        // A full claim may leave more due now: tick again at the same instant.
        const dueNow = (await nextWake(database, clock.sqlNow(), current.punctual.channels.names()))
          ?.next_run_at;
        if (report.claimed > 0 && dueNow && dueNow.getTime() <= now) continue;
        if (now >= target) return;
        const next = await nextEvent(now);
        clock.set(next === null ? target : Math.min(next, target));
      }
      throw new Error(`runUntil did not reach its instant within ${MAX_STEPS} steps`);
    },
    async crash() {
      if (closed) throw new Error("this test scheduler is closed");
      const old = current;
      old.sever();
      old.clock.kill();
      // Frees the old instance's resources; every write it tries fails on the severed link,
      // so the database is left as SIGKILL would leave it.
      await old.punctual.close(0).catch(() => undefined);
      current = await open();
    },
    async close() {
      if (closed) return;
      closed = true;
      try {
        await current.punctual.close(0);
      } finally {
        await database.close();
      }
    },
  };

  return new Proxy(controls, {
    get(target, prop, receiver) {
      if (prop in target) return Reflect.get(target, prop, receiver) as unknown;
      const value = Reflect.get(current.punctual, prop, current.punctual) as unknown;
      if (prop === "start") {
        return () =>
          Promise.reject(
            new Error("a test scheduler is not started: drive it with tick() and runUntil()"),
          );
      }
      return typeof value === "function"
        ? (value as (...args: unknown[]) => unknown).bind(current.punctual)
        : value;
    },
    has(target, prop) {
      return prop in target || prop in current.punctual;
    },
  }) as unknown as TestScheduler;
}
