/**
 * User periodic tasks (OPS-7): code the library runs on a cadence (renew a subscription,
 * re-import a calendar) in a lane of its own, beside the scheduler loop and never on its
 * path: a tick never waits for a task, and a task is started by its own timer.
 *
 * - Cadence: `every` (ms, or `"30s"`, `"15m"`, `"2h"`, `"1d"`), aligned on multiples of the
 *   period since the Unix epoch so that every process computes the same occurrences; or
 *   an RFC 5545 `rrule` read in `tzid` (from `dtstart`, default 2020-01-01 00:00 local).
 * - Budget: a run still going after `budgetMs` is aborted through `ctx.signal` and
 *   counted `timeout`. The lane of that task stays busy until the run's promise settles:
 *   two runs of one task never overlap in a process; an occurrence that falls due
 *   meanwhile is counted `overlap` and not run.
 * - Singleton: the task takes the lease of each occurrence in the database
 *   (`punctual_task_leases`, database clock) before it runs, so one process in the
 *   cluster runs each occurrence; the others count `lease_held`. The lease lasts the
 *   budget plus {@link TASK_LEASE_MARGIN_MS} and ends when the run does.
 * - Every run ends in `punctual_task_runs_total{task,outcome}` with outcome `ok`,
 *   `error` (logged at WARN with the error), `timeout`, `overlap` or `lease_held`.
 *
 * A task runs on the process's event loop: it must await its I/O and not compute for
 * long stretches (OPS-12); heavy work belongs in a worker thread.
 */
import { Counter, type Registry } from "prom-client";
import type { CancelTimer, Clock } from "../clock/index.js";
import { ConfigError, ValidationError } from "../errors/index.js";
import type { Logger } from "../observability/logger.js";
import { validateRule, type Recurrence } from "../recurrence/index.js";
import type { Database } from "../store/database.js";
import { claimTaskOccurrence, endTaskLease } from "../store/tasks.js";

/** What a task's `run` receives. */
export interface TaskContext {
  /** The task's name. */
  readonly name: string;
  /** The occurrence this run is for (aligned instant, not the moment it started). */
  readonly occurrenceAt: Date;
  /** Aborted when the run passes its budget, or when the process stops. */
  readonly signal: AbortSignal;
  /** A child logger with `task` set. */
  readonly logger: Logger;
}

/** A periodic task (the `tasks` library option). Give `every`, or `rrule` (and `tzid`). */
export interface TaskDefinition {
  /** Unique name: the metric label, the log field and, for singletons, the lease key. */
  name: string;
  /** Period: milliseconds, or a text such as `"30s"`, `"15m"`, `"2h"`, `"1d"` (≥ 1 s). */
  every?: number | string;
  /** RFC 5545 RRULE (without `RRULE:`), e.g. `FREQ=DAILY;BYHOUR=3`; instead of `every`. */
  rrule?: string;
  /** IANA zone the `rrule` is read in; default `UTC`. */
  tzid?: string;
  /** Local DTSTART of the `rrule`; default `2020-01-01T00:00:00`. */
  dtstart?: string;
  /** Time budget of one run, ms (1 ms – 24 h): past it, `ctx.signal` is aborted. */
  budgetMs: number;
  /** One process of the cluster runs each occurrence (database lease). Default false. */
  singleton?: boolean;
  /** The work. Rejecting (or throwing) counts `error`; the next occurrence runs as usual. */
  run(ctx: TaskContext): Promise<void> | void;
}

/** Outcome label values of `punctual_task_runs_total`. */
export const TASK_OUTCOMES = ["ok", "error", "timeout", "overlap", "lease_held"] as const;
/** One outcome of a task occurrence. */
export type TaskOutcome = (typeof TASK_OUTCOMES)[number];

/** How long a singleton's lease outlives its budget, ms (the run is aborted at the budget). */
export const TASK_LEASE_MARGIN_MS = 30_000;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A task period: a number of ms, or digits and a unit (`ms`, `s`, `m`, `h`, `d`).
 * @returns milliseconds.
 * @throws ValidationError naming `field` when it is not one, or under 1 s / over 366 d.
 */
export function parseEvery(value: unknown, field = "every"): number {
  let ms: number | null = null;
  if (typeof value === "number" && Number.isInteger(value)) ms = value;
  if (typeof value === "string") {
    const m = /^(\d{1,9})(ms|s|m|h|d)$/.exec(value.trim());
    if (m) ms = Number(m[1]) * UNIT_MS[m[2]!]!;
  }
  if (ms === null) {
    throw new ValidationError({
      field,
      message: 'must be milliseconds or a period such as "30s", "15m", "2h", "1d"',
      value: value as string,
    });
  }
  if (ms < 1_000 || ms > 366 * 86_400_000) {
    throw new ValidationError({ field, message: "must be between 1 s and 366 days", value: ms });
  }
  return ms;
}

/** A validated task: its definition and how to find its next occurrence. */
interface PlannedTask {
  def: TaskDefinition;
  /** First occurrence strictly after `afterMs`, or null when the rule has ended. */
  next(afterMs: number): number | null;
}

/**
 * OPS-7: validates the `tasks` option (names unique, a cadence, a budget, a function).
 * @throws ConfigError naming each bad entry and field (`tasks.1.budgetMs`).
 */
export function validateTasks(tasks: readonly TaskDefinition[]): PlannedTask[] {
  const problems: string[] = [];
  const names = new Set<string>();
  const planned: PlannedTask[] = [];
  tasks.forEach((def, i) => {
    const at = `tasks.${i}`;
    const bad = (field: string, message: string) => problems.push(`${at}.${field}: ${message}`);
    if (!def || typeof def !== "object") return bad("(entry)", "must be an object");
    if (typeof def.name !== "string" || !/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/.test(def.name)) {
      bad("name", "must be 1–64 letters, digits, _ . : -");
    } else if (names.has(def.name)) bad("name", `duplicate task name "${def.name}"`);
    else names.add(def.name);
    if (typeof def.run !== "function") bad("run", "must be a function");
    if (!Number.isInteger(def.budgetMs) || def.budgetMs < 1 || def.budgetMs > 86_400_000) {
      bad("budgetMs", "must be an integer number of ms, 1 to 86400000");
    }
    if ((def.every === undefined) === (def.rrule === undefined)) {
      return bad("every", "give exactly one of every or rrule");
    }
    try {
      if (def.every !== undefined) {
        const period = parseEvery(def.every, `${at}.every`);
        planned.push({ def, next: (after) => (Math.floor(after / period) + 1) * period });
      } else {
        const rec: Recurrence = validateRule({
          dtstart: def.dtstart ?? "2020-01-01T00:00:00",
          tzid: def.tzid ?? "UTC",
          rrule: def.rrule ?? null,
        });
        planned.push({ def, next: (after) => rec.next(after)?.instant ?? null });
      }
    } catch (err) {
      if (err instanceof ValidationError) {
        for (const issue of err.issues) {
          const field = issue.field.startsWith(at) ? issue.field : `${at}.${issue.field}`;
          problems.push(`${field}: ${issue.message}`);
        }
      } else throw err;
    }
  });
  if (problems.length > 0) throw new ConfigError(`invalid tasks option: ${problems.join("; ")}`);
  return planned;
}

/** What a {@link TaskRunner} works with. */
export interface TaskRunnerDeps {
  db: Database;
  clock: Clock;
  logger: Logger;
  /** Registry the `punctual_task_runs_total` counter is registered on. */
  registry: Registry;
  /** Lease owner id of this process (the scheduler's). */
  owner: string;
}

interface Lane {
  task: PlannedTask;
  cancel: CancelTimer | null;
  /** The run in progress (settles when `run` does, whatever the budget said). */
  running: Promise<void> | null;
  abort: AbortController | null;
}

/** Runs the periodic tasks of one process, each in its own lane (OPS-7). */
export class TaskRunner {
  readonly #deps: TaskRunnerDeps;
  readonly #lanes: Lane[];
  readonly #runs: Counter<"task" | "outcome">;
  #stopped = true;

  /** @throws ConfigError when a definition is invalid (see {@link validateTasks}). */
  constructor(tasks: readonly TaskDefinition[], deps: TaskRunnerDeps) {
    this.#deps = deps;
    this.#lanes = validateTasks(tasks).map((task) => ({
      task,
      cancel: null,
      running: null,
      abort: null,
    }));
    this.#runs =
      (deps.registry.getSingleMetric("punctual_task_runs_total") as
        Counter<"task" | "outcome"> | undefined) ??
      new Counter({
        name: "punctual_task_runs_total",
        help: "Occurrences of periodic tasks by outcome: ok, error, timeout (aborted at its budget), overlap (previous run still going), lease_held (another process runs it)",
        labelNames: ["task", "outcome"],
        registers: [deps.registry],
      });
  }

  /** Names of the tasks this runner has. */
  names(): string[] {
    return this.#lanes.map((l) => l.task.def.name);
  }

  /** Arms each task's timer for its next occurrence. Idempotent. */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    for (const lane of this.#lanes) this.#arm(lane, this.#deps.clock.now());
  }

  /**
   * Stops arming timers and aborts runs in progress (`ctx.signal`, reason "stopping"),
   * then waits for them to settle, at most `graceMs` on the process clock.
   */
  async stop(graceMs = 5_000): Promise<void> {
    this.#stopped = true;
    const pending: Promise<void>[] = [];
    for (const lane of this.#lanes) {
      lane.cancel?.();
      lane.cancel = null;
      if (lane.running) {
        lane.abort?.abort(new Error("stopping"));
        pending.push(lane.running);
      }
    }
    if (pending.length === 0 || graceMs <= 0) return;
    let cancel: CancelTimer = () => {};
    await Promise.race([
      Promise.allSettled(pending),
      new Promise<void>((resolve) => {
        cancel = this.#deps.clock.setTimer(graceMs, resolve);
      }),
    ]);
    cancel();
  }

  /** Whether a run of `name` is in progress (tests, status). */
  isRunning(name: string): boolean {
    return this.#lanes.some((l) => l.task.def.name === name && l.running !== null);
  }

  #arm(lane: Lane, afterMs: number): void {
    if (this.#stopped) return;
    const at = lane.task.next(afterMs);
    if (at === null) {
      this.#deps.logger.info({ task: lane.task.def.name }, "task rule has ended: no more runs");
      return;
    }
    lane.cancel = this.#deps.clock.setTimer(at - this.#deps.clock.now(), () => {
      lane.cancel = null;
      this.#fire(lane, at);
      this.#arm(lane, Math.max(at, this.#deps.clock.now()));
    });
  }

  #count(name: string, outcome: TaskOutcome): void {
    try {
      this.#runs.inc({ task: name, outcome });
    } catch {
      // recording never throws into the lane
    }
  }

  #fire(lane: Lane, occurrenceMs: number): void {
    const { def } = lane.task;
    const log = this.#deps.logger.child({ task: def.name });
    if (lane.running) {
      this.#count(def.name, "overlap");
      log.warn(
        { occurrenceAt: new Date(occurrenceMs).toISOString() },
        "task still running from an earlier occurrence: this occurrence is not run",
      );
      return;
    }
    const abort = new AbortController();
    lane.abort = abort;
    const occurrenceAt = new Date(occurrenceMs);
    const run = this.#runOnce(lane, abort, occurrenceAt, log).finally(() => {
      lane.running = null;
      lane.abort = null;
    });
    lane.running = run;
  }

  async #runOnce(
    lane: Lane,
    abort: AbortController,
    occurrenceAt: Date,
    log: Logger,
  ): Promise<void> {
    const { def } = lane.task;
    const { db, clock, owner } = this.#deps;
    if (def.singleton) {
      let held: boolean;
      try {
        held = await claimTaskOccurrence(db, {
          now: clock.sqlNow(),
          name: def.name,
          occurrenceAt,
          owner,
          leaseMs: def.budgetMs + TASK_LEASE_MARGIN_MS,
        });
      } catch (err) {
        this.#count(def.name, "error");
        log.warn({ err }, "task lease could not be taken: occurrence not run");
        return;
      }
      if (!held) {
        this.#count(def.name, "lease_held");
        log.debug({ occurrenceAt: occurrenceAt.toISOString() }, "task occurrence run elsewhere");
        return;
      }
    }
    let timedOut = false;
    const cancelBudget = clock.setTimer(def.budgetMs, () => {
      timedOut = true;
      this.#count(def.name, "timeout");
      log.warn({ budgetMs: def.budgetMs }, "task passed its budget: aborted");
      abort.abort(new Error(`task ${def.name} passed its budget of ${def.budgetMs} ms`));
    });
    try {
      await def.run({ name: def.name, occurrenceAt, signal: abort.signal, logger: log });
      if (!timedOut) this.#count(def.name, "ok");
    } catch (err) {
      if (!timedOut) {
        this.#count(def.name, "error");
        log.warn({ err }, "task failed");
      }
    } finally {
      cancelBudget();
      if (def.singleton) {
        await endTaskLease(db, { now: clock.sqlNow(), name: def.name, occurrenceAt, owner }).catch(
          (err: unknown) =>
            log.warn({ err }, "task lease could not be ended (it expires on its own)"),
        );
      }
    }
  }
}
