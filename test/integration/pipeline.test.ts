/**
 * The delivery pipeline on a real engine (DEL-13, DEL-16, OPS-6, OPS-9): bounded
 * prefetch, lease renewal while a send runs, the lease check before each send, claims
 * given back at stop and after a lost claim reply, signatures on the database clock.
 * Time is a TestClock; "a stalled worker" is one whose renewals fail or whose clock stands.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Clock } from "../../src/clock/index.js";
import { createPunctual } from "../../src/app/punctual.js";
import { memoryLogger } from "../../src/observability/logger.js";
import {
  CLAIM_SQL,
  claimDeliveries,
  RELEASE_SQL,
  RENEW_SQL,
} from "../../src/store/deliveries/index.js";
import { deferred, ScriptedChannel } from "../support/channels.js";
import { openTestDatabase } from "../support/db.js";
import {
  deliveries,
  faultyDatabase,
  peer,
  testPunctual,
  tickAndDrain,
  type TestPunctual,
} from "../support/punctual.js";

const T0 = "2027-01-04T08:00:00Z";
let t: TestPunctual | null = null;
const closers: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
  await t?.close();
  t = null;
});

function oneOffs(n: number, dtstart = T0) {
  return Array.from({ length: n }, (_, i) => ({
    dtstart,
    tzid: "UTC",
    payload: { i },
    reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
  }));
}

async function create(tp: TestPunctual, n: number, dtstart = T0): Promise<void> {
  for (const s of oneOffs(n, dtstart)) await tp.punctual.createSchedule(s);
}

function states(rows: Awaited<ReturnType<typeof deliveries>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of rows) out[r.state] = (out[r.state] ?? 0) + 1;
  return out;
}

describe("delivery pipeline", () => {
  it("DEL-13: a worker holds at most concurrency + prefetch claims; the rest stay claimable by others", async () => {
    t = await testPunctual({ scheduler: { concurrency: 2, prefetch: 3 } });
    const gate = deferred<{ messageId: null }>();
    t.channel.behaviour = () => gate.promise;
    await create(t, 12);
    const report = await t.punctual.scheduler.tick();
    // Before a rate is measured the prefetch is min(prefetch, concurrency) = 2.
    expect(report.claimed).toBe(4);
    expect(t.channel.sends).toHaveLength(2);
    expect(states(await deliveries(t.punctual))).toEqual({ claimed: 4, pending: 8 });
    const other = await peer(t, { start: T0 });
    closers.push(other.close);
    other.channel.behaviour = () => ({ messageId: null });
    await tickAndDrain(other.punctual);
    expect(other.channel.sends).toHaveLength(8);
    gate.resolve({ messageId: null });
    await t.punctual.scheduler.drain();
    expect(states(await deliveries(t.punctual))).toEqual({ sent: 12 });
    expect(new Set([...t.channel.keys(), ...other.channel.keys()]).size).toBe(12);
  });

  it("DEL-16: a healthy send slower than its lease keeps its lease (renewed, fenced) and is sent once", async () => {
    // The send's own budget (60 s) is independent of the lease (9 s).
    t = await testPunctual({
      scheduler: { leaseMs: 9_000, leaseMarginMs: 1_000, sendTimeoutMs: 60_000 },
    });
    const gate = deferred<{ messageId: string }>();
    t.channel.behaviour = () => gate.promise;
    await create(t, 1);
    await t.punctual.scheduler.tick();
    expect(t.channel.sends).toHaveLength(1);
    const other = await peer(t, { start: T0, scheduler: { leaseMs: 9_000 } });
    closers.push(other.close);
    // 30 s of sending, three times the lease: renewals every 3 s keep it.
    for (let s = 3; s <= 30; s += 3) {
      t.clock.advance(3_000);
      await t.punctual.scheduler.renewLeases();
      other.clock.advance(3_000);
      expect(await other.punctual.scheduler.recover()).toBe(0);
    }
    const [during] = await deliveries(t.punctual);
    expect(during).toMatchObject({ state: "claimed", attempt: 1 });
    expect(Date.parse(during!.leaseExpiresAt!)).toBe(Date.parse(T0) + 30_000 + 9_000);
    gate.resolve({ messageId: "slow-but-fine" });
    await t.punctual.scheduler.drain();
    await tickAndDrain(other.punctual);
    const [row] = await deliveries(t.punctual);
    expect(row).toMatchObject({ state: "sent", attempt: 1, failures: 0 });
    expect(t.channel.sends).toHaveLength(1);
    expect(other.channel.sends).toHaveLength(0);
  });

  it("DEL-16: a worker whose lease ran out (renewals failing) aborts its send and never starts the next one", async () => {
    let faulty: ReturnType<typeof faultyDatabase> | null = null;
    t = await testPunctual({
      idempotent: false,
      scheduler: { concurrency: 1, prefetch: 1, leaseMs: 9_000, leaseMarginMs: 1_000 },
      wrapDb: (db) => (faulty = faultyDatabase(db)),
    });
    let aborted = 0;
    t.channel.behaviour = (_d, ctx) =>
      new Promise((_resolve, reject) => {
        ctx.signal.addEventListener("abort", () => {
          aborted++;
          reject(ctx.signal.reason);
        });
      });
    await create(t, 2);
    const report = await t.punctual.scheduler.tick();
    expect(report.claimed).toBe(2);
    expect(t.channel.sends).toHaveLength(1);
    // The database is away for renewals: the lease cannot be kept.
    faulty!.failWhen = (sql) => sql === RENEW_SQL;
    t.clock.advance(7_999);
    await t.punctual.scheduler.renewLeases();
    expect(aborted).toBe(0);
    t.clock.advance(1); // 1 s (the margin) before the lease ends: the watchdog aborts
    await t.punctual.scheduler.drain();
    expect(aborted).toBe(1);
    // The second row was never sent: too little lease left when its slot came free.
    expect(t.channel.sends).toHaveLength(1);
    expect((await t.punctual.metrics.claimsReleased.get()).values).toEqual([
      expect.objectContaining({ labels: { reason: "lease_low" }, value: 1 }),
    ]);
    const rows = await deliveries(t.punctual);
    expect(states(rows)).toEqual({ in_doubt: 1, claimed: 1 });
    // Recovery by anyone else judges the unsent row once its lease ends.
    const other = await peer(t, { start: "2027-01-04T08:00:10Z", idempotent: false });
    closers.push(other.close);
    expect(await other.punctual.scheduler.recover()).toBe(1);
  });

  it("CH-7: a send this worker aborted because its lease ran out (database away) does not count toward the host's circuit", async () => {
    let faulty: ReturnType<typeof faultyDatabase> | null = null;
    t = await testPunctual({
      idempotent: false,
      scheduler: {
        concurrency: 1,
        prefetch: 1,
        leaseMs: 9_000,
        leaseMarginMs: 1_000,
        circuitFailures: 1,
      },
      wrapDb: (db) => (faulty = faultyDatabase(db)),
    });
    let aborted = 0;
    t.channel.behaviour = (_d, ctx) =>
      new Promise((_resolve, reject) => {
        ctx.signal.addEventListener("abort", () => {
          aborted++;
          reject(ctx.signal.reason);
        });
      });
    await t.punctual.createSchedule({
      dtstart: T0,
      tzid: "UTC",
      reminders: [
        {
          key: "r",
          offset: "PT0S",
          channel: "test",
          target: { url: "https://healthy.example/hook" },
        },
      ],
    });
    await t.punctual.scheduler.tick();
    expect(t.channel.sends).toHaveLength(1);
    faulty!.failWhen = (sql) => sql === RENEW_SQL;
    t.clock.advance(7_999);
    await t.punctual.scheduler.renewLeases();
    t.clock.advance(1); // the watchdog aborts the send a margin before the lease ends
    await t.punctual.scheduler.drain();
    expect(aborted).toBe(1);
    // The outcome was recorded (in doubt), but the host's circuit never heard of it.
    expect(states(await deliveries(t.punctual))).toEqual({ in_doubt: 1 });
    expect(await t.punctual.listCircuits()).toEqual([]);
  });

  it("DEL-2/DEL-5: an outcome the database could not take for longer than the lease is kept and recorded once it is back, never left to recovery to send again", async () => {
    let faulty: ReturnType<typeof faultyDatabase> | null = null;
    t = await testPunctual({
      scheduler: { concurrency: 1, prefetch: 1, leaseMs: 9_000, leaseMarginMs: 1_000 },
      wrapDb: (db) => (faulty = faultyDatabase(db)),
    });
    await create(t, 1);
    await t.punctual.scheduler.tick();
    // The send has started; the database goes away before its outcome is recorded.
    faulty!.failWhen = () => true;
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(t.channel.sends).toHaveLength(1);
    // Away for twice the lease: every settle retry fails, the lease runs out.
    for (let ms = 0; ms < 18_000; ms += 500) {
      t.clock.advance(500);
      await new Promise((r) => setImmediate(r));
    }
    faulty!.failWhen = null;
    // Back: the recover pass records this process's known outcome first.
    expect(await t.punctual.scheduler.recover()).toBe(0);
    const other = await peer(t, { start: "2027-01-04T08:00:30Z" });
    closers.push(other.close);
    expect(await other.punctual.scheduler.recover()).toBe(0);
    await tickAndDrain(other.punctual);
    expect(other.channel.sends).toHaveLength(0);
    expect(states(await deliveries(t.punctual))).toEqual({ sent: 1 });
  });

  it("DEL-16: a claim whose reply is read only after its lease ran out is given back at once, unsent, with no attempt spent", async () => {
    let faulty: ReturnType<typeof faultyDatabase> | null = null;
    t = await testPunctual({
      scheduler: { concurrency: 1, prefetch: 1, leaseMs: 9_000, leaseMarginMs: 1_000 },
      wrapDb: (db) => (faulty = faultyDatabase(db)),
    });
    await create(t, 2);
    // The worker stalls between the claim statement and its reply for the whole lease.
    faulty!.afterReply = (sql) => {
      if (sql !== CLAIM_SQL) return;
      faulty!.afterReply = null;
      t!.clock.advance(9_000);
    };
    // The give-back statement is held back a few turns of the event loop, so a recovery
    // statement that did not wait for it would reach the database first and take the rows.
    faulty!.hold = async (sql) => {
      if (sql !== RELEASE_SQL) return;
      for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    };
    await t.punctual.scheduler.tick();
    expect(t.channel.sends).toHaveLength(0);
    // The give-back runs after the claim; the recover pass waits for it and finds neither
    // an expired lease nor an orphan left: the rows went back on their own, at once.
    await t.punctual.scheduler.recover();
    expect((await t.punctual.metrics.claimsReleased.get()).values).toEqual([
      expect.objectContaining({ labels: { reason: "lease_low" }, value: 2 }),
    ]);
    const rows = await deliveries(t.punctual);
    expect(states(rows)).toEqual({ pending: 2 });
    expect(rows.map((r) => r.attempt)).toEqual([0, 0]);
    expect(t.logs.filter((l) => String(l.msg).includes("gave its rows back unsent"))).toHaveLength(
      1,
    );
    // A claim without a stall sends them.
    await t.punctual.scheduler.tick();
    await t.punctual.scheduler.drain();
    expect(t.channel.sends).toHaveLength(2);
  });

  it("DEL-16: while claim replies come back too late to send on, each claim takes half the rows of the last and the fill stops, so a slow worker does not hold the backlog; it sends them all once replies are timely", async () => {
    let faulty: ReturnType<typeof faultyDatabase> | null = null;
    t = await testPunctual({
      scheduler: {
        concurrency: 4,
        prefetch: 4,
        claimBatch: 8,
        leaseMs: 9_000,
        leaseMarginMs: 1_000,
      },
      wrapDb: (db) => (faulty = faultyDatabase(db)),
    });
    await create(t, 20);
    const lateClaims: number[] = [];
    faulty!.afterReply = (sql, rows) => {
      if (sql !== CLAIM_SQL || rows === 0) return;
      lateClaims.push(rows);
      // Within the lease (the rows are not recoverable yet) but past its margin.
      t!.clock.advance(8_500);
    };
    for (let i = 0; i < 5; i++) {
      await t.punctual.scheduler.tick();
      // The give-back runs behind the claim; the recover pass is serialized after it.
      await t.punctual.scheduler.recover();
      expect(states(await deliveries(t.punctual))).toEqual({ pending: 20 });
    }
    expect(t.channel.sends).toHaveLength(0);
    // Halving down to one row: never a second full batch out of other workers' reach.
    expect(lateClaims.slice(0, 4)).toEqual([8, 4, 2, 1]);
    for (const n of lateClaims.slice(4)) expect(n).toBe(1);
    const timely: number[] = [];
    faulty!.afterReply = (sql, rows) => {
      if (sql === CLAIM_SQL && rows > 0) timely.push(rows);
    };
    // Timely replies double the cap back; every row is sent, once.
    for (let i = 0; i < 10 && t.channel.sends.length < 20; i++) {
      await tickAndDrain(t.punctual);
    }
    expect(t.channel.sends).toHaveLength(20);
    expect(new Set(t.channel.keys()).size).toBe(20);
    expect(timely[0]).toBe(1);
    expect(Math.max(...timely)).toBeGreaterThan(2);
    expect(states(await deliveries(t.punctual))).toEqual({ sent: 20 });
  });

  it("DEL-16: the wait for a connection before a claim is sent does not count against its lease", async () => {
    let faulty: ReturnType<typeof faultyDatabase> | null = null;
    t = await testPunctual({
      scheduler: { concurrency: 1, prefetch: 1, leaseMs: 9_000, leaseMarginMs: 1_000 },
      wrapDb: (db) => (faulty = faultyDatabase(db)),
    });
    await create(t, 1);
    // 8.5 s pass before the claim statement leaves (a busy pool): the engine reports the
    // moment it is handed over, so the lease it grants then is whole.
    faulty!.beforeSend = (sql) => {
      if (sql !== CLAIM_SQL) return;
      faulty!.beforeSend = null;
      t!.clock.advance(8_500);
    };
    await t.punctual.scheduler.tick();
    await t.punctual.scheduler.drain();
    expect(t.channel.sends).toHaveLength(1);
    expect(states(await deliveries(t.punctual))).toEqual({ sent: 1 });
  });

  it("DEL-16: a renewal that finds the row taken over gives it up: queued rows are dropped unsent", async () => {
    t = await testPunctual({
      scheduler: { concurrency: 1, prefetch: 1, leaseMs: 9_000, leaseMarginMs: 1_000 },
    });
    const gate = deferred<{ messageId: null }>();
    t.channel.behaviour = () => gate.promise;
    await create(t, 2);
    await t.punctual.scheduler.tick();
    expect(t.channel.sends).toHaveLength(1);
    // This worker stalls (no renewals); another worker recovers both rows and sends them.
    const other = await peer(t, { start: "2027-01-04T08:00:10Z" });
    closers.push(other.close);
    expect(await other.punctual.scheduler.recover()).toBe(2);
    other.clock.advance(60_000);
    await tickAndDrain(other.punctual);
    expect(other.channel.sends).toHaveLength(2);
    // The stalled worker wakes: its renewal finds nothing; the queued row is never sent.
    await t.punctual.scheduler.renewLeases();
    gate.resolve({ messageId: null });
    await t.punctual.scheduler.drain();
    expect(t.channel.sends).toHaveLength(1);
    expect(states(await deliveries(t.punctual))).toEqual({ sent: 2 });
  });

  it("DEL-16/OPS-6: a stopping worker gives back the claims it has not started, at once", async () => {
    t = await testPunctual({ scheduler: { concurrency: 1, prefetch: 5 } });
    const gate = deferred<{ messageId: null }>();
    t.channel.behaviour = () => gate.promise;
    await create(t, 4);
    expect((await t.punctual.scheduler.tick()).claimed).toBe(2);
    expect(t.channel.sends).toHaveLength(1);
    const stopping = t.punctual.scheduler.stop(60_000);
    // The unstarted claim goes back while the in-flight send still runs.
    await vi.waitFor(
      async () => expect(states(await deliveries(t!.punctual))).toEqual({ claimed: 1, pending: 3 }),
      { timeout: 30_000, interval: 20 },
    );
    const rows = await deliveries(t.punctual);
    for (const r of rows.filter((x) => x.state === "pending")) expect(r.attempt).toBe(0);
    gate.resolve({ messageId: null });
    await stopping;
    expect(states(await deliveries(t.punctual))).toEqual({ sent: 1, pending: 3 });
    expect(t.channel.sends).toHaveLength(1);
  });

  it("DEL-16: rows of a claim whose reply was lost are given back by the next recover pass", async () => {
    t = await testPunctual();
    await create(t, 3);
    // The claim statement committed under this worker's owner, but its reply never came.
    const lost = await claimDeliveries(t.punctual.db, {
      now: t.clock.sqlNow(),
      owner: t.punctual.scheduler.owner,
      leaseMs: 60_000,
      limit: 3,
      channels: ["test"],
    });
    expect(lost).toHaveLength(3);
    await t.punctual.scheduler.recover();
    const rows = await deliveries(t.punctual);
    expect(states(rows)).toEqual({ pending: 3 });
    expect(rows.map((r) => r.attempt)).toEqual([0, 0, 0]);
    expect((await t.punctual.metrics.claimsReleased.get()).values).toEqual([
      expect.objectContaining({ labels: { reason: "orphan" }, value: 3 }),
    ]);
    // Rows it does hold are never given back.
    const gate = deferred<{ messageId: null }>();
    t.channel.behaviour = () => gate.promise;
    await t.punctual.scheduler.tick();
    await t.punctual.scheduler.recover();
    expect(states(await deliveries(t.punctual))).toEqual({ claimed: 3 });
    gate.resolve({ messageId: null });
    await t.punctual.scheduler.drain();
    expect(states(await deliveries(t.punctual))).toEqual({ sent: 3 });
  });

  it("OPS-9: a worker whose clock runs 30 s ahead stamps what it sends with the database clock", async () => {
    const handle = await openTestDatabase();
    closers.push(handle.close);
    const skewMs = 30_000;
    const skewed: Clock = {
      now: () => Date.now() + skewMs,
      sqlNow: () => null,
      setTimer: (delayMs, fn) => {
        const h = setTimeout(fn, Math.max(0, delayMs));
        return () => clearTimeout(h);
      },
    };
    const channel = new ScriptedChannel("test", true);
    const stamps: number[] = [];
    const processAtStamp: number[] = [];
    channel.behaviour = (_d, ctx) => {
      stamps.push(ctx.now!());
      processAtStamp.push(skewed.now());
      return { messageId: null };
    };
    const p = await createPunctual({
      database: handle.db,
      clock: skewed,
      logger: memoryLogger("silent").logger,
      channels: [channel],
      webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
    });
    closers.push(() => p.close(0));
    const { rows } = await handle.db.query<{ now: Date }>("select now() as now");
    const dbBefore = rows[0]!.now.getTime();
    await p.createSchedule(oneOffs(1, new Date(dbBefore - 1_000).toISOString())[0]!);
    await p.scheduler.tick();
    await p.scheduler.drain();
    expect(stamps).toHaveLength(1);
    const after = await handle.db.query<{ now: Date }>("select now() as now");
    const dbAfter = after.rows[0]!.now.getTime();
    // The stamp lies between two readings of the database clock taken around the send
    // (1 s of rounding slack), however long the send took; the process clock reads 30 s
    // later than both, so a stamp taken from it could not.
    expect(stamps[0]!).toBeGreaterThanOrEqual(dbBefore - 1_000);
    expect(stamps[0]!).toBeLessThanOrEqual(dbAfter + 1_000);
    // At the same instant, the stamp and the process clock differ by about the skew.
    expect(processAtStamp[0]! - stamps[0]!).toBeGreaterThan(skewMs / 2);
    // The heartbeat measured the process clock as ahead of the database (sign, not size).
    expect(Math.sign(p.scheduler.skewMs)).toBe(-1);
  });
});
