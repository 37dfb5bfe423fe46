/**
 * The settle with the next claim riding on it (SETTLE_AND_CLAIM_SQL, DEL-2 / DEL-14): the
 * same fences as the settle alone, the same admission as the claim alone, in one
 * statement. Driven directly with a pinned "now".
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  claimDeliveries,
  settleAndClaim,
  type SettleInput,
} from "../../src/store/deliveries/index.js";
import { deliveries, testPunctual, type TestPunctual } from "../support/punctual.js";
import { sentOutcome } from "../support/rows.js";

const T0 = Date.parse("2027-01-04T08:00:00Z");
const LEASE = 60_000;
let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

async function setup(n: number): Promise<TestPunctual> {
  t = await testPunctual();
  for (let i = 0; i < n; i++) {
    await t.punctual.createSchedule({
      dtstart: new Date(T0).toISOString(),
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
      payload: { i },
    });
  }
  return t;
}

const at = (ms: number) => new Date(T0 + ms);

const outcome = (id: number, attempt: number, over: Partial<SettleInput> = {}) =>
  sentOutcome(id, attempt, at(0), over);

const ride = (tp: TestPunctual, nowMs: number, batch: SettleInput[], limit = 10) =>
  settleAndClaim(tp.punctual.db, at(nowMs), "A", batch, {
    leaseMs: LEASE,
    limit,
    channels: ["test"],
  });

describe("a claim riding on a settle", () => {
  it("DEL-2: a stale settle (old attempt) changes nothing while the claim beside it takes the due rows; the right attempt then settles", async () => {
    const tp = await setup(3);
    const [first] = await claimDeliveries(tp.punctual.db, {
      now: at(0),
      owner: "A",
      leaseMs: LEASE,
      limit: 1,
      channels: ["test"],
    });
    const stale = await ride(tp, 1, [outcome(first!.id, first!.attempt + 1)]);
    expect(stale.settled.size).toBe(0);
    expect(stale.claimed.map((r) => r.id).sort()).not.toContain(first!.id);
    expect(stale.claimed).toHaveLength(2);
    expect(stale.claimed[0]).toMatchObject({ attempt: 1, channel: "test", payload: { i: 1 } });
    expect(stale.claimed[0]!.db_now).toEqual(at(1));
    expect(stale.claimed[0]!.lease_expires_at).toEqual(at(1 + LEASE));

    const rows = await deliveries(tp.punctual);
    expect(rows.find((r) => r.id === first!.id)).toMatchObject({ state: "claimed", attempt: 1 });

    const right = await ride(tp, 2, [outcome(first!.id, first!.attempt)]);
    expect([...right.settled]).toEqual([first!.id]);
    expect(right.claimed).toEqual([]);
    expect((await deliveries(tp.punctual)).find((r) => r.id === first!.id)).toMatchObject({
      state: "sent",
    });
  });

  it("DEL-2: a row the statement settles back to retry is not claimed by that same statement (one snapshot), but by the next claim", async () => {
    const tp = await setup(1);
    const [first] = await claimDeliveries(tp.punctual.db, {
      now: at(0),
      owner: "A",
      leaseMs: LEASE,
      limit: 1,
      channels: ["test"],
    });
    const retry = outcome(first!.id, 1, {
      state: "retry",
      runAt: at(0),
      failure: 1,
      outcome: "transient",
      status: 500,
      error: "500",
    });
    const result = await ride(tp, 1, [retry]);
    expect([...result.settled]).toEqual([first!.id]);
    expect(result.claimed).toEqual([]);
    const again = await ride(tp, 2, []);
    expect(again.claimed.map((r) => [r.id, r.attempt])).toEqual([[first!.id, 2]]);
  });
});
