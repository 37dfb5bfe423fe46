/**
 * OPS-12: the worker-thread pool that keeps the API's CPU-heavy pure work off the event
 * loop — the same answers and errors as in this thread, the rule work it lends, and its
 * bounds (queue, timeout, a crashed thread). Work is counted in expansion steps.
 */
import { afterAll, describe, expect, it } from "vitest";
import { toErrorReply } from "../../../src/api/errors.js";
import { ValidationError } from "../../../src/errors/index.js";
import { parseCalendar } from "../../../src/ical/index.js";
import { OffloadPool, OffloadUnavailableError } from "../../../src/offload/index.js";
import { measureWork } from "../../../src/recurrence/expand.js";
import { preview } from "../../../src/recurrence/preview.js";
import { lendRuleWork, validateRule } from "../../../src/recurrence/recurrence.js";

const pool = new OffloadPool({ size: 1 });
const echo = new URL("../../fixtures/offload/echo-worker.ts", import.meta.url);
afterAll(() => pool.close());

/** A COUNT series this thread has not walked yet (the zone and start differ per test). */
function series(day: number) {
  return {
    dtstart: `2033-04-${String(day).padStart(2, "0")}T06:15:00`,
    tzid: "America/Chicago",
    rrule: "FREQ=DAILY;COUNT=15000",
  };
}

describe("OPS-12: the worker-thread pool", () => {
  it("OPS-12: a preview on a worker thread answers exactly what it answers here, errors included", async () => {
    const input = { ...series(1), count: 200, after: "2040-01-01T00:00:00" };
    expect(await pool.run("preview", input)).toEqual(preview(input));
    const bad = { dtstart: "2027-01-04T09:00:00", rrule: "FREQ=MONTHLY;BYMONTHDAY=31;BYMONTH=2" };
    let here: unknown;
    try {
      preview(bad);
    } catch (err) {
      here = err;
    }
    const there = await pool.run("preview", bad).catch((err: unknown) => err);
    expect(there).toBeInstanceOf(ValidationError);
    expect(here).toBeInstanceOf(ValidationError);
    expect((there as ValidationError).issues).toEqual((here as ValidationError).issues);
    expect((there as ValidationError).message).toBe((here as ValidationError).message);
  });

  it("OPS-12: a rule validated on a worker thread is validated here without walking its COUNT set again", async () => {
    const input = series(2);
    const release = lendRuleWork(await pool.run("ruleWork", [input]));
    try {
      const borrowed = measureWork(() => validateRule(input));
      expect(borrowed.steps).toBeLessThan(1_000);
      expect(borrowed.result.between(-Infinity, Infinity, 20_000)).toHaveLength(15_000);
    } finally {
      release();
    }
    // Without the loan, the same validation of another series walks it whole here.
    expect(measureWork(() => validateRule(series(3))).steps).toBeGreaterThan(15_000);
  });

  it("OPS-12: a rule that never matches is searched once, on the worker thread", async () => {
    const input = { dtstart: "2027-01-04T09:00:00", rrule: "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30" };
    const release = lendRuleWork(await pool.run("ruleWork", [input]));
    try {
      const here = measureWork(() => {
        try {
          validateRule(input);
          return null;
        } catch (err) {
          return err;
        }
      });
      expect(here.result).toBeInstanceOf(ValidationError);
      expect((here.result as ValidationError).issues[0]?.field).toMatch(/^rrule/);
      expect(here.steps).toBeLessThan(1_000);
    } finally {
      release();
    }
  });

  it("OPS-12: a calendar read on a worker thread is the same import, its events in pieces", async () => {
    const events = Array.from(
      { length: 600 },
      (_, i) =>
        `BEGIN:VEVENT\r\nUID:e${i}@punctual.test\r\nDTSTAMP:20270101T000000Z\r\nDTSTART:20270${1 + (i % 9)}0${1 + (i % 9)}T0${i % 10}0000Z\r\nSUMMARY:Event ${i}\r\nRRULE:FREQ=WEEKLY;COUNT=${10 + i}\r\nEND:VEVENT\r\n`,
    );
    const text = `BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//punctual//test//EN\r\n${events.join("")}END:VCALENDAR\r\n`;
    const options = { source: "pieces", remind: ["-PT15M"], channel: "log" };
    const { parsed, work } = await pool.run("parseCalendar", { text, options });
    expect(parsed).toEqual(parseCalendar(text, options));
    expect(parsed.events).toHaveLength(600);
    expect(work.walks.length).toBeGreaterThanOrEqual(600);
    const failed = await pool
      .run("parseCalendar", { text: "not a calendar", options })
      .catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(ValidationError);
    expect((failed as ValidationError).issues[0]?.field).toBe("file");
  });

  it("OPS-12: a worker thread that crashes fails only its task (503 WORKER_FAILED); the next task gets a new thread", async () => {
    const crashy = new OffloadPool({ size: 1, entry: echo });
    try {
      const failed = await crashy.run("preview", { crash: true } as never).catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(OffloadUnavailableError);
      expect((failed as OffloadUnavailableError).code).toBe("WORKER_FAILED");
      const reply = toErrorReply(failed);
      expect(reply.status).toBe(503);
      expect(reply.body.error.code).toBe("WORKER_FAILED");
      expect(await crashy.run("preview", { n: 1 } as never)).toEqual({ n: 1 });
    } finally {
      await crashy.close();
    }
  });

  it("OPS-12: a task past its time limit is stopped (WORKER_TIMEOUT) and its thread replaced; a full queue answers WORKERS_BUSY", async () => {
    const slow = new OffloadPool({ size: 1, maxQueue: 1, timeoutMs: 200, entry: echo });
    try {
      const hung = slow.run("preview", { hang: true } as never).catch((e: unknown) => e);
      const waiting = slow.run("preview", { n: 2 } as never);
      const refused = await slow.run("preview", { n: 3 } as never).catch((e: unknown) => e);
      expect((refused as OffloadUnavailableError).code).toBe("WORKERS_BUSY");
      expect(toErrorReply(refused).status).toBe(503);
      expect(((await hung) as OffloadUnavailableError).code).toBe("WORKER_TIMEOUT");
      expect(await waiting).toEqual({ n: 2 });
      expect(slow.stats.threads).toBe(1);
    } finally {
      await slow.close();
    }
  });
});
