/**
 * Pure pieces of the core: backoff (DEL-4), delivery key (DEL-1), transitions, streak
 * logging (OPS-2), configuration (OPS-5), environment variables, TestClock (OPS-9).
 */
import { describe, expect, it } from "vitest";
import { TestClock } from "../../src/clock/index.js";
import { configFromEnv, mergeConfig } from "../../src/config/env.js";
import { resolveConfig } from "../../src/config/index.js";
import { backoffMs, canTransition, deliveryKey } from "../../src/domain/index.js";
import { ConfigError } from "../../src/errors/index.js";
import { StreakLogger } from "../../src/observability/error-log.js";
import { memoryLogger } from "../../src/observability/logger.js";

describe("backoff", () => {
  it("DEL-4: min(base·2^(n−1), cap) with jitter in [delay/2, delay]", () => {
    const opts = { baseMs: 1_000, capMs: 3_600_000 };
    expect(backoffMs(1, { ...opts, random: () => 0 })).toBe(500);
    expect(backoffMs(1, { ...opts, random: () => 1 })).toBe(1_000);
    expect(backoffMs(4, { ...opts, random: () => 1 })).toBe(8_000);
    expect(backoffMs(30, { ...opts, random: () => 1 })).toBe(3_600_000);
    expect(backoffMs(30, { ...opts, random: () => 0 })).toBe(1_800_000);
  });
});

describe("delivery key", () => {
  it("DEL-1: stable for (schedule, reminder, occurrence) and different when any part differs", () => {
    const at = new Date("2027-01-04T08:00:00Z");
    const k = deliveryKey("s1", "r", at);
    expect(k).toMatch(/^dk_[0-9a-f]{32}$/);
    expect(deliveryKey("s1", "r", new Date(at.getTime()))).toBe(k);
    expect(deliveryKey("s2", "r", at)).not.toBe(k);
    expect(deliveryKey("s1", "r2", at)).not.toBe(k);
    expect(deliveryKey("s1", "r", new Date(at.getTime() + 1_000))).not.toBe(k);
  });
  it("DEL-2: only legal transitions: nothing leaves sent; claimed settles; dead can be redriven", () => {
    expect(canTransition("pending", "claimed")).toBe(true);
    expect(canTransition("claimed", "sent")).toBe(true);
    expect(canTransition("sent", "pending")).toBe(false);
    expect(canTransition("sent", "claimed")).toBe(false);
    expect(canTransition("pending", "sent")).toBe(false);
    expect(canTransition("dead", "pending")).toBe(true);
  });
});

describe("streak logging", () => {
  it("OPS-2: first failure with stack, then one line every N, then a recovery line", () => {
    const { logger, lines } = memoryLogger();
    const streak = new StreakLogger(logger, "plan", 3);
    for (let i = 0; i < 7; i++) streak.failure(new Error(`boom ${i}`));
    streak.success();
    streak.success();
    const errors = lines.filter((l) => l.level === "error");
    expect(errors).toHaveLength(3); // failures 1, 4, 7
    expect((errors[0]!.err as { stack?: string }).stack).toContain("boom 0");
    expect(errors[1]!.failures).toBe(4);
    expect(errors[2]!.failures).toBe(7);
    const recovered = lines.filter((l) => l.level === "info");
    expect(recovered).toHaveLength(1);
    expect(recovered[0]!.failures).toBe(7);
  });
});

describe("configuration", () => {
  it("OPS-5: defaults, frozen, units in names", () => {
    const config = resolveConfig({});
    expect(config.scheduler.leaseMs).toBe(60_000);
    expect(config.scheduler.maxAttempts).toBe(5);
    expect(config.api).toMatchObject({ host: "127.0.0.1", port: 8080 });
    expect(Object.isFrozen(config.scheduler)).toBe(true);
  });
  it("OPS-5: unknown keys are refused with a suggestion; bad values name the path", () => {
    expect(() => resolveConfig({ scheduler: { leaseMS: 5 } } as never)).toThrow(
      /leaseMS: unknown option \(did you mean "leaseMs"\?\)/,
    );
    expect(() => resolveConfig({ scheduler: { leaseMs: 10 } })).toThrow(ConfigError);
    // DEL-16: the send timeout is independent of the lease (renewed while a send runs).
    expect(
      resolveConfig({ scheduler: { leaseMs: 5_000, sendTimeoutMs: 45_000 } }).scheduler
        .sendTimeoutMs,
    ).toBe(45_000);
  });
  it("OPS-5: environment variables map onto options and bad ones name the variable", () => {
    const input = configFromEnv({
      PUNCTUAL_LEASE_MS: "3000",
      PUNCTUAL_ALLOW_PRIVATE_TARGETS: "true",
      PUNCTUAL_PORT: "9000",
    });
    expect(input).toMatchObject({
      scheduler: { leaseMs: 3_000 },
      allowPrivateTargets: true,
      api: { port: 9_000 },
    });
    expect(() => configFromEnv({ PUNCTUAL_LEASE_MS: "3s" })).toThrow(
      /PUNCTUAL_LEASE_MS must be a whole number/,
    );
    expect(() => configFromEnv({ PUNCTUAL_ALLOW_PRIVATE_TARGETS: "maybe" })).toThrow(
      /true or false/,
    );
    expect(mergeConfig({ scheduler: { leaseMs: 1 } }, { scheduler: { pollMs: 2 } })).toEqual({
      scheduler: { leaseMs: 1, pollMs: 2 },
    });
  });
  it("CH-7: the circuit settings come from PUNCTUAL_CIRCUIT_*; a value out of range is refused naming the variable and the value", () => {
    const config = resolveConfig(
      configFromEnv({
        PUNCTUAL_CIRCUIT_FAILURES: "3",
        PUNCTUAL_CIRCUIT_BACKOFF_MS: "1500",
        PUNCTUAL_CIRCUIT_MAX_BACKOFF_MS: "60000",
      }),
    );
    expect(config.scheduler).toMatchObject({
      circuitFailures: 3,
      circuitBackoffMs: 1_500,
      circuitMaxBackoffMs: 60_000,
    });
    expect(() => configFromEnv({ PUNCTUAL_CIRCUIT_FAILURES: "0" })).toThrow(
      'PUNCTUAL_CIRCUIT_FAILURES is out of range (at least 1) (got "0")',
    );
    expect(() => configFromEnv({ PUNCTUAL_CIRCUIT_FAILURES: "1001" })).toThrow(
      /PUNCTUAL_CIRCUIT_FAILURES is out of range \(at most 1000\) \(got "1001"\)/,
    );
    expect(() => configFromEnv({ PUNCTUAL_CIRCUIT_BACKOFF_MS: "5" })).toThrow(
      /PUNCTUAL_CIRCUIT_BACKOFF_MS .*"5"/,
    );
    expect(() => configFromEnv({ PUNCTUAL_CIRCUIT_MAX_BACKOFF_MS: "10m" })).toThrow(
      /PUNCTUAL_CIRCUIT_MAX_BACKOFF_MS must be a whole number \(got "10m"\)/,
    );
  });
  it("OPS-8: the lock timeout of operations defaults to 5 s, comes from PUNCTUAL_LOCK_TIMEOUT_MS, 0 turns it off", () => {
    expect(resolveConfig(configFromEnv({})).lockTimeoutMs).toBe(5_000);
    expect(resolveConfig(configFromEnv({ PUNCTUAL_LOCK_TIMEOUT_MS: "250" })).lockTimeoutMs).toBe(
      250,
    );
    expect(resolveConfig(configFromEnv({ PUNCTUAL_LOCK_TIMEOUT_MS: "0" })).lockTimeoutMs).toBe(0);
    expect(() => configFromEnv({ PUNCTUAL_LOCK_TIMEOUT_MS: "5s" })).toThrow(
      /PUNCTUAL_LOCK_TIMEOUT_MS must be a whole number \(got "5s"\)/,
    );
    expect(() => resolveConfig({ lockTimeoutMs: 3_600_001 })).toThrow(/lockTimeoutMs/);
  });
});

describe("TestClock", () => {
  it("OPS-9: timers fire only when the test moves time, in order", () => {
    const clock = new TestClock("2027-01-04T08:00:00Z");
    const fired: string[] = [];
    clock.setTimer(2_000, () => fired.push("b"));
    clock.setTimer(1_000, () => fired.push("a"));
    const cancel = clock.setTimer(1_500, () => fired.push("x"));
    cancel();
    clock.advance(999);
    expect(fired).toEqual([]);
    clock.advance(1_001);
    expect(fired).toEqual(["a", "b"]);
    expect(clock.sqlNow().toISOString()).toBe("2027-01-04T08:00:02.000Z");
    expect(() => clock.set("2027-01-04T07:00:00Z")).toThrow(/backwards/);
  });
});

describe("validation messages", () => {
  it("API-1: a long refused value is cut inside its quotes with an ellipsis; the issue keeps it whole", async () => {
    const { ValidationError } = await import("../../src/errors/index.js");
    const long = "x".repeat(300);
    const err = new ValidationError({ field: "cursor", message: "is not a cursor", value: long });
    expect(err.message).toBe(`cursor: is not a cursor (got "${"x".repeat(117)}…")`);
    expect(err.issues[0]?.value).toBe(long);
    const short = new ValidationError({ field: "limit", message: "too large", value: 5000 });
    expect(short.message).toBe("limit: too large (got 5000)");
  });
});
