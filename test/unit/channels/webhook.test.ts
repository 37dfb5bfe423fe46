import { createHmac } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import {
  PermanentError,
  RateLimitedError,
  TransientError,
  ValidationError,
} from "../../../src/errors/index.js";
import { memoryLogger } from "../../../src/observability/logger.js";
import { createWebhookChannel, signWebhook, verifyWebhook } from "../../../src/channels/index.js";
import type {
  ChannelDelivery,
  SendContext,
  WebhookChannel,
  WebhookChannelOptions,
} from "../../../src/channels/index.js";
import { freePort, startReceiver } from "./receiver.js";
import type { Receiver } from "./receiver.js";

const KEY_BYTES = Buffer.from("a 32-byte key for the test suite", "utf8");
const SECRET = `whsec_${KEY_BYTES.toString("base64")}`;

function delivery(url: string, extra: Partial<ChannelDelivery> = {}): ChannelDelivery {
  return {
    deliveryKey: "dk_sched1.standup.2027-01-04T08:45:00Z",
    scheduleId: "sched1",
    reminderKey: "standup",
    occurrenceAt: new Date("2027-01-04T09:00:00.000Z"),
    dueAt: new Date("2027-01-04T08:45:00.000Z"),
    attempt: 2,
    late: false,
    payload: { title: "Standup", room: "Blue" },
    target: { url },
    ...extra,
  };
}

function ctx(extra: Partial<SendContext> = {}): SendContext {
  return {
    idempotencyKey: "dk_sched1.standup.2027-01-04T08:45:00Z",
    signal: new AbortController().signal,
    timeoutMs: 5_000,
    ...extra,
  };
}

/** Independent Standard Webhooks check with node:crypto only. */
function expectedSignature(keyBytes: Buffer, id: string, ts: string, body: string): string {
  return `v1,${createHmac("sha256", keyBytes).update(`${id}.${ts}.${body}`).digest("base64")}`;
}

let receiver: Receiver;
const channels: WebhookChannel[] = [];

function channel(options: WebhookChannelOptions = {}): WebhookChannel {
  const created = createWebhookChannel({ secret: SECRET, allowPrivateTargets: true, ...options });
  channels.push(created);
  return created;
}

beforeAll(async () => {
  receiver = await startReceiver();
});
afterEach(async () => {
  receiver.requests.length = 0;
  receiver.respond = (_req, res) => res.writeHead(200).end();
  await Promise.all(channels.splice(0).map((c) => c.close()));
});
afterAll(async () => {
  await receiver.close();
});

async function sendError(ch: WebhookChannel, d: ChannelDelivery, c = ctx()): Promise<unknown> {
  try {
    await ch.send(d, c);
  } catch (err) {
    return err;
  }
  throw new Error("send resolved, an error was expected");
}

describe("webhook channel: request contract", () => {
  it("CH-1: POSTs the contract body with webhook-id, webhook-timestamp and a verifiable signature", async () => {
    const nowMs = Date.UTC(2027, 0, 4, 8, 45, 1, 500);
    const ch = channel({ now: () => nowMs, userAgent: "test-agent" });
    const result = await ch.send(delivery(receiver.url), ctx());
    expect(result.status).toBe(200);

    expect(receiver.requests).toHaveLength(1);
    const req = receiver.requests[0]!;
    expect(req.method).toBe("POST");
    expect(req.url).toBe("/hooks/reminders");
    expect(req.headers["content-type"]).toBe("application/json");
    expect(req.headers["user-agent"]).toBe("test-agent");
    expect(req.headers["webhook-id"]).toBe("dk_sched1.standup.2027-01-04T08:45:00Z");
    expect(req.headers["webhook-timestamp"]).toBe(String(Math.floor(nowMs / 1000)));
    expect(JSON.parse(req.body)).toEqual({
      type: "reminder.due",
      deliveryKey: "dk_sched1.standup.2027-01-04T08:45:00Z",
      scheduleId: "sched1",
      reminderKey: "standup",
      occurrenceAt: "2027-01-04T09:00:00.000Z",
      dueAt: "2027-01-04T08:45:00.000Z",
      attempt: 2,
      late: false,
      payload: { title: "Standup", room: "Blue" },
    });

    const id = req.headers["webhook-id"] as string;
    const ts = req.headers["webhook-timestamp"] as string;
    expect(req.headers["webhook-signature"]).toBe(expectedSignature(KEY_BYTES, id, ts, req.body));
    expect(verifyWebhook(SECRET, req.headers, req.body, { nowSeconds: Number(ts) })).toBe(true);
    expect(
      verifyWebhook(SECRET, req.headers, req.body.replace("Blue", "Red"), {
        nowSeconds: Number(ts),
      }),
    ).toBe(false);
    expect(verifyWebhook(SECRET, req.headers, req.body, { nowSeconds: Number(ts) + 301 })).toBe(
      false,
    );
  });

  it("CH-1: a target secret overrides the default; a secret without whsec_ is used as UTF-8 bytes", async () => {
    const ch = channel();
    await ch.send(
      delivery(receiver.url, { target: { url: receiver.url, secret: "plain-secret" } }),
      ctx(),
    );
    const req = receiver.requests[0]!;
    const ts = req.headers["webhook-timestamp"] as string;
    expect(req.headers["webhook-signature"]).toBe(
      expectedSignature(
        Buffer.from("plain-secret", "utf8"),
        req.headers["webhook-id"] as string,
        ts,
        req.body,
      ),
    );
    expect(verifyWebhook("plain-secret", req.headers, req.body)).toBe(true);
    expect(verifyWebhook(SECRET, req.headers, req.body)).toBe(false);
  });

  it("CH-1: verifyWebhook accepts any matching entry of a rotated signature list", () => {
    const body = '{"a":1}';
    const ts = Math.floor(Date.now() / 1000);
    const good = signWebhook(SECRET, "msg_1", ts, body);
    const headers = {
      "Webhook-Id": "msg_1",
      "webhook-timestamp": String(ts),
      "webhook-signature": `v1,AAAA ${good}`,
    };
    expect(verifyWebhook(SECRET, headers, body)).toBe(true);
    expect(verifyWebhook(SECRET, { ...headers, "webhook-signature": "v1,AAAA" }, body)).toBe(false);
    expect(
      verifyWebhook(
        SECRET,
        new Headers({
          "webhook-id": "msg_1",
          "webhook-timestamp": String(ts),
          "webhook-signature": good,
        }),
        body,
      ),
    ).toBe(true);
  });

  it("CH-1: a 2xx is sent; the receiver's message id is recorded when it returns one", async () => {
    const ch = channel();
    receiver.respond = (_req, res) => res.writeHead(201, { "x-message-id": "rcv-42" }).end("{}");
    expect(await ch.send(delivery(receiver.url), ctx())).toEqual({
      status: 201,
      messageId: "rcv-42",
    });
    receiver.respond = (_req, res) => res.writeHead(204).end();
    expect(await ch.send(delivery(receiver.url), ctx())).toEqual({ status: 204, messageId: null });
  });

  it("DEL-6: the webhook channel declares itself idempotent (receivers de-duplicate on webhook-id)", () => {
    const ch = channel();
    expect(ch.name).toBe("webhook");
    expect(ch.idempotent).toBe(true);
  });
});

describe("webhook channel: outcome classification", () => {
  it.each([500, 502, 503, 408])("CH-1: HTTP %i is transient", async (status) => {
    const ch = channel();
    receiver.respond = (_req, res) => res.writeHead(status).end("try later");
    const err = await sendError(ch, delivery(receiver.url));
    expect(err).toBeInstanceOf(TransientError);
    expect((err as Error).message).toContain(`HTTP ${status}`);
  });

  it("DEL-13, DEL-14: 429 with Retry-After: 7 is rate-limited for 7000 ms and carries the status for the attempt record", async () => {
    const ch = channel();
    receiver.respond = (_req, res) => res.writeHead(429, { "retry-after": "7" }).end();
    const err = await sendError(ch, delivery(receiver.url));
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAfterMs).toBe(7000);
    expect((err as RateLimitedError).status).toBe(429);
  });

  it("DEL-13: 503 with an HTTP-date Retry-After is rate-limited until that date; 429 without it is transient", async () => {
    const nowMs = Date.UTC(2027, 0, 4, 9, 0, 0);
    const ch = channel({ now: () => nowMs });
    receiver.respond = (_req, res) =>
      res.writeHead(503, { "retry-after": new Date(nowMs + 90_000).toUTCString() }).end();
    const err = await sendError(ch, delivery(receiver.url));
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAfterMs).toBe(90_000);

    receiver.respond = (_req, res) => res.writeHead(429).end();
    const bare = await sendError(ch, delivery(receiver.url));
    expect(bare).toBeInstanceOf(TransientError);
  });

  it.each([400, 404, 410])(
    "DEL-5: HTTP %i is permanent, with status and a body excerpt",
    async (status) => {
      const ch = channel();
      receiver.respond = (_req, res) =>
        res.writeHead(status).end(`{"error":"no such hook ${status}"}`);
      const err = await sendError(ch, delivery(receiver.url));
      expect(err).toBeInstanceOf(PermanentError);
      expect((err as PermanentError).code).toBe("HTTP_REJECTED");
      expect((err as Error).message).toContain(`HTTP ${status}`);
      expect((err as Error).message).toContain(`no such hook ${status}`);
    },
  );

  it("DEL-5: a 301 is permanent and the redirect is not followed", async () => {
    const ch = channel();
    receiver.respond = (req, res) =>
      req.url === "/hooks/reminders"
        ? res.writeHead(301, { location: `${receiver.url}/moved` }).end()
        : res.writeHead(200).end();
    const err = await sendError(ch, delivery(receiver.url));
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as PermanentError).code).toBe("HTTP_REDIRECT");
    expect(receiver.requests).toHaveLength(1);
  });

  it("CH-1: a receiver that never answers times out as transient after ctx.timeoutMs", async () => {
    // The channel's timer runs on the test clock: the send is cut when that clock reaches
    // ctx.timeoutMs (below the channel's own cap), however slow the machine is.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const ch = channel({ timeoutMs: 60_000 });
      let connectionClosed = false;
      receiver.respond = (_req, res) => {
        res.on("close", () => (connectionClosed = true));
        /* never answer */
      };
      let settled = false;
      const pending = sendError(ch, delivery(receiver.url), ctx({ timeoutMs: 200 })).finally(
        () => (settled = true),
      );
      while (receiver.requests.length === 0) await new Promise((r) => setImmediate(r));
      await vi.advanceTimersByTimeAsync(199);
      expect(settled).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      // The abort settles the send within a few turns of the event loop (bounded by count).
      for (let turn = 0; turn < 10_000 && !settled; turn++)
        await new Promise((r) => setImmediate(r));
      expect(settled).toBe(true);
      const err = await pending;
      expect(err).toBeInstanceOf(TransientError);
      expect((err as TransientError).code).toBe("SEND_TIMEOUT");
      expect((err as Error).message).toContain("after 200 ms");
      // DEL-5: the request reached the receiver, so it may have been acted on.
      expect((err as TransientError).maybeDelivered).toBe(true);
      // The abort reached the socket: the receiver saw the connection go away.
      while (!connectionClosed) await new Promise((r) => setImmediate(r));
    } finally {
      vi.useRealTimers();
    }
  });

  it("CH-1: an aborted ctx.signal stops the send as transient", async () => {
    const ch = channel();
    receiver.respond = () => {
      /* never answer */
    };
    const controller = new AbortController();
    const pending = sendError(ch, delivery(receiver.url), ctx({ signal: controller.signal }));
    while (receiver.requests.length === 0) await new Promise((r) => setImmediate(r));
    controller.abort();
    const err = await pending;
    expect(err).toBeInstanceOf(TransientError);
    expect((err as TransientError).code).toBe("SEND_ABORTED");
    expect((err as TransientError).maybeDelivered).toBe(true);
  });

  it("CH-1: connection refused is transient", async () => {
    const ch = channel();
    const port = await freePort();
    const err = await sendError(ch, delivery(`http://127.0.0.1:${port}/`));
    expect(err).toBeInstanceOf(TransientError);
    expect((err as TransientError).code).toBe("NETWORK_ERROR");
    expect((err as Error).message).toContain("ECONNREFUSED");
    // Nothing left this host: a retry cannot duplicate anything.
    expect((err as TransientError).maybeDelivered).toBe(false);
  });

  it("CH-1: a huge error body is read only up to the cap", async () => {
    const ch = channel({ maxResponseBytes: 1024 });
    receiver.respond = (_req, res) => res.writeHead(400).end("x".repeat(4 * 1024 * 1024));
    const err = await sendError(ch, delivery(receiver.url));
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message.length).toBeLessThan(400);
  });
});

describe("webhook channel: target validation and SSRF", () => {
  const forbidden = [
    "http://127.0.0.1/hook",
    "http://10.0.0.1/hook",
    "http://169.254.169.254/latest/meta-data",
    "http://[::1]/hook",
    "http://localhost/hook",
    "http://api.localhost/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://[::ffff:a00:1]/hook",
    "http://2130706433/hook",
    "http://0x7f.1/hook",
    "http://192.168.1.10/hook",
    "http://100.64.0.1/hook",
    "http://[fd00::1]/hook",
    "http://[fe80::1]/hook",
    "http://0.0.0.0/hook",
  ];

  it.each(forbidden)(
    "CH-1: validateTarget refuses %s unless private targets are allowed",
    (url) => {
      const strict = channel({ allowPrivateTargets: false });
      let caught: unknown;
      try {
        strict.validateTarget({ url });
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ValidationError);
      expect((caught as ValidationError).issues[0]?.field).toBe("target.url");
      expect(() => channel({ allowPrivateTargets: true }).validateTarget({ url })).not.toThrow();
    },
  );

  it("CH-1: public hosts and addresses pass validation", () => {
    const strict = channel({ allowPrivateTargets: false });
    expect(() => strict.validateTarget({ url: "https://hooks.example.com/x" })).not.toThrow();
    expect(() =>
      strict.validateTarget({ url: "https://93.184.216.34/x", secret: "whsec_AAAA" }),
    ).not.toThrow();
    expect(() => strict.validateTarget({ url: "https://[2606:4700::1111]/x" })).not.toThrow();
  });

  it("CH-1: a loopback target is refused at send time without any traffic", async () => {
    const { logger, lines } = memoryLogger();
    const strict = channel({ allowPrivateTargets: false, logger });
    for (const url of [
      receiver.url,
      `http://localhost:${receiver.port}/`,
      `http://[::ffff:127.0.0.1]:${receiver.port}/`,
    ]) {
      const err = await sendError(strict, delivery(url));
      expect(err).toBeInstanceOf(PermanentError);
      expect((err as PermanentError).code).toBe("TARGET_FORBIDDEN");
    }
    expect(receiver.requests).toHaveLength(0);
    expect(lines.some((l) => l.level === "warn" && l.msg === "webhook target refused")).toBe(true);
  });

  it("CH-1: a hostname that resolves to loopback is refused at connect time (DNS rebinding)", async () => {
    const lookups: string[] = [];
    const strict = channel({
      allowPrivateTargets: false,
      resolve: async (hostname) => {
        lookups.push(hostname);
        return [{ address: "127.0.0.1", family: 4 }];
      },
    });
    const url = `http://rebind.example.test:${receiver.port}/hooks/reminders`;
    // The name looks public when validated …
    expect(() => strict.validateTarget({ url })).not.toThrow();
    // … and is refused on the address it resolves to when connecting.
    const err = await sendError(strict, delivery(url));
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as PermanentError).code).toBe("TARGET_FORBIDDEN");
    expect((err as Error).message).toContain("127.0.0.1");
    expect(lookups).toContain("rebind.example.test");
    expect(receiver.requests).toHaveLength(0);
  });

  it("CH-1: an allow-listed host, address or range passes", async () => {
    const byName = channel({
      allowPrivateTargets: false,
      allowlist: ["hooks.internal.test"],
      resolve: async () => [{ address: "127.0.0.1", family: 4 }],
    });
    const namedUrl = `http://hooks.internal.test:${receiver.port}/hooks/reminders`;
    expect(() => byName.validateTarget({ url: namedUrl })).not.toThrow();
    expect(await byName.send(delivery(namedUrl), ctx())).toMatchObject({ status: 200 });

    const byAddress = channel({ allowPrivateTargets: false, allowlist: ["127.0.0.1"] });
    expect(() => byAddress.validateTarget({ url: receiver.url })).not.toThrow();
    expect(await byAddress.send(delivery(receiver.url), ctx())).toMatchObject({ status: 200 });

    const byRange = channel({ allowPrivateTargets: false, allowlist: ["127.0.0.0/8"] });
    expect(await byRange.send(delivery(receiver.url), ctx())).toMatchObject({ status: 200 });
    expect(() => byRange.validateTarget({ url: "http://10.0.0.1/" })).toThrow(ValidationError);

    expect(receiver.requests).toHaveLength(3);
  });

  it("CH-1: a malformed allow-list entry is refused", () => {
    expect(() => createWebhookChannel({ allowlist: ["10.0.0.0/33"] })).toThrow(ValidationError);
    expect(() => createWebhookChannel({ allowlist: ["not a host"] })).toThrow(ValidationError);
  });

  it("CH-1: validateTarget checks the target's shape", () => {
    const ch = channel();
    const noDefault = channel({ secret: undefined });
    const fieldOf = (fn: () => void): string | undefined => {
      try {
        fn();
      } catch (err) {
        expect(err).toBeInstanceOf(ValidationError);
        return (err as ValidationError).issues[0]?.field;
      }
      return undefined;
    };
    expect(fieldOf(() => ch.validateTarget(undefined))).toBe("target");
    expect(fieldOf(() => ch.validateTarget("http://x.test"))).toBe("target");
    expect(fieldOf(() => ch.validateTarget({}))).toBe("target.url");
    expect(fieldOf(() => ch.validateTarget({ url: 42 }))).toBe("target.url");
    expect(fieldOf(() => ch.validateTarget({ url: "not a url" }))).toBe("target.url");
    expect(fieldOf(() => ch.validateTarget({ url: "ftp://files.example.com/x" }))).toBe(
      "target.url",
    );
    expect(fieldOf(() => ch.validateTarget({ url: "https://user:pw@example.com/x" }))).toBe(
      "target.url",
    );
    expect(fieldOf(() => ch.validateTarget({ url: "https://example.com/x", secret: 7 }))).toBe(
      "target.secret",
    );
    expect(
      fieldOf(() => ch.validateTarget({ url: "https://example.com/x", secret: "whsec_!!" })),
    ).toBe("target.secret");
    expect(fieldOf(() => ch.validateTarget({ url: "https://example.com/x", extra: 1 }))).toBe(
      "target.extra",
    );
    expect(fieldOf(() => noDefault.validateTarget({ url: "https://example.com/x" }))).toBe(
      "target.secret",
    );
    expect(
      fieldOf(() => noDefault.validateTarget({ url: "https://example.com/x", secret: SECRET })),
    ).toBeUndefined();
  });

  it("DEL-5: an invalid target at send time is permanent, not retried", async () => {
    const ch = channel();
    const err = await sendError(ch, delivery("x", { target: { url: "ftp://example.com/" } }));
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as PermanentError).code).toBe("TARGET_INVALID");
    expect(receiver.requests).toHaveLength(0);
  });
});
