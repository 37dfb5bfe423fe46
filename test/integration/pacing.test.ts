/**
 * DEL-13: rate-limited rows are paced by a schedule, not by when a claim happens to run.
 * Each row claimed under a limit gets its own slot on the database clock, one token
 * interval after the previous one across every claimer; the worker sends it at that slot,
 * never before. On the test clock (both engines), and two claimers on two connections of
 * one PostgreSQL server.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createPunctual, type Punctual } from "../../src/app/punctual.js";
import type { Database } from "../../src/store/database.js";
import { recoverExpired } from "../../src/store/deliveries/index.js";
import { openPostgres } from "../../src/store/postgres.js";
import { claimLimited, upsertRateLimit } from "../../src/store/rate-limits.js";
import { itIfPostgres, openTestDatabase } from "../support/db.js";
import { deliveries, testPunctual, type TestPunctual } from "../support/punctual.js";

const T0 = "2027-01-04T08:00:00Z";
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function open(): Promise<TestPunctual> {
  const t = await testPunctual({ start: T0 });
  cleanups.push(() => t.close());
  return t;
}

describe("paced rate limits (DEL-13)", () => {
  it("DEL-13: rows claimed ahead of their slot are sent at it, 100 ms apart at 10/s, never before", async () => {
    const t = await open();
    const start = t.clock.now();
    const sentAt: number[] = [];
    t.channel.behaviour = () => {
      sentAt.push(t.clock.now() - start);
      return { messageId: null };
    };
    await t.punctual.setRateLimit("test", { ratePerSecond: 10, burst: 1 });
    await t.punctual.createSchedule({
      dtstart: T0,
      tzid: "UTC",
      reminders: Array.from({ length: 10 }, (_, i) => ({
        key: `r${i}`,
        offset: "PT0S",
        channel: "test",
      })),
    });
    await t.punctual.scheduler.tick();
    // One token now, and the slots of the next 600 ms claimed ahead: 7 rows held, one sent.
    expect(t.punctual.scheduler.held).toBe(7);
    expect(sentAt).toEqual([0]);
    t.clock.advance(99);
    expect(sentAt).toEqual([0]);
    t.clock.advance(1);
    expect(sentAt).toEqual([0, 100]);
    t.clock.advance(900);
    expect(sentAt).toEqual([0, 100, 200, 300, 400, 500, 600]);
    await t.punctual.scheduler.drain();
    // At 1 s the bucket has refilled to its burst: the rest follow on from there.
    await t.punctual.scheduler.tick();
    t.clock.advance(1_000);
    await t.punctual.scheduler.drain();
    expect(sentAt).toEqual([0, 100, 200, 300, 400, 500, 600, 1000, 1100, 1200]);
    const sent = (await deliveries(t.punctual)).filter((d) => d.state === "sent");
    expect(sent).toHaveLength(10);
  });
});

/** Two connections to one server, beside the punctual that planned the rows. */
interface Claimers {
  punctual: Punctual;
  a: Database;
  b: Database;
  close(): Promise<void>;
}

async function claimers(rows: number): Promise<Claimers> {
  const handle = await openTestDatabase();
  const punctual = await createPunctual({ databaseUrl: handle.url!, logLevel: "silent" });
  const a = openPostgres({ url: handle.url! });
  const b = openPostgres({ url: handle.url! });
  await punctual.createSchedule({
    dtstart: new Date(Date.now() - 60_000).toISOString(),
    tzid: "UTC",
    reminders: Array.from({ length: rows }, (_, i) => ({
      key: `r${i}`,
      offset: "PT0S",
      channel: "log",
      rateLimitKey: "k",
      // A lease lost on recovery goes back to retry (the stalled-worker case).
      delivery: "at-least-once" as const,
    })),
  });
  return {
    punctual,
    a,
    b,
    async close() {
      await a.close();
      await b.close();
      await punctual.close();
      await handle.close();
    },
  };
}

/** Claims rows of limiter `default/k` on `db` as owner `owner` at `at` (epoch ms). */
async function claimAt(db: Database, owner: string, at: number, leaseMs = 60_000) {
  const result = await claimLimited(db, {
    now: new Date(at),
    owner,
    leaseMs,
    limit: 50,
    channels: ["log"],
    tenant: "default",
    key: "k",
  });
  return result.rows.map((r) => r.send_at.getTime() - T);
}

let T = 0;

/** {@link claimers} of `rows` rows behind a 10/s limit of `burst` on key `k`, from T (a whole second). */
async function limitedClaimers(
  rows: number,
  burst: number,
): Promise<Awaited<ReturnType<typeof claimers>>> {
  const c = await claimers(rows);
  cleanups.push(() => c.close());
  T = Math.floor(Date.now() / 1000) * 1000;
  await upsertRateLimit(c.punctual.db, new Date(T), {
    tenant: "default",
    key: "k",
    ratePerSecond: 10,
    burst,
    concurrency: null,
  });
  return c;
}

describe("paced rate limits across connections (DEL-13)", () => {
  itIfPostgres(
    "DEL-13: two claimers on two connections share one schedule: every slot 100 ms after the previous at 10/s, none given twice, none beyond the lookahead",
    async () => {
      const c = await limitedClaimers(20, 1);
      // A: the one token now, then one slot per 100 ms up to 600 ms ahead.
      expect(await claimAt(c.a, "a", T)).toEqual([0, 100, 200, 300, 400, 500, 600]);
      // B, 50 ms later: the next slot (700 ms) is more than the lookahead away.
      expect(await claimAt(c.b, "b", T + 50)).toEqual([]);
      // B at 200 ms: the slots after A's, not A's again.
      expect(await claimAt(c.b, "b", T + 200)).toEqual([700, 800]);
      // A and B at once: the bucket's lock orders them; the slots still follow on.
      const both = await Promise.all([claimAt(c.a, "a", T + 700), claimAt(c.b, "b", T + 700)]);
      expect(both.flat().sort((x, y) => x - y)).toEqual([900, 1000, 1100, 1200, 1300]);
    },
  );

  itIfPostgres(
    "DEL-13: a stalled worker's slots are not reused: its rows, recovered after its lease, get new slots from the bucket, one token interval apart",
    async () => {
      const c = await limitedClaimers(7, 2);
      // A claims 7 rows (2 tokens now, then 100 ms apart) and stalls: it never sends.
      expect(await claimAt(c.a, "a", T, 4_000)).toEqual([0, 0, 100, 200, 300, 400, 500]);
      // Its leases end at 4 s; recovery at 6 s gives the rows back (retry, no delay).
      const recovered = await recoverExpired(c.punctual.db, new Date(T + 6_000), 100, 0);
      expect(recovered.map((r) => r.state)).toEqual(Array.from({ length: 7 }, () => "retry"));
      // B claims them at 6 s: the bucket holds its burst again (2), and every further row
      // waits for its own token; A's past slots are not handed out again as a clump.
      const slots = await claimAt(c.b, "b", T + 6_000);
      expect(slots).toEqual([6000, 6000, 6100, 6200, 6300, 6400, 6500]);
    },
  );
});
