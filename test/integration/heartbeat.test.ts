/**
 * The heartbeat tells a tick that started from a pass that succeeded (OPS-3, OPS-4): a
 * scheduler whose database work fails each tick keeps stamping the start of its ticks,
 * but its last successful pass stops moving, so readiness, `punctual healthcheck
 * --database-url` (which reads the instances table) and the last-pass metric all see it
 * go stale. The database is made to fail for chosen statements only (`faultyDatabase`),
 * and time moves only on the test clock.
 */
import { afterEach, describe, expect, it } from "vitest";
import { heartbeatFreshness } from "../../src/app/health.js";
import type { Punctual } from "../../src/app/punctual.js";
import { CLAIM_SQL, RECOVER_SQL } from "../../src/store/deliveries/index.js";
import { listInstances, type InstanceRow } from "../../src/store/operations.js";
import { faultyDatabase, testPunctual, type TestPunctual } from "../support/punctual.js";

const POLL_MS = 1_000;
const STALE_MS = 5_000;

let t: TestPunctual | null = null;
afterEach(async () => {
  await t?.close();
  t = null;
});

/** Lets the scheduler's asynchronous work run until `check` holds (bounded). */
async function settle(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 2_000; i++) {
    if (await check()) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error(`never: ${what}`);
}

async function instanceOf(p: Punctual): Promise<InstanceRow> {
  const rows = await listInstances(p.db, { now: null, windowMs: 0 });
  const row = rows.find((r) => r.id === p.scheduler.owner);
  if (!row) throw new Error("instance not registered");
  return row;
}

/** The value of a gauge of this instance in the Prometheus text. */
async function gauge(p: Punctual, name: string): Promise<number> {
  const { body } = await p.metricsText();
  const line = body.split("\n").find((l) => l.startsWith(`${name}{`));
  return Number(line?.split(" ").at(-1));
}

async function started(): Promise<{ t: TestPunctual; faulty: ReturnType<typeof faultyDatabase> }> {
  let faulty: ReturnType<typeof faultyDatabase> | null = null;
  const opened = await testPunctual({
    scheduler: { pollMs: POLL_MS, heartbeatStaleMs: STALE_MS },
    wrapDb: (db) => (faulty = faultyDatabase(db)),
  });
  t = opened;
  await opened.punctual.scheduler.start();
  await settle(async () => (await opened.punctual.health()).ready, "the first pass").catch(
    async (err: Error) => {
      const h = await opened.punctual.health();
      throw new Error(
        `${err.message}: ${JSON.stringify(h)} ${JSON.stringify(opened.logs.slice(-5))}`,
      );
    },
  );
  return { t: opened, faulty: faulty! };
}

/**
 * Advances the test clock `times` times by the poll interval, letting each tick that comes
 * due start (a stamped heartbeat) and finish (a counted sweep failure) before going on.
 */
async function tickFailing(p: TestPunctual, times: number, minStarts = 2): Promise<number[]> {
  const starts: number[] = [];
  // At least `times` steps, and more (up to 5×) until `minStarts` ticks were seen: on a busy
  // machine a tick still in flight (its statements waiting on the database) takes the
  // next step's wake-up with it.
  for (let i = 0; i < times || (starts.length < minStarts && i < 5 * times); i++) {
    const before = p.punctual.scheduler.lastTickAt;
    p.clock.advance(POLL_MS);
    // A failed sweep backs the loop off (OPS-8): not every step starts a tick.
    for (let j = 0; j < 200 && p.punctual.scheduler.lastTickAt === before; j++) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    const tick = p.punctual.scheduler.lastTickAt;
    if (tick !== before && tick !== null) {
      starts.push(tick);
      await settle(
        async () => (await instanceOf(p.punctual)).last_tick_at?.getTime() === tick,
        "the tick's heartbeat",
      );
    }
  }
  return starts;
}

describe("OPS-4 health reads the last successful pass", () => {
  it("OPS-3 OPS-4: a worker whose sweeps fail each tick goes stale and not ready while its tick stamp keeps moving", async () => {
    const { t, faulty } = await started();
    const p = t.punctual;
    const passed = await instanceOf(p);
    expect(passed.last_pass_at).not.toBeNull();
    const passMetric = await gauge(p, "punctual_scheduler_last_pass_timestamp_seconds");

    // The heartbeat statement still goes through; the recover sweep's does not.
    faulty.failWhen = (sql) => sql === RECOVER_SQL;
    const starts = await tickFailing(t, 12);
    expect(starts.length).toBeGreaterThanOrEqual(2);
    expect(t.clock.now() - passed.last_pass_at!.getTime()).toBeGreaterThan(STALE_MS);

    const row = await instanceOf(p);
    // The start stamp moved with every tick; the successful pass did not.
    expect(row.last_tick_at?.getTime()).toBe(starts.at(-1));
    expect(row.last_tick_at!.getTime()).toBeGreaterThan(passed.last_pass_at!.getTime());
    expect(row.last_pass_at).toEqual(passed.last_pass_at);
    // `punctual healthcheck --database-url` finds no fresh instance.
    const seen = heartbeatFreshness([row], { now: t.clock.now(), maxAgeMs: STALE_MS });
    expect(seen.running).toHaveLength(1);
    expect(seen.fresh).toEqual([]);
    // /readyz: not ready, saying that ticks start but do not succeed.
    const health = await p.health();
    expect(health.ready).toBe(false);
    expect(health.checks.heartbeat).toBe(false);
    expect(health.lastPassAt).toBe(passed.last_pass_at!.toISOString());
    expect(health.detail.join(" ")).toContain("ticks still start");
    // The last-pass metric stayed; the last-tick one moved.
    expect(await gauge(p, "punctual_scheduler_last_pass_timestamp_seconds")).toBe(passMetric);
    expect(await gauge(p, "punctual_scheduler_last_tick_timestamp_seconds")).toBeGreaterThan(
      passMetric,
    );

    // Once the database answers again, the next pass succeeds and all three recover.
    faulty.failWhen = null;
    t.clock.advance(30_000);
    await settle(async () => (await p.health()).ready, "a successful pass");
    const again = await instanceOf(p);
    expect(again.last_pass_at!.getTime()).toBeGreaterThan(row.last_tick_at!.getTime());
    expect(
      heartbeatFreshness([again], { now: t.clock.now(), maxAgeMs: STALE_MS }).fresh,
    ).toHaveLength(1);
  });

  it("OPS-4: a worker whose claims fail goes stale too, though its maintenance sweeps succeed", async () => {
    // Driven by tick() (maintenance, then a claim), so each step is one whole tick.
    let faulty: ReturnType<typeof faultyDatabase> | null = null;
    t = await testPunctual({
      scheduler: { pollMs: POLL_MS, heartbeatStaleMs: STALE_MS },
      wrapDb: (db) => (faulty = faultyDatabase(db)),
    });
    const p = t.punctual;
    expect((await p.scheduler.tick()).failedSweep).toBeNull();
    const passed = await instanceOf(p);
    expect(passed.last_pass_at?.getTime()).toBe(t.clock.now());
    faulty!.failWhen = (sql) => sql === CLAIM_SQL;
    // The first failing tick's maintenance succeeds before its claim fails: its pass counts.
    const lastGood = t.clock.now() + POLL_MS;
    for (let i = 0; i < 8; i++) {
      t.clock.advance(POLL_MS);
      expect((await p.scheduler.tick()).failedSweep).toBe("dispatch");
    }
    const row = await instanceOf(p);
    expect(row.last_tick_at?.getTime()).toBe(t.clock.now());
    // The pass right after the first failed claim, and every one since, is not a success.
    expect(row.last_pass_at?.getTime()).toBe(lastGood);
    expect(p.scheduler.lastPassAt).toBe(lastGood);
    expect(heartbeatFreshness([row], { now: t.clock.now(), maxAgeMs: STALE_MS }).fresh).toEqual([]);
    faulty!.failWhen = null;
    t.clock.advance(POLL_MS);
    await p.scheduler.tick(); // the claim succeeds again
    t.clock.advance(POLL_MS);
    await p.scheduler.tick();
    expect((await instanceOf(p)).last_pass_at?.getTime()).toBe(t.clock.now());
  });

  it("OPS-8: while claims fail, the running loop retries them on a doubling backoff, never in a loop with maintenance", async () => {
    const { t, faulty } = await started();
    const p = t.punctual;
    await p.createSchedule({
      dtstart: new Date(t.clock.now()).toISOString(),
      tzid: "UTC",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    let claims = 0;
    faulty.failWhen = (sql) => sql === CLAIM_SQL && ++claims > 0;
    /**
     * Lets the scheduler's own statements run: `n` round trips of this test's, one after
     * another, on the same database (a maintenance pass is a handful of them).
     */
    const roundTrips = async (n: number, until: () => boolean = () => false) => {
      for (let i = 0; i < n && !until(); i++) await p.db.query("select 1");
    };
    p.scheduler.wake();
    await roundTrips(500, () => claims >= 1);
    expect(claims).toBeGreaterThanOrEqual(1);
    // Without a backoff, the failed claim asks for a maintenance pass (its reply may have
    // been lost), and that pass would kick the next claim at once: a loop with no timer,
    // many claims within these round trips.
    await roundTrips(60, () => claims > 2);
    expect(claims).toBeLessThanOrEqual(2);
    // Retries follow the (test) clock and double: 2, 4, 8, 16 s after each failure.
    for (let s = 0; s < 30; s++) {
      t.clock.advance(POLL_MS);
      await roundTrips(10);
    }
    expect(claims).toBeGreaterThanOrEqual(3);
    expect(claims).toBeLessThanOrEqual(7);
    // Once the database answers again, the delivery goes out.
    faulty.failWhen = null;
    t.clock.advance(30_000);
    await roundTrips(500, () => t.channel.sends.length === 1);
    expect(t.channel.sends).toHaveLength(1);
  });
});
