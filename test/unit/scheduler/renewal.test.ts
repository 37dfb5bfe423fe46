/**
 * The renewal schedule of held leases (DEL-16): fixed rate, one renewal at a time, and a
 * renewal that falls due while one is in flight runs once after it.
 */
import { describe, expect, it } from "vitest";
import { TestClock } from "../../../src/clock/index.js";
import { RenewalSchedule } from "../../../src/scheduler/renewal.js";

/** A renew function whose runs the test ends one by one; each records the instant it started. */
function renewals(clock: TestClock) {
  const started: number[] = [];
  const pending: Array<() => void> = [];
  const renew = () =>
    new Promise<void>((resolve) => {
      started.push(clock.now());
      pending.push(resolve);
    });
  /** Ends the oldest renewal in flight and lets its continuations run. */
  const finishOne = async () => {
    pending.shift()!();
    for (let i = 0; i < 5; i++) await Promise.resolve();
  };
  return { started, renew, finishOne, inFlight: () => pending.length };
}

/** A schedule of period 1 s with something held, its clock moved to its first renewal. */
function firstRenewalStarted() {
  const clock = new TestClock("2027-01-04T08:00:00Z");
  const r = renewals(clock);
  new RenewalSchedule(
    clock,
    () => 1_000,
    r.renew,
    () => true,
  ).ensure();
  clock.advance(1_000);
  return { clock, r };
}

describe("RenewalSchedule", () => {
  it("DEL-16: the next renewal is armed as one starts, so a renewal still in flight leaves a timer armed", async () => {
    const { clock, r } = firstRenewalStarted();
    expect(r.started).toEqual([clock.now()]);
    // The first renewal has not ended; the next one is armed all the same.
    expect(clock.pendingTimers()).toBe(1);
    await r.finishOne();
    clock.advance(1_000);
    expect(r.started).toHaveLength(2);
    expect(r.started[1]).toBe(clock.now());
  });

  it("DEL-16: a renewal due while the previous is in flight runs once when it ends, from the instant then", async () => {
    const { clock, r } = firstRenewalStarted();
    // A far jump while the first is in flight: one follow-up, not one per period.
    clock.advance(60_000);
    expect(r.started).toHaveLength(1);
    expect(r.inFlight()).toBe(1);
    await r.finishOne();
    expect(r.started).toHaveLength(2);
    expect(r.started[1]).toBe(clock.now());
    expect(clock.pendingTimers()).toBe(1);
  });

  it("DEL-16: renew() joins the renewal in flight; nothing is armed while nothing is held or after stop()", async () => {
    const clock = new TestClock("2027-01-04T08:00:00Z");
    const r = renewals(clock);
    let held = false;
    const schedule = new RenewalSchedule(
      clock,
      () => 1_000,
      r.renew,
      () => held,
    );
    schedule.ensure();
    expect(clock.pendingTimers()).toBe(0);
    held = true;
    const a = schedule.renew();
    const b = schedule.renew();
    expect(a).toBe(b);
    expect(r.started).toHaveLength(1);
    await r.finishOne();
    schedule.ensure();
    expect(clock.pendingTimers()).toBe(1);
    schedule.stop();
    expect(clock.pendingTimers()).toBe(0);
    schedule.ensure();
    expect(clock.pendingTimers()).toBe(0);
    schedule.resume();
    schedule.ensure();
    expect(clock.pendingTimers()).toBe(1);
  });
});
