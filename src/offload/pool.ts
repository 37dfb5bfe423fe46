/**
 * A small pool of `node:worker_threads` for the API's CPU-heavy pure work (OPS-12):
 * previews, the validation walks of rules, reading calendars and import dry runs run
 * there, so the event loop that answers `/healthz`, other requests and the scheduler's
 * ticks is never held by them. Bounded: at most `size` threads, each running one task at
 * a time, at most `maxQueue` tasks waiting, each task stopped after `timeoutMs` (its
 * thread is ended and replaced). A thread that crashes fails only the task it was
 * running; the process goes on. Failures surface as {@link OffloadUnavailableError}
 * (HTTP 503), never as a wrong answer. A thread says `{ ready: true }` once it listens;
 * a task's time limit counts from then.
 */
import { availableParallelism } from "node:os";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { PunctualError, ValidationError } from "../errors/index.js";
import { SPLIT_PATHS, type OffloadKind, type OffloadTasks } from "./tasks.js";
import type { CrossedError } from "./worker.js";

/**
 * The pool could not run a task: code `WORKERS_BUSY` (the queue is full),
 * `WORKER_TIMEOUT` (the task ran longer than its limit) or `WORKER_FAILED` (its thread
 * crashed or could not start). HTTP: 503.
 */
export class OffloadUnavailableError extends PunctualError {
  constructor(code: "WORKERS_BUSY" | "WORKER_TIMEOUT" | "WORKER_FAILED", message: string) {
    super(code, message);
  }
}

/** Options of {@link OffloadPool}. */
export interface OffloadPoolOptions {
  /** Most threads; default one per core beyond the first, at least 1 and at most 4. */
  size?: number;
  /** Most tasks waiting for a thread; default {@link DEFAULT_MAX_QUEUE}. */
  maxQueue?: number;
  /** Longest one task may run, ms; default {@link DEFAULT_TASK_TIMEOUT_MS}. */
  timeoutMs?: number;
  /** The worker's entry module (tests); default this directory's `worker` module. */
  entry?: URL;
}

/** Default most tasks waiting for a thread. */
export const DEFAULT_MAX_QUEUE = 1_000;
/**
 * Default longest run of one task, ms: a preview or a rule's validation takes
 * milliseconds, reading the largest calendar allowed (20 MiB, 50,000 events) some
 * seconds; this only turns a thread that never answers into an error.
 */
export const DEFAULT_TASK_TIMEOUT_MS = 120_000;

interface Task {
  id: number;
  kind: OffloadKind;
  input: unknown;
  resolve: (output: unknown) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  task: Task | null;
  timer: NodeJS.Timeout | null;
  pieces: Map<string, unknown[]>;
  /** The thread said it listens (its start, module loading included, is not timed). */
  ready: boolean;
}

/** The entry module next to this one: TypeScript source under tsx or vitest, else built JavaScript. */
function defaultEntry(): URL {
  const source = import.meta.url.endsWith(".ts");
  return new URL(source ? "./worker.ts" : "./worker.js", import.meta.url);
}

/** tsx's ESM API, for a thread that runs TypeScript source (a development dependency). */
function tsxApi(): string {
  return pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm/api")).href.replace(
    /\.cjs$/,
    ".mjs",
  );
}

/** A bounded pool of worker threads; see the module's description. */
export class OffloadPool {
  private readonly size: number;
  private readonly maxQueue: number;
  private readonly timeoutMs: number;
  private readonly entry: URL;
  private readonly slots: Slot[] = [];
  private readonly queue: Task[] = [];
  private nextId = 1;
  private closed = false;

  constructor(options: OffloadPoolOptions = {}) {
    this.size = Math.max(1, options.size ?? Math.min(4, availableParallelism() - 1));
    this.maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TASK_TIMEOUT_MS;
    this.entry = options.entry ?? defaultEntry();
  }

  /** Threads started, tasks running and tasks waiting. */
  get stats(): { threads: number; running: number; queued: number } {
    return {
      threads: this.slots.length,
      running: this.slots.filter((s) => s.task !== null).length,
      queued: this.queue.length,
    };
  }

  /**
   * Runs one task on a thread of the pool.
   * @returns what the task answers.
   * @throws ValidationError as the task's function threw it (the same issues and message);
   *   OffloadUnavailableError when the pool is full, the task timed out or its thread
   *   crashed; Error with the name and message of any other error of the task.
   */
  run<K extends OffloadKind>(
    kind: K,
    input: OffloadTasks[K]["input"],
  ): Promise<OffloadTasks[K]["output"]> {
    if (this.closed) {
      return Promise.reject(
        new OffloadUnavailableError("WORKER_FAILED", "the worker pool is closed"),
      );
    }
    if (this.queue.length >= this.maxQueue) {
      return Promise.reject(
        new OffloadUnavailableError(
          "WORKERS_BUSY",
          `the server is busy (${this.queue.length} tasks waiting for a worker thread); try again shortly`,
        ),
      );
    }
    return new Promise((resolve, reject) => {
      this.queue.push({
        id: this.nextId++,
        kind,
        input,
        resolve: resolve as (output: unknown) => void,
        reject,
      });
      this.dispatch();
    });
  }

  /** Ends every thread; tasks still running or waiting fail with `WORKER_FAILED`. */
  async close(): Promise<void> {
    this.closed = true;
    for (const task of this.queue.splice(0)) {
      task.reject(new OffloadUnavailableError("WORKER_FAILED", "the worker pool is closed"));
    }
    await Promise.all(
      this.slots.splice(0).map((slot) => {
        this.fail(slot, new OffloadUnavailableError("WORKER_FAILED", "the worker pool is closed"));
        return slot.worker.terminate();
      }),
    );
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      let slot = this.slots.find((s) => s.task === null);
      if (slot === undefined) {
        if (this.slots.length >= this.size) return;
        slot = this.spawn();
      }
      const task = this.queue.shift() as Task;
      slot.task = task;
      slot.pieces.clear();
      slot.worker.ref();
      if (slot.ready) this.startTimer(slot);
      slot.worker.postMessage({ id: task.id, kind: task.kind, input: task.input });
    }
  }

  /** Stops the slot's task once it has run `timeoutMs` on a thread that is up. */
  private startTimer(slot: Slot): void {
    slot.timer = setTimeout(() => {
      this.fail(
        slot,
        new OffloadUnavailableError(
          "WORKER_TIMEOUT",
          `the work took longer than ${this.timeoutMs} ms and was stopped`,
        ),
      );
      this.discard(slot);
    }, this.timeoutMs);
  }

  private spawn(): Slot {
    const worker = this.entry.pathname.endsWith(".ts")
      ? // TypeScript source (tests, benchmarks): tsx's loader first, then the entry.
        new Worker(
          `import(${JSON.stringify(tsxApi())}).then((tsx) => { tsx.register(); return import(${JSON.stringify(this.entry.href)}); });`,
          { eval: true },
        )
      : new Worker(fileURLToPath(this.entry));
    worker.unref();
    const slot: Slot = { worker, task: null, timer: null, pieces: new Map(), ready: false };
    worker.on("message", (m: Answer) => this.receive(slot, m));
    worker.on("error", (err) => {
      this.fail(
        slot,
        new OffloadUnavailableError("WORKER_FAILED", `a worker thread failed: ${err.message}`),
      );
      this.discard(slot);
    });
    worker.on("exit", (code) => {
      this.fail(
        slot,
        new OffloadUnavailableError("WORKER_FAILED", `a worker thread exited (code ${code})`),
      );
      this.discard(slot);
    });
    this.slots.push(slot);
    return slot;
  }

  private receive(slot: Slot, m: Answer): void {
    if ("ready" in m) {
      slot.ready = true;
      if (slot.task !== null && slot.timer === null) this.startTimer(slot);
      return;
    }
    const task = slot.task;
    if (task === null || m.id !== task.id) return;
    if ("piece" in m) {
      const key = m.piece.path.join(".");
      const items = slot.pieces.get(key);
      if (items === undefined) slot.pieces.set(key, m.piece.items);
      else for (const item of m.piece.items) items.push(item);
      // The next piece after a turn of this loop: one piece per turn at most.
      setImmediate(() => {
        if (slot.task === task) slot.worker.postMessage({ ack: true });
      });
      return;
    }
    this.settle(slot);
    if (m.ok) {
      for (const path of SPLIT_PATHS[task.kind] ?? []) {
        const holder = (m.output as Record<string, Record<string, unknown>>)[path[0]];
        if (holder !== undefined) holder[path[1]] = slot.pieces.get(path.join(".")) ?? [];
      }
      slot.pieces.clear();
      task.resolve(m.output);
    } else {
      slot.pieces.clear();
      task.reject(rebuild(m.error));
    }
    this.dispatch();
  }

  /** Clears a slot's task (and timer), keeping its thread for the next one. */
  private settle(slot: Slot): void {
    if (slot.timer !== null) clearTimeout(slot.timer);
    slot.timer = null;
    slot.task = null;
    slot.worker.unref();
  }

  private fail(slot: Slot, err: Error): void {
    const task = slot.task;
    if (task === null) return;
    this.settle(slot);
    slot.pieces.clear();
    task.reject(err);
  }

  /** Drops a thread that crashed or timed out; the next task starts a new one. */
  private discard(slot: Slot): void {
    const i = this.slots.indexOf(slot);
    if (i < 0) return;
    this.slots.splice(i, 1);
    void slot.worker.terminate();
    if (!this.closed) this.dispatch();
  }
}

type Answer =
  | { ready: true }
  | { id: number; piece: { path: [string, string]; items: unknown[] } }
  | { id: number; ok: true; output: unknown }
  | { id: number; ok: false; error: CrossedError };

function rebuild(error: CrossedError): Error {
  if (error.type === "validation") return new ValidationError([...error.issues]);
  const err = new Error(error.message);
  err.name = error.name;
  return err;
}

let shared: OffloadPool | null = null;

/** The process's pool, started on first use (threads start with the first tasks). */
export function offloadPool(): OffloadPool {
  shared ??= new OffloadPool();
  return shared;
}
