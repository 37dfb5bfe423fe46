/**
 * The pure parts of schedules for recipients: the verdict at send (API-11, API-13) and
 * the quiet-hours deferral of a recipient's delivery (API-13, DEL-15).
 */
import { describe, expect, it } from "vitest";
import { recipientDeferral } from "../../../src/scheduler/audience.js";
import { judgeRecipient } from "../../../src/scheduler/recipient-gate.js";

const read = {
  tzid: "Europe/Berlin",
  targets: { email: { to: "ann@example.com" } },
  attributes: { name: "Ann" },
  preferences: {},
  member: true,
  category: "digest",
  priority: null,
} as const;
const delivery = { recipientId: "ann", channel: "email", target: {} };

describe("API-11 / API-13: the verdict at send", () => {
  it("API-11: a reminder without a target of its own goes to the recipient's target for its channel", () => {
    expect(judgeRecipient(read, delivery)).toEqual({
      action: "send",
      target: { to: "ann@example.com" },
      recipient: { id: "ann", tzid: "Europe/Berlin", attributes: { name: "Ann" } },
      bypassed: null,
      category: "digest",
    });
  });

  it("API-11: the reminder's own target wins over the recipient's", () => {
    const own = { to: "team@example.com" };
    expect(judgeRecipient(read, { ...delivery, target: own })).toMatchObject({ target: own });
  });

  it("API-11: no target for the channel is NO_TARGET", () => {
    expect(judgeRecipient(read, { ...delivery, channel: "slack" })).toEqual({
      action: "skip",
      reason: "NO_TARGET",
    });
  });

  it("API-13: an opt-out of the channel or of the category is OPTED_OUT", () => {
    const byChannel = { ...read, preferences: { optOut: { channels: ["email"] } } };
    const byCategory = { ...read, preferences: { optOut: { categories: ["digest"] } } };
    const other = { ...read, preferences: { optOut: { categories: ["news"] } } };
    expect(judgeRecipient(byChannel, delivery)).toEqual({ action: "skip", reason: "OPTED_OUT" });
    expect(judgeRecipient(byCategory, delivery)).toEqual({ action: "skip", reason: "OPTED_OUT" });
    expect(judgeRecipient(other, delivery)).toMatchObject({ action: "send", bypassed: null });
  });

  it("API-13: a critical reminder goes past an opt-out and says so", () => {
    const out = {
      ...read,
      priority: "critical" as const,
      preferences: { optOut: { channels: ["email"] } },
    };
    expect(judgeRecipient(out, delivery)).toMatchObject({ action: "send", bypassed: "OPTED_OUT" });
  });

  it("API-12: a recipient off the schedule or out of the registry is recipient_removed", () => {
    expect(judgeRecipient({ ...read, member: false }, delivery)).toEqual({
      action: "skip",
      reason: "recipient_removed",
    });
    expect(
      judgeRecipient(
        { ...read, tzid: null, targets: null, attributes: null, preferences: null },
        delivery,
      ),
    ).toEqual({ action: "skip", reason: "recipient_removed" });
  });
});

describe("API-13: a recipient's quiet hours", () => {
  const tokyoNights = { tzid: "Asia/Tokyo", start: "22:00", end: "07:00" };
  const due = Date.parse("2027-01-04T14:00:00Z"); // 23:00 in Tokyo

  it("API-13: a delivery due in the recipient's window waits for its end, in the recipient's zone", () => {
    expect(recipientDeferral({ quiet_hours: null, priority: null }, tokyoNights, due)).toEqual({
      deferredUntil: new Date("2027-01-04T22:00:00Z"),
      bypassed: null,
    });
  });

  it("API-13: the reminder's window and the recipient's, chained: an end inside the other window waits on", () => {
    // Due 12:00Z: the reminder's window (12:00–13:00 UTC) holds it until 13:00, which is
    // inside the recipient's (12:30–14:00 UTC), so it waits until 14:00.
    const reminder = { quiet_hours: { tzid: "UTC", start: "12:00", end: "13:00" }, priority: null };
    const recipient = { tzid: "UTC", start: "12:30", end: "14:00" };
    expect(recipientDeferral(reminder, recipient, Date.parse("2027-01-04T12:00:00Z"))).toEqual({
      deferredUntil: new Date("2027-01-04T14:00:00Z"),
      bypassed: null,
    });
  });

  it("API-13: a critical reminder is not deferred and records QUIET_HOURS", () => {
    expect(
      recipientDeferral({ quiet_hours: null, priority: "critical" }, tokyoNights, due),
    ).toEqual({
      deferredUntil: null,
      bypassed: "QUIET_HOURS",
    });
  });

  it("API-13: outside every window nothing is deferred", () => {
    const noon = Date.parse("2027-01-04T03:00:00Z"); // 12:00 in Tokyo
    expect(recipientDeferral({ quiet_hours: null, priority: null }, tokyoNights, noon)).toEqual({
      deferredUntil: null,
      bypassed: null,
    });
  });
});
