/**
 * DEL-13: rate limits and concurrency caps kept in the database and shared by every
 * scheduler on it; CH-7: a circuit per target host. On the test clock, both engines.
 * (Real worker processes racing on one bucket: test/concurrency/rate-limits.test.ts.)
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ConfigInput } from "../../src/config/index.js";
import { startReceiver, type Receiver } from "../unit/channels/receiver.js";
import { deferred } from "../support/channels.js";
import {
  deliveries,
  peer,
  testPunctual,
  tickAndDrain,
  type TestPunctual,
} from "../support/punctual.js";

const T0 = "2027-01-04T08:00:00Z";
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function open(scheduler: NonNullable<ConfigInput["scheduler"]> = {}): Promise<TestPunctual> {
  const t = await testPunctual({ start: T0, scheduler });
  cleanups.push(() => t.close());
  return t;
}

/** One due schedule with `n` reminders on the scripted channel, optionally under `rateLimitKey`. */
async function due(t: TestPunctual, n: number, rateLimitKey?: string, prefix = "r") {
  await t.punctual.createSchedule({
    dtstart: T0,
    tzid: "UTC",
    reminders: Array.from({ length: n }, (_, i) => ({
      key: `${prefix}${i}`,
      offset: "PT0S",
      channel: "test",
      ...(rateLimitKey ? { rateLimitKey } : {}),
    })),
  });
}

const sentCount = async (t: TestPunctual) =>
  (await deliveries(t.punctual)).filter((d) => d.state === "sent").length;

describe("shared rate limits (DEL-13)", () => {
  it("DEL-13: idle limits of another tenant cost a claim nothing (no bucket is locked for a key without due rows)", async () => {
    const t = await open();
    await t.punctual.setRateLimit("test", { ratePerSecond: 2, burst: 3 });
    await t.punctual.db.query(
      `insert into punctual_rate_limits (tenant, key, rate_per_second, burst, tokens, refilled_at)
       select 'other', 'idle' || g, 1, 1, 1, now() from generate_series(1, 2000) g`,
    );
    await due(t, 5);
    const spy = vi.spyOn(t.punctual.db, "transaction");
    await tickAndDrain(t.punctual);
    expect(await sentCount(t)).toBe(3);
    // One locked claim per key with due rows (and a few others of the pass), never one per limit.
    expect(spy.mock.calls.length).toBeLessThan(50);
    spy.mockRestore();
  });

  it("DEL-13: a tenant's limits are capped; a new key past the cap is a 409 naming the key and the cap, a change of an existing one applies", async () => {
    const t = await open({ maxRateLimitsPerTenant: 2 });
    await t.punctual.setRateLimit("a", { ratePerSecond: 1 });
    await t.punctual.setRateLimit("b", { ratePerSecond: 1 });
    await expect(t.punctual.setRateLimit("c", { ratePerSecond: 1 })).rejects.toThrow(
      /key: cannot add rate limit "c".*\(2,/,
    );
    await expect(t.punctual.setRateLimit("b", { ratePerSecond: 5 })).resolves.toMatchObject({
      key: "b",
      ratePerSecond: 5,
    });
    expect((await t.punctual.listRateLimits()).map((l) => l.key)).toEqual(["a", "b"]);
  });

  it("DEL-13: a bucket of burst 3 at 2/s lets 3 due deliveries go, then 2 per second of database clock", async () => {
    const t = await open();
    await t.punctual.setRateLimit("test", { ratePerSecond: 2, burst: 3 });
    await due(t, 10);
    await tickAndDrain(t.punctual);
    expect(await sentCount(t)).toBe(3);
    await tickAndDrain(t.punctual);
    expect(await sentCount(t)).toBe(3);
    t.clock.advance(1_000);
    await tickAndDrain(t.punctual);
    expect(await sentCount(t)).toBe(5);
    t.clock.advance(1_500);
    await tickAndDrain(t.punctual);
    expect(await sentCount(t)).toBe(8);
    const [limit] = await t.punctual.listRateLimits();
    expect(limit).toMatchObject({ key: "test", ratePerSecond: 2, burst: 3, tokens: 0 });
  });

  it("DEL-13: a reminder's rateLimitKey picks its bucket; keys without a limit are not held back", async () => {
    const t = await open();
    await t.punctual.setRateLimit("sms-carrier", { ratePerSecond: 1, burst: 2 });
    await due(t, 5, "sms-carrier", "limited");
    await due(t, 5, undefined, "free");
    await tickAndDrain(t.punctual);
    const sent = (await deliveries(t.punctual)).filter((d) => d.state === "sent");
    expect(sent.filter((d) => d.reminderKey.startsWith("free"))).toHaveLength(5);
    expect(sent.filter((d) => d.reminderKey.startsWith("limited"))).toHaveLength(2);
    const schedule = (await t.punctual.listSchedules()).items.find((s) =>
      s.reminders.some((r) => r.rateLimitKey === "sms-carrier"),
    );
    expect(schedule?.reminders[0]?.rateLimitKey).toBe("sms-carrier");
  });

  it("DEL-13: the concurrency cap counts claimed rows of the key: at most 2 in flight", async () => {
    const t = await open();
    await t.punctual.setRateLimit("test", { ratePerSecond: 1_000, burst: 1_000, concurrency: 2 });
    await due(t, 6);
    const gate = deferred();
    t.channel.behaviour = async () => {
      await gate.promise;
      return { messageId: null };
    };
    await t.punctual.scheduler.tick();
    expect(t.punctual.scheduler.held).toBe(2);
    await t.punctual.scheduler.tick();
    expect(t.punctual.scheduler.held).toBe(2);
    gate.resolve();
    await t.punctual.scheduler.drain();
    await tickAndDrain(t.punctual);
    expect(await sentCount(t)).toBe(4);
  });

  it("DEL-13 / OPS-11: two schedulers on one database share one bucket, and a limit set through one applies to the other from its next tick", async () => {
    const t = await open();
    const other = await peer(t, { start: T0 });
    cleanups.push(() => other.close());
    await due(t, 10);
    await t.punctual.setRateLimit("test", { ratePerSecond: 0.001, burst: 4 });
    // Neither has ticked since: the next tick of each reloads the limits.
    await tickAndDrain(other.punctual);
    await tickAndDrain(t.punctual);
    await tickAndDrain(other.punctual);
    expect(t.channel.sends.length + other.channel.sends.length).toBe(4);
    // Raising the limit through the other process reaches this one at its next tick.
    await other.punctual.setRateLimit("test", { ratePerSecond: 0.001, burst: 10 });
    t.clock.advance(1);
    await tickAndDrain(t.punctual);
    expect(await sentCount(t)).toBe(4);
    expect(await t.punctual.listRateLimits()).toEqual([
      expect.objectContaining({ key: "test", burst: 10 }),
    ]);
    // Removing it puts the key back on the unlimited claim.
    await other.punctual.removeRateLimit("test");
    await tickAndDrain(t.punctual);
    expect(await sentCount(t)).toBe(10);
    await expect(t.punctual.removeRateLimit("test")).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("DEL-13: triggered deliveries carry the reminder's limiter and wait for its bucket like planned ones", async () => {
    const t = await open();
    await t.punctual.setRateLimit("sms-carrier", { ratePerSecond: 0.001, burst: 2 });
    const { schedule } = await t.punctual.createSchedule({
      dtstart: "2027-06-01T08:00:00Z",
      tzid: "UTC",
      reminders: [{ key: "r", offset: "PT0S", channel: "test", rateLimitKey: "sms-carrier" }],
    });
    for (const triggerId of ["a", "b", "c", "d"]) {
      await t.punctual.triggerSchedule(schedule.id, {}, { triggerId });
    }
    await tickAndDrain(t.punctual);
    await tickAndDrain(t.punctual);
    expect(t.channel.sends).toHaveLength(2);
    const waiting = (await deliveries(t.punctual)).filter((d) => d.state === "pending");
    // The two triggers the bucket held back (June's occurrence is beyond the horizon).
    expect(waiting).toHaveLength(2);
  });

  it("DEL-13: backfilled deliveries carry the reminder's limiter and are paced by its bucket", async () => {
    const t = await open();
    await t.punctual.setRateLimit("test", { ratePerSecond: 0.001, burst: 2 });
    // A daily series that began ten days ago: only today's occurrence is planned.
    const { schedule } = await t.punctual.createSchedule({
      dtstart: "2026-12-25T08:00:00Z",
      tzid: "UTC",
      rrule: "FREQ=DAILY;COUNT=60",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    const result = await t.punctual.backfillSchedule(schedule.id, {
      from: "2027-01-01T00:00:00Z",
      to: "2027-01-04T00:00:00Z",
    });
    expect(result.created).toBe(3);
    await tickAndDrain(t.punctual);
    await tickAndDrain(t.punctual);
    expect(t.channel.sends).toHaveLength(2);
  });

  it("DEL-13: a bad limit is refused naming the field", async () => {
    const t = await open();
    await expect(t.punctual.setRateLimit("test", { ratePerSecond: 0 })).rejects.toMatchObject({
      code: "VALIDATION_FAILED",
      issues: [expect.objectContaining({ field: "ratePerSecond" })],
    });
    await expect(t.punctual.setRateLimit("a/b", { ratePerSecond: 1 })).rejects.toMatchObject({
      code: "VALIDATION_FAILED",
    });
  });
});

describe("circuit per target host (CH-7)", () => {
  let receiver: Receiver | null = null;
  afterEach(async () => {
    await receiver?.close();
    receiver = null;
  });

  it("CH-7: a failure reported after its lease ended (a stalled worker) does not count toward the circuit", async () => {
    receiver = await startReceiver();
    const rx = receiver;
    const t = await open({ circuitFailures: 1, leaseMs: 10_000 });
    rx.respond = (_req, res) => {
      t.clock.advance(120_000);
      res.writeHead(503).end();
    };
    await t.punctual.createSchedule({
      dtstart: T0,
      tzid: "UTC",
      reminders: [{ key: "w", offset: "PT0S", channel: "webhook", target: { url: rx.url } }],
    });
    await tickAndDrain(t.punctual);
    expect(rx.requests).toHaveLength(1);
    const host = new URL(rx.url).host;
    expect((await t.punctual.listCircuits()).filter((c) => c.host === host)).toEqual([]);
  });

  it("CH-7: one tenant's failures open its own circuit of a host; another tenant's deliveries to that host still go, and each sees only its own circuits", async () => {
    receiver = await startReceiver();
    const rx = receiver;
    const t = await open({ circuitFailures: 2, circuitBackoffMs: 60_000, backoffBaseMs: 1_000 });
    // Same host for both tenants; acme's path fails, globex's answers.
    rx.respond = (req, res) => res.writeHead(req.url.endsWith("/acme") ? 503 : 200).end();
    const webhooks = (tenant: string, prefix: string) =>
      t.punctual.createSchedule(
        {
          dtstart: T0,
          tzid: "UTC",
          reminders: Array.from({ length: 3 }, (_, i) => ({
            key: `${prefix}${i}`,
            offset: "PT0S",
            channel: "webhook",
            target: { url: `${rx.url}/${tenant}` },
            maxAttempts: 10,
          })),
        },
        { tenant },
      );
    await webhooks("acme", "a");
    await tickAndDrain(t.punctual);
    const host = new URL(rx.url).host;
    const acme = await t.punctual.listCircuits({ tenant: "acme" });
    expect(acme).toMatchObject([{ tenant: "acme", host, state: "open" }]);
    expect(await t.punctual.listCircuits({ tenant: "globex" })).toEqual([]);
    // globex's deliveries to the same host go out while acme's circuit is open.
    const before = rx.requests.length;
    await webhooks("globex", "g");
    t.clock.advance(30_000);
    await tickAndDrain(t.punctual);
    const after = rx.requests.slice(before).map((r) => r.url);
    expect(after).toHaveLength(3);
    expect(after.every((u) => u.endsWith("/globex"))).toBe(true);
    const globexRows = (await t.punctual.listDeliveries({ limit: 100 }, { tenant: "globex" }))
      .items;
    expect(globexRows.map((d) => d.state)).toEqual(["sent", "sent", "sent"]);
    // acme's retries were held back by its circuit: no attempt spent.
    const acmeRows = (await t.punctual.listDeliveries({ limit: 100 }, { tenant: "acme" })).items;
    expect(acmeRows.every((d) => d.state === "retry" && d.attempt === 1)).toBe(true);
    expect(await t.punctual.listCircuits({ tenant: "globex" })).toEqual([]);
    expect((await t.punctual.listCircuits({}, { everyTenant: true })).map((c) => c.tenant)).toEqual(
      ["acme"],
    );
  });

  it("CH-7: 3 transient failures open the circuit; while open no attempt is spent; a probe after the backoff closes it", async () => {
    receiver = await startReceiver();
    const rx = receiver;
    const t = await open({ circuitFailures: 3, circuitBackoffMs: 60_000, backoffBaseMs: 1_000 });
    let failing = true;
    rx.respond = (_req, res) => res.writeHead(failing ? 503 : 200).end();
    await t.punctual.createSchedule({
      dtstart: T0,
      tzid: "UTC",
      reminders: Array.from({ length: 5 }, (_, i) => ({
        key: `w${i}`,
        offset: "PT0S",
        channel: "webhook",
        target: { url: rx.url },
        maxAttempts: 10,
      })),
    });
    // The first tick sends all 5 at once: every one fails (attempt 1 each), the circuit opens.
    await tickAndDrain(t.punctual);
    expect(rx.requests).toHaveLength(5);
    const [circuit] = await t.punctual.listCircuits();
    expect(circuit).toMatchObject({ state: "open", failures: 5, backoffMs: 60_000 });
    // Retries fall due; the circuit holds them back: nothing sent, no attempt spent.
    t.clock.advance(30_000);
    await tickAndDrain(t.punctual);
    expect(rx.requests).toHaveLength(5);
    let rows = await deliveries(t.punctual);
    expect(rows.every((d) => d.state === "retry" && d.failures === 1)).toBe(true);
    expect(rows.every((d) => d.attempt === 1)).toBe(true);
    expect(rows.every((d) => new Date(d.runAt).getTime() >= Date.parse(T0) + 60_000)).toBe(true);
    // After the backoff, one probe; it fails: open again with the backoff doubled.
    t.clock.set(circuit!.retryAt!);
    await tickAndDrain(t.punctual);
    expect(rx.requests).toHaveLength(6);
    expect((await t.punctual.listCircuits())[0]).toMatchObject({
      state: "open",
      backoffMs: 120_000,
    });
    // The next probe succeeds: closed, and the rest go.
    failing = false;
    t.clock.advance(120_000);
    await tickAndDrain(t.punctual);
    expect(await t.punctual.listCircuits()).toEqual([]);
    // Rows held back during the probe wait out its turn (the send timeout, 30 s), then go.
    t.clock.advance(30_000);
    await tickAndDrain(t.punctual);
    rows = await deliveries(t.punctual);
    expect(rows.filter((d) => d.state === "sent")).toHaveLength(5);
    // Attempts spent: the 5 failures, the failed probe, and 5 sends (one of them the probe).
    expect(rx.requests).toHaveLength(11);
  });
});
