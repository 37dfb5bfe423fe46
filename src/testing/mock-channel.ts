/**
 * The mock channel of the testing kit (API-8): records every send and answers as the test
 * scripted it (status, latency on the test clock, Retry-After), the way a receiver would.
 */
import type { CancelTimer, Clock } from "../clock/index.js";
import type { Channel, ChannelDelivery, SendContext, SendResult } from "../channels/types.js";
import { PermanentError, RateLimitedError, TransientError } from "../errors/index.js";

/**
 * One scripted answer of a {@link MockChannel}. Each send takes the next step of the
 * script; once the script is used up, sends answer `{ status: 200 }`.
 *
 * How a step steers the delivery (as the webhook channel reads an HTTP reply, CH-1):
 * - `status` 2xx: sent (the status is recorded in the attempt);
 * - `retryAfterMs` with status 429 or 503: deferred that long, spending no attempt (DEL-13);
 * - 408, 429 and 5xx without `retryAfterMs`: transient, retried with backoff (DEL-4);
 * - any other status: permanent, the delivery is dead at once (DEL-5).
 */
export interface MockStep {
  /** The receiver's HTTP-like status. Default 200. */
  status?: number;
  /**
   * How long the send takes, ms of the test clock (default 0): the send finishes when the
   * test clock has moved this far (`clock.advance`, `runUntil`). `Infinity` never
   * finishes: the send ends only when it is aborted (deadline, lost lease, shutdown).
   */
  latencyMs?: number;
  /** The `Retry-After` the receiver asks for, ms (with status 429 or 503). */
  retryAfterMs?: number;
  /** The receiver's message id, recorded with a successful send. */
  messageId?: string;
}

/** One send the mock channel received. Instants are ISO 8601 UTC strings (`…Z`). */
export interface MockSend {
  /** The delivery key: the same across every attempt of one delivery. */
  deliveryKey: string;
  scheduleId: string;
  reminderKey: string;
  /** The occurrence the reminder is about. */
  occurrenceAt: string;
  /** When the reminder was due. */
  dueAt: string;
  /** When the send started, on the test clock. */
  at: string;
  /** The attempt this send spends, 1-based. */
  attempt: number;
  /** Whether the first attempt started more than 1 s after the due time. */
  late: boolean;
  /** The schedule's payload. */
  payload: unknown;
  /** The status the script answered (200 when the script was used up). */
  status: number;
}

/** Options of {@link createMockChannel}. */
export interface MockChannelOptions {
  /**
   * Whether the receiver de-duplicates on the delivery key (default true): a send whose
   * outcome is unknown (crash, lost lease) is then retried with the same key; with
   * `false` it becomes `in_doubt` (DEL-6).
   */
  idempotent?: boolean;
}

const clocks = new WeakMap<MockChannel, Clock>();

/** The testing kit gives its mock channels the test clock (for latency and `at`). */
export function attachClock(channel: MockChannel, clock: Clock): void {
  clocks.set(channel, clock);
}

/** A channel that records sends and answers from a script. Create with {@link createMockChannel}. */
export class MockChannel implements Channel {
  readonly name: string;
  readonly idempotent: boolean;
  /** DEL-19: takes digests (a digest is one send whose `delivery.digest` lists the items). */
  readonly digests = true;
  /** Every send received, in order (failed and retried ones too). */
  readonly sends: MockSend[] = [];
  #script: MockStep[] = [];
  #waiting = 0;

  /** @internal use {@link createMockChannel}. */
  constructor(name: string, options: MockChannelOptions = {}) {
    this.name = name;
    this.idempotent = options.idempotent ?? true;
  }

  /**
   * Appends answers for the next sends, in order, and returns the channel.
   * @example s.channel("mock").script([{ status: 503 }, { status: 200, latencyMs: 2_000 }])
   * @throws RangeError for a negative latency or Retry-After, or a status outside 100–599.
   */
  script(steps: readonly MockStep[]): this {
    for (const step of steps) {
      const status = step.status ?? 200;
      if (!Number.isInteger(status) || status < 100 || status > 599) {
        throw new RangeError(`mock step status must be an HTTP status (100–599), not ${status}`);
      }
      if ((step.latencyMs ?? 0) < 0 || (step.retryAfterMs ?? 0) < 0) {
        throw new RangeError("mock step latencyMs and retryAfterMs must not be negative");
      }
    }
    this.#script.push(...steps);
    return this;
  }

  /** Scripted answers not used yet. */
  get scripted(): number {
    return this.#script.length;
  }

  /** Sends started and now waiting for the test clock (their latency). */
  get waiting(): number {
    return this.#waiting;
  }

  /** Forgets the recorded sends and the rest of the script. */
  reset(): void {
    this.sends.length = 0;
    this.#script = [];
  }

  /** Accepts any target: the mock has no address to check. */
  validateTarget(): void {}

  /**
   * Records the send, waits its scripted latency on the test clock, then answers.
   * @throws PermanentError, TransientError or RateLimitedError as the step says (see {@link MockStep}).
   */
  async send(delivery: ChannelDelivery, ctx: SendContext): Promise<SendResult> {
    const clock = clocks.get(this);
    const step = this.#script.shift() ?? {};
    const status = step.status ?? 200;
    const at = clock?.now() ?? ctx.now?.() ?? Date.now();
    this.sends.push({
      deliveryKey: delivery.deliveryKey,
      scheduleId: delivery.scheduleId,
      reminderKey: delivery.reminderKey,
      occurrenceAt: delivery.occurrenceAt.toISOString(),
      dueAt: delivery.dueAt.toISOString(),
      at: new Date(at).toISOString(),
      attempt: delivery.attempt,
      late: delivery.late,
      payload: delivery.payload ?? null,
      status,
    });
    const latencyMs = step.latencyMs ?? 0;
    if (latencyMs > 0) await this.#wait(latencyMs, ctx.signal, clock);
    ctx.signal.throwIfAborted();
    if (status >= 200 && status < 300) return { status, messageId: step.messageId ?? null };
    const message = `mock channel answered ${status}`;
    if (step.retryAfterMs !== undefined && (status === 429 || status === 503)) {
      throw new RateLimitedError(message, step.retryAfterMs, { status });
    }
    if (status === 408 || status === 429 || status >= 500) {
      throw new TransientError(message, { status });
    }
    throw new PermanentError(message, { status });
  }

  /** Resolves after `ms` of the test clock; rejects when `signal` aborts first. */
  #wait(ms: number, signal: AbortSignal, clock: Clock | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#waiting++;
      let cancel: CancelTimer | null = null;
      const done = () => {
        this.#waiting--;
        signal.removeEventListener("abort", onAbort);
        cancel?.();
      };
      const onAbort = () => {
        done();
        reject(signal.reason instanceof Error ? signal.reason : new Error("send aborted"));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      if (Number.isFinite(ms)) {
        if (!clock) {
          done();
          reject(
            new Error(
              "a mock channel's latency needs the test clock: register it with createTestScheduler",
            ),
          );
          return;
        }
        cancel = clock.setTimer(ms, () => {
          done();
          resolve();
        });
      }
    });
  }
}

/**
 * A mock channel named `name` (default `mock`): pass it in
 * `createTestScheduler({ channels: [...] })` to have more than the default one, or one
 * whose receiver does not de-duplicate (`{ idempotent: false }`).
 */
export function createMockChannel(name = "mock", options: MockChannelOptions = {}): MockChannel {
  return new MockChannel(name, options);
}
