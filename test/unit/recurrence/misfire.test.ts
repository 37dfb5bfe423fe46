/**
 * REC-6: misfire policy as a pure function.
 */
import { describe, expect, it } from "vitest";
import { applyMisfire } from "../../../src/recurrence/index.js";

const MIN = 60_000;
const now = Date.UTC(2027, 0, 4, 12);
const item = (minutesAgo: number) => ({
  occurrenceAt: now - minutesAgo * MIN,
  dueAt: now - minutesAgo * MIN,
});

describe("REC-6: misfire", () => {
  it("REC-6: skip (series default): missed beyond the 15-minute grace are stale, the rest are sent", () => {
    const items = [item(120), item(60), item(16), item(10), item(0), item(-30)];
    expect(applyMisfire({ items, nowMs: now, oneOff: false })).toEqual([
      { action: "skip", late: false, reason: "stale" },
      { action: "skip", late: false, reason: "stale" },
      { action: "skip", late: false, reason: "stale" },
      { action: "send", late: true },
      { action: "send", late: false },
      { action: "send", late: false },
    ]);
  });

  it("REC-6: the grace boundary is inclusive and configurable", () => {
    const items = [item(15), item(5)];
    expect(applyMisfire({ items, nowMs: now, oneOff: false }).map((d) => d.action)).toEqual([
      "send",
      "send",
    ]);
    expect(
      applyMisfire({ items, nowMs: now, oneOff: false, graceMs: 0 }).map((d) => d.action),
    ).toEqual(["skip", "skip"]);
  });

  it("REC-6: latest sends only the most recent missed occurrence", () => {
    const items = [item(180), item(60), item(120)];
    expect(applyMisfire({ items, nowMs: now, oneOff: false, policy: "latest" })).toEqual([
      { action: "skip", late: false, reason: "stale" },
      { action: "send", late: true },
      { action: "skip", late: false, reason: "stale" },
    ]);
    // An occurrence due within the grace period already catches up: all missed ones are stale.
    const withRecent = [item(180), item(5)];
    expect(
      applyMisfire({ items: withRecent, nowMs: now, oneOff: false, policy: "latest" }).map(
        (d) => d.action,
      ),
    ).toEqual(["skip", "send"]);
  });

  it("REC-6: all sends every missed occurrence, capped to the most recent maxCatchUp", () => {
    const items = [item(50), item(40), item(30), item(20)];
    expect(
      applyMisfire({ items, nowMs: now, oneOff: false, policy: "all" }).map((d) => d.action),
    ).toEqual(["send", "send", "send", "send"]);
    expect(
      applyMisfire({ items, nowMs: now, oneOff: false, policy: "all", maxCatchUp: 2 }),
    ).toEqual([
      { action: "skip", late: false, reason: "stale" },
      { action: "skip", late: false, reason: "stale" },
      { action: "send", late: true },
      { action: "send", late: true },
    ]);
    const many = Array.from({ length: 150 }, (_, i) => item(1000 - i));
    const decisions = applyMisfire({ items: many, nowMs: now, oneOff: false, policy: "all" });
    expect(decisions.filter((d) => d.action === "send")).toHaveLength(100);
    expect(decisions.slice(0, 50).every((d) => d.reason === "stale")).toBe(true);
  });

  it("REC-6: a one-off is sent late, and marked late, unless its expiry has passed", () => {
    expect(applyMisfire({ items: [item(600)], nowMs: now, oneOff: true })).toEqual([
      { action: "send", late: true },
    ]);
    expect(
      applyMisfire({ items: [item(600)], nowMs: now, oneOff: true, expiresAtMs: now + MIN }),
    ).toEqual([{ action: "send", late: true }]);
    expect(
      applyMisfire({ items: [item(600)], nowMs: now, oneOff: true, expiresAtMs: now - MIN }),
    ).toEqual([{ action: "skip", late: false, reason: "expired" }]);
    expect(applyMisfire({ items: [item(0)], nowMs: now, oneOff: true })).toEqual([
      { action: "send", late: false },
    ]);
  });

  it("REC-6: late means due more than one second before now", () => {
    const d = applyMisfire({
      items: [
        { occurrenceAt: now, dueAt: now - 1000 },
        { occurrenceAt: now, dueAt: now - 1001 },
      ],
      nowMs: now,
      oneOff: false,
    });
    expect(d.map((x) => x.late)).toEqual([false, true]);
  });
});

describe("DEL-17: catch-up window and pacing", () => {
  const HOUR = 60 * MIN;
  // 72 hourly occurrences missed over 3 days, the newest an hour ago.
  const missed = Array.from({ length: 72 }, (_, i) => item((72 - i) * 60));

  it("DEL-17: under all, missed occurrences older than the window are stale, the rest sent oldest first", () => {
    const decisions = applyMisfire({
      items: missed,
      nowMs: now,
      oneOff: false,
      policy: "all",
      catchUpWindowMs: 6 * HOUR,
    });
    expect(decisions.filter((d) => d.action === "skip" && d.reason === "stale")).toHaveLength(66);
    expect(decisions.slice(66).every((d) => d.action === "send" && d.late)).toBe(true);
  });

  it("DEL-17: kept catch-up sends are spread paceMs apart from now on, oldest first", () => {
    const decisions = applyMisfire({
      items: missed,
      nowMs: now,
      oneOff: false,
      policy: "all",
      catchUpWindowMs: 6 * HOUR,
      catchUpPaceMs: MIN,
    });
    expect(decisions.slice(66).map((d) => d.runAtMs)).toEqual(
      [0, 1, 2, 3, 4, 5].map((k) => now + k * MIN),
    );
    expect(decisions.slice(0, 66).every((d) => d.runAtMs === undefined)).toBe(true);
  });

  it("DEL-17: without a window all keeps the old behaviour (capped by maxCatchUp only)", () => {
    const decisions = applyMisfire({ items: missed, nowMs: now, oneOff: false, policy: "all" });
    expect(decisions.every((d) => d.action === "send" && d.runAtMs === undefined)).toBe(true);
  });
});
