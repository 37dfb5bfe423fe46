/** Every numeric input field has bounds: min/max, integers where meant, finite (API-1, DEL-13, OPS-5). */
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { parseInput } from "../../../src/app/input.js";
import { MAX_HORIZON_MS, MAX_TIMER_MS, schedulerOptionsSchema } from "../../../src/config/index.js";
import { createScheduleSchema, listDeliveriesQuerySchema } from "../../../src/contracts/index.js";
import { MAX_BULK_LIMIT, bulkRedriveInputSchema } from "../../../src/contracts/operator.js";
import { rateLimitInputSchema } from "../../../src/contracts/rate-limits.js";
import { ValidationError } from "../../../src/errors/index.js";

const schedule = { dtstart: "2027-01-04T09:00:00", reminders: [{ channel: "log" }] };

type Row = [string, z.ZodType, (v: number) => unknown, string, number, number, boolean];
const rows: Row[] = [
  [
    "graceMs",
    createScheduleSchema,
    (v) => ({ ...schedule, graceMs: v }),
    "graceMs",
    0,
    604_800_000,
    true,
  ],
  [
    "catchUp.windowMs",
    createScheduleSchema,
    (v) => ({ ...schedule, catchUp: { windowMs: v } }),
    "catchUp.windowMs",
    0,
    31_622_400_000,
    true,
  ],
  [
    "catchUp.paceMs",
    createScheduleSchema,
    (v) => ({ ...schedule, catchUp: { paceMs: v } }),
    "catchUp.paceMs",
    0,
    86_400_000,
    true,
  ],
  [
    "maxAttempts",
    createScheduleSchema,
    (v) => ({ ...schedule, reminders: [{ channel: "log", maxAttempts: v }] }),
    "reminders.0.maxAttempts",
    1,
    100,
    true,
  ],
  [
    "ratePerSecond",
    rateLimitInputSchema,
    (v) => ({ ratePerSecond: v }),
    "ratePerSecond",
    0.001,
    100_000,
    false,
  ],
  [
    "burst",
    rateLimitInputSchema,
    (v) => ({ ratePerSecond: 1, burst: v }),
    "burst",
    1,
    1_000_000,
    true,
  ],
  [
    "concurrency",
    rateLimitInputSchema,
    (v) => ({ ratePerSecond: 1, concurrency: v }),
    "concurrency",
    1,
    100_000,
    true,
  ],
  ["bulk limit", bulkRedriveInputSchema, (v) => ({ limit: v }), "limit", 1, MAX_BULK_LIMIT, true],
  ["deliveries limit", listDeliveriesQuerySchema, (v) => ({ limit: v }), "limit", 1, 1_000, true],
  [
    "leaseMs",
    schedulerOptionsSchema,
    (v) => ({ leaseMs: v }),
    "leaseMs",
    1_000,
    MAX_TIMER_MS,
    true,
  ],
  ["pollMs", schedulerOptionsSchema, (v) => ({ pollMs: v }), "pollMs", 10, MAX_TIMER_MS, true],
  [
    "planAheadMs",
    schedulerOptionsSchema,
    (v) => ({ planAheadMs: v }),
    "planAheadMs",
    60_000,
    MAX_HORIZON_MS,
    true,
  ],
  [
    "backoffCapMs",
    schedulerOptionsSchema,
    (v) => ({ backoffCapMs: v }),
    "backoffCapMs",
    1,
    MAX_TIMER_MS,
    true,
  ],
];

describe("numeric input bounds", () => {
  it.each(rows)(
    "API-1: %s: outside [min, max], fractional or not finite is refused naming the field",
    (_n, schema, wrap, field, min, max, integer) => {
      const bad = [
        min - (integer ? 1 : min / 2),
        max + 1,
        Number.NaN,
        Infinity,
        -Infinity,
        5e-324 + (min > 0 ? 0 : -1),
      ];
      if (integer) bad.push(min + 0.5);
      for (const v of bad) {
        let caught: unknown;
        try {
          parseInput(schema, wrap(v));
        } catch (err) {
          caught = err;
        }
        expect(caught, `${field} = ${v}`).toBeInstanceOf(ValidationError);
        const issue = (caught as ValidationError).issues[0];
        expect(issue?.field).toBe(field);
        if (Number.isFinite(v)) expect(issue?.value).toBe(v);
      }
      expect(() => parseInput(schema, wrap(min))).not.toThrow();
      expect(() => parseInput(schema, wrap(max))).not.toThrow();
    },
  );
});
