/**
 * Channels for tests: record every send, and let a test decide each outcome (resolve,
 * throw a steering error, or hang until released) without real time passing.
 */
import type {
  Channel,
  ChannelDelivery,
  SendContext,
  SendResult,
} from "../../src/channels/types.js";

export interface RecordedSend {
  delivery: ChannelDelivery;
  ctx: SendContext;
}

type Behaviour = (
  delivery: ChannelDelivery,
  ctx: SendContext,
  n: number,
) => Promise<SendResult> | SendResult;

/** A channel whose behaviour the test sets; `sends` lists every call in order. */
export class ScriptedChannel implements Channel {
  readonly sends: RecordedSend[] = [];
  behaviour: Behaviour = () => ({ messageId: null });
  /** DEL-19: renders digests (a scripted channel records them like any send). */
  readonly digests = true;
  constructor(
    readonly name = "test",
    readonly idempotent = true,
  ) {}
  validateTarget(): void {}
  async send(delivery: ChannelDelivery, ctx: SendContext): Promise<SendResult> {
    this.sends.push({ delivery, ctx });
    return this.behaviour(delivery, ctx, this.sends.length);
  }
  /** Delivery keys sent, in order. */
  keys(): string[] {
    return this.sends.map((s) => s.delivery.deliveryKey);
  }
}

/** A promise the test resolves by hand. */
export function deferred<T = void>(): {
  promise: Promise<T>;
  resolve: (v: T) => void;
  reject: (e: unknown) => void;
} {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
