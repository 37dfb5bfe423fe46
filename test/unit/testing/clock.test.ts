/** API-8: the testing kit's clock — moves only when told, either direction, timers in order. */
import { describe, expect, it } from "vitest";
import { InstanceClock, ManualClock } from "../../../src/testing/clock.js";

describe("ManualClock", () => {
  it("API-8: advance and set fire due timers in time order, each at its own instant", () => {
    const clock = new ManualClock("2027-01-04T08:00:00Z");
    const fired: Array<[string, string]> = [];
    clock.setTimer(2_000, () => fired.push(["b", clock.date().toISOString()]));
    clock.setTimer(1_000, () => fired.push(["a", clock.date().toISOString()]));
    clock.setTimer(10_000, () => fired.push(["c", clock.date().toISOString()]));
    clock.advance(5_000);
    expect(fired).toEqual([
      ["a", "2027-01-04T08:00:01.000Z"],
      ["b", "2027-01-04T08:00:02.000Z"],
    ]);
    expect(clock.date().toISOString()).toBe("2027-01-04T08:00:05.000Z");
    expect(clock.sqlNow()).toEqual(new Date("2027-01-04T08:00:05.000Z"));
    expect(clock.nextTimerAt()).toBe(Date.parse("2027-01-04T08:00:10Z"));
  });

  it("API-8: going backwards fires nothing; a timer fires when the clock reaches it again", () => {
    const clock = new ManualClock("2027-01-04T08:00:00Z");
    let fired = 0;
    clock.setTimer(60_000, () => fired++);
    clock.set("2027-01-04T07:00:00Z");
    expect(fired).toBe(0);
    expect(clock.sqlNow().toISOString()).toBe("2027-01-04T07:00:00.000Z");
    clock.advance(3_600_000);
    expect(fired).toBe(0);
    clock.advance(60_000);
    expect(fired).toBe(1);
    expect(clock.pendingTimers()).toBe(0);
  });

  it("API-8: an invalid instant is a RangeError", () => {
    const clock = new ManualClock(0);
    expect(() => clock.set("not a date")).toThrow(RangeError);
    expect(() => clock.advance(Number.NaN)).toThrow(RangeError);
  });

  it("API-8: a killed instance view disarms its timers and arms no more", () => {
    const clock = new ManualClock(0);
    const view = new InstanceClock(clock);
    let fired = 0;
    view.setTimer(10, () => fired++);
    view.kill();
    view.setTimer(10, () => fired++);
    clock.advance(100);
    expect(fired).toBe(0);
    expect(clock.pendingTimers()).toBe(0);
  });
});
