import { describe, expect, it } from "vitest";
import { TransientError, ValidationError } from "../../../src/errors/index.js";
import { memoryLogger } from "../../../src/observability/logger.js";
import { createLogChannel } from "../../../src/channels/index.js";
import type { ChannelDelivery, LogChannelLine, SendContext } from "../../../src/channels/index.js";

const delivery: ChannelDelivery = {
  deliveryKey: "dk_1",
  scheduleId: "sched1",
  reminderKey: "r1",
  occurrenceAt: new Date("2027-03-28T01:30:00Z"),
  dueAt: new Date("2027-03-28T01:15:00Z"),
  attempt: 1,
  late: true,
  payload: { n: 1 },
  target: {},
};
const ctx: SendContext = {
  idempotencyKey: "dk_1",
  signal: new AbortController().signal,
  timeoutMs: 1000,
};

describe("log channel", () => {
  it("CH-5: logs one structured reminder.due line per delivery at info", async () => {
    const { logger, lines } = memoryLogger();
    const ch = createLogChannel({ logger });
    expect(ch.name).toBe("log");
    expect(ch.idempotent).toBe(false);
    await ch.send(delivery, ctx);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: "info",
      msg: "reminder.due",
      deliveryKey: "dk_1",
      scheduleId: "sched1",
      reminderKey: "r1",
      occurrenceAt: "2027-03-28T01:30:00.000Z",
      dueAt: "2027-03-28T01:15:00.000Z",
      attempt: 1,
      late: true,
      payload: { n: 1 },
    });
  });

  it("CH-5: a write sink receives the line instead of the logger", async () => {
    const { logger, lines } = memoryLogger();
    const written: LogChannelLine[] = [];
    const ch = createLogChannel({ logger, write: (line) => written.push(line) });
    await ch.send(delivery, ctx);
    expect(lines).toHaveLength(0);
    expect(written).toEqual([
      expect.objectContaining({ msg: "reminder.due", deliveryKey: "dk_1" }),
    ]);
  });

  it("CH-5: the target is optional and ignored", () => {
    const ch = createLogChannel({ logger: memoryLogger().logger });
    expect(() => ch.validateTarget(undefined)).not.toThrow();
    expect(() => ch.validateTarget({})).not.toThrow();
    expect(() => ch.validateTarget(null)).not.toThrow();
    expect(() => ch.validateTarget("stdout")).toThrow(ValidationError);
  });

  it("CH-5: an already aborted send is transient and logs nothing", async () => {
    const { logger, lines } = memoryLogger();
    const ch = createLogChannel({ logger });
    const controller = new AbortController();
    controller.abort();
    await expect(ch.send(delivery, { ...ctx, signal: controller.signal })).rejects.toBeInstanceOf(
      TransientError,
    );
    expect(lines).toHaveLength(0);
  });

  it("CH-5/CH-6: a reminder's template is rendered into the line, so it can be seen while developing", async () => {
    const { logger, lines } = memoryLogger();
    const ch = createLogChannel({ logger });
    await ch.send({ ...delivery, template: { text: "Reminder {{ payload.n }}" } }, ctx);
    expect(lines[0]).toMatchObject({ msg: "reminder.due", rendered: { text: "Reminder 1" } });
    await ch.send(delivery, ctx);
    expect(lines[1]).not.toHaveProperty("rendered");
  });
});
