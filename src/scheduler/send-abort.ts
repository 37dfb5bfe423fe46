/**
 * The abort of one send, with its `AbortSignal` made only when someone asks for it.
 *
 * Every send may be aborted (its deadline, the watchdog a safety margin before a lease
 * that could not be renewed ends, a lost lease, forced shutdown), but a channel that never
 * reads `ctx.signal` (an in-process no-op or counting channel) does not need the
 * `AbortController` and its `EventTarget` that each send used to allocate. This object
 * records the abort itself; the signal, once read, reflects every abort before and after
 * (same first reason, as `AbortController` keeps it). The shipped channels all read the
 * signal, so for them it is an `AbortController` made a little later.
 *
 * Shaped like `AbortController` (`signal`, `abort(reason)`), so code that holds either
 * calls it alike.
 */
/**
 * The reason of an abort this worker made for its own sake (its lease ran out or was
 * lost, or it is shutting down), not the receiver's: a send stopped so says nothing about
 * the host, and must not count toward its circuit (CH-7).
 */
export class OwnAbortReason extends Error {}

export class SendAbort {
  #controller: AbortController | null = null;
  #aborted = false;
  #reason: unknown = undefined;

  /** The first reason given to {@link abort} (undefined before); reads no signal. */
  get reason(): unknown {
    return this.#reason;
  }

  /** Whether {@link abort} was called; reads no signal. */
  get aborted(): boolean {
    return this.#aborted;
  }

  /** The send's signal, made on first read (already aborted when the abort came first). */
  get signal(): AbortSignal {
    if (this.#controller === null) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  /** Aborts the send; later calls change nothing (the first reason stays). */
  abort(reason?: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }
}
