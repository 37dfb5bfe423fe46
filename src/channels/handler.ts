/**
 * Handler channels (CH-4): a function of the library user's own process becomes a
 * channel. `handlerChannel("billing", async (delivery, { idempotencyKey, signal }) => …)`
 * registers under `billing`; reminders name it as their `channel`.
 *
 * The function receives the delivery (its key, occurrence, payload, target, template) and
 * an abort signal that fires when its time budget is spent, a safety margin before a lease
 * that could not be renewed ends (so it stops before another worker may take the row),
 * when the lease is lost, and on forced shutdown. It steers the outcome by what it throws:
 * {@link PermanentError} (dead now), {@link RateLimitedError} (wait, no attempt spent),
 * {@link TransientError} (retry with backoff); any other error counts as transient.
 * Whether a send interrupted mid-way is retried depends on `idempotent` (DEL-6).
 */
import { TransientError, ValidationError } from "../errors/index.js";
import type { Channel, ChannelDelivery, SendContext, SendResult } from "./types.js";

/** What a handler function receives beside the delivery. */
export interface HandlerContext {
  /** The delivery key: the same on every attempt; de-duplicate on it when idempotent. */
  idempotencyKey: string;
  /** Aborted before the lease ends (see the module comment): stop work when it fires. */
  signal: AbortSignal;
}

/** A handler function: resolve when done (optionally with the message id and a status). */
export type HandlerFunction = (
  delivery: ChannelDelivery,
  context: HandlerContext,
) => Promise<void | SendResult> | void | SendResult;

/** Options of {@link handlerChannel}. */
export interface HandlerChannelOptions {
  /**
   * True when the function de-duplicates by `idempotencyKey`, so a send whose outcome is
   * unknown may be retried with the same key; false makes such deliveries `in_doubt`
   * unless the reminder opts into at-least-once (DEL-6). Required: there is no safe
   * default.
   */
  idempotent: boolean;
  /** Budget of one call, ms; default the scheduler's `sendTimeoutMs`. */
  timeoutMs?: number;
  /**
   * Checks a reminder's target at create and edit; throw a {@link ValidationError} naming
   * `target.<field>`. Default: any object, or none.
   */
  validateTarget?: (target: unknown) => void;
  /**
   * DEL-19: the function that sends a digest (`delivery.digest.items`, one call per
   * digest, `idempotencyKey` the digest id). Without it, a reminder with `digest` on this
   * channel is refused at create: `fn` receives one delivery at a time.
   */
  digest?: HandlerFunction;
}

const NAME = /^[a-z][a-z0-9_-]{0,63}$/;

/**
 * Creates a channel that calls `fn` for each delivery.
 *
 * @param name the channel name reminders use: lower-case letter first, then letters,
 *   digits, `_` or `-`, at most 64 characters.
 * @throws ValidationError (field `name` or `timeoutMs`) for a bad name or budget.
 */
export function handlerChannel(
  name: string,
  fn: HandlerFunction,
  options: HandlerChannelOptions,
): Channel {
  if (!NAME.test(name)) {
    throw new ValidationError({
      field: "name",
      message: "must be a lower-case letter, then up to 63 letters, digits, _ or -",
      value: name,
    });
  }
  if (
    options.timeoutMs !== undefined &&
    (!Number.isInteger(options.timeoutMs) || options.timeoutMs < 1)
  ) {
    throw new ValidationError({
      field: "timeoutMs",
      message: "must be a positive whole number of milliseconds",
      value: options.timeoutMs,
    });
  }
  const check = options.validateTarget;
  const digestFn = options.digest;
  return {
    name,
    idempotent: options.idempotent,
    digests: digestFn !== undefined,
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    validateTarget(target: unknown): void {
      if (check) {
        check(target);
        return;
      }
      if (target === undefined || target === null) return;
      if (typeof target !== "object" || Array.isArray(target)) {
        throw new ValidationError({ field: "target", message: "must be an object", value: target });
      }
    },
    async send(delivery: ChannelDelivery, ctx: SendContext): Promise<SendResult> {
      if (ctx.signal.aborted) {
        throw new TransientError(`${name} handler aborted before it started`, {
          code: "SEND_ABORTED",
        });
      }
      const call = delivery.digest && digestFn ? digestFn : fn;
      const result = await call(delivery, {
        idempotencyKey: ctx.idempotencyKey,
        signal: ctx.signal,
      });
      return result ?? {};
    },
  };
}
