/**
 * The channels through the whole pipeline on a real engine (CH-2, CH-3, CH-4, CH-6):
 * e-mail to a real SMTP server on 127.0.0.1, Slack to a local receiver, handler
 * functions, and templates from create to send. Time is a TestClock.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createApi } from "../../src/api/server.js";
import { createEmailChannel, handlerChannel } from "../../src/channels/index.js";
import type { ChannelDelivery } from "../../src/channels/index.js";
import type { ErrorBody } from "../../src/contracts/index.js";
import { PermanentError, ValidationError } from "../../src/errors/index.js";
import { RENEW_SQL } from "../../src/store/deliveries/index.js";
import { startReceiver, type Receiver } from "../unit/channels/receiver.js";
import { faultyDatabase, deliveries, testPunctual, tickAndDrain } from "../support/punctual.js";
import type { TestPunctual } from "../support/punctual.js";
import { startSmtpReceiver, type SmtpReceiver } from "../support/smtp.js";

const T0 = "2027-01-04T08:00:00Z";
let t: TestPunctual | null = null;
let smtp: SmtpReceiver;
let http: Receiver;

beforeAll(async () => {
  smtp = await startSmtpReceiver();
  http = await startReceiver();
});
afterEach(async () => {
  await t?.close();
  t = null;
  smtp.mails.length = 0;
  smtp.onRcpt = () => null;
  smtp.onData = () => null;
  http.requests.length = 0;
  http.respond = (_req, res) => res.writeHead(200).end("ok");
});
afterAll(async () => {
  await smtp.close();
  await http.close();
});

function emailChannel() {
  return createEmailChannel({
    url: smtp.url,
    from: "Reminders <reminders@punctual.example>",
    domain: "punctual.example",
  });
}

function oneOff(reminder: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    dtstart: T0,
    tzid: "Europe/Berlin",
    payload: { title: "Rent", tenant: "Tom & <Jerry>" },
    reminders: [{ key: "r", offset: "PT0S", ...reminder }],
    ...extra,
  };
}

const email = {
  channel: "email",
  target: { to: "ada@example.com" },
  template: {
    subject: "{{ payload.title }} due",
    text: "Hello {{ payload.tenant }}",
    html: "<p>Hello {{ payload.tenant }}</p>",
  },
};

describe("e-mail through the pipeline (CH-2)", () => {
  it("CH-2: a due e-mail is delivered once, with Message-ID <deliveryKey@domain>, recorded as sent", async () => {
    t = await testPunctual({ start: T0, channels: [emailChannel()] });
    await t.punctual.createSchedule(oneOff(email));
    await tickAndDrain(t.punctual);
    await tickAndDrain(t.punctual);
    const [row] = await deliveries(t.punctual);
    expect(row).toMatchObject({ state: "sent", attempt: 1, channel: "email" });
    expect(smtp.mails).toHaveLength(1);
    const mail = smtp.mails[0]!;
    expect(mail.headers["message-id"]).toBe(`<${row!.deliveryKey}@punctual.example>`);
    expect(mail.headers.subject).toBe("Rent due");
    expect(mail.raw).toContain("<p>Hello Tom &amp; &lt;Jerry&gt;</p>");
    const detail = await t.punctual.getDelivery(row!.id);
    expect(detail.attempts).toEqual([
      expect.objectContaining({
        outcome: "sent",
        status: 250,
        messageId: `<${row!.deliveryKey}@punctual.example>`,
      }),
    ]);
  });

  it("CH-2: a 4xx reply is retried with backoff and then sent; a 5xx reply is dead at once", async () => {
    t = await testPunctual({ start: T0, channels: [emailChannel()] });
    await t.punctual.createSchedule(oneOff(email));
    smtp.onRcpt = () => ({ code: 451, message: "greylisted, try again" });
    await tickAndDrain(t.punctual);
    let [row] = await deliveries(t.punctual);
    expect(row).toMatchObject({ state: "retry", failures: 1 });
    smtp.onRcpt = () => null;
    t.clock.advance(60_000);
    await tickAndDrain(t.punctual);
    [row] = await deliveries(t.punctual);
    expect(row).toMatchObject({ state: "sent", attempt: 2, failures: 1 });
    expect(smtp.mails).toHaveLength(1);
    const attempts = (await t.punctual.getDelivery(row!.id)).attempts;
    expect(attempts.map((a) => [a.outcome, a.status])).toEqual([
      ["transient", 451],
      ["sent", 250],
    ]);

    await t.punctual.createSchedule(
      oneOff({ ...email, key: "r" }, { dtstart: "2027-01-04T08:02:00Z" }),
    );
    smtp.onRcpt = () => ({ code: 550, message: "mailbox unavailable" });
    t.clock.advance(60_000);
    await tickAndDrain(t.punctual);
    const dead = (await deliveries(t.punctual)).find((d) => d.state !== "sent");
    expect(dead).toMatchObject({ state: "dead", reason: "PERMANENT", attempt: 1 });
    expect(smtp.mails).toHaveLength(1);
  });

  it("CH-2/DEL-5: a server silent after the message was sent leaves the delivery in doubt (at most once), never resent", async () => {
    t = await testPunctual({
      start: T0,
      channels: [emailChannel()],
      scheduler: { sendTimeoutMs: 300 },
    });
    await t.punctual.createSchedule(oneOff(email));
    smtp.onData = () => "hold";
    const received = smtp.nextMail();
    await t.punctual.scheduler.tick();
    await received;
    await t.punctual.scheduler.drain();
    const [row] = await deliveries(t.punctual);
    expect(row).toMatchObject({ state: "in_doubt", reason: "OUTCOME_UNKNOWN" });
    t.clock.advance(3_600_000);
    await tickAndDrain(t.punctual);
    expect(smtp.mails).toHaveLength(1);
  });
});

describe("Slack through the pipeline (CH-3)", () => {
  it("CH-3: a 429 with Retry-After waits that long and spends no attempt", async () => {
    t = await testPunctual({ start: T0 });
    await t.punctual.createSchedule(
      oneOff({
        channel: "slack",
        target: { url: http.url },
        template: { text: "{{ payload.title }}" },
      }),
    );
    http.respond = (_req, res) => res.writeHead(429, { "retry-after": "30" }).end("rate_limited");
    await tickAndDrain(t.punctual);
    let [row] = await deliveries(t.punctual);
    expect(row).toMatchObject({ state: "retry", failures: 0, runAt: "2027-01-04T08:00:30.000Z" });
    http.respond = (_req, res) => res.writeHead(200).end("ok");
    t.clock.advance(30_000);
    await tickAndDrain(t.punctual);
    [row] = await deliveries(t.punctual);
    expect(row).toMatchObject({ state: "sent", failures: 0 });
    expect(http.requests.map((r) => JSON.parse(r.body) as unknown)).toEqual([
      { text: "Rent" },
      { text: "Rent" },
    ]);
  });
});

describe("handler functions (CH-4)", () => {
  it("CH-4: a handler gets the delivery and its key; its PermanentError kills the delivery", async () => {
    const seen: Array<{ delivery: ChannelDelivery; key: string }> = [];
    const handler = handlerChannel(
      "billing",
      (delivery, { idempotencyKey }) => {
        seen.push({ delivery, key: idempotencyKey });
        if ((delivery.payload as { title: string }).title === "bad") {
          throw new PermanentError("customer closed the account");
        }
        return { messageId: `inv-${delivery.reminderKey}` };
      },
      { idempotent: true },
    );
    t = await testPunctual({ start: T0, channels: [handler] });
    await t.punctual.createSchedule(oneOff({ channel: "billing" }));
    await t.punctual.createSchedule(oneOff({ channel: "billing" }, { payload: { title: "bad" } }));
    await tickAndDrain(t.punctual);
    const rows = await deliveries(t.punctual);
    expect(rows.map((r) => r.state).sort()).toEqual(["dead", "sent"]);
    expect(seen).toHaveLength(2);
    expect(seen.map((s) => s.key).sort()).toEqual(rows.map((r) => r.deliveryKey).sort());
    expect(seen[0]!.delivery).toMatchObject({
      reminderKey: "r",
      tzid: "Europe/Berlin",
      channel: "billing",
      occurrenceAt: new Date(T0),
    });
  });

  it("CH-4: a handler's signal aborts before its lease ends when the lease cannot be renewed", async () => {
    let faulty: ReturnType<typeof faultyDatabase> | null = null;
    let abortedAt: number | null = null;
    let leaseEnd: number | null = null;
    const handler = handlerChannel(
      "slow",
      (_delivery, { signal }) =>
        new Promise<void>((_resolve, reject) => {
          signal.addEventListener("abort", () => {
            abortedAt = t!.clock.now();
            reject(signal.reason as Error);
          });
        }),
      { idempotent: false, timeoutMs: 120_000 },
    );
    t = await testPunctual({
      start: T0,
      channels: [handler],
      scheduler: { leaseMs: 9_000, leaseMarginMs: 1_000 },
      wrapDb: (db) => (faulty = faultyDatabase(db)),
    });
    await t.punctual.createSchedule(oneOff({ channel: "slow" }));
    await t.punctual.scheduler.tick();
    const [claimed] = await deliveries(t.punctual);
    leaseEnd = Date.parse(claimed!.leaseExpiresAt!);
    faulty!.failWhen = (sql) => sql === RENEW_SQL;
    t.clock.advance(7_999);
    await t.punctual.scheduler.renewLeases();
    expect(abortedAt).toBeNull();
    t.clock.advance(1);
    await t.punctual.scheduler.drain();
    expect(abortedAt).not.toBeNull();
    expect(leaseEnd! - abortedAt!).toBe(1_000); // the margin, before the lease ends
    const [row] = await deliveries(t.punctual);
    expect(row).toMatchObject({ state: "in_doubt" });
  });
});

describe("templates at create (CH-6)", () => {
  it("CH-6: a bad template is refused at create naming the field and the line; a good one is stored and shown", async () => {
    t = await testPunctual({ start: T0, channels: [emailChannel()] });
    let caught: unknown = null;
    try {
      await t.punctual.createSchedule(
        oneOff({ ...email, template: { html: "<p>\n{{ payload.title | nope }}</p>" } }),
      );
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ValidationError);
    expect((caught as ValidationError).issues).toEqual([
      { field: "reminders.0.template.html", message: "line 2, column 1: undefined filter: nope" },
    ]);
    expect(await deliveries(t.punctual)).toHaveLength(0);

    const api = createApi(t.punctual);
    const res = await api.request("/v1/schedules", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(oneOff({ ...email, template: { text: "a\nb\n{% for x in y %}" } })),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as ErrorBody;
    expect(body.error.issues).toEqual([
      expect.objectContaining({
        field: "reminders.0.template.text",
        message: expect.stringMatching(/^line 3, column 1: /),
      }),
    ]);

    const { schedule } = await t.punctual.createSchedule(oneOff(email));
    expect(schedule.reminders[0]!.template).toEqual(email.template);
  });

  it("CH-6: a template certain to render more than 1,048,576 characters is refused at create with 400 naming the field (TEMPLATE_TOO_LARGE); nothing is stored", async () => {
    t = await testPunctual({ start: T0, channels: [emailChannel()] });
    const api = createApi(t.punctual);
    const res = await api.request("/v1/schedules", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(
        oneOff(
          { ...email, template: { text: "{{ payload.s }}".repeat(20) } },
          { payload: { s: "x".repeat(60_000) } },
        ),
      ),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as ErrorBody).error.issues).toEqual([
      expect.objectContaining({
        field: "reminders.0.template.text",
        message: expect.stringMatching(/^TEMPLATE_TOO_LARGE: the rendered text has 1200000 /),
      }),
    ]);
    expect(await deliveries(t.punctual)).toHaveLength(0);
  });

  it("CH-6: the create-time try cannot be told from a send: a template that branches on the try's values is tried like any other", async () => {
    t = await testPunctual({ start: T0 });
    const tell = (test: string) =>
      oneOff({
        channel: "log",
        template: {
          text: `{% if ${test} %}fine{% else %}{{ dueAt | format_instant: "Mars/Olympus" }}{% endif %}`,
        },
      });
    for (const test of [
      'deliveryKey == "dk_template_check"',
      'schedule.id == "00000000-0000-0000-0000-000000000000"',
      'dueAt == "2000-01-01T00:00:00.000Z"',
    ]) {
      const caught = await t.punctual.createSchedule(tell(test)).catch((err: unknown) => err);
      expect(caught, test).toBeInstanceOf(ValidationError);
      expect((caught as ValidationError).issues, test).toEqual([
        expect.objectContaining({
          field: "reminders.0.template.text",
          message: expect.stringMatching(/time zone/i),
        }),
      ]);
    }
    expect(await deliveries(t.punctual)).toHaveLength(0);
  });

  it("CH-6: a template that overruns at send ends that delivery dead (TEMPLATE_TIMEOUT) and the others go on", async () => {
    t = await testPunctual({ start: T0 });
    // Heavy only from the second attempt: the create-time try (attempt 1) passes.
    // The list stays under the 64 KiB payload limit; the chain of sorts is what runs long.
    const heavy =
      "{% for a in payload.list limit: 2000 %}{{ payload.list | sample: 6000 | sort_natural | size }}{% endfor %}";
    const list = Array.from({ length: 6_000 }, (_, i) => `i${(i * 7919) % 6_000}`);
    await t.punctual.createSchedule(
      oneOff(
        {
          channel: "webhook",
          target: { url: http.url },
          template: { text: `{% if attempt > 1 %}${heavy}{% else %}light{% endif %}` },
        },
        { payload: { list } },
      ),
    );
    http.respond = (_req, res) => res.writeHead(503).end("busy");
    await tickAndDrain(t.punctual);
    let [row] = await deliveries(t.punctual);
    expect(row).toMatchObject({ state: "retry", failures: 1 });
    http.respond = (_req, res) => res.writeHead(200).end("ok");
    await t.punctual.createSchedule(
      oneOff(
        { channel: "webhook", target: { url: http.url } },
        { dtstart: "2027-01-04T08:01:00Z" },
      ),
    );
    t.clock.advance(3_600_000);
    await tickAndDrain(t.punctual);
    const rows = await deliveries(t.punctual);
    row = rows.find((d) => d.attempt === 2);
    expect(row).toMatchObject({ state: "dead", reason: "PERMANENT" });
    const view = await t.punctual.getDelivery(row!.id);
    expect(JSON.stringify(view)).toMatch(/TEMPLATE_TIMEOUT|ran longer than 1000 ms/);
    expect(rows.filter((d) => d.state === "sent")).toHaveLength(1);
  });

  it("CH-6: the webhook body carries the rendered template", async () => {
    t = await testPunctual({ start: T0 });
    await t.punctual.createSchedule(
      oneOff({
        channel: "webhook",
        target: { url: http.url },
        template: {
          subject: "{{ payload.title }}",
          html: "<b>{{ payload.tenant }}</b> {{ dueAt | format_time: 'Europe/Berlin', 'de-DE' }}",
        },
      }),
    );
    await tickAndDrain(t.punctual);
    const body = JSON.parse(http.requests[0]!.body) as { rendered?: unknown };
    expect(body.rendered).toEqual({
      subject: "Rent",
      html: "<b>Tom &amp; &lt;Jerry&gt;</b> 09:00",
    });
  });
});

describe("views (CH-3)", () => {
  it("CH-3: a Slack or Discord webhook URL is its credential: views show only its origin", async () => {
    t = await testPunctual({ start: T0 });
    const { schedule } = await t.punctual.createSchedule(
      oneOff({ channel: "discord", target: { url: `${http.url}/123/tok3n` } }),
    );
    expect(schedule.reminders[0]!.target).toEqual({
      url: `http://127.0.0.1:${http.port}/[redacted]`,
    });
    expect(JSON.stringify(await t.punctual.getSchedule(schedule.id))).not.toContain("tok3n");
  });
});

describe("templates on edit (CH-6)", () => {
  it("CH-6: an edit that leaves the reminders alone keeps their templates", async () => {
    t = await testPunctual({ start: T0 });
    const template = { text: "{{ payload.title }} at {{ dueAt | format_time }}" };
    const { schedule } = await t.punctual.createSchedule(
      oneOff({ channel: "log", template }, { dtstart: "2027-01-05T08:00:00Z" }),
    );
    const edited = await t.punctual.updateSchedule(schedule.id, { payload: { title: "Moved" } });
    expect(edited.schedule.reminders[0]!.template).toEqual(template);
  });
});
