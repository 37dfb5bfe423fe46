import { describe, expect, it } from "vitest";
import { rateLimitInputSchema } from "../../../src/contracts/rate-limits.js";

describe("rate limit bounds (DEL-13)", () => {
  it.each([5e-324, 0, -1, 0.0009])(
    "DEL-13: ratePerSecond %s is refused naming the field",
    (rate) => {
      const r = rateLimitInputSchema.safeParse({ ratePerSecond: rate });
      expect(r.success).toBe(false);
      expect(r.error?.issues[0]?.path).toEqual(["ratePerSecond"]);
    },
  );

  it("DEL-13: 0.001 per second and 100,000 per second are accepted", () => {
    expect(rateLimitInputSchema.safeParse({ ratePerSecond: 0.001 }).success).toBe(true);
    expect(rateLimitInputSchema.safeParse({ ratePerSecond: 100_000 }).success).toBe(true);
  });
});
