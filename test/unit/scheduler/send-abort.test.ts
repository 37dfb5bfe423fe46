/**
 * The abort of one send (CH-4): its signal is made only when read, and tells the same as
 * an `AbortController` would, whether it was read before or after the abort.
 */
import { describe, expect, it } from "vitest";
import { SendAbort } from "../../../src/scheduler/send-abort.js";

describe("SendAbort", () => {
  it("CH-4: a signal read after the abort is already aborted, with the abort's reason", () => {
    const abort = new SendAbort();
    const reason = new Error("lease about to end and not renewed: send aborted");
    abort.abort(reason);
    expect(abort.aborted).toBe(true);
    expect(abort.signal.aborted).toBe(true);
    expect(abort.signal.reason).toBe(reason);
  });

  it("CH-4: a signal read before the abort fires its abort event once, with the first reason", () => {
    const abort = new SendAbort();
    const signal = abort.signal;
    expect(signal.aborted).toBe(false);
    const reasons: unknown[] = [];
    signal.addEventListener("abort", () => reasons.push(signal.reason));
    const first = new Error("send deadline reached");
    abort.abort(first);
    abort.abort(new Error("shutting down"));
    expect(reasons).toEqual([first]);
    expect(abort.signal).toBe(signal);
  });

  it("CH-4: a second abort before the signal is read keeps the first reason", () => {
    const abort = new SendAbort();
    const first = new Error("send deadline reached");
    abort.abort(first);
    abort.abort(new Error("lease lost"));
    expect(abort.signal.reason).toBe(first);
  });

  it("CH-4: not aborted until abort is called, and reading the flag makes no signal", () => {
    const abort = new SendAbort();
    expect(abort.aborted).toBe(false);
    expect(abort.signal.aborted).toBe(false);
  });
});
