/**
 * DEL-19 digests under DEL-13 rate limits and CH-7 circuits, on a real engine (PGlite or
 * PostgreSQL, per PUNCTUAL_TEST_ENGINE), driven by the test clock: a digest takes a token
 * and a concurrency slot of its members' limiter as one send, and waits for them
 * (RATE_LIMITED); a Retry-After defers it as it defers a delivery (RETRY_AFTER, no attempt
 * spent, the same deferral budget); its host's open circuit holds it (CIRCUIT_OPEN) and its
 * failures count toward that circuit. Each deferral keeps the digest's members and id,
 * releases its lease and shows on every member's explanation.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Punctual } from "../../src/app/punctual.js";
import { RateLimitedError, TransientError } from "../../src/errors/index.js";
import { admitDigest, deferDigest } from "../../src/store/deliveries/index.js";
import { deferred } from "../support/channels.js";
import { deliveries, testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

const WINDOW = 300_000;
const HOOK = { url: "http://hooks.example.test/in" };

/** A one-off schedule at `at` whose reminder goes to the test channel, in digests when `digest`. */
function oneOff(at: string, title: string, digest?: Record<string, unknown>, target?: unknown) {
  return {
    dtstart: at,
    tzid: "UTC",
    title,
    reminders: [
      {
        key: "r",
        channel: "test",
        maxAttempts: 5,
        ...(target === undefined ? {} : { target }),
        ...(digest ? { digest } : {}),
      },
    ],
  };
}

/** The digest rows as stored. */
async function digestRows(p: Punctual) {
  return (
    await p.db.query<{
      id: string;
      state: string;
      attempt: number;
      failures: number;
      deferrals: number;
      lease_owner: string | null;
      deferred_reason: string | null;
    }>(
      `select id, state, attempt, failures, deferrals, lease_owner, deferred_reason
       from punctual_digests order by created_at, id`,
    )
  ).rows;
}

/** `verdict reason until` of each given delivery's explanation. */
async function verdicts(p: Punctual, ids: readonly number[]): Promise<string[]> {
  const out: string[] = [];
  for (const id of ids) {
    const { entry } = await p.explainDelivery(id);
    const last = entry.events.at(-1)!;
    out.push(`${entry.verdict} ${entry.reason} ${last.type} ${last.until ?? "-"}`);
  }
  return out;
}

/** The sum of a counter's values, every label. */
async function counted(p: Punctual, name: string): Promise<number> {
  const metric = p.metrics.registry.getSingleMetric(name);
  if (!metric) return 0;
  return (await metric.get()).values.reduce((sum, v) => sum + v.value, 0);
}

describe("DEL-13 / CH-7: digests obey rate limits, circuits and Retry-After", () => {
  it("DEL-13 / DEL-19: a digest takes one token of its channel's bucket; an empty bucket defers it RATE_LIMITED until its token (members, id kept; no attempt spent; lease released), and the token it waited for is its own", async () => {
    t = await testPunctual({ start: "2027-01-04T08:30:00Z" });
    const { punctual, channel, clock } = t;
    // One token, then one every 1,000 s, shared by the channel's sends and its digests.
    await punctual.setRateLimit("test", { ratePerSecond: 0.001, burst: 1 });
    const key = { windowMs: WINDOW, key: "alice" };
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00Z", "plain"));
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00Z", "a1", key));
    await punctual.createSchedule(oneOff("2027-01-04T09:01:00Z", "a2", key));
    await punctual.createSchedule(oneOff("2027-01-04T09:10:00Z", "later"));
    await tickAndDrain(punctual);
    clock.set("2027-01-04T09:00:00Z");
    await tickAndDrain(punctual);
    // The plain delivery took the one token.
    expect(channel.sends.map((s) => s.delivery.digest?.id ?? "plain")).toEqual(["plain"]);

    // The window ends at 09:05: the digest forms, finds the bucket empty (0.3 token) and
    // waits for its token, due 1,000 s after the last one: 09:16:40.
    clock.set("2027-01-04T09:05:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    const [digest] = await digestRows(punctual);
    expect(digest).toMatchObject({
      state: "retry",
      attempt: 0,
      failures: 0,
      deferrals: 0,
      lease_owner: null,
      deferred_reason: "RATE_LIMITED",
    });
    const members = (await deliveries(punctual)).filter((d) => d.digestKey === "alice");
    expect(members.map((m) => [m.state, m.digestId, m.attempt, m.failures])).toEqual([
      ["grouped", digest!.id, 0, 0],
      ["grouped", digest!.id, 0, 0],
    ]);
    const ids = members.map((m) => m.id);
    expect(await verdicts(punctual, ids)).toEqual([
      "deferred RATE_LIMITED deferred 2027-01-04T09:16:40.000Z",
      "deferred RATE_LIMITED deferred 2027-01-04T09:16:40.000Z",
    ]);
    expect(await counted(punctual, "punctual_rate_limit_throttled_total")).toBeGreaterThan(0);

    // Passes before its token change nothing (no second digest of the same members).
    clock.set("2027-01-04T09:16:39Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    expect(await digestRows(punctual)).toHaveLength(1);

    // At 09:16:40 the digest goes, once, with both items under the same id; "later" (due
    // 09:10) does not get that token: its own is 1,000 s after, at 09:33:20.
    clock.set("2027-01-04T09:16:40Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(2);
    const sent = channel.sends[1]!;
    expect(sent.ctx.idempotencyKey).toBe(digest!.id);
    expect(sent.delivery.attempt).toBe(1);
    expect(sent.delivery.digest!.items.map((i) => i.title)).toEqual(["a1", "a2"]);
    const after = await deliveries(punctual);
    expect(after.filter((d) => d.digestKey === "alice").map((d) => d.state)).toEqual([
      "sent",
      "sent",
    ]);
    const later = after.find((d) => d.occurrenceAt === "2027-01-04T09:10:00.000Z")!;
    expect(later.state).toBe("pending");
    expect(await verdicts(punctual, [later.id])).toEqual([
      "deferred RATE_LIMITED deferred 2027-01-04T09:33:20.000Z",
    ]);
    expect(await digestRows(punctual)).toMatchObject([{ state: "sent", attempt: 1 }]);
  });

  it("DEL-13 / DEL-19: a digest holds one slot of its limiter's concurrency cap while it is sent: a delivery and a second digest of the key wait RATE_LIMITED for it, then each goes once", async () => {
    t = await testPunctual({ start: "2027-01-04T08:30:00Z" });
    const { punctual, channel, clock } = t;
    await punctual.setRateLimit("test", { ratePerSecond: 1_000, burst: 1_000, concurrency: 1 });
    await punctual.createSchedule(
      oneOff("2027-01-04T09:00:00Z", "a1", { windowMs: WINDOW, key: "a" }),
    );
    await punctual.createSchedule(
      oneOff("2027-01-04T09:00:10Z", "b1", { windowMs: WINDOW, key: "b" }),
    );
    await punctual.createSchedule(oneOff("2027-01-04T09:05:05Z", "plain"));
    await tickAndDrain(punctual);
    const started = deferred();
    const release = deferred();
    channel.behaviour = async (delivery) => {
      if (delivery.digest?.key === "a") {
        started.resolve();
        await release.promise;
      }
      return { messageId: null };
    };
    // Digest "a" forms at 09:05 and hangs in the receiver, holding the key's only slot.
    clock.set("2027-01-04T09:05:00Z");
    await punctual.scheduler.tick();
    await started.promise;
    // DEL-2: a deferral is fenced: another owner (or a stale attempt) changes nothing, and
    // an admission that finds its lease gone spends no token.
    const [sending] = await digestRows(punctual);
    const tokens = async () =>
      (await punctual.db.query<{ tokens: number }>("select tokens from punctual_rate_limits"))
        .rows[0]!.tokens;
    const before = await tokens();
    const stale = { id: sending!.id, attempt: sending!.attempt };
    expect(
      await deferDigest(punctual.db, null, "another-worker", {
        ...stale,
        until: new Date("2027-01-04T10:00:00Z"),
        reason: "RATE_LIMITED",
        slotAt: null,
      }),
    ).toBe(false);
    expect(
      await admitDigest(punctual.db, {
        now: null,
        owner: "another-worker",
        ...stale,
        limiter: "default/test",
        slotAt: null,
      }),
    ).toEqual({ send: false, lost: true });
    expect(await tokens()).toBe(before);
    expect(await digestRows(punctual)).toMatchObject([{ state: "claimed", deferred_reason: null }]);
    // "plain" falls due and "b" forms: the cap holds both back; "b" is given back.
    clock.set("2027-01-04T09:05:10Z");
    const report = await punctual.scheduler.tick();
    expect(report.failedSweep ?? null).toBeNull();
    expect(channel.sends.map((s) => s.delivery.digest?.key ?? "plain")).toEqual(["a"]);
    const rows = await digestRows(punctual);
    const b = rows.find((r) => r.state === "retry")!;
    expect(b).toMatchObject({ attempt: 0, lease_owner: null, deferred_reason: "RATE_LIMITED" });
    const bMember = (await deliveries(punctual)).find((d) => d.digestKey === "b")!;
    expect(await verdicts(punctual, [bMember.id])).toEqual([
      "deferred RATE_LIMITED deferred 2027-01-04T09:05:11.000Z",
    ]);

    release.resolve();
    await punctual.scheduler.drain();
    for (const at of ["2027-01-04T09:05:11Z", "2027-01-04T09:05:12Z", "2027-01-04T09:05:13Z"]) {
      clock.set(at);
      await tickAndDrain(punctual);
    }
    expect(channel.sends.map((s) => s.delivery.digest?.key ?? "plain").sort()).toEqual([
      "a",
      "b",
      "plain",
    ]);
    expect((await deliveries(punctual)).map((d) => d.state)).toEqual(["sent", "sent", "sent"]);
  });

  it("DEL-13 / DEL-19: a digest's 429 with Retry-After defers it RETRY_AFTER to that instant spending no attempt, within the deferral budget a delivery has", async () => {
    t = await testPunctual({
      start: "2027-01-04T08:30:00Z",
      scheduler: { rateLimitMaxDeferrals: 1 },
    });
    const { punctual, channel, clock } = t;
    const key = { windowMs: WINDOW, key: "alice" };
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00Z", "a1", key));
    await punctual.createSchedule(oneOff("2027-01-04T09:01:00Z", "a2", key));
    await tickAndDrain(punctual);
    channel.behaviour = () => {
      throw new RateLimitedError("slow down", 60_000, { status: 429 });
    };
    clock.set("2027-01-04T09:05:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    expect(channel.sends[0]!.delivery.attempt).toBe(1);
    const [digest] = await digestRows(punctual);
    expect(digest).toMatchObject({
      state: "retry",
      attempt: 1,
      failures: 0,
      deferrals: 1,
      lease_owner: null,
      deferred_reason: "RETRY_AFTER",
    });
    const members = await deliveries(punctual);
    expect(members.map((m) => [m.state, m.failures, m.deferrals])).toEqual([
      ["grouped", 0, 1],
      ["grouped", 0, 1],
    ]);
    const ids = members.map((m) => m.id);
    expect(await verdicts(punctual, ids)).toEqual([
      "deferred RETRY_AFTER deferred 2027-01-04T09:06:00.000Z",
      "deferred RETRY_AFTER deferred 2027-01-04T09:06:00.000Z",
    ]);
    const { entry } = await punctual.explainDelivery(ids[0]!);
    expect(entry.events.find((e) => e.type === "attempt")).toMatchObject({
      outcome: "rate_limited",
      status: 429,
    });

    // Not before the instant it was given.
    clock.set("2027-01-04T09:05:59Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    // Its budget is one deferral: a second 429 ends it dead RATE_LIMITED, as a delivery.
    clock.set("2027-01-04T09:06:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(2);
    // The try after a deferral repeats the attempt it deferred.
    expect(channel.sends[1]!.delivery.attempt).toBe(1);
    expect(channel.sends[1]!.ctx.idempotencyKey).toBe(digest!.id);
    expect((await deliveries(punctual)).map((m) => [m.state, m.reason, m.digestId])).toEqual([
      ["dead", "RATE_LIMITED", digest!.id],
      ["dead", "RATE_LIMITED", digest!.id],
    ]);
  });

  it("CH-7 / DEL-19: a digest to a host whose circuit is open waits CIRCUIT_OPEN for the probe (no attempt spent) and, as the probe, closes it; its transient failures open the circuit for deliveries", async () => {
    t = await testPunctual({
      start: "2027-01-04T08:30:00Z",
      scheduler: { circuitFailures: 1, circuitBackoffMs: 60_000, backoffBaseMs: 1_000 },
    });
    const { punctual, channel, clock } = t;
    const key = { windowMs: WINDOW, key: "alice" };
    await punctual.createSchedule(oneOff("2027-01-04T09:04:00Z", "plain", undefined, HOOK));
    await punctual.createSchedule(oneOff("2027-01-04T09:00:00Z", "a1", key, HOOK));
    await punctual.createSchedule(oneOff("2027-01-04T09:01:00Z", "a2", key, HOOK));
    await tickAndDrain(punctual);
    // A delivery to the host fails at 09:04:30: the circuit opens until 09:05:30.
    channel.behaviour = () => {
      throw new TransientError("503 from the host", { status: 503 });
    };
    clock.set("2027-01-04T09:04:30Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    channel.behaviour = () => ({ messageId: null });

    // The digest forms at 09:05 and waits for the probe; no attempt spent, lease released.
    clock.set("2027-01-04T09:05:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends).toHaveLength(1);
    const [digest] = await digestRows(punctual);
    expect(digest).toMatchObject({
      state: "retry",
      attempt: 0,
      failures: 0,
      lease_owner: null,
      deferred_reason: "CIRCUIT_OPEN",
    });
    const members = (await deliveries(punctual)).filter((d) => d.digestKey === "alice");
    expect(
      await verdicts(
        punctual,
        members.map((m) => m.id),
      ),
    ).toEqual([
      "deferred CIRCUIT_OPEN deferred 2027-01-04T09:05:30.000Z",
      "deferred CIRCUIT_OPEN deferred 2027-01-04T09:05:30.000Z",
    ]);
    expect(await counted(punctual, "punctual_circuit_deferred_total")).toBeGreaterThan(0);

    // At 09:05:30 one send probes the host (the digest or the delivery, whichever asks
    // first): it goes and closes the circuit; the other follows once the probe's turn is over.
    clock.set("2027-01-04T09:05:30Z");
    await tickAndDrain(punctual);
    clock.set("2027-01-04T09:07:00Z");
    await tickAndDrain(punctual);
    const digestSends = channel.sends.filter((s) => s.delivery.digest);
    expect(digestSends).toHaveLength(1);
    expect(digestSends[0]!.delivery.attempt).toBe(1);
    expect(digestSends[0]!.delivery.digest!.items.map((i) => i.title)).toEqual(["a1", "a2"]);
    expect((await deliveries(punctual)).map((d) => d.state)).toEqual(["sent", "sent", "sent"]);
    const circuits = await punctual.db.query<{ state: string; failures: number }>(
      "select state, failures from punctual_tenant_circuits",
    );
    expect(circuits.rows).toEqual([{ state: "closed", failures: 0 }]);

    // A digest's transient failure counts toward the host's circuit: it opens, and a
    // delivery to the host falling due then waits CIRCUIT_OPEN.
    await punctual.createSchedule(oneOff("2027-01-04T09:10:00Z", "b1", key, HOOK));
    await punctual.createSchedule(oneOff("2027-01-04T09:15:10Z", "after", undefined, HOOK));
    await tickAndDrain(punctual);
    channel.behaviour = (delivery) => {
      if (delivery.digest) throw new TransientError("503 from the host", { status: 503 });
      return { messageId: null };
    };
    clock.set("2027-01-04T09:15:00Z");
    await tickAndDrain(punctual);
    expect(channel.sends.filter((s) => s.delivery.digest)).toHaveLength(2);
    clock.set("2027-01-04T09:15:10Z");
    await tickAndDrain(punctual);
    const after = (await deliveries(punctual)).find(
      (d) => d.occurrenceAt === "2027-01-04T09:15:10.000Z",
    )!;
    expect(after.state).toBe("pending");
    expect(await verdicts(punctual, [after.id])).toEqual([
      "deferred CIRCUIT_OPEN deferred 2027-01-04T09:16:00.000Z",
    ]);
  });
});
