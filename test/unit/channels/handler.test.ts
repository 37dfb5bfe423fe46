import { describe, expect, it } from "vitest";
import { handlerChannel, type ChannelDelivery } from "../../../src/channels/index.js";
import { TransientError, ValidationError } from "../../../src/errors/index.js";

const delivery: ChannelDelivery = {
  deliveryKey: "dk_h",
  scheduleId: "s1",
  reminderKey: "r",
  occurrenceAt: new Date("2027-01-04T08:00:00Z"),
  dueAt: new Date("2027-01-04T08:00:00Z"),
  attempt: 1,
  late: false,
  payload: null,
  target: {},
};

describe("handler channels (CH-4)", () => {
  it("CH-4: declares what it was given; passes the key and the signal; returns the function's result", async () => {
    const controller = new AbortController();
    let seen: { key: string; signal: AbortSignal } | null = null;
    const ch = handlerChannel(
      "crm",
      (_d, { idempotencyKey, signal }) => {
        seen = { key: idempotencyKey, signal };
        return { messageId: "crm-1" };
      },
      { idempotent: true, timeoutMs: 5_000 },
    );
    expect([ch.name, ch.idempotent, ch.timeoutMs]).toEqual(["crm", true, 5_000]);
    const result = await ch.send(delivery, {
      idempotencyKey: "dk_h",
      signal: controller.signal,
      timeoutMs: 5_000,
    });
    expect(result).toEqual({ messageId: "crm-1" });
    expect(seen!.key).toBe("dk_h");
    expect(seen!.signal).toBe(controller.signal);
  });

  it("CH-4: never calls the function once the signal has fired", async () => {
    let calls = 0;
    const ch = handlerChannel("crm", () => void calls++, { idempotent: false });
    const controller = new AbortController();
    controller.abort(new Error("lease ending"));
    await expect(
      ch.send(delivery, { idempotencyKey: "dk_h", signal: controller.signal, timeoutMs: 1_000 }),
    ).rejects.toBeInstanceOf(TransientError);
    expect(calls).toBe(0);
  });

  it("CH-4: refuses a bad name or budget; validates targets with the given check", () => {
    expect(() => handlerChannel("Bad Name", () => {}, { idempotent: true })).toThrow(
      ValidationError,
    );
    expect(() => handlerChannel("ok", () => {}, { idempotent: true, timeoutMs: 0 })).toThrow(
      /timeoutMs/,
    );
    const ch = handlerChannel("ok", () => {}, {
      idempotent: true,
      validateTarget: (t) => {
        if (!(t as { account?: unknown })?.account)
          throw new ValidationError({ field: "target.account", message: "required" });
      },
    });
    expect(() => ch.validateTarget({})).toThrow(/target\.account/);
    expect(() => ch.validateTarget({ account: "a1" })).not.toThrow();
    expect(() => handlerChannel("x", () => {}, { idempotent: true }).validateTarget("s")).toThrow(
      ValidationError,
    );
  });
});
