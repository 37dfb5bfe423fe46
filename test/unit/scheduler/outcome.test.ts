/**
 * The outcome decision as a table (DEL-4, DEL-5, DEL-13): each row is one send result on
 * one delivery, and the state, time, reason and attempt cost it must lead to.
 */
import { describe, expect, it } from "vitest";
import { PermanentError, RateLimitedError, TransientError } from "../../../src/errors/index.js";
import { decideOutcome, type OutcomeRow, type SendResult } from "../../../src/scheduler/outcome.js";

const NOW = Date.parse("2027-01-04T08:00:00Z");
const policy = { backoffBaseMs: 1_000, backoffCapMs: 3_600_000, random: () => 0.5 };
const fresh: OutcomeRow = { failures: 0, maxAttempts: 5, onLostLease: "retry" };
const atMostOnce: OutcomeRow = { failures: 0, maxAttempts: 5, onLostLease: "in_doubt" };
const lastTry: OutcomeRow = { failures: 4, maxAttempts: 5, onLostLease: "retry" };

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
    { state: "retry", reason: null, failure: 0, outcome: "rate_limited", retryInMs: 7_000 },
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

describe("decideOutcome", () => {
  it.each(cases)("%s", (_name, result, row, expected) => {
    const d = decideOutcome(result, row, policy, NOW);
    expect({
      state: d.state,
      reason: d.reason,
      failure: d.failure,
      outcome: d.outcome,
    }).toEqual({
      state: expected.state,
      reason: expected.reason,
      failure: expected.failure,
      outcome: expected.outcome,
    });
    if (expected.retryInMs === undefined) expect(d.runAt).toBeNull();
    else expect(d.runAt?.getTime()).toBe(NOW + expected.retryInMs);
  });

  it("DEL-4: the backoff is capped at one hour", () => {
    const d = decideOutcome(
      failed(new TransientError("503")),
      { failures: 40, maxAttempts: 100, onLostLease: "retry" },
      { backoffBaseMs: 1_000, backoffCapMs: 3_600_000, random: () => 0.999999 },
      NOW,
    );
    expect(d.runAt!.getTime() - NOW).toBeLessThanOrEqual(3_600_000);
    expect(d.runAt!.getTime() - NOW).toBeGreaterThan(3_500_000);
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
