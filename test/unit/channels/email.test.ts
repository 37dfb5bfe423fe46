import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  createEmailChannel,
  emailMessageId,
  parseSmtpUrl,
  smtpSecretRedactor,
  type EmailChannelOptions,
} from "../../../src/channels/index.js";
import type { ChannelDelivery, SendContext } from "../../../src/channels/index.js";
import {
  ConfigError,
  PermanentError,
  TransientError,
  ValidationError,
} from "../../../src/errors/index.js";
import { startSmtpReceiver, type SmtpReceiver } from "../../support/smtp.js";
import { freePort } from "./receiver.js";

const KEY = "dk_0123456789abcdef0123456789abcdef";

function delivery(extra: Partial<ChannelDelivery> = {}): ChannelDelivery {
  return {
    deliveryKey: KEY,
    scheduleId: "6f1c7a1e-0000-4000-8000-000000000001",
    reminderKey: "invoice",
    occurrenceAt: new Date("2027-03-01T09:00:00.000Z"),
    dueAt: new Date("2027-02-28T09:00:00.000Z"),
    attempt: 1,
    late: false,
    payload: { title: "Invoice 42", customer: "Tom & <Jerry>" },
    target: { to: "ada@example.com" },
    tzid: "Europe/Berlin",
    channel: "email",
    ...extra,
  };
}

function ctx(extra: Partial<SendContext> = {}): SendContext {
  return {
    idempotencyKey: KEY,
    signal: new AbortController().signal,
    timeoutMs: 10_000,
    now: () => Date.parse("2027-02-28T09:00:01Z"),
    ...extra,
  };
}

let smtp: SmtpReceiver;

function channel(options: Partial<EmailChannelOptions> = {}) {
  return createEmailChannel({
    url: smtp.url,
    from: "Reminders <reminders@punctual.example>",
    clientName: "punctual.test",
    ...options,
  });
}

async function sendError(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("send resolved, an error was expected");
}

beforeAll(async () => {
  smtp = await startSmtpReceiver();
});
afterEach(() => {
  smtp.mails.length = 0;
  smtp.onConnect = () => null;
  smtp.onRcpt = () => null;
  smtp.onData = () => null;
});
afterAll(async () => {
  await smtp.close();
});

describe("email channel (CH-2)", () => {
  it("DEL-19 / CH-2: a digest is one message whose Message-ID is the digest id, its template rendering every item", async () => {
    const DIGEST = "dg_0123456789abcdef0123456789abcdef";
    const item = (n: number) => ({
      deliveryId: n,
      deliveryKey: `dk_${String(n).padStart(32, "0")}`,
      scheduleId: "6f1c7a1e-0000-4000-8000-000000000001",
      title: `Invoice ${n}`,
      reminderKey: "invoice",
      occurrenceAt: new Date("2027-03-01T09:00:00.000Z"),
      dueAt: new Date("2027-02-28T09:00:00.000Z"),
      payload: { n },
    });
    const result = await channel({ domain: "mail.punctual.example" }).send(
      delivery({
        deliveryKey: DIGEST,
        payload: null,
        template: {
          subject: "{{ items | size }} invoices",
          text: "{% for i in items %}{{ i.title }};{% endfor %}",
        },
        digest: { id: DIGEST, key: "billing", items: [item(1), item(2)] },
      }),
      ctx({ idempotencyKey: DIGEST }),
    );
    expect(result.messageId).toBe(`<${DIGEST}@mail.punctual.example>`);
    expect(smtp.mails).toHaveLength(1);
    expect(smtp.mails[0]!.headers["message-id"]).toBe(`<${DIGEST}@mail.punctual.example>`);
    expect(smtp.mails[0]!.headers.subject).toBe("2 invoices");
    expect(smtp.mails[0]!.raw).toContain("Invoice 1;Invoice 2;");
  });

  it("CH-2: delivers one message with the deterministic Message-ID <deliveryKey@domain> to every recipient", async () => {
    const ch = channel({ domain: "mail.punctual.example" });
    const result = await ch.send(
      delivery({
        target: {
          to: ["ada@example.com", "Bob <bob@example.com>"],
          cc: "carol@example.com",
          bcc: ["audit@example.com"],
          replyTo: "desk@example.com",
        },
      }),
      ctx(),
    );
    expect(result).toEqual({ status: 250, messageId: `<${KEY}@mail.punctual.example>` });
    expect(smtp.mails).toHaveLength(1);
    const [mail] = smtp.mails;
    expect(mail!.from).toBe("reminders@punctual.example");
    expect(mail!.to.sort()).toEqual(
      ["ada@example.com", "audit@example.com", "bob@example.com", "carol@example.com"].sort(),
    );
    expect(mail!.headers["message-id"]).toBe(`<${KEY}@mail.punctual.example>`);
    expect(mail!.headers["auto-submitted"]).toBe("auto-generated");
    expect(mail!.headers["x-punctual-delivery-key"]).toBe(KEY);
    expect(mail!.headers["reply-to"]).toBe("desk@example.com");
    expect(mail!.headers.bcc).toBeUndefined();
    expect(mail!.headers.subject).toBe("Reminder: Invoice 42");
    // The Date header comes from the scheduler's (database) clock.
    expect(new Date(mail!.headers.date!).toISOString()).toBe("2027-02-28T09:00:01.000Z");
  });

  it("CH-2: the Message-ID domain defaults to the sender's; a resend carries the same Message-ID", async () => {
    const ch = channel();
    await ch.send(delivery(), ctx());
    await ch.send(delivery({ attempt: 2 }), ctx());
    expect(smtp.mails.map((m) => m.headers["message-id"])).toEqual([
      `<${KEY}@punctual.example>`,
      `<${KEY}@punctual.example>`,
    ]);
    expect(emailMessageId(KEY, "x.example")).toBe(`<${KEY}@x.example>`);
  });

  it("CH-2/CH-6: subject, text and html come from the template; HTML outputs are escaped, text is not", async () => {
    const ch = channel();
    await ch.send(
      delivery({
        template: {
          subject: "Invoice for {{ payload.customer }}",
          text: "Dear {{ payload.customer }}, due {{ dueAt | format_date: 'Europe/Berlin', 'de-DE', 'long' }}",
          html: "<p>Dear {{ payload.customer }}</p>",
        },
      }),
      ctx(),
    );
    const raw = smtp.mails[0]!.raw;
    expect(smtp.mails[0]!.headers.subject).toContain("Invoice for");
    expect(raw).toContain("<p>Dear Tom &amp; &lt;Jerry&gt;</p>");
    expect(raw).toContain("Dear Tom & <Jerry>, due 28. Februar 2027");
    expect(raw).toMatch(/multipart\/alternative/);
  });

  it("CH-2: a 421 greeting is transient and nothing was delivered", async () => {
    smtp.onConnect = () => ({ code: 421, message: "too busy, try later" });
    const err = await sendError(channel().send(delivery(), ctx()));
    expect(err).toBeInstanceOf(TransientError);
    expect(err).toMatchObject({ code: "SMTP_DEFERRED", status: 421, maybeDelivered: false });
    expect(smtp.mails).toHaveLength(0);
  });

  it("CH-2: 4xx on RCPT is transient, 5xx on RCPT and after DATA are permanent", async () => {
    smtp.onRcpt = () => ({ code: 451, message: "greylisted" });
    const deferred = await sendError(channel().send(delivery(), ctx()));
    expect(deferred).toBeInstanceOf(TransientError);
    expect(deferred).toMatchObject({ status: 451, maybeDelivered: false });

    smtp.onRcpt = () => ({ code: 550, message: "no such mailbox" });
    const rejected = await sendError(channel().send(delivery(), ctx()));
    expect(rejected).toBeInstanceOf(PermanentError);
    expect(rejected).toMatchObject({ code: "SMTP_REJECTED", status: 550 });

    smtp.onRcpt = () => null;
    smtp.onData = () => ({ code: 554, message: "content refused" });
    const refused = await sendError(channel().send(delivery(), ctx()));
    expect(refused).toBeInstanceOf(PermanentError);
    expect(refused).toMatchObject({ status: 554 });
    expect(smtp.mails).toHaveLength(0);
  });

  it("CH-2: one refused recipient among several: sent to the others", async () => {
    smtp.onRcpt = (address) =>
      address === "gone@example.com" ? { code: 550, message: "no such mailbox" } : null;
    const result = await channel().send(
      delivery({ target: { to: ["ada@example.com", "gone@example.com"] } }),
      ctx(),
    );
    expect(result.status).toBe(250);
    expect(smtp.mails[0]!.to).toEqual(["ada@example.com"]);
  });

  it("CH-2/DEL-5: silence after the message was sent is an unknown outcome (maybe delivered); before DATA it is not", async () => {
    smtp.onData = () => "hold";
    const afterData = await sendError(channel().send(delivery(), ctx({ timeoutMs: 300 })));
    expect(afterData).toBeInstanceOf(TransientError);
    expect(afterData).toMatchObject({ code: "SEND_TIMEOUT", maybeDelivered: true });
    expect(smtp.mails).toHaveLength(1); // the server has it, it just never said so

    // Aborted (lease ending) while the server sits on RCPT: nothing can have been delivered.
    smtp.onData = () => null;
    const controller = new AbortController();
    smtp.onRcpt = () => {
      controller.abort(new Error("lease ending"));
      return null;
    };
    const beforeData = await sendError(
      channel().send(delivery(), ctx({ signal: controller.signal })),
    );
    expect(beforeData).toMatchObject({ code: "SEND_ABORTED", maybeDelivered: false });
  });

  it("CH-2: a server that is not there is transient, and the password never shows", async () => {
    const port = await freePort();
    const ch = channel({ url: `smtp://mailer:s3cr3t-pw@127.0.0.1:${port}?insecure=true` });
    const err = await sendError(ch.send(delivery(), ctx()));
    expect(err).toBeInstanceOf(TransientError);
    expect(err).toMatchObject({ code: "SMTP_CONNECTION", maybeDelivered: false });
    expect((err as Error).message).not.toContain("s3cr3t-pw");
    expect((err as Error).message).toContain("mailer:***@");
    expect(JSON.stringify(ch.server)).not.toContain("s3cr3t-pw");
  });

  it("CH-2: authenticates with the URL's user and password; a refused login is permanent", async () => {
    const authed = await startSmtpReceiver({ auth: { user: "mailer", pass: "p@ss:word" } });
    try {
      const ok = createEmailChannel({ url: authed.url, from: "r@punctual.example" });
      await ok.send(delivery(), ctx());
      expect(authed.mails).toHaveLength(1);
      const wrong = createEmailChannel({
        url: `smtp://mailer:nope@127.0.0.1:${authed.port}?insecure=true`,
        from: "r@punctual.example",
      });
      const err = await sendError(wrong.send(delivery(), ctx()));
      expect(err).toBeInstanceOf(PermanentError);
      expect((err as Error).message).not.toContain("nope");
    } finally {
      await authed.close();
    }
  });

  it("CH-2: targets are checked at create, naming each bad address", () => {
    const ch = channel();
    const caught = (() => {
      try {
        ch.validateTarget({
          to: ["ada@example.com", "not an address"],
          cc: "carol@",
          from: "x\r\nBcc: evil@example.com",
          subject: "two\nlines",
          colour: "blue",
        });
      } catch (err) {
        return err;
      }
      return null;
    })();
    expect(caught).toBeInstanceOf(ValidationError);
    const fields = (caught as ValidationError).issues.map((i) => i.field);
    expect(fields).toEqual(
      expect.arrayContaining([
        "target.to.1",
        "target.cc",
        "target.from",
        "target.subject",
        "target.colour",
      ]),
    );
    expect((caught as ValidationError).issues.find((i) => i.field === "target.to.1")?.value).toBe(
      "not an address",
    );
    expect(() => ch.validateTarget({})).toThrow(/target\.to: required/);
    expect(() => ch.validateTarget({ to: "ada@example.com" })).not.toThrow();
    const noSender = createEmailChannel({ url: smtp.url });
    expect(() => noSender.validateTarget({ to: "ada@example.com" })).toThrow(/PUNCTUAL_SMTP_FROM/);
  });

  it("CH-2: reads smtp:// and smtps:// URLs; a bad one is a ConfigError without the password", () => {
    expect(parseSmtpUrl("smtp://u:p%40ss@mail.example?requireTLS=true")).toMatchObject({
      host: "mail.example",
      port: 587,
      secure: false,
      user: "u",
      pass: "p@ss",
      redacted: "smtp://u:***@mail.example?requireTLS=true",
    });
    expect(parseSmtpUrl("smtps://mail.example")).toMatchObject({ port: 465, secure: true });
    expect(parseSmtpUrl("smtp://mail.example:2525?requireTLS=true")).toMatchObject({
      port: 2525,
      requireTLS: true,
    });
    let caught: unknown = null;
    try {
      parseSmtpUrl("http://u:hunter2@mail.example");
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as Error).message).not.toContain("hunter2");
  });

  const HARD = "pä§s:w@rd/%?#";
  /** Every form of HARD that must not leave the channel. */
  const hardForms = (user: string): string[] => [
    HARD,
    encodeURIComponent(HARD),
    encodeURIComponent(HARD).toLowerCase(),
    Buffer.from(HARD).toString("base64"),
    Buffer.from(`\u0000${user}\u0000${HARD}`).toString("base64"),
    Buffer.from(HARD).toString("latin1"),
  ];

  it("CH-2: a password with non-ASCII and URL-special characters never leaves the channel, in any encoding", async () => {
    // The server refuses the login and echoes what it was sent, in every encoding.
    const echo = await startSmtpReceiver({
      auth: { user: "mailer", pass: "other" },
      authFailure: (user, pass) =>
        `bad login ${pass} / ${encodeURIComponent(pass)} / ${encodeURIComponent(pass).toLowerCase()} / ` +
        `${Buffer.from(pass).toString("base64")} / ${Buffer.from(`\u0000${user}\u0000${pass}`).toString("base64")} / ` +
        `${Buffer.from(pass).toString("latin1")}`,
    });
    try {
      const url = `smtp://mailer:${encodeURIComponent(HARD)}@127.0.0.1:${echo.port}?insecure=true`;
      const lines: string[] = [];
      const ch = createEmailChannel({
        url,
        from: "r@punctual.example",
        logger: pino({ level: "trace" }, { write: (line: string) => lines.push(line) }),
      });
      const err = await sendError(ch.send(delivery(), ctx()));
      expect(err).toBeInstanceOf(PermanentError);
      expect((err as Error).message).toContain("bad login ***");
      const cause = (err as Error).cause as Error & { response?: string };
      const shown = [
        (err as Error).message,
        (err as Error).stack ?? "",
        cause.message,
        cause.stack ?? "",
        cause.response ?? "",
        JSON.stringify(err),
        JSON.stringify(cause),
        JSON.stringify(ch.server),
        ...lines,
      ].join("\n");
      for (const form of hardForms("mailer")) expect(shown, form).not.toContain(form);
    } finally {
      await echo.close();
    }
  });

  it("CH-2: the URL shown in errors hides a password written without URL-encoding", () => {
    const raw = `smtp://mailer:${HARD.replace(/[/?#]/g, "")}@mail.example`;
    const server = parseSmtpUrl(`${raw}?insecure=true`);
    expect(server.redacted).toBe("smtp://mailer:***@mail.example?insecure=true");
    expect(server.redacted).not.toContain("%C3%A4");
    const redact = smtpSecretRedactor(server, `${raw}?insecure=true`);
    expect(redact(`failed: ${raw}`)).not.toMatch(/pä|p%C3/i);
  });

  it("CH-2: smtp:// with credentials is refused unless TLS is required or clear text accepted", () => {
    let caught: unknown = null;
    try {
      parseSmtpUrl("smtp://mailer:hunter2@mail.example:587");
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as Error).message).toContain("smtp://mailer:***@mail.example:587");
    expect((caught as Error).message).toContain("insecure=true");
    expect((caught as Error).message).not.toContain("hunter2");
    expect(() => createEmailChannel({ url: "smtp://mailer:hunter2@mail.example" })).toThrow(
      ConfigError,
    );
    expect(parseSmtpUrl("smtp://mailer:hunter2@mail.example?requireTLS=true")).toMatchObject({
      requireTLS: true,
    });
    expect(parseSmtpUrl("smtp://mailer:hunter2@mail.example?insecure=true")).toMatchObject({
      insecure: true,
      requireTLS: false,
    });
    expect(parseSmtpUrl("smtps://mailer:hunter2@mail.example")).toMatchObject({ secure: true });
    // Without credentials no AUTH is sent.
    expect(parseSmtpUrl("smtp://relay.example:25")).toMatchObject({ secure: false });
  });

  it("CH-2: a target's from must be the default sender or an allowed one, at create and at send", async () => {
    const strict = channel();
    const refused = (() => {
      try {
        strict.validateTarget({ to: "ada@example.com", from: "ceo@bank.example" });
      } catch (err) {
        return err;
      }
      return null;
    })();
    expect(refused).toBeInstanceOf(ValidationError);
    expect((refused as ValidationError).issues).toEqual([
      expect.objectContaining({ field: "target.from", value: "ceo@bank.example" }),
    ]);
    // The default sender's address is always allowed, with any display name, in any case.
    expect(() =>
      strict.validateTarget({ to: "ada@example.com", from: "Other <REMINDERS@punctual.example>" }),
    ).not.toThrow();
    const listed = channel({ allowedFrom: ["billing@shop.example", "*@news.example"] });
    expect(() =>
      listed.validateTarget({ to: "ada@example.com", from: "billing@shop.example" }),
    ).not.toThrow();
    expect(() =>
      listed.validateTarget({ to: "ada@example.com", from: "Weekly <any@News.example>" }),
    ).not.toThrow();
    expect(() =>
      listed.validateTarget({ to: "ada@example.com", from: "any@sub.news.example" }),
    ).toThrow(/target\.from/);
    expect(() =>
      channel({ allowedFrom: ["*"] }).validateTarget({ to: "a@example.com", from: "x@y.example" }),
    ).not.toThrow();
    expect(() => channel({ allowedFrom: ["*@"] })).toThrow(/PUNCTUAL_SMTP_ALLOWED_FROM/);
    // A reminder stored before the configuration changed is refused when it is sent.
    const err = await sendError(
      strict.send(delivery({ target: { to: "ada@example.com", from: "ceo@bank.example" } }), ctx()),
    );
    expect(err).toBeInstanceOf(PermanentError);
    expect(err).toMatchObject({ code: "TARGET_INVALID" });
    expect((err as Error).message).toContain("target.from");
    expect(smtp.mails).toHaveLength(0);
  });

  it("CH-2: an allowed sender written tenant:pattern is that tenant's only, at create and at send; bare patterns stay every tenant's", async () => {
    const perTenant = channel({
      allowedFrom: ["acme:*@acme.example", "globex:noreply@globex.example", "ops@shared.example"],
    });
    const ok = (from: string, tenant?: string) => () =>
      perTenant.validateTarget({ to: "ada@example.com", from }, tenant ? { tenant } : {});
    expect(ok("billing@acme.example", "acme")).not.toThrow();
    expect(ok("noreply@globex.example", "globex")).not.toThrow();
    expect(ok("ops@shared.example", "acme")).not.toThrow();
    expect(ok("ops@shared.example", "globex")).not.toThrow();
    // Another tenant's sender, or a tenant's sender without a tenant, is refused.
    expect(ok("billing@acme.example", "globex")).toThrow(/target\.from/);
    expect(ok("noreply@globex.example", "acme")).toThrow(/target\.from/);
    expect(ok("billing@acme.example")).toThrow(/target\.from/);
    // The default sender is every tenant's.
    expect(ok("reminders@punctual.example", "globex")).not.toThrow();
    // A stored reminder of globex's naming acme's sender is refused at send.
    const err = await sendError(
      perTenant.send(
        delivery({ tenant: "globex", target: { to: "ada@example.com", from: "x@acme.example" } }),
        ctx(),
      ),
    );
    expect(err).toMatchObject({ code: "TARGET_INVALID" });
    expect((err as Error).message).toContain("target.from");
    expect(smtp.mails).toHaveLength(0);
    await perTenant.send(
      delivery({ tenant: "acme", target: { to: "ada@example.com", from: "x@acme.example" } }),
      ctx(),
    );
    expect(smtp.mails).toHaveLength(1);
    // A tenant part that is not a tenant name is refused at start.
    expect(() => channel({ allowedFrom: ["a b:x@acme.example"] })).toThrow(
      /PUNCTUAL_SMTP_ALLOWED_FROM/,
    );
  });
});
