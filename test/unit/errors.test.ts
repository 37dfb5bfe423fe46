import { describe, expect, it } from "vitest";
import { toErrorReply } from "../../src/api/errors.js";
import {
  isLockTimeout,
  isRetryableDatabaseError,
  ResourceBusyError,
  ValidationError,
} from "../../src/errors/index.js";
import { isPlainRead, lockedRelation } from "../../src/store/lock-timeout.js";

describe("errors", () => {
  it("ValidationError names each field and value", () => {
    const err = new ValidationError([
      { field: "reminders.0.offset", message: "not an ISO 8601 duration", value: "15m" },
    ]);
    expect(err.code).toBe("VALIDATION_FAILED");
    expect(err.message).toContain("reminders.0.offset");
    expect(err.message).toContain('"15m"');
  });
  it("OPS-8: connection errors are retryable, constraint violations are not", () => {
    expect(isRetryableDatabaseError({ code: "ECONNREFUSED" })).toBe(true);
    expect(isRetryableDatabaseError({ code: "08006" })).toBe(true);
    expect(isRetryableDatabaseError({ code: "57P01" })).toBe(true);
    expect(isRetryableDatabaseError({ code: "23505" })).toBe(false);
    expect(isRetryableDatabaseError(new Error("syntax"))).toBe(false);
  });
  it("OPS-8: a lock timeout (55P03) is told apart, and its table read from the server's context", () => {
    expect(isLockTimeout({ code: "55P03" })).toBe(true);
    expect(isLockTimeout({ code: "40P01" })).toBe(false);
    expect(isLockTimeout(null)).toBe(false);
    expect(
      lockedRelation({ where: 'while updating tuple (0,1) in relation "punctual_schedules"' }),
    ).toBe("punctual_schedules");
    expect(lockedRelation({ code: "55P03" })).toBeNull();
  });
  it("OPS-8: RESOURCE_BUSY is a 503 with Retry-After in whole seconds, never a 500", () => {
    const busy = new ResourceBusyError("punctual_deliveries", 2_500);
    expect(busy.code).toBe("RESOURCE_BUSY");
    expect(busy.message).toContain("punctual_deliveries");
    expect(busy.message).toContain("2500 ms");
    const reply = toErrorReply(busy);
    expect(reply).toMatchObject({ status: 503, internal: false, retryAfterSeconds: 3 });
    expect(reply.body.error.code).toBe("RESOURCE_BUSY");
    expect(toErrorReply(new ResourceBusyError(null, 200)).retryAfterSeconds).toBe(1);
  });
  it("OPS-8: only a plain read goes without the lock timeout; a write or a locking read never does", () => {
    expect(isPlainRead("select * from punctual_schedules where id = $1")).toBe(true);
    expect(isPlainRead("  -- header\nwith x as (select 1) select * from x")).toBe(true);
    expect(isPlainRead("select updated_at from punctual_schedules")).toBe(true);
    expect(isPlainRead("update punctual_schedules set state = 'paused'")).toBe(false);
    expect(isPlainRead("with d as (delete from t returning id) select * from d")).toBe(false);
    expect(isPlainRead("select id from punctual_schedules for update")).toBe(false);
    expect(isPlainRead("select id from t for no key update of t skip locked")).toBe(false);
    expect(isPlainRead("select id from t for key share")).toBe(false);
    expect(isPlainRead("select pg_advisory_xact_lock(1)")).toBe(false);
    expect(isPlainRead("insert into t values (1)")).toBe(false);
  });
});
