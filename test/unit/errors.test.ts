import { describe, expect, it } from "vitest";
import { isRetryableDatabaseError, ValidationError } from "../../src/errors/index.js";

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
});
