/**
 * The outcome decision as a table (DEL-4, DEL-5, DEL-13): each row is one send result on
 * one delivery, and the state, time, reason and attempt cost it must lead to.
 */
import { describe, expect, it } from "vitest";
import { PermanentError, RateLimitedError, TransientError } from "../../../src/errors/index.js";
import { decideOutcome, type OutcomeRow, type SendResult } from "../../../src/scheduler/outcome.js";

const NOW = Date.parse("2027-01-04T08:00:00Z");
const HOUR = 3_600_000;
const policy = {
  backoffBaseMs: 1_000,
  backoffCapMs: HOUR,
  rateLimitMaxDeferrals: 20,
  rateLimitMaxAgeMs: 24 * HOUR,
  rateLimitMaxDelayMs: HOUR,
  random: () => 0.5,
};
const budget = { deferrals: 0, firstAttemptAtMs: null };
const fresh: OutcomeRow = { failures: 0, maxAttempts: 5, onLostLease: "retry", ...budget };
const atMostOnce: OutcomeRow = { failures: 0, maxAttempts: 5, onLostLease: "in_doubt", ...budget };
const lastTry: OutcomeRow = { failures: 4, maxAttempts: 5, onLostLease: "retry", ...budget };

const failed = (error: unknown, aborted = false): SendResult => ({
  kind: "failed",
  error,
  aborted,
});
const maybeDelivered = new TransientError("socket hang up after the request was written", {
  code: "CONNECTION_LOST",
  maybeDelivered: true,
});
const sendTimeout = new TransientError("webhook timed out after 30000 ms", {
  code: "SEND_TIMEOUT",
  maybeDelivered: true,
});

type Case = [
  name: string,
  result: SendResult,
  row: OutcomeRow,
  expected: {
    state: string;
    reason: string | null;
    failure: 0 | 1;
    outcome: string;
    retryInMs?: number;
    /** 1 when the try is a Retry-After deferral (DEL-13); 0 when omitted. */
    deferral?: 0 | 1;
  },
];

// backoff with random 0.5: exp/2 + exp/4 = 0.75 · min(base · 2^(n-1), cap)
const cases: Case[] = [
  [
    "sent",
    { kind: "sent", status: 200, messageId: "m" },
    fresh,
    { state: "sent", reason: null, failure: 0, outcome: "sent" },
  ],
  [
    "DEL-13: rate limited waits Retry-After, spends no attempt",
    failed(new RateLimitedError("slow down", 7_000)),
    lastTry,
    {
      state: "retry",
      reason: null,
      failure: 0,
      deferral: 1,
      outcome: "rate_limited",
      retryInMs: 7_000,
    },
  ],
  [
    "DEL-13: the last deferral of the budget is still granted",
    failed(new RateLimitedError("slow down", 7_000)),
    { ...fresh, deferrals: 19, firstAttemptAtMs: NOW - HOUR },
    {
      state: "retry",
      reason: null,
      failure: 0,
      deferral: 1,
      outcome: "rate_limited",
      retryInMs: 7_000,
    },
  ],
  [
    "DEL-13: a rate limit after the deferral count is spent is dead RATE_LIMITED, no attempt spent",
    failed(new RateLimitedError("slow down", 7_000)),
    { ...fresh, deferrals: 20, firstAttemptAtMs: NOW - HOUR },
    { state: "dead", reason: "RATE_LIMITED", failure: 0, outcome: "rate_limited" },
  ],
  [
    "DEL-13: a rate limit once the first try is older than the age budget is dead RATE_LIMITED",
    failed(new RateLimitedError("slow down", 7_000)),
    { ...fresh, deferrals: 3, firstAttemptAtMs: NOW - 24 * HOUR },
    { state: "dead", reason: "RATE_LIMITED", failure: 0, outcome: "rate_limited" },
  ],
  [
    "DEL-13: just inside the age budget the deferral is granted",
    failed(new RateLimitedError("slow down", 7_000)),
    { ...fresh, deferrals: 3, firstAttemptAtMs: NOW - 24 * HOUR + 1 },
    {
      state: "retry",
      reason: null,
      failure: 0,
      deferral: 1,
      outcome: "rate_limited",
      retryInMs: 7_000,
    },
  ],
  [
    "DEL-13: a Retry-After longer than the ceiling is shortened to it",
    failed(new RateLimitedError("slow down", 30 * HOUR)),
    fresh,
    {
      state: "retry",
      reason: null,
      failure: 0,
      deferral: 1,
      outcome: "rate_limited",
      retryInMs: HOUR,
    },
  ],

  [
    "DEL-5: permanent is dead at once",
    failed(new PermanentError("410 gone")),
    fresh,
    { state: "dead", reason: "PERMANENT", failure: 1, outcome: "permanent" },
  ],
  [
    "DEL-4: transient retries with backoff",
    failed(new TransientError("503")),
    fresh,
    { state: "retry", reason: null, failure: 1, outcome: "transient", retryInMs: 750 },
  ],
  [
    "DEL-4: third failure doubles twice",
    failed(new TransientError("503")),
    { ...fresh, failures: 2 },
    { state: "retry", reason: null, failure: 1, outcome: "transient", retryInMs: 3_000 },
  ],
  [
    "DEL-4: a plain Error counts as transient",
    failed(new Error("boom")),
    fresh,
    { state: "retry", reason: null, failure: 1, outcome: "transient", retryInMs: 750 },
  ],
  [
    "DEL-4: the last attempt's failure is dead SEND_FAILED",
    failed(new TransientError("503")),
    lastTry,
    { state: "dead", reason: "SEND_FAILED", failure: 1, outcome: "transient" },
  ],
  [
    "DEL-5: our deadline on an at-most-once reminder is in doubt",
    { kind: "deadline", message: "send did not finish within 30000 ms" },
    atMostOnce,
    { state: "in_doubt", reason: "OUTCOME_UNKNOWN", failure: 1, outcome: "timeout" },
  ],
  [
    "DEL-5: our deadline on an idempotent reminder retries with the same key",
    { kind: "deadline", message: "send did not finish within 30000 ms" },
    fresh,
    { state: "retry", reason: null, failure: 1, outcome: "timeout", retryInMs: 750 },
  ],
  [
    "DEL-5: an aborted send on an at-most-once reminder is in doubt",
    failed(new Error("aborted"), true),
    atMostOnce,
    { state: "in_doubt", reason: "OUTCOME_UNKNOWN", failure: 1, outcome: "timeout" },
  ],
  [
    "DEL-5: maybe delivered (connection lost after writing) on at-most-once is in doubt",
    failed(maybeDelivered),
    atMostOnce,
    { state: "in_doubt", reason: "OUTCOME_UNKNOWN", failure: 1, outcome: "transient" },
  ],
  [
    "DEL-5: a channel's own timeout is a timeout outcome",
    failed(sendTimeout),
    atMostOnce,
    { state: "in_doubt", reason: "OUTCOME_UNKNOWN", failure: 1, outcome: "timeout" },
  ],
  [
    "DEL-5: maybe delivered on an idempotent reminder, last attempt, is dead",
    failed(maybeDelivered),
    lastTry,
    { state: "dead", reason: "SEND_FAILED", failure: 1, outcome: "transient" },
  ],
  [
    "DEL-5: a transient error that was not delivered retries even at most once",
    failed(new TransientError("connection refused")),
    atMostOnce,
    { state: "retry", reason: null, failure: 1, outcome: "transient", retryInMs: 750 },
  ],
  [
    "DEL-5: a permanent error beats an abort",
    failed(new PermanentError("target refused"), true),
    atMostOnce,
    { state: "dead", reason: "PERMANENT", failure: 1, outcome: "permanent" },
  ],
];

describe("DEL-13: a Retry-After under a second backs off instead of spending the budget at once", () => {
  it("DEL-13: Retry-After 0 waits backoffBaseMs doubling per deferral; one of a second or more is honoured as said", () => {
    const after = (retryAfterMs: number, deferrals: number) =>
      decideOutcome(
        failed(new RateLimitedError("slow down", retryAfterMs)),
        { ...fresh, deferrals, firstAttemptAtMs: NOW },
        policy,
        NOW,
      ).runAt?.getTime();
    expect(after(0, 0)).toBe(NOW + 1_000);
    expect(after(0, 3)).toBe(NOW + 8_000);
    expect(after(1, 5)).toBe(NOW + 32_000);
    expect(after(0, 19)).toBe(NOW + HOUR); // capped at rateLimitMaxDelayMs
    expect(after(1_500, 5)).toBe(NOW + 1_500);
  });
});

describe("decideOutcome", () => {
  it.each(cases)("%s", (_name, result, row, expected) => {
    const d = decideOutcome(result, row, policy, NOW);
    expect({
      state: d.state,
      reason: d.reason,
      failure: d.failure,
      deferral: d.deferral,
      outcome: d.outcome,
    }).toEqual({
      state: expected.state,
      reason: expected.reason,
      failure: expected.failure,
      deferral: expected.deferral ?? 0,
      outcome: expected.outcome,
    });
    if (expected.retryInMs === undefined) expect(d.runAt).toBeNull();
    else expect(d.runAt?.getTime()).toBe(NOW + expected.retryInMs);
  });

  it("DEL-4: the backoff is capped at one hour", () => {
    const d = decideOutcome(
      failed(new TransientError("503")),
      { ...fresh, failures: 40, maxAttempts: 100 },
      { ...policy, random: () => 0.999999 },
      NOW,
    );
    expect(d.runAt!.getTime() - NOW).toBeLessThanOrEqual(3_600_000);
    expect(d.runAt!.getTime() - NOW).toBeGreaterThan(3_500_000);
  });

  it("DEL-13: the budget is configurable: with no deferrals allowed the first rate limit is dead, logged at ERROR", () => {
    const d = decideOutcome(
      failed(new RateLimitedError("429 Too Many Requests", 7_000)),
      fresh,
      { ...policy, rateLimitMaxDeferrals: 0 },
      NOW,
    );
    expect(d).toMatchObject({ state: "dead", reason: "RATE_LIMITED", failure: 0, deferral: 0 });
    expect(d.log).toMatchObject({ level: "error", fields: { deferrals: 0 } });
  });

  it("DEL-13: the first try's own rate limit has age zero (no first attempt recorded yet)", () => {
    const d = decideOutcome(
      failed(new RateLimitedError("429", 1_000)),
      fresh,
      { ...policy, rateLimitMaxAgeMs: 1 },
      NOW,
    );
    expect(d).toMatchObject({ state: "retry", deferral: 1 });
  });

  it("keeps the receiver's status and message id; logs nothing on success or rate limit", () => {
    const ok = decideOutcome({ kind: "sent", status: 202, messageId: "abc" }, fresh, policy, NOW);
    expect(ok).toMatchObject({ status: 202, messageId: "abc", log: null, error: null });
    const limited = decideOutcome(failed(new RateLimitedError("429", 1_000)), fresh, policy, NOW);
    expect(limited.log).toBeNull();
    const dead = decideOutcome(failed(new PermanentError("no")), fresh, policy, NOW);
    expect(dead.log?.level).toBe("error");
  });
});
