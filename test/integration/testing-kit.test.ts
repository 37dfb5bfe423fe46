/**
 * API-8: the testing kit `punctual/testing`, as a user's suite sees it: the library's
 * scheduler on an in-memory embedded database, a test clock, a scripted mock channel,
 * tick / runUntil / crash. The kit always runs on PGlite, so the file runs in the PGlite
 * stage only.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ValidationError } from "../../src/errors/index.js";
import {
  createMockChannel,
  createTestScheduler,
  type TestScheduler,
  type TestSchedulerOptions,
} from "../../src/testing/index.js";
import { migratedTemplate } from "../../src/testing/template.js";

const engine = process.env.PUNCTUAL_TEST_ENGINE ?? "pglite";

describe.skipIf(engine !== "pglite")(
  "testing kit (skipped on the PostgreSQL stage: the kit always runs on embedded PGlite, tested in the PGlite stage)",
  () => {
    let s: TestScheduler | null = null;
    const open = async (options: TestSchedulerOptions) => {
      s = await createTestScheduler(options);
      return s;
    };
    afterEach(async () => {
      await s?.close();
      s = null;
    });
    const states = async (t: TestScheduler) =>
      (await t.listDeliveries({ limit: 100 })).items.map((d) => d.state);

    it("API-8: 15 minutes before a weekly Berlin meeting, across the March DST change", async () => {
      const t = await open({ now: "2027-03-20T00:00:00Z" });
      await t.createSchedule({
        dtstart: "2027-03-22T09:00:00",
        tzid: "Europe/Berlin",
        rrule: "FREQ=WEEKLY;BYDAY=MO",
        reminders: [{ key: "heads-up", offset: "-PT15M", channel: "mock" }],
      });
      await t.runUntil("2027-04-06T00:00:00Z");
      const sends = t.channel("mock").sends;
      // 08:45 in Berlin: UTC+1 before 28 March, UTC+2 after.
      expect(sends.map((x) => x.dueAt)).toEqual([
        "2027-03-22T07:45:00.000Z",
        "2027-03-29T06:45:00.000Z",
        "2027-04-05T06:45:00.000Z",
      ]);
      expect(sends.map((x) => x.at)).toEqual(sends.map((x) => x.dueAt));
      expect(sends.map((x) => x.occurrenceAt)).toEqual([
        "2027-03-22T08:00:00.000Z",
        "2027-03-29T07:00:00.000Z",
        "2027-04-05T07:00:00.000Z",
      ]);
      expect(t.clock.date().toISOString()).toBe("2027-04-06T00:00:00.000Z");
    });

    it("API-8: the database's now follows the test clock, forwards and backwards", async () => {
      const t = await open({ now: "2027-01-04T08:00:00Z" });
      const first = await t.createSchedule({
        dtstart: "2027-01-04T09:00:00Z",
        reminders: [{ key: "r", offset: "PT0S", channel: "mock" }],
      });
      expect(first.schedule.createdAt).toBe("2027-01-04T08:00:00.000Z");
      t.clock.advance(-3_600_000);
      expect(t.clock.date().toISOString()).toBe("2027-01-04T07:00:00.000Z");
      const earlier = await t.createSchedule({
        dtstart: "2027-01-04T09:30:00Z",
        reminders: [{ key: "r", offset: "PT0S", channel: "mock" }],
      });
      expect(earlier.schedule.createdAt).toBe("2027-01-04T07:00:00.000Z");
      // Nothing is due at 07:00; at 09:00 the first one is, on the database's clock too.
      await t.tick();
      expect(t.channel().sends).toEqual([]);
      t.clock.set("2027-01-04T09:00:00Z");
      await t.tick();
      expect(t.channel().sends.map((x) => x.scheduleId)).toEqual([first.schedule.id]);
    });

    it("API-8: a scripted 503 is retried with the same key, then sent", async () => {
      const t = await open({ now: "2027-01-04T08:00:00Z" });
      t.channel("mock").script([{ status: 503 }, { status: 200 }]);
      await t.createSchedule({
        dtstart: "2027-01-04T08:00:00Z",
        reminders: [{ key: "r", offset: "PT0S", channel: "mock" }],
      });
      await t.tick();
      expect(await states(t)).toEqual(["retry"]);
      await t.runUntil("2027-01-04T08:01:00Z");
      const sends = t.channel("mock").sends;
      expect(sends.map((x) => [x.attempt, x.status])).toEqual([
        [1, 503],
        [2, 200],
      ]);
      expect(new Set(sends.map((x) => x.deliveryKey)).size).toBe(1);
      expect(await states(t)).toEqual(["sent"]);
    });

    it("API-8: Retry-After defers without spending an attempt; a 404 is dead at once", async () => {
      const t = await open({ now: "2027-01-04T08:00:00Z" });
      t.channel("mock").script([{ status: 429, retryAfterMs: 120_000 }, { status: 404 }]);
      await t.createSchedule({
        dtstart: "2027-01-04T08:00:00Z",
        reminders: [{ key: "r", offset: "PT0S", channel: "mock" }],
      });
      await t.runUntil("2027-01-04T09:00:00Z");
      const sends = t.channel("mock").sends;
      expect(sends.map((x) => [x.at, x.attempt, x.status])).toEqual([
        ["2027-01-04T08:00:00.000Z", 1, 429],
        ["2027-01-04T08:02:00.000Z", 1, 404],
      ]);
      expect(await states(t)).toEqual(["dead"]);
    });

    it("API-8: a send with latency stays in flight until the test clock has moved that far", async () => {
      const t = await open({ now: "2027-01-04T08:00:00Z" });
      const mock = t.channel("mock").script([{ latencyMs: 5_000 }]);
      await t.createSchedule({
        dtstart: "2027-01-04T08:00:00Z",
        reminders: [{ key: "r", offset: "PT0S", channel: "mock" }],
      });
      await t.tick();
      expect(mock.waiting).toBe(1);
      expect(await states(t)).toEqual(["claimed"]);
      t.clock.advance(4_999);
      await t.tick();
      expect(await states(t)).toEqual(["claimed"]);
      t.clock.advance(1);
      await t.tick();
      expect(mock.waiting).toBe(0);
      expect(await states(t)).toEqual(["sent"]);
      expect(mock.sends).toHaveLength(1);
    });

    it("API-8 / DEL-19: tick() and runUntil() wait for digest sends, except those waiting on the test clock", async () => {
      const t = await open({ now: "2027-01-04T08:00:00Z" });
      const mock = t.channel("mock").script([{ latencyMs: 5_000 }]);
      const digestAt = async (at: string) =>
        t.createSchedule({
          dtstart: at,
          reminders: [
            { key: "r", offset: "PT0S", channel: "mock", digest: { windowMs: 60_000, key: "k" } },
          ],
        });
      await digestAt("2027-01-04T09:00:00Z");
      await digestAt("2027-01-04T09:00:30Z");
      await t.runUntil("2027-01-04T09:01:00Z");
      expect(mock.waiting).toBe(1);
      expect(await states(t)).toEqual(["grouped", "grouped"]);
      await t.runUntil("2027-01-04T09:01:05Z");
      expect(mock.waiting).toBe(0);
      expect(await states(t)).toEqual(["sent", "sent"]);
      expect(mock.sends).toHaveLength(1);
      // The script is used up: the next digest answers at once, settled when tick() returns.
      await digestAt("2027-01-04T10:00:00Z");
      t.clock.set("2027-01-04T10:01:00Z");
      await t.tick();
      expect(await states(t)).toEqual(["sent", "sent", "sent"]);
      expect(mock.sends).toHaveLength(2);
    });

    it("API-8: crash() keeps the claim until its lease ends; recovery retries with the same key", async () => {
      const t = await open({ now: "2027-01-04T08:00:00Z", scheduler: { leaseMs: 30_000 } });
      const mock = t.channel("mock").script([{ latencyMs: Infinity }]);
      await t.createSchedule({
        dtstart: "2027-01-04T08:00:00Z",
        reminders: [{ key: "r", offset: "PT0S", channel: "mock" }],
      });
      await t.tick();
      expect(await states(t)).toEqual(["claimed"]);
      await t.crash();
      // Like kill -9: the claim was not given back.
      expect(await states(t)).toEqual(["claimed"]);
      t.clock.advance(29_000);
      await t.tick();
      expect(mock.sends).toHaveLength(1);
      await t.runUntil("2027-01-04T08:02:00Z");
      expect(mock.sends.map((x) => x.attempt)).toEqual([1, 2]);
      expect(new Set(mock.sends.map((x) => x.deliveryKey)).size).toBe(1);
      expect(mock.sends[1]?.at).toBe("2027-01-04T08:00:30.000Z");
      expect(await states(t)).toEqual(["sent"]);
    });

    it("API-8: after a crash, a receiver that does not de-duplicate leaves the delivery in doubt", async () => {
      const t = await open({
        now: "2027-01-04T08:00:00Z",
        channels: [createMockChannel("mock", { idempotent: false })],
      });
      t.channel().script([{ latencyMs: Infinity }]);
      await t.createSchedule({
        dtstart: "2027-01-04T08:00:00Z",
        reminders: [{ key: "r", offset: "PT0S", channel: "mock" }],
      });
      await t.tick();
      await t.crash();
      await t.runUntil("2027-01-04T08:05:00Z");
      expect(t.channel().sends).toHaveLength(1);
      expect(await states(t)).toEqual(["in_doubt"]);
    });

    it("API-8: the library's methods act on the test scheduler (cancel stops what was planned)", async () => {
      const t = await open({
        now: "2027-01-04T08:00:00Z",
        channels: [createMockChannel("sms")],
      });
      const { schedule } = await t.createSchedule({
        dtstart: "2027-01-04T09:00:00Z",
        rrule: "FREQ=DAILY;COUNT=3",
        reminders: [{ key: "r", offset: "PT0S", channel: "sms" }],
      });
      await t.runUntil("2027-01-05T10:00:00Z");
      expect(t.channel("sms").sends).toHaveLength(2);
      const updated = await t.updateSchedule(schedule.id, { payload: { v: 2 } });
      expect(updated.schedule.version).toBe(2);
      await t.cancelSchedule(schedule.id);
      await t.runUntil("2027-01-08T00:00:00Z");
      expect(t.channel("sms").sends).toHaveLength(2);
      expect(t.channel("mock").sends).toEqual([]);
      await expect(t.createSchedule({ dtstart: "nope", reminders: [] })).rejects.toBeInstanceOf(
        ValidationError,
      );
    });

    it("API-8: misuse is named: runUntil into the past, an unknown mock channel, start()", async () => {
      const t = await open({ now: "2027-01-04T08:00:00Z" });
      await expect(t.runUntil("2027-01-04T07:00:00Z")).rejects.toThrow(RangeError);
      expect(() => t.channel("nope")).toThrow(/no mock channel named "nope"/);
      expect(() => t.channel().script([{ status: 99 }])).toThrow(RangeError);
      const started = (t as unknown as { start(): Promise<void> }).start();
      await expect(started).rejects.toThrow(/not started/);
    });

    it("API-8: the migrated template is built once per process and shared", async () => {
      const a = await migratedTemplate();
      const b = await migratedTemplate();
      expect(b).toBe(a);
    });
  },
);
