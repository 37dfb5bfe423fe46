/**
 * DEL-13: a receiver's 429 with Retry-After, end to end through the built-in webhook
 * channel and a real HTTP receiver on 127.0.0.1, on the test clock: deferrals spend no
 * attempt, are recorded in the attempts history (DEL-14), and have a budget (count and
 * age) after which the delivery is dead `RATE_LIMITED`.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/index.js";
import { startReceiver, type Receiver } from "../unit/channels/receiver.js";
import { deliveries, testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

const T0 = "2027-01-04T08:00:00Z";
let t: TestPunctual | null = null;
let receiver: Receiver | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
  await receiver?.close();
  receiver = null;
});

async function setup(scheduler: NonNullable<ConfigInput["scheduler"]>) {
  receiver = await startReceiver();
  t = await testPunctual({ start: T0, scheduler });
  await t.punctual.createSchedule({
    dtstart: T0,
    tzid: "UTC",
    payload: { note: "hello" },
    reminders: [{ key: "r", offset: "PT0S", channel: "webhook", target: { url: receiver.url } }],
  });
  return { tp: t, rx: receiver };
}

/** Ticks at each retry time until the delivery is final (bounded). */
async function runToEnd(tp: TestPunctual, maxTicks = 60) {
  for (let i = 0; i < maxTicks; i++) {
    await tickAndDrain(tp.punctual);
    const [row] = await deliveries(tp.punctual);
    if (row!.state !== "retry" && row!.state !== "pending") return row!;
    tp.clock.set(row!.runAt);
  }
  throw new Error(`delivery not final after ${maxTicks} ticks`);
}

const bodyAttempts = (rx: Receiver) =>
  rx.requests.map((r) => (JSON.parse(r.body) as { attempt: number }).attempt);

describe("Retry-After budget", () => {
  it("DEL-13: a receiver that always answers 429 + Retry-After ends dead RATE_LIMITED after the deferral budget, spending one attempt", async () => {
    const { tp, rx } = await setup({ maxAttempts: 3, rateLimitMaxDeferrals: 4 });
    rx.respond = (_req, res) => res.writeHead(429, { "retry-after": "7" }).end();
    const row = await runToEnd(tp);
    // Four deferrals, then the fifth rate limit ends it; attempts never exceed the budget.
    expect(rx.requests).toHaveLength(5);
    expect(row).toMatchObject({
      state: "dead",
      reason: "RATE_LIMITED",
      failures: 0,
      deferrals: 4,
      attempt: 1,
      maxAttempts: 3,
    });
    expect(row.attempt).toBeLessThanOrEqual(row.maxAttempts);
    // Each try waited the receiver's 7 s; the receiver saw attempt 1 every time.
    expect(Date.parse(row.finishedAt!) - Date.parse(T0)).toBe(4 * 7_000);
    expect(bodyAttempts(rx)).toEqual([1, 1, 1, 1, 1]);
    // DEL-14: every deferral is in the history, with its outcome and status.
    const detail = await tp.punctual.getDelivery(row.id);
    expect(detail.attempts.map((a) => [a.outcome, a.status, a.settled])).toEqual(
      Array.from({ length: 5 }, () => ["rate_limited", 429, true]),
    );
    expect(
      tp.logs.some((l) => l.level === "error" && String(l.msg).includes("dead (RATE_LIMITED)")),
    ).toBe(true);
  });

  it("DEL-13: the age budget (since the first try) ends deferrals too; a longer Retry-After is shortened to the ceiling", async () => {
    const { tp, rx } = await setup({
      rateLimitMaxAgeMs: 60_000,
      rateLimitMaxDelayMs: 30_000,
    });
    // The receiver asks for 10 minutes; the scheduler waits at most 30 s.
    rx.respond = (_req, res) => res.writeHead(429, { "retry-after": "600" }).end();
    const row = await runToEnd(tp);
    // Tries at 0 s, 30 s (age 30 s: deferred), 60 s (age 60 s: budget spent).
    expect(rx.requests).toHaveLength(3);
    expect(row).toMatchObject({ state: "dead", reason: "RATE_LIMITED", deferrals: 2, attempt: 1 });
    expect(Date.parse(row.finishedAt!) - Date.parse(T0)).toBe(60_000);
  });

  it("DEL-13, DEL-4: deferrals and real failures mixed: only failures spend attempts, and the numbers stay honest", async () => {
    const { tp, rx } = await setup({ maxAttempts: 3 });
    const replies = [429, 500, 429, 200];
    rx.respond = (_req, res) => {
      const status = replies[rx.requests.length - 1] ?? 200;
      res.writeHead(status, status === 429 ? { "retry-after": "5" } : {}).end();
    };
    const row = await runToEnd(tp);
    expect(row).toMatchObject({
      state: "sent",
      attempt: 2,
      failures: 1,
      deferrals: 2,
      maxAttempts: 3,
    });
    expect(bodyAttempts(rx)).toEqual([1, 1, 2, 2]);
    const detail = await tp.punctual.getDelivery(row.id);
    expect(detail.attempts.map((a) => a.outcome)).toEqual([
      "rate_limited",
      "transient",
      "rate_limited",
      "sent",
    ]);
  });

  it("DEL-13, DEL-12: a redrive of a RATE_LIMITED delivery tries again; the counts stay true", async () => {
    const { tp, rx } = await setup({ rateLimitMaxDeferrals: 1 });
    rx.respond = (_req, res) => res.writeHead(429, { "retry-after": "3" }).end();
    const dead = await runToEnd(tp);
    expect(dead).toMatchObject({ state: "dead", reason: "RATE_LIMITED", deferrals: 1 });
    rx.respond = (_req, res) => res.writeHead(200).end();
    await tp.punctual.redriveDelivery(dead.id);
    const row = await runToEnd(tp);
    // The redrive's round spent one attempt (its first): "attempt 1 of N, round 2" (DEL-12).
    expect(row).toMatchObject({ state: "sent", deferrals: 1, attempt: 1, round: 2, failures: 0 });
    expect(bodyAttempts(rx)).toEqual([1, 1, 2]);
  });
});
