/**
 * `punctual deliveries show` reads a redriven delivery's attempts per round (DEL-12).
 */
import { describe, expect, it } from "vitest";
import type { DeliveryView } from "../../../src/contracts/index.js";
import { deliveryText } from "../../../src/cli/remote.js";

const delivery = (fields: Partial<DeliveryView>): DeliveryView => ({
  id: 7,
  deliveryKey: "dk_0123",
  scheduleId: "0b6f3c1e-2a4d-4c8e-9f00-000000000001",
  reminderKey: "r",
  occurrenceAt: "2027-01-04T08:00:00.000Z",
  dueAt: "2027-01-04T08:00:00.000Z",
  runAt: "2027-01-04T08:00:00.000Z",
  state: "retry",
  attempt: 1,
  round: 1,
  failures: 1,
  maxAttempts: 3,
  deferrals: 0,
  channel: "webhook",
  leaseOwner: null,
  leaseExpiresAt: null,
  sentAt: null,
  finishedAt: null,
  reason: null,
  lastError: "503",
  late: false,
  deferredUntil: null,
  deferredReason: null,
  createdAt: "2027-01-04T07:00:00.000Z",
  updatedAt: "2027-01-04T08:00:00.000Z",
  ...fields,
});

describe("deliveries show", () => {
  it("DEL-12: a redriven delivery reads attempt 1 of 3, round 2", () => {
    expect(deliveryText(delivery({ round: 2 }))).toMatch(/attempt:\s+1 of 3, round 2 \(1 failed\)/);
  });
  it("DEL-12: a delivery never redriven names no round", () => {
    const text = deliveryText(delivery({ deferrals: 2 }));
    expect(text).toMatch(/attempt:\s+1 of 3 \(1 failed, 2 deferred by Retry-After\)/);
    expect(text).not.toMatch(/round/);
  });
});
