/**
 * DEL-19 digests on a real engine (PGlite or PostgreSQL, per PUNCTUAL_TEST_ENGINE), driven
 * by the test clock: grouping by key within the window, maxItems, members that leave before
 * the digest is formed, the digest id as idempotency key, the outcome shared by every
 * member, and recovery of a digest whose worker stopped between claim and settle.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { SendContext, SendResult } from "../../src/channels/types.js";
import { PermanentError, TransientError } from "../../src/errors/index.js";
import { deferred } from "../support/channels.js";
import {
  deliveries,
  peer,
  testPunctual,
  tickAndDrain,
  type TestPunctual,
} from "../support/punctual.js";

let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

const WINDOW = 300_000;

/** A one-off schedule at `at` whose reminder goes to the test channel in digests. */
function oneOff(at: string, title: string, digest: Record<string, unknown>) {
  return {
    dtstart: at,
    tzid: "UTC",
    title,
    payload: { title },
    reminders: [{ key: "r", channel: "test", digest }],
  };
}

describe("DEL-19: digests", () => {
  it("DEL-19: deliveries with one key due within the window of the first are one message at the first due time + window; later ones open the next digest", async () => {
    t = await testPunctual({ start: "2027-01-04T08:30:00Z" });
    const { punctual, channel, clock } = t;
    const alice = { windowMs: WINDOW, key: "alice" };
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00Z", "a1", alice));
    await punctual.createSchedule(oneOff("2027-01-04T09:01:00Z", "a2", alice));
    await punctual.createSchedule(oneOff("2027-01-04T09:04:59Z", "a3", alice));
    await punctual.createSchedule(oneOff("2027-01-04T09:05:00Z", "a4", alice));
    await punctual.createSchedule(
      oneOff("2027-01-04T09:02:00Z", "b1", { windowMs: WINDOW, key: "bob" }),
    );
    await tickAndDrain(punctual);
    const planned = await deliveries(punctual);
    expect(planned.map((d) => d.state)).toEqual(Array(5).fill("pending"));
    expect(planned.map((d) => d.digestKey).sort()).toEqual([
      "alice",
      "alice",
      "alice",
      "alice",
      "bob",
    ]);

    // Due, but the window of the first (09:00) is still open: nothing goes out alone.
    clock.set("2027-01-04T09:04:59.999Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(0);

    clock.set("2027-01-04T09:05:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    const first = channel.sends[0]!;
    const digestId = first.delivery.digest!.id;
    expect(digestId).toMatch(/^dg_[0-9a-f]{32}$/);
    expect(first.delivery.deliveryKey).toBe(digestId);
    expect(first.delivery.late).toBe(false);
    expect(first.ctx.idempotencyKey).toBe(digestId);
    expect(first.delivery.digest!.key).toBe("alice");
    expect(
      first.delivery.digest!.items.map((i) => [i.title, i.occurrenceAt.toISOString()]),
    ).toEqual([
      ["a1", "2027-01-04T09:00:00.000Z"],
      ["a2", "2027-01-04T09:01:00.000Z"],
      ["a3", "2027-01-04T09:04:59.000Z"],
    ]);
    expect(first.delivery.digest!.items.map((i) => i.payload)).toEqual([
      { title: "a1" },
      { title: "a2" },
      { title: "a3" },
    ]);
    const rows = await deliveries(punctual);
    const at = (iso: string) => rows.find((r) => r.occurrenceAt === iso)!;
    for (const iso of ["09:00:00", "09:01:00", "09:04:59"]) {
      // Sent on time for a digest (at its window's end): not late because the window held it.
      expect(at(`2027-01-04T${iso}.000Z`)).toMatchObject({ state: "sent", digestId, late: false });
    }
    // a4 (09:05, outside the first window) waits in its own window; bob's opened at 09:02.
    expect(at("2027-01-04T09:05:00.000Z").state).toBe("pending");
    expect(at("2027-01-04T09:05:00.000Z").digestId).toBeUndefined();
    expect(at("2027-01-04T09:02:00.000Z").state).toBe("pending");

    clock.set("2027-01-04T09:07:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(2);
    expect(channel.sends[1]!.delivery.digest!.key).toBe("bob");
    expect(channel.sends[1]!.delivery.digest!.items.map((i) => i.title)).toEqual(["b1"]);

    clock.set("2027-01-04T09:10:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(3);
    expect(channel.sends[2]!.delivery.digest!.items.map((i) => i.title)).toEqual(["a4"]);
    const ids = new Set(channel.sends.map((s) => s.ctx.idempotencyKey));
    expect(ids.size).toBe(3);
    const final = await deliveries(punctual);
    expect(final.every((d) => d.state === "sent")).toBe(true);
    // Each member in exactly one digest, and that digest is the message that carried it.
    for (const d of final) {
      const carrier = channel.sends.filter((s) =>
        s.delivery.digest!.items.some((i) => i.deliveryId === d.id),
      );
      expect(carrier).toHaveLength(1);
      expect(carrier[0]!.delivery.digest!.id).toBe(d.digestId);
    }
  });

  it("DEL-19 / DEL-15: a digest formed past its window's end (the scheduler was down) says late, as its members do", async () => {
    t = await testPunctual({ start: "2027-01-04T08:30:00Z" });
    const { punctual, channel, clock } = t;
    const key = { windowMs: WINDOW, key: "late" };
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00Z", "l1", key));
    await punctual.createSchedule(oneOff("2027-01-04T09:02:00Z", "l2", key));
    await tickAndDrain(punctual);
    // No pass between 09:00 and 09:06: the window ended at 09:05, the digest forms a minute late.
    clock.set("2027-01-04T09:06:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    expect(channel.sends[0]!.delivery.late).toBe(true);
    expect(channel.sends[0]!.delivery.digest!.items.map((i) => i.title)).toEqual(["l1", "l2"]);
    const rows = await deliveries(punctual);
    expect(rows.map((r) => [r.state, r.late])).toEqual([
      ["sent", true],
      ["sent", true],
    ]);
  });

  it("DEL-19: maxItems due members send the digest before the window ends; the rest open the next", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z", scheduler: { retentionDays: 1 } });
    const { punctual, channel, clock } = t;
    const digest = { windowMs: WINDOW, key: "k", maxItems: 3 };
    for (let i = 0; i < 5; i++) {
      await punctual.createSchedule(oneOff(`2027-01-04T09:00:0${i}Z`, `m${i}`, digest));
    }
    clock.set("2027-01-04T09:00:01Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(0);
    clock.set("2027-01-04T09:00:02Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    expect(channel.sends[0]!.delivery.digest!.items.map((i) => i.title)).toEqual([
      "m0",
      "m1",
      "m2",
    ]);
    // m3 opened the next window at 09:00:03: sent at 09:05:03 (it never reaches 3 items).
    clock.set("2027-01-04T09:05:02Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    clock.set("2027-01-04T09:05:03Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(2);
    expect(channel.sends[1]!.delivery.digest!.items.map((i) => i.title)).toEqual(["m3", "m4"]);
    // OPS-12: retention deletes the sent digests with their members.
    const digests = async () =>
      (await punctual.db.query<{ n: number }>("select count(*)::int as n from punctual_digests"))
        .rows[0]!.n;
    expect(await digests()).toBe(2);
    clock.set("2027-01-05T09:06:00Z");
    await tickAndDrain(punctual);
    expect(await digests()).toBe(0);
    expect(await deliveries(punctual)).toEqual([]);
  });

  it("DEL-19 / DEL-10 / DEL-9: a member cancelled or edited away before its digest is formed leaves it", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const { punctual, channel, clock } = t;
    const digest = { windowMs: WINDOW, key: "k" };
    const { schedule: a } = await punctual.createSchedule(
      oneOff("2027-01-04T09:00:00Z", "stays", digest),
    );
    const { schedule: b } = await punctual.createSchedule(
      oneOff("2027-01-04T09:01:00Z", "cancelled", digest),
    );
    const { schedule: c } = await punctual.createSchedule(
      oneOff("2027-01-04T09:02:00Z", "moved", digest),
    );
    clock.set("2027-01-04T09:03:00Z");
    await tickAndDrain(punctual);
    await punctual.cancelSchedule(b.id);
    // Moved to 10:00: no longer due inside this window.
    await punctual.updateSchedule(
      c.id,
      { dtstart: "2027-01-04T10:00:00Z" },
      { version: c.version },
    );
    clock.set("2027-01-04T09:05:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    expect(channel.sends[0]!.delivery.digest!.items.map((i) => i.title)).toEqual(["stays"]);
    const rows = await deliveries(punctual);
    expect(rows.find((r) => r.scheduleId === a.id)).toMatchObject({ state: "sent" });
    expect(rows.find((r) => r.scheduleId === b.id)).toMatchObject({ state: "cancelled" });
    expect(rows.find((r) => r.scheduleId === b.id)!.digestId).toBeUndefined();
    const moved = rows.filter((r) => r.scheduleId === c.id);
    expect(moved.map((r) => [r.state, r.dueAt])).toEqual([["pending", "2027-01-04T10:00:00.000Z"]]);
  });

  it("DEL-19 / REC-6: a member of a series waiting for its window is not skipped as stale: its grace counts from the window's end", async () => {
    t = await testPunctual({ start: "2027-01-04T08:30:00Z" });
    const { punctual, channel, clock } = t;
    await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00Z",
      tzid: "UTC",
      rrule: "FREQ=DAILY;COUNT=2",
      misfire: "skip",
      graceMs: 60_000,
      title: "series",
      reminders: [{ key: "r", channel: "test", digest: { windowMs: WINDOW, key: "k" } }],
    });
    await tickAndDrain(punctual);
    // Past the 1-minute grace of its due time, inside its 5-minute window.
    clock.set("2027-01-04T09:03:00Z");
    await tickAndDrain(punctual);
    expect((await deliveries(punctual))[0]!.state).toBe("pending");
    clock.set("2027-01-04T09:05:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    expect((await deliveries(punctual))[0]!.state).toBe("sent");
  });

  it("DEL-19 / DEL-9: an edit that removes a reminder's digest sends its waiting deliveries alone; one that adds it makes them members", async () => {
    t = await testPunctual({ start: "2027-01-04T08:30:00Z" });
    const { punctual, channel, clock } = t;
    const digest = { windowMs: WINDOW, key: "k" };
    const { schedule: a } = await punctual.createSchedule(
      oneOff("2027-01-04T09:00:00Z", "was member", digest),
    );
    const { schedule: b } = await punctual.createSchedule({
      dtstart: "2027-01-04T09:01:00Z",
      tzid: "UTC",
      title: "now member",
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    await punctual.updateSchedule(
      a.id,
      { reminders: [{ key: "r", channel: "test" }] },
      { version: a.version },
    );
    await punctual.updateSchedule(
      b.id,
      { reminders: [{ key: "r", channel: "test", digest }] },
      { version: b.version },
    );
    const rows = await deliveries(punctual);
    expect(rows.find((r) => r.scheduleId === a.id)!.digestKey).toBeUndefined();
    expect(rows.find((r) => r.scheduleId === b.id)!.digestKey).toBe("k");
    clock.set("2027-01-04T09:01:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends.map((x) => x.delivery.digest)).toEqual([undefined]);
    expect(channel.sends[0]!.delivery.scheduleId).toBe(a.id);
    clock.set("2027-01-04T09:06:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(2);
    expect(channel.sends[1]!.delivery.digest!.items.map((i) => i.title)).toEqual(["now member"]);
  });

  it("DEL-19 / DEL-4: a failed digest retries with the same id and the same items; its members share the outcome", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z", scheduler: { backoffBaseMs: 1_000 } });
    const { punctual, channel, clock } = t;
    const digest = { windowMs: 1_000, key: "k" };
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00Z", "x", digest));
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00.500Z", "y", digest));
    channel.behaviour = (_d, _c, n) => {
      if (n === 1) throw new TransientError("503 from the receiver");
      return { messageId: null };
    };
    clock.set("2027-01-04T09:00:01Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    expect((await deliveries(punctual)).map((d) => d.state)).toEqual(["grouped", "grouped"]);
    // A member that arrives now is not added to the digest being retried.
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00.900Z", "late", digest));
    clock.set("2027-01-04T09:01:00Z");
    await tickAndDrain(punctual);
    await tickAndDrain(punctual);
    // The retry and the next digest go out in the same pass, in either order.
    expect(channel.sends).toHaveLength(3);
    const first = channel.sends[0]!.ctx.idempotencyKey;
    const retried = channel.sends.slice(1).filter((x) => x.ctx.idempotencyKey === first);
    const next = channel.sends.slice(1).filter((x) => x.ctx.idempotencyKey !== first);
    expect(retried.map((x) => x.delivery.digest!.items.map((i) => i.title))).toEqual([["x", "y"]]);
    expect(next.map((x) => x.delivery.digest!.items.map((i) => i.title))).toEqual([["late"]]);
    expect((await deliveries(punctual)).map((d) => d.state)).toEqual(["sent", "sent", "sent"]);
  });

  it("DEL-19 / DEL-6: a digest whose worker stopped between claim and settle is recovered: retried once with the same id (idempotent channel), never in a second digest", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z", scheduler: { leaseMs: 10_000 } });
    const { punctual, channel, clock } = t;
    const digest = { windowMs: 1_000, key: "k" };
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00Z", "x", digest));
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00.200Z", "y", digest));
    // The first worker's send does not return: it is stalled after its claim, and when it
    // comes back at last its settle is fenced out (the digest was recovered meanwhile).
    const stalled = deferred<{ messageId: null }>();
    channel.behaviour = () => stalled.promise;
    clock.set("2027-01-04T09:00:01Z");
    const firstTick = punctual.scheduler.tick();
    await expect.poll(() => channel.sends.length).toBe(1);
    const stuckId = channel.sends[0]!.ctx.idempotencyKey;
    expect((await deliveries(punctual)).map((d) => d.state)).toEqual(["grouped", "grouped"]);

    const survivor = await peer(t, { start: "2027-01-04T09:00:12Z" });
    try {
      await tickAndDrain(survivor.punctual); // recovers the expired lease: retry, same id
      await tickAndDrain(survivor.punctual);
      expect(survivor.channel.sends).toHaveLength(1);
      expect(survivor.channel.sends[0]!.ctx.idempotencyKey).toBe(stuckId);
      expect(survivor.channel.sends[0]!.delivery.digest!.items.map((i) => i.title)).toEqual([
        "x",
        "y",
      ]);
      // OPS-16: explain shows the digest the member was frozen into and sent in.
      const [x] = await deliveries(survivor.punctual);
      const { entry } = await survivor.punctual.explainDelivery(x!.id);
      expect(entry).toMatchObject({ verdict: "sent", digestId: stuckId });
      expect(entry.events.filter((e) => e.digestId === stuckId).map((e) => e.type)).toEqual([
        "digested",
        "sent",
      ]);
      expect(entry.events.find((e) => e.type === "digested")!.items).toBe(2);
      const rows = await deliveries(survivor.punctual);
      expect(rows.map((d) => [d.state, d.digestId])).toEqual([
        ["sent", stuckId],
        ["sent", stuckId],
      ]);
      stalled.resolve({ messageId: null });
      await firstTick;
      // The pass did not wait for the send (it runs on, off the pass): drain it.
      await punctual.scheduler.drain();
      expect(t.logs.some((l) => /digest lease lost/.test(JSON.stringify(l)))).toBe(true);
      expect((await deliveries(punctual)).map((d) => d.state)).toEqual(["sent", "sent"]);
    } finally {
      stalled.resolve({ messageId: null });
      await survivor.close();
    }
  });

  it("DEL-19 / DEL-6: on a channel that does not de-duplicate, a digest whose lease expired is in doubt with all its members", async () => {
    t = await testPunctual({
      start: "2027-01-04T08:00:00Z",
      idempotent: false,
      scheduler: { leaseMs: 10_000 },
    });
    const { punctual, channel, clock } = t;
    const digest = { windowMs: 1_000, key: "k" };
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00Z", "x", digest));
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00.200Z", "y", digest));
    const stalled = deferred<{ messageId: null }>();
    channel.behaviour = () => stalled.promise;
    clock.set("2027-01-04T09:00:01Z");
    const firstTick = punctual.scheduler.tick();
    await expect.poll(() => channel.sends.length).toBe(1);
    // OPS-16: while its digest is being sent, a member is pending (in_digest), digest named.
    const [grouped] = await deliveries(punctual);
    const during = await punctual.explainDelivery(grouped!.id);
    expect(during.entry).toMatchObject({ verdict: "pending", reason: "in_digest" });
    expect(during.entry.digestId).toBe(channel.sends[0]!.ctx.idempotencyKey);
    const survivor = await peer(t, { start: "2027-01-04T09:00:12Z", idempotent: false });
    try {
      await tickAndDrain(survivor.punctual);
      await tickAndDrain(survivor.punctual);
      expect(survivor.channel.sends).toHaveLength(0);
      const rows = await deliveries(survivor.punctual);
      expect(rows.map((d) => [d.state, d.reason, d.digestId])).toEqual([
        ["in_doubt", "LEASE_EXPIRED", channel.sends[0]!.ctx.idempotencyKey],
        ["in_doubt", "LEASE_EXPIRED", channel.sends[0]!.ctx.idempotencyKey],
      ]);
      stalled.resolve({ messageId: null });
      await firstTick;
      await punctual.scheduler.drain();
      expect((await deliveries(punctual)).map((d) => d.state)).toEqual(["in_doubt", "in_doubt"]);
      const after = await punctual.explainDelivery(grouped!.id);
      expect(after.entry).toMatchObject({ verdict: "in_doubt", reason: "LEASE_EXPIRED" });
      expect(after.entry.events.at(-1)).toMatchObject({
        type: "in_doubt",
        digestId: channel.sends[0]!.ctx.idempotencyKey,
      });
    } finally {
      stalled.resolve({ messageId: null });
      await survivor.close();
    }
  });
});

/** A send that never answers: it ends only when aborted (deadline, watchdog, shutdown). */
function hangs(_d: unknown, ctx: SendContext): Promise<SendResult> {
  return new Promise((_resolve, reject) => {
    ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason as Error), { once: true });
  });
}

/** The digest rows, by key. */
async function digestRows(t: TestPunctual) {
  const { rows } = await t.punctual.db.query<{
    id: string;
    digest_key: string;
    state: string;
    attempt: number;
    lease_expires_at: Date | null;
  }>("select id, digest_key, state, attempt, lease_expires_at from punctual_digests order by id");
  return rows;
}

describe("DEL-19: digest sends run off the maintenance pass", () => {
  it("DEL-19 / OPS-1 / DEL-6: a digest whose receiver never answers holds neither the pass, nor another key's digest, nor the recovery of an expired lease; stop() settles it", async () => {
    t = await testPunctual({
      start: "2027-01-04T08:00:00Z",
      scheduler: { sendTimeoutMs: 300_000 },
    });
    const { punctual, channel, clock } = t;
    channel.behaviour = (d, ctx) =>
      d.digest?.key === "hang" ? hangs(d, ctx) : { messageId: null };
    await punctual.createSchedule(
      oneOff("2027-01-04T09:00:00Z", "hung", { windowMs: 1_000, key: "hang" }),
    );
    await punctual.createSchedule(
      oneOff("2027-01-04T09:00:10Z", "other", { windowMs: 1_000, key: "other" }),
    );
    const { schedule: plain } = await punctual.createSchedule({
      dtstart: "2027-01-04T09:00:05Z",
      tzid: "UTC",
      title: "plain",
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);

    // The hung digest is formed and its send starts; the pass returns without it.
    clock.set("2027-01-04T09:00:01Z");
    const report = await punctual.scheduler.tick();
    expect(report).toMatchObject({ failedSweep: null, digests: { started: 1 } });
    await expect.poll(() => channel.sends.length).toBe(1);
    expect(punctual.scheduler.digestsInFlight).toBe(1);

    // Another worker claims the ordinary delivery and stalls with it (its clock stops).
    const stalled = await peer(t, {
      start: "2027-01-04T09:00:05Z",
      scheduler: { leaseMs: 10_000 },
    });
    try {
      stalled.channel.behaviour = hangs;
      await stalled.punctual.scheduler.tick();
      await expect.poll(() => stalled.channel.sends.length).toBe(1);

      // The next pass forms and sends the other key's digest while the first still hangs.
      clock.set("2027-01-04T09:00:12Z");
      expect((await punctual.scheduler.tick()).failedSweep).toBeNull();
      await punctual.scheduler.drain(() => punctual.scheduler.digestsInFlight === 1);
      expect(channel.sends.map((x) => x.delivery.digest?.key)).toEqual(["hang", "other"]);
      // And a later pass recovers the stalled worker's expired lease; the delivery is sent.
      clock.set("2027-01-04T09:00:16Z");
      const later = await punctual.scheduler.tick();
      expect(later.recovered).toBe(1);
      await punctual.scheduler.drain(() => punctual.scheduler.held === 1);
      const rows = await deliveries(punctual);
      const byTitle = async (title: string) => {
        const all = await punctual.listSchedules({ limit: 10 });
        const id = all.items.find((x) => x.title === title)!.id;
        return rows.find((r) => r.scheduleId === id)!;
      };
      expect((await byTitle("other")).state).toBe("sent");
      expect((await byTitle("hung")).state).toBe("grouped");
      expect(rows.find((r) => r.scheduleId === plain.id)!.state).toBe("sent");
      expect(channel.sends.at(-1)!.delivery.scheduleId).toBe(plain.id);
      expect(punctual.scheduler.digestsInFlight).toBe(1);

      // OPS-6: stop() without grace aborts the hung send and settles it (unknown outcome on
      // an idempotent channel: retry, same id), rather than leaving it to recovery.
      await punctual.scheduler.stop(0);
      expect(punctual.scheduler.digestsInFlight).toBe(0);
      const hung = (await digestRows(t)).find((g) => g.digest_key === "hang")!;
      expect(hung).toMatchObject({ state: "retry", lease_expires_at: null });
      expect((await byTitle("hung")).state).toBe("grouped");
    } finally {
      await stalled.close();
    }
  });

  it("DEL-19 / DEL-16 / OPS-6: a digest send slower than the lease keeps its lease renewed and reaches the receiver once; a graceful stop waits for it", async () => {
    t = await testPunctual({
      start: "2027-01-04T08:00:00Z",
      scheduler: { leaseMs: 10_000, leaseMarginMs: 1_000, sendTimeoutMs: 120_000 },
    });
    const { punctual, channel, clock } = t;
    const slow = deferred<{ messageId: string }>();
    channel.behaviour = () => slow.promise;
    await punctual.createSchedule(
      oneOff("2027-01-04T09:00:00Z", "x", { windowMs: 1_000, key: "k" }),
    );
    await punctual.createSchedule(
      oneOff("2027-01-04T09:00:00.500Z", "y", { windowMs: 1_000, key: "k" }),
    );
    await tickAndDrain(punctual);
    clock.set("2027-01-04T09:00:01Z");
    await punctual.scheduler.tick();
    await expect.poll(() => channel.sends.length).toBe(1);
    const leaseOf = async () => (await digestRows(t!))[0]!.lease_expires_at!.getTime();
    expect(await leaseOf()).toBe(clock.now() + 10_000);
    // Three leases long: each third of the lease the renewal moves it on.
    const every = Math.floor(10_000 / 3);
    for (let i = 0; i < 9; i++) {
      clock.advance(every);
      const expected = clock.now() + 10_000;
      await expect.poll(leaseOf).toBe(expected);
    }
    // Another worker, past the first lease, finds nothing to recover or send.
    const other = await peer(t, { start: new Date(clock.now()).toISOString() });
    try {
      const report = await other.punctual.scheduler.tick();
      await other.punctual.scheduler.drain();
      expect(report.digests).toMatchObject({ recovered: 0, started: 0 });
      expect(other.channel.sends).toHaveLength(0);
    } finally {
      await other.close();
    }
    // OPS-6: a graceful stop drains the digest in flight: it settles when its send ends.
    let stopped = false;
    const stopping = punctual.scheduler.stop(60_000).then(() => (stopped = true));
    await punctual.db.query("select 1");
    expect(stopped).toBe(false);
    slow.resolve({ messageId: "m-1" });
    await stopping;
    expect(channel.sends).toHaveLength(1);
    expect((await digestRows(t))[0]).toMatchObject({ state: "sent", attempt: 1 });
    expect((await deliveries(punctual)).map((d) => d.state)).toEqual(["sent", "sent"]);
  });
});

describe("DEL-19 / API-8: drain() waits for digest sends", () => {
  it("DEL-19 / API-8: tickAndDrain returns once the digest sends a pass started are settled, however long they take", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const { punctual, channel, clock } = t;
    // A receiver that answers only after many round trips of the database: far later than
    // the rest of the pass.
    channel.behaviour = async () => {
      for (let i = 0; i < 40; i++) await punctual.db.query("select 1");
      return { messageId: "m" };
    };
    const digest = { windowMs: 1_000, key: "k" };
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00Z", "x", digest));
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00.500Z", "y", digest));
    clock.set("2027-01-04T09:00:01Z");
    await tickAndDrain(punctual);
    expect(punctual.scheduler.digestsInFlight).toBe(0);
    expect((await deliveries(punctual)).map((d) => d.state)).toEqual(["sent", "sent"]);
  });
});

describe("DEL-19 / DEL-14: each try of a digest is an attempt of every member", () => {
  it("DEL-19 / DEL-14 / OPS-16: failed tries (transient, timeout, permanent) are recorded per member, shown by its attempts and its explanation", async () => {
    t = await testPunctual({
      start: "2027-01-04T08:00:00Z",
      scheduler: { backoffBaseMs: 1_000, sendTimeoutMs: 5_000 },
    });
    const { punctual, channel, clock } = t;
    channel.behaviour = (d, ctx, n) => {
      if (n === 1) throw new TransientError("503 from the receiver");
      if (n === 2) return hangs(d, ctx);
      throw Object.assign(new PermanentError("410 gone"), { status: 410 });
    };
    const digest = { windowMs: 1_000, key: "k" };
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00Z", "x", digest));
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00.500Z", "y", digest));
    clock.set("2027-01-04T09:00:01Z");
    await tickAndDrain(punctual);
    // Retry after the backoff; the second try hangs until its 5 s budget.
    clock.set("2027-01-04T09:00:03Z");
    await punctual.scheduler.tick();
    await expect.poll(() => channel.sends.length).toBe(2);
    clock.advance(5_000);
    await punctual.scheduler.drain();
    clock.set("2027-01-04T09:01:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(3);
    const members = await deliveries(punctual);
    expect(members.map((d) => d.state)).toEqual(["dead", "dead"]);
    for (const m of members) {
      const { attempts } = await punctual.getDelivery(m.id);
      expect(attempts.map((a) => [a.attempt, a.outcome, a.settled])).toEqual([
        [1, "transient", true],
        [2, "timeout", true],
        [3, "permanent", true],
      ]);
      expect(attempts[0]!.error).toContain("503");
      expect(attempts[2]!.status).toBe(410);
      const { entry } = await punctual.explainDelivery(m.id);
      expect(entry).toMatchObject({ verdict: "failed", digestId: m.digestId });
      expect(
        entry.events.filter((e) => e.type === "attempt").map((e) => [e.attempt, e.outcome]),
      ).toEqual([
        [1, "transient"],
        [2, "timeout"],
        [3, "permanent"],
      ]);
      expect(m).toMatchObject({ attempt: 3, failures: 3 });
    }
  });

  it("DEL-19 / DEL-14 / DEL-6: a digest whose lease expired records a lease_expired attempt for every member", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z", scheduler: { leaseMs: 10_000 } });
    const { punctual, channel, clock } = t;
    const stuck = deferred<{ messageId: null }>();
    channel.behaviour = () => stuck.promise;
    const digest = { windowMs: 1_000, key: "k" };
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00Z", "x", digest));
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00.500Z", "y", digest));
    clock.set("2027-01-04T09:00:01Z");
    await punctual.scheduler.tick();
    await expect.poll(() => channel.sends.length).toBe(1);
    const survivor = await peer(t, { start: "2027-01-04T09:00:12Z" });
    try {
      await tickAndDrain(survivor.punctual);
      await tickAndDrain(survivor.punctual);
      expect(survivor.channel.sends).toHaveLength(1);
      for (const m of await deliveries(survivor.punctual)) {
        const { attempts } = await survivor.punctual.getDelivery(m.id);
        expect(attempts.map((a) => [a.attempt, a.outcome])).toEqual([
          [1, "lease_expired"],
          [2, "sent"],
        ]);
      }
      stuck.resolve({ messageId: null });
      await punctual.scheduler.drain();
      // The stalled worker's late outcome changed nothing; its try is recorded unsettled.
      for (const m of await deliveries(punctual)) {
        const { attempts } = await punctual.getDelivery(m.id);
        expect(attempts.map((a) => [a.attempt, a.outcome, a.settled])).toEqual([
          [1, "lease_expired", true],
          [1, "sent", false],
          [2, "sent", true],
        ]);
      }
    } finally {
      stuck.resolve({ messageId: null });
      await survivor.close();
    }
  });
});
