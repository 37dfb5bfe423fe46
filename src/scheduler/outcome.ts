/**
 * The outcome decision (DEL-4, DEL-5, DEL-13): what one send's result means for its
 * delivery. One pure function, table-tested (test/unit/scheduler/outcome.test.ts): the send
 * result, the row's attempt and deferral budgets and lost-lease policy, and the retry
 * policy go in; the next state, its time, the reason and what to log come out. Nothing here reads a clock or a
 * database; the executor passes "now" (database clock, ms) in.
 */
import { backoffMs } from "../domain/index.js";
import { PermanentError, RateLimitedError, TransientError } from "../errors/index.js";
import type { SettleInput } from "../store/deliveries/index.js";

/** What came back from `channel.send`, as the executor saw it. */
export type SendResult =
  | { kind: "sent"; status: number | null; messageId: string | null }
  /** The executor's own deadline (the channel's send timeout) fired first. */
  | { kind: "deadline"; message: string }
  /** `send` threw (or rejected); `aborted` when our abort signal had fired. */
  | { kind: "failed"; error: unknown; aborted: boolean };

/** The facts of the row that the decision depends on. */
export interface OutcomeRow {
  /** Real failures before this attempt (DEL-4). */
  failures: number;
  /** Attempt budget: dead after this many failures. */
  maxAttempts: number;
  /** What an unknown outcome means: retry with the same key, or in doubt (DEL-6). */
  onLostLease: "retry" | "in_doubt";
  /** Retry-After deferrals granted before this try (DEL-13). */
  deferrals: number;
  /**
   * When the row's first try began, epoch ms; null when none has settled yet (this try is
   * the first). The deferral budget's age counts from it (DEL-13).
   */
  firstAttemptAtMs: number | null;
}

/**
 * Retry policy (DEL-4): delay min(base · 2^(n−1), cap) with jitter; and the budget of
 * Retry-After deferrals (DEL-13), from the scheduler options of the same names.
 */
export interface RetryPolicy {
  backoffBaseMs: number;
  backoffCapMs: number;
  /** Most Retry-After deferrals of one delivery; the next rate limit is dead `RATE_LIMITED`. */
  rateLimitMaxDeferrals: number;
  /** Longest a delivery is deferred, ms since its first try; past it a rate limit is dead `RATE_LIMITED`. */
  rateLimitMaxAgeMs: number;
  /** Longest Retry-After honoured, ms; a longer one is shortened to it. */
  rateLimitMaxDelayMs: number;
  /** Jitter source in [0, 1); `Math.random` by default. */
  random?: () => number;
}

/** The settle fields of one outcome, without the row's id, attempt and start time. */
export type SettleFields = Omit<SettleInput, "id" | "attempt" | "startedAt">;

/** A decision, and the one log line it deserves (none for a plain success or a 429). */
export interface Decision extends SettleFields {
  log: { level: "warn" | "error"; message: string; fields: Record<string, unknown> } | null;
}

function statusOf(err: unknown): number | null {
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === "number" ? status : null;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function retryOrDead(
  row: OutcomeRow,
  policy: RetryPolicy,
  nowMs: number,
  message: string,
  outcome: "transient" | "timeout",
  status: number | null,
): Decision {
  const failures = row.failures + 1;
  const base = {
    error: message,
    failure: 1 as const,
    deferral: 0 as const,
    outcome,
    status,
    messageId: null,
  };
  if (failures >= row.maxAttempts) {
    return {
      ...base,
      state: "dead",
      runAt: null,
      reason: "SEND_FAILED",
      log: {
        level: "error",
        message: "delivery failed on its last attempt: dead (SEND_FAILED)",
        fields: { attempts: failures, error: message },
      },
    };
  }
  const delay = backoffMs(failures, {
    baseMs: policy.backoffBaseMs,
    capMs: policy.backoffCapMs,
    ...(policy.random ? { random: policy.random } : {}),
  });
  return {
    ...base,
    state: "retry",
    runAt: new Date(nowMs + delay),
    reason: null,
    log: {
      level: "warn",
      message: "send failed; will retry",
      fields: { failures, retryInMs: delay, error: message },
    },
  };
}

/** The send may or may not have happened (DEL-5): retried only where that is safe. */
function unknownOutcome(
  row: OutcomeRow,
  policy: RetryPolicy,
  nowMs: number,
  outcome: "timeout" | "transient",
  message: string,
): Decision {
  if (row.onLostLease === "in_doubt") {
    return {
      state: "in_doubt",
      runAt: null,
      reason: "OUTCOME_UNKNOWN",
      error: message,
      failure: 1,
      deferral: 0,
      outcome,
      status: null,
      messageId: null,
      log: {
        level: "error",
        message: "send outcome unknown on a channel without idempotency: delivery is in doubt",
        fields: { error: message },
      },
    };
  }
  return retryOrDead(row, policy, nowMs, message, outcome, null);
}

/**
 * DEL-13: a receiver's "try again later" spends no attempt: the try is a deferral, retried
 * after `retryAfterMs` shortened to `rateLimitMaxDelayMs`. The deferrals have their own
 * budget so a receiver that always answers so cannot hold a delivery forever: once
 * `rateLimitMaxDeferrals` were granted, or the first try began `rateLimitMaxAgeMs` or more
 * ago, the delivery is dead with reason `RATE_LIMITED` (logged at ERROR).
 */
/** The shortest Retry-After taken as said (ms); shorter ones back off ({@link rateLimited}). */
const MIN_HONOURED_RETRY_AFTER_MS = 1_000;

function rateLimited(
  err: RateLimitedError,
  row: OutcomeRow,
  policy: RetryPolicy,
  nowMs: number,
  message: string,
): Decision {
  const base = {
    error: message,
    failure: 0 as const,
    outcome: "rate_limited" as const,
    status: statusOf(err),
    messageId: null,
  };
  const ageMs = nowMs - (row.firstAttemptAtMs ?? nowMs);
  if (row.deferrals >= policy.rateLimitMaxDeferrals || ageMs >= policy.rateLimitMaxAgeMs) {
    return {
      ...base,
      deferral: 0,
      state: "dead",
      runAt: null,
      reason: "RATE_LIMITED",
      log: {
        level: "error",
        message: "receiver still rate limits after the deferral budget: dead (RATE_LIMITED)",
        fields: { deferrals: row.deferrals, ageMs, error: message },
      },
    };
  }
  // A Retry-After under a second (0, a past date, a negative or fractional value) says only
  // "soon": honoured as is it would spend the whole budget in well under a second. Such a
  // deferral backs off instead, from backoffBaseMs doubling per deferral granted.
  const asked = Math.max(err.retryAfterMs, 0);
  const floor =
    asked >= MIN_HONOURED_RETRY_AFTER_MS
      ? 0
      : policy.backoffBaseMs * 2 ** Math.min(row.deferrals, 30);
  const delay = Math.min(Math.max(asked, floor), policy.rateLimitMaxDelayMs);
  return {
    ...base,
    deferral: 1,
    state: "retry",
    runAt: new Date(nowMs + delay),
    reason: null,
    log: null,
  };
}

/**
 * Decides the next state of a delivery from its send result. One failure costs at most
 * one attempt (DEL-4), whatever layer noticed it:
 *
 * | result                                   | next state                                   |
 * |------------------------------------------|----------------------------------------------|
 * | sent                                     | `sent`                                       |
 * | `RateLimitedError`, within its budget    | `retry` after `retryAfterMs` (capped), no attempt spent (DEL-13) |
 * | `RateLimitedError`, budget spent         | `dead`, reason `RATE_LIMITED` (DEL-13)       |
 * | `PermanentError`                         | `dead`, reason `PERMANENT` (DEL-5)           |
 * | deadline, abort, `maybeDelivered`        | unknown: `in_doubt` (at most once) or retry/dead (DEL-5) |
 * | any other error                          | `retry` with backoff, `dead` `SEND_FAILED` on the last attempt (DEL-4) |
 *
 * @param nowMs the database clock's "now", epoch ms, from which retry times count.
 */
export function decideOutcome(
  result: SendResult,
  row: OutcomeRow,
  policy: RetryPolicy,
  nowMs: number,
): Decision {
  if (result.kind === "sent") {
    return {
      state: "sent",
      runAt: null,
      reason: null,
      error: null,
      failure: 0,
      deferral: 0,
      outcome: "sent",
      status: result.status,
      messageId: result.messageId,
      log: null,
    };
  }
  if (result.kind === "deadline") {
    return unknownOutcome(row, policy, nowMs, "timeout", result.message);
  }
  const err = result.error;
  const message = messageOf(err);
  if (err instanceof RateLimitedError) return rateLimited(err, row, policy, nowMs, message);
  if (err instanceof PermanentError) {
    return {
      state: "dead",
      runAt: null,
      reason: "PERMANENT",
      error: message,
      failure: 1,
      deferral: 0,
      outcome: "permanent",
      status: statusOf(err),
      messageId: null,
      log: {
        level: "error",
        message: "permanent failure: delivery is dead",
        fields: { error: message, code: err.code },
      },
    };
  }
  if (result.aborted) return unknownOutcome(row, policy, nowMs, "timeout", message);
  // DEL-5: a timeout or a connection lost after the request left may have delivered it.
  if (err instanceof TransientError && err.maybeDelivered) {
    return unknownOutcome(
      row,
      policy,
      nowMs,
      err.code === "SEND_TIMEOUT" ? "timeout" : "transient",
      message,
    );
  }
  return retryOrDead(row, policy, nowMs, message, "transient", statusOf(err));
}
