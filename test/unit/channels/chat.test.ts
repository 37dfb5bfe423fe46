import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  createDiscordChannel,
  createSlackChannel,
  slackBody,
  type ChatChannel,
  type ChatChannelOptions,
} from "../../../src/channels/index.js";
import type { ChannelDelivery, SendContext } from "../../../src/channels/index.js";
import {
  PermanentError,
  RateLimitedError,
  TransientError,
  ValidationError,
} from "../../../src/errors/index.js";
import { startReceiver, type Receiver } from "./receiver.js";

function delivery(url: string, extra: Partial<ChannelDelivery> = {}): ChannelDelivery {
  return {
    deliveryKey: "dk_chat",
    scheduleId: "s1",
    reminderKey: "standup",
    occurrenceAt: new Date("2027-01-04T09:00:00.000Z"),
    dueAt: new Date("2027-01-04T08:45:00.000Z"),
    attempt: 1,
    late: false,
    payload: { title: "Standup <@U024BE7LH> & @everyone" },
    target: { url },
    tzid: "Europe/Paris",
    channel: "slack",
    ...extra,
  };
}

function ctx(extra: Partial<SendContext> = {}): SendContext {
  return {
    idempotencyKey: "dk_chat",
    signal: new AbortController().signal,
    timeoutMs: 5_000,
    ...extra,
  };
}

let receiver: Receiver;
const open: ChatChannel[] = [];

function slack(options: ChatChannelOptions = {}): ChatChannel {
  const ch = createSlackChannel({ allowPrivateTargets: true, ...options });
  open.push(ch);
  return ch;
}
function discord(options: ChatChannelOptions = {}): ChatChannel {
  const ch = createDiscordChannel({ allowPrivateTargets: true, ...options });
  open.push(ch);
  return ch;
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
  receiver = await startReceiver();
});
afterEach(async () => {
  receiver.requests.length = 0;
  receiver.respond = (_req, res) => res.writeHead(200).end();
  await Promise.all(open.splice(0).map((c) => c.close()));
});
afterAll(async () => {
  await receiver.close();
});

describe("slack channel (CH-3)", () => {
  it("CH-3: posts Slack's own body: text with payload outputs escaped for mrkdwn", async () => {
    receiver.respond = (_req, res) =>
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    const result = await slack().send(delivery(receiver.url), ctx());
    expect(result).toEqual({ status: 200, messageId: null });
    expect(receiver.requests).toHaveLength(1);
    const req = receiver.requests[0]!;
    expect(req.method).toBe("POST");
    expect(req.headers["content-type"]).toBe("application/json");
    const body = JSON.parse(req.body) as { text: string; blocks?: unknown };
    // A payload cannot ping a user or a channel: <, > and & arrive escaped.
    // Locale data may put a narrow no-break space before AM: compare with plain spaces.
    expect(body.text.replace(/\s/g, " ")).toBe(
      "Reminder: Standup &lt;@U024BE7LH&gt; &amp; @everyone, due Monday, January 4, 2027 at 9:45 AM",
    );
    expect(body.blocks).toBeUndefined();
  });

  it("CH-3/CH-6: a template with a subject becomes a header block above a mrkdwn section", async () => {
    await slack().send(
      delivery(receiver.url, {
        template: {
          subject: "Standup in 15 minutes",
          text: "*{{ payload.title }}* at {{ occurrenceAt | format_time: 'Europe/Paris', 'fr-FR' }}",
        },
      }),
      ctx(),
    );
    const body = JSON.parse(receiver.requests[0]!.body) as {
      text: string;
      blocks: Array<{ type: string; text: { type: string; text: string } }>;
    };
    expect(body.blocks.map((b) => [b.type, b.text.type])).toEqual([
      ["header", "plain_text"],
      ["section", "mrkdwn"],
    ]);
    expect(body.blocks[0]!.text.text).toBe("Standup in 15 minutes");
    expect(body.blocks[1]!.text.text).toBe("*Standup &lt;@U024BE7LH&gt; &amp; @everyone* at 10:00");
    expect(body.text.startsWith("Standup in 15 minutes\n")).toBe(true);
  });

  it("CH-3: 429 with Retry-After is rate-limited with that delay; without it, transient", async () => {
    receiver.respond = (_req, res) =>
      res.writeHead(429, { "retry-after": "7" }).end("rate_limited");
    const limited = await sendError(slack().send(delivery(receiver.url), ctx()));
    expect(limited).toBeInstanceOf(RateLimitedError);
    expect(limited).toMatchObject({ retryAfterMs: 7_000, status: 429 });

    receiver.respond = (_req, res) => res.writeHead(429).end("rate_limited");
    const bare = await sendError(slack().send(delivery(receiver.url), ctx()));
    expect(bare).toBeInstanceOf(TransientError);
    expect(bare).not.toBeInstanceOf(RateLimitedError);
  });

  it("CH-3: Slack's 4xx answers are permanent, 5xx transient", async () => {
    receiver.respond = (_req, res) => res.writeHead(404).end("channel_not_found");
    const gone = await sendError(slack().send(delivery(receiver.url), ctx()));
    expect(gone).toBeInstanceOf(PermanentError);
    expect((gone as Error).message).toContain("channel_not_found");
    receiver.respond = (_req, res) => res.writeHead(500).end("oops");
    expect(await sendError(slack().send(delivery(receiver.url), ctx()))).toBeInstanceOf(
      TransientError,
    );
  });

  it("CH-3: not idempotent (Slack does not de-duplicate); private targets refused like the webhook's", async () => {
    const guarded = createSlackChannel();
    open.push(guarded);
    expect(guarded.idempotent).toBe(false);
    expect(() => guarded.validateTarget({ url: receiver.url })).toThrow(ValidationError);
    expect(() => guarded.validateTarget({ url: "https://169.254.169.254/latest" })).toThrow(
      /private, loopback/,
    );
    expect(() =>
      guarded.validateTarget({ url: "https://hooks.slack.com/services/T/B/x" }),
    ).not.toThrow();
    expect(() =>
      guarded.validateTarget({ url: "https://hooks.slack.com/x", channel: "#a" }),
    ).toThrow(/target\.channel/);
    const err = await sendError(guarded.send(delivery(receiver.url), ctx()));
    expect(err).toMatchObject({ code: "TARGET_FORBIDDEN" });
    expect(receiver.requests).toHaveLength(0);
  });
});

describe("discord channel (CH-3)", () => {
  it("CH-3: posts Discord's own body with mentions disabled, waits for the message and records its id", async () => {
    receiver.respond = (_req, res) =>
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ id: "1187000000000000001", type: 0 }));
    const result = await discord().send(delivery(receiver.url, { channel: "discord" }), ctx());
    expect(result).toEqual({ status: 200, messageId: "1187000000000000001" });
    const req = receiver.requests[0]!;
    expect(req.url).toBe("/hooks/reminders?wait=true");
    const body = JSON.parse(req.body) as Record<string, unknown>;
    expect({ ...body, content: String(body.content).replace(/\s/g, " ") }).toEqual({
      content: "Reminder: Standup <@U024BE7LH> & @everyone, due Monday, January 4, 2027 at 9:45 AM",
      allowed_mentions: { parse: [] },
      nonce: "chat",
      enforce_nonce: true,
    });
  });

  it("CH-3/CH-6: a template with a subject becomes an embed", async () => {
    receiver.respond = (_req, res) => res.writeHead(204).end();
    await discord().send(
      delivery(receiver.url, {
        template: { subject: "Standup", text: "Room {{ payload.room }}" },
        payload: { room: "Blue" },
      }),
      ctx(),
    );
    const body = JSON.parse(receiver.requests[0]!.body) as Record<string, unknown>;
    expect(body).toEqual({
      embeds: [
        { title: "Standup", description: "Room Blue", timestamp: "2027-01-04T08:45:00.000Z" },
      ],
      allowed_mentions: { parse: [] },
      nonce: "chat",
      enforce_nonce: true,
    });
  });

  it("CH-3: the nonce comes from the delivery key, the same on every attempt, with enforce_nonce", async () => {
    receiver.respond = (_req, res) => res.writeHead(204).end();
    const d = delivery(receiver.url, { channel: "discord" });
    await discord().send(d, ctx());
    await discord().send({ ...d, attempt: 2 }, ctx());
    const bodies = receiver.requests.map((r) => JSON.parse(r.body) as Record<string, unknown>);
    expect(bodies[0]!.nonce).toBe(d.deliveryKey.slice(3, 28));
    expect(bodies[1]!.nonce).toBe(bodies[0]!.nonce);
    expect(bodies.every((b) => b.enforce_nonce === true)).toBe(true);
  });

  it("DEL-19 / CH-3: a digest's Discord nonce comes from the digest id, so a resent digest is refused", async () => {
    receiver.respond = (_req, res) => res.writeHead(204).end();
    const digestId = "dg_0123456789abcdef0123456789abcdef";
    await discord().send(
      { ...delivery(receiver.url, { channel: "discord" }), deliveryKey: digestId },
      ctx(),
    );
    const body = JSON.parse(receiver.requests[0]!.body) as Record<string, unknown>;
    expect(body.nonce).toBe(digestId.slice(0, 25));
    expect(body.enforce_nonce).toBe(true);
  });

  it("CH-3: a 429 with JSON retry_after (seconds, fractional) is rate-limited with that delay", async () => {
    receiver.respond = (_req, res) =>
      res.writeHead(429, { "content-type": "application/json", "retry-after": "60" }).end(
        JSON.stringify({
          message: "You are being rate limited.",
          retry_after: 1.25,
          global: false,
        }),
      );
    const err = await sendError(discord().send(delivery(receiver.url), ctx()));
    expect(err).toBeInstanceOf(RateLimitedError);
    // The body's precise value wins over the rounded header.
    expect(err).toMatchObject({ retryAfterMs: 1_250, status: 429 });

    receiver.respond = (_req, res) => res.writeHead(429, { "retry-after": "3" }).end("slow down");
    expect(await sendError(discord().send(delivery(receiver.url), ctx()))).toMatchObject({
      retryAfterMs: 3_000,
    });
  });

  it("CH-3: Discord's unknown webhook (404) is permanent", async () => {
    receiver.respond = (_req, res) =>
      res.writeHead(404).end(JSON.stringify({ message: "Unknown Webhook", code: 10015 }));
    const err = await sendError(discord().send(delivery(receiver.url), ctx()));
    expect(err).toBeInstanceOf(PermanentError);
    expect(err).toMatchObject({ status: 404 });
  });
});

describe("Slack text escaping (CH-3)", () => {
  it("CH-3: the subject in the top-level text is escaped for Slack (&, <, >); the header block keeps it as written", async () => {
    const body = await slackBody(
      delivery("https://hooks.slack.com/services/x", {
        payload: { title: "<!channel> Tom & <Jerry>" },
        template: { subject: "{{ payload.title }}", text: "{{ payload.title }}" },
      }),
    );
    expect(body.text).toBe(
      "&lt;!channel&gt; Tom &amp; &lt;Jerry&gt;\n&lt;!channel&gt; Tom &amp; &lt;Jerry&gt;",
    );
    expect(body.blocks?.[0]).toMatchObject({
      type: "header",
      text: { type: "plain_text", text: "<!channel> Tom & <Jerry>" },
    });
  });
});
