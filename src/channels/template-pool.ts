/**
 * Off-thread rendering of templates (CH-6, CH-6): a template that may run long (loops,
 * tags, filters whose cost is not linear in their input) renders on a worker thread of
 * this small pool, under a hard deadline. A render that overruns has its thread ended
 * (`Worker.terminate`, which stops even a render stuck inside one filter call) and
 * replaced; the delivery fails with `TEMPLATE_TIMEOUT`. Each thread's heap is capped, so
 * a render that allocates without bound ends its own thread (`TEMPLATE_FAILED`), never
 * the process.
 *
 * Why a pool of its own rather than the API's (src/offload/): that one waits behind
 * calendar imports that may take seconds, and it sits above channels in the import order
 * (docs/architecture.md); a delivery must not wait for an import.
 */
import { availableParallelism } from "node:os";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { PermanentError, TransientError } from "../errors/index.js";
import type { RenderedMessage, ReminderTemplate, TextEscape } from "./template.js";

/** Longest an off-thread render may run, ms (counted once its thread is up). */
export const RENDER_DEADLINE_MS = 1_000;
/** Heap of one render thread, MiB. */
export const RENDER_HEAP_MB = 64;
/** Most renders waiting for a thread; beyond, a delivery is retried later (`TEMPLATE_BUSY`). */
const MAX_WAITING = 200;

/** What crosses to a render thread. */
export interface RenderJob {
  template: ReminderTemplate;
  context: Record<string, unknown>;
  textEscape: TextEscape;
}

/** What a render thread answers. */
export type RenderAnswer =
  | { ready: true }
  | { id: number; ok: true; message: RenderedMessage }
  | { id: number; ok: false; code: string; message: string };

interface Job extends RenderJob {
  id: number;
  resolve: (m: RenderedMessage) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  job: Job | null;
  timer: NodeJS.Timeout | null;
  ready: boolean;
}

function entry(): URL {
  const source = import.meta.url.endsWith(".ts");
  return new URL(source ? "./template-worker.ts" : "./template-worker.js", import.meta.url);
}

/** A bounded pool of render threads; see the module's description. */
export class TemplateRenderPool {
  private readonly size: number;
  private readonly deadlineMs: number;
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  /** Threads ended because a render overran its deadline or its heap (tests, metrics). */
  killed = 0;

  /**
   * @param options.size most threads (default: 1 or 2 by the cores available).
   * @param options.deadlineMs longest render, ms (default {@link RENDER_DEADLINE_MS}).
   */
  constructor(options: { size?: number; deadlineMs?: number } = {}) {
    this.size = Math.max(1, options.size ?? Math.min(2, availableParallelism() - 1));
    this.deadlineMs = options.deadlineMs ?? RENDER_DEADLINE_MS;
  }

  /**
   * Renders `job` on a thread.
   * @throws PermanentError `TEMPLATE_TIMEOUT` (overran the deadline), `TEMPLATE_FAILED`
   *   (the template failed, or its thread ran out of heap), `TEMPLATE_TOO_LARGE`;
   *   TransientError `TEMPLATE_BUSY` when too many renders wait.
   */
  render(job: RenderJob): Promise<RenderedMessage> {
    if (this.queue.length >= MAX_WAITING) {
      return Promise.reject(
        new TransientError(`${this.queue.length} template renders are waiting; retried later`, {
          code: "TEMPLATE_BUSY",
        }),
      );
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ ...job, id: this.nextId++, resolve, reject });
      this.dispatch();
    });
  }

  /** Ends every thread (renders in flight fail as busy, to be retried). */
  async close(): Promise<void> {
    for (const job of this.queue.splice(0)) {
      job.reject(new TransientError("the render pool closed", { code: "TEMPLATE_BUSY" }));
    }
    await Promise.all(
      this.slots.splice(0).map((slot) => {
        this.fail(slot, new TransientError("the render pool closed", { code: "TEMPLATE_BUSY" }));
        return slot.worker.terminate();
      }),
    );
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      let slot = this.slots.find((s) => s.job === null);
      if (slot === undefined) {
        if (this.slots.length >= this.size) return;
        slot = this.spawn();
      }
      const job = this.queue.shift() as Job;
      slot.job = job;
      slot.worker.ref();
      if (slot.ready) this.startTimer(slot);
      const { template, context, textEscape } = job;
      slot.worker.postMessage({ id: job.id, template, context, textEscape });
    }
  }

  private startTimer(slot: Slot): void {
    slot.timer = setTimeout(() => {
      this.killed++;
      this.fail(
        slot,
        new PermanentError(
          `template: the render ran longer than ${this.deadlineMs} ms and was stopped`,
          { code: "TEMPLATE_TIMEOUT" },
        ),
      );
      this.discard(slot);
    }, this.deadlineMs);
  }

  private spawn(): Slot {
    const url = entry();
    const resourceLimits = { maxOldGenerationSizeMb: RENDER_HEAP_MB };
    const worker = url.pathname.endsWith(".ts")
      ? // TypeScript source (tests): tsx's loader first, then the entry.
        new Worker(
          `import(${JSON.stringify(tsxApi())}).then((tsx) => { tsx.register(); return import(${JSON.stringify(url.href)}); });`,
          { eval: true, resourceLimits },
        )
      : new Worker(fileURLToPath(url), { resourceLimits });
    worker.unref();
    const slot: Slot = { worker, job: null, timer: null, ready: false };
    worker.on("message", (m: RenderAnswer) => this.receive(slot, m));
    worker.on("error", (err: Error & { code?: string }) => {
      if (slot.job !== null) this.killed++;
      const heap = err.code === "ERR_WORKER_OUT_OF_MEMORY";
      this.fail(
        slot,
        new PermanentError(
          heap
            ? `template: the render used more than ${RENDER_HEAP_MB} MiB and was stopped`
            : `template: the render thread failed: ${err.message}`,
          { code: "TEMPLATE_FAILED" },
        ),
      );
      this.discard(slot);
    });
    worker.on("exit", (code) => {
      this.fail(
        slot,
        new PermanentError(`template: the render thread exited (code ${code})`, {
          code: "TEMPLATE_FAILED",
        }),
      );
      this.discard(slot);
    });
    this.slots.push(slot);
    return slot;
  }

  private receive(slot: Slot, m: RenderAnswer): void {
    if ("ready" in m) {
      slot.ready = true;
      if (slot.job !== null && slot.timer === null) this.startTimer(slot);
      return;
    }
    const job = slot.job;
    if (job === null || m.id !== job.id) return;
    this.settle(slot);
    if (m.ok) job.resolve(m.message);
    else job.reject(new PermanentError(m.message, { code: m.code }));
    this.dispatch();
  }

  private settle(slot: Slot): void {
    if (slot.timer !== null) clearTimeout(slot.timer);
    slot.timer = null;
    slot.job = null;
    slot.worker.unref();
  }

  private fail(slot: Slot, err: Error): void {
    const job = slot.job;
    if (job === null) return;
    this.settle(slot);
    job.reject(err);
  }

  private discard(slot: Slot): void {
    const i = this.slots.indexOf(slot);
    if (i < 0) return;
    this.slots.splice(i, 1);
    void slot.worker.terminate();
    this.dispatch();
  }
}

/** tsx's ESM API, for a thread that runs TypeScript source (a development dependency). */
function tsxApi(): string {
  return pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm/api")).href.replace(
    /\.cjs$/,
    ".mjs",
  );
}

let shared: TemplateRenderPool | null = null;

/** The process's render pool, started on first use. */
export function templateRenderPool(): TemplateRenderPool {
  shared ??= new TemplateRenderPool();
  return shared;
}
