/**
 * Each clause that protects the guarantee, proven by a test that fails without it
 * (DEL-2, DEL-6, DEL-16, OPS-9). The statements are driven directly, with a pinned "now",
 * so each test isolates one clause: the test title names it.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  claimDeliveries,
  recoverExpired,
  releaseClaims,
  renewLeases,
  settleDeliveries,
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

function claim(tp: TestPunctual, owner: string, nowMs = 0, limit = 10) {
  return claimDeliveries(tp.punctual.db, {
    now: at(nowMs),
    owner,
    leaseMs: LEASE,
    limit,
    channels: ["test"],
  });
}

const sent = (id: number, attempt: number): SettleInput => sentOutcome(id, attempt, at(0));

async function row(tp: TestPunctual, id: number) {
  return (await deliveries(tp.punctual)).find((r) => r.id === id)!;
}

describe("fences", () => {
  it("DEL-2 settle fence `d.attempt = u.attempt`: the same worker's row recovered and claimed again ignores the stale settle", async () => {
    const tp = await setup(1);
    const [first] = await claim(tp, "A");
    expect(first!.attempt).toBe(1);
    expect(await recoverExpired(tp.punctual.db, at(LEASE + 1), 10, 0)).toHaveLength(1);
    const [second] = await claim(tp, "A", LEASE + 2);
    expect(second).toMatchObject({ id: first!.id, attempt: 2 });
    // The first claim's send finishes now: same id, same owner, state claimed — old attempt.
    const settled = await settleDeliveries(tp.punctual.db, at(LEASE + 3), "A", [
      sent(first!.id, 1),
    ]);
    expect(settled.size).toBe(0);
    expect(await row(tp, first!.id)).toMatchObject({ state: "claimed", attempt: 2 });
  });

  it("DEL-2, DEL-13 settle fence after a Retry-After deferral: the deferral spends no attempt yet keeps its fence, so its stale settle never lands on the next claim", async () => {
    const tp = await setup(1);
    const [first] = await claim(tp, "A");
    const deferral: SettleInput = {
      ...sent(first!.id, 1),
      state: "retry",
      runAt: at(7_000),
      failure: 0,
      deferral: 1,
      outcome: "rate_limited",
      status: 429,
      error: "429 (retry after 7000 ms)",
    };
    expect((await settleDeliveries(tp.punctual.db, at(1), "A", [deferral])).size).toBe(1);
    expect(await row(tp, first!.id)).toMatchObject({
      state: "retry",
      attempt: 0,
      deferrals: 1,
      failures: 0,
    });
    // The same owner claims it again: a new fence (claim 2), one attempt spent so far.
    const [second] = await claim(tp, "A", 7_000);
    expect(second).toMatchObject({ id: first!.id, attempt: 2, deferrals: 1 });
    // The deferred claim's settle arrives again (its first reply was lost): nothing changes.
    expect((await settleDeliveries(tp.punctual.db, at(7_001), "A", [deferral])).size).toBe(0);
    expect(await row(tp, first!.id)).toMatchObject({
      state: "claimed",
      attempt: 1,
      deferrals: 1,
    });
  });

  it("DEL-2 settle fence `lease_owner`: another worker's settle at the same attempt changes nothing", async () => {
    const tp = await setup(1);
    const [c] = await claim(tp, "A");
    const settled = await settleDeliveries(tp.punctual.db, at(1), "B", [sent(c!.id, c!.attempt)]);
    expect(settled.size).toBe(0);
    expect(await row(tp, c!.id)).toMatchObject({ state: "claimed", leaseOwner: "A" });
  });

  it("DEL-2 settle fence `state = 'claimed'` with the owner: a settled row is never settled twice", async () => {
    // Only `claimed` rows carry an owner (CHECK punctual_deliveries_lease), so the state
    // clause and the owner clause guard this together; removing both lets it through.
    const tp = await setup(1);
    const [c] = await claim(tp, "A");
    expect((await settleDeliveries(tp.punctual.db, at(1), "A", [sent(c!.id, 1)])).size).toBe(1);
    const again: SettleInput = {
      ...sent(c!.id, 1),
      state: "retry",
      runAt: at(10_000),
      failure: 1,
      outcome: "transient",
      error: "duplicate outcome",
    };
    expect((await settleDeliveries(tp.punctual.db, at(2), "A", [again])).size).toBe(0);
    expect(await row(tp, c!.id)).toMatchObject({ state: "sent", failures: 0 });
    // The CHECK that makes the owner clause imply the state clause.
    await expect(
      tp.punctual.db.query(
        "update punctual_deliveries set lease_owner = 'A', lease_expires_at = now(), claimed_at = now() where id = $1",
        [c!.id],
      ),
    ).rejects.toThrow(/punctual_deliveries_lease/);
  });

  it("DEL-2 settle fence `d.id = u.id`: settling one row leaves the others of the same claim alone", async () => {
    const tp = await setup(3);
    const claimed = await claim(tp, "A");
    expect(claimed).toHaveLength(3);
    const [one, ...rest] = claimed;
    const settled = await settleDeliveries(tp.punctual.db, at(1), "A", [sent(one!.id, 1)]);
    expect([...settled]).toEqual([one!.id]);
    for (const r of rest) expect(await row(tp, r.id)).toMatchObject({ state: "claimed" });
    // In one batch each row takes its own outcome, not another row's of the same batch.
    const [two, three] = rest;
    const retry: SettleInput = {
      ...sent(three!.id, 1),
      state: "retry",
      runAt: at(60),
      error: "503",
      failure: 1,
      outcome: "transient",
    };
    await settleDeliveries(tp.punctual.db, at(2), "A", [sent(two!.id, 1), retry]);
    expect(await row(tp, two!.id)).toMatchObject({ state: "sent", failures: 0 });
    expect(await row(tp, three!.id)).toMatchObject({ state: "retry", failures: 1 });
  });

  it("DEL-2 claim: the lease runs on the statement's clock (`now` + lease), and attempt counts claims", async () => {
    const tp = await setup(1);
    const [c] = await claim(tp, "A", 5_000);
    expect(c!.db_now.getTime()).toBe(T0 + 5_000);
    expect(c!.lease_expires_at.getTime()).toBe(T0 + 5_000 + LEASE);
    expect(c!.attempt).toBe(1);
    // A held lease is not claimable; an expired one is only after recovery moves it.
    expect(await claim(tp, "B", 6_000)).toHaveLength(0);
    expect(await claim(tp, "B", 5_000 + LEASE + 1)).toHaveLength(0);
  });

  it("DEL-6 recover: only leases that ended (`lease_expires_at <= now`) are recovered", async () => {
    const tp = await setup(2);
    await claim(tp, "A", 0, 1);
    await claim(tp, "A", 30_000, 1);
    const recovered = await recoverExpired(tp.punctual.db, at(LEASE), 10, 0);
    expect(recovered).toHaveLength(1);
    const rows = await deliveries(tp.punctual);
    expect(rows.map((r) => r.state).sort()).toEqual(["claimed", "retry"]);
  });

  it("DEL-16 renew fences: wrong attempt, other owner, or a lease already ended is never renewed", async () => {
    const tp = await setup(1);
    const [c] = await claim(tp, "A");
    const db = tp.punctual.db;
    expect(await renewLeases(db, at(1_000), "A", LEASE, [{ id: c!.id, attempt: 2 }])).toEqual([]);
    expect(await renewLeases(db, at(1_000), "B", LEASE, [{ id: c!.id, attempt: 1 }])).toEqual([]);
    expect(await renewLeases(db, at(LEASE), "A", LEASE, [{ id: c!.id, attempt: 1 }])).toEqual([]);
    const ok = await renewLeases(db, at(20_000), "A", LEASE, [{ id: c!.id, attempt: 1 }]);
    expect(ok).toHaveLength(1);
    expect(ok[0]!.lease_expires_at.getTime()).toBe(T0 + 20_000 + LEASE);
    // The recovered row cannot be renewed by its old holder.
    await recoverExpired(db, at(20_000 + LEASE), 10, 0);
    expect(
      await renewLeases(db, at(20_000 + LEASE + 1), "A", LEASE, [{ id: c!.id, attempt: 1 }]),
    ).toEqual([]);
  });

  it("DEL-16 release fences: only the holder at its attempt gives a claim back, attempt restored", async () => {
    const tp = await setup(1);
    const [c] = await claim(tp, "A");
    const db = tp.punctual.db;
    expect(await releaseClaims(db, at(1), "B", [{ id: c!.id, attempt: 1 }])).toEqual([]);
    expect(await releaseClaims(db, at(1), "A", [{ id: c!.id, attempt: 2 }])).toEqual([]);
    expect(await releaseClaims(db, at(1), "A", [{ id: c!.id, attempt: 1 }])).toEqual([c!.id]);
    expect(await row(tp, c!.id)).toMatchObject({ state: "pending", attempt: 0, leaseOwner: null });
    // Claimable again at once, by anyone.
    expect(await claim(tp, "B", 2)).toHaveLength(1);
  });
});
