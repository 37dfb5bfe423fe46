/**
 * OPS-15: an e-mail carries `X-Trace-Id`, the trace id of its send span (the second field
 * of the W3C `traceparent` the scheduler hands the channel), so a mail system's own
 * records can be joined to the reminder's trace; without a trace, no such header. A local
 * SMTP receiver reads what was sent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEmailChannel } from "../../../src/channels/index.js";
import type { ChannelDelivery, SendContext } from "../../../src/channels/index.js";
import { startSmtpReceiver, type SmtpReceiver } from "../../support/smtp.js";

const KEY = "dk_trace0123456789abcdef0123456789";
const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

function delivery(extra: Partial<ChannelDelivery> = {}): ChannelDelivery {
  return {
    deliveryKey: KEY,
    scheduleId: "6f1c7a1e-0000-4000-8000-000000000002",
    reminderKey: "r",
    occurrenceAt: new Date("2027-03-01T09:00:00.000Z"),
    dueAt: new Date("2027-03-01T09:00:00.000Z"),
    attempt: 1,
    late: false,
    payload: { title: "Traced" },
    target: { to: "ada@example.com" },
    tzid: "UTC",
    channel: "email",
    ...extra,
  };
}

const ctx = (): SendContext => ({
  idempotencyKey: KEY,
  signal: new AbortController().signal,
  timeoutMs: 10_000,
  now: () => Date.parse("2027-03-01T09:00:01Z"),
});

let smtp: SmtpReceiver;
beforeAll(async () => {
  smtp = await startSmtpReceiver();
});
afterAll(async () => {
  await smtp.close();
});

describe("e-mail and traces", () => {
  it("OPS-15: an e-mail sent under a trace carries X-Trace-Id (the traceparent's trace id); one without a trace has none", async () => {
    const ch = createEmailChannel({
      url: smtp.url,
      from: "Reminders <reminders@punctual.example>",
      clientName: "punctual.test",
    });
    await ch.send(delivery({ traceParent: `00-${TRACE}-00f067aa0ba902b7-01` }), ctx());
    await ch.send(delivery(), ctx());
    expect(smtp.mails).toHaveLength(2);
    expect(smtp.mails[0]!.headers["x-trace-id"]).toBe(TRACE);
    expect(smtp.mails[1]!.headers["x-trace-id"]).toBeUndefined();
  });
});
