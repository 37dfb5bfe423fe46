/**
 * The `slack` and `discord` channels (CH-3): one POST per delivery to an incoming-webhook
 * URL, the body in the service's own format, built from the reminder's template (CH-6).
 *
 * Neither service de-duplicates incoming-webhook posts (there is no idempotency key to
 * send), so both channels declare themselves not idempotent: a send whose outcome is
 * unknown (timeout after the request left, lost lease) becomes `in_doubt` unless the
 * reminder opts into at-least-once (DEL-6).
 *
 * Outcomes:
 * - 2xx → sent (Discord: `?wait=true` is added, so the created message's `id` is recorded);
 * - 429 → {@link RateLimitedError} after Slack's `Retry-After` header (seconds) or
 *   Discord's JSON `retry_after` (seconds, fractional), header as fallback; no attempt
 *   spent (DEL-13); without either, transient;
 * - 408, 5xx, network errors, timeouts → {@link TransientError};
 * - other 4xx (Slack `invalid_payload`, `channel_not_found`, `channel_is_archived`;
 *   Discord `Unknown Webhook`) and 3xx → {@link PermanentError};
 * - a private target → {@link PermanentError} `TARGET_FORBIDDEN` (the webhook's SSRF rules).
 */
import { PermanentError, RateLimitedError, TransientError } from "../errors/index.js";
import type { FieldIssue } from "../errors/index.js";
import { lazyChild } from "../observability/logger.js";
import {
  checkTargetUrl,
  excerptOf,
  headerValue,
  parseRetryAfter,
  postCapped,
  type CappedResponse,
  httpChannelBase,
  targetFields,
  targetValidator,
  type HttpChannelOptions,
} from "./http.js";
import { DEFAULT_TEXT_TEMPLATE, renderTemplate, type RenderedMessage } from "./template.js";
import type { Channel, ChannelDelivery, SendContext, SendResult } from "./types.js";

/** A Slack or Discord reminder's target. */
export interface ChatTarget {
  /** The incoming-webhook URL (`https://hooks.slack.com/services/…`, `https://discord.com/api/webhooks/…`). */
  url: string;
}

/** Options of {@link createSlackChannel} and {@link createDiscordChannel}: those of every HTTP channel. */
export type ChatChannelOptions = HttpChannelOptions;

/** A chat channel, with a `close()` that releases its pooled connections. */
export interface ChatChannel extends Channel {
  readonly name: "slack" | "discord";
  readonly idempotent: false;
  close(): Promise<void>;
}

/** Slack's incoming-webhook body: `text` (fallback and notification) and `blocks`. */
export interface SlackBody {
  text: string;
  blocks?: Array<Record<string, unknown>>;
}

/** Discord's execute-webhook body; mentions are never parsed from reminder text. */
export interface DiscordBody {
  content?: string;
  embeds?: Array<{ title?: string; description?: string; timestamp?: string }>;
  allowed_mentions: { parse: string[] };
  /** From the delivery key ({@link discordNonce}): Discord drops a repeat it saw recently. */
  nonce: string;
  /** Asks Discord to refuse a second message with the same nonce (CH-3). */
  enforce_nonce: true;
}

/** Longest nonce Discord takes, characters. */
const DISCORD_NONCE_CHARS = 25;

/**
 * CH-3: the Discord nonce of a delivery: the first 25 characters (Discord's limit) of its
 * delivery key's hex part (100 bits), the same for every attempt, so with
 * `enforce_nonce` Discord refuses a second message of the same delivery sent within its
 * de-duplication window (a few minutes, by Discord's documentation).
 */
export function discordNonce(deliveryKey: string): string {
  return deliveryKey.replace(/^dk_/, "").slice(0, DISCORD_NONCE_CHARS);
}

const MAX_RESPONSE_BYTES = 16 * 1024;

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** Slack's escape of `&`, `<` and `>` in message text. */
function escapeSlackText(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function rendered(
  delivery: ChannelDelivery,
  textEscape: "slack" | "none",
): Promise<RenderedMessage> {
  const template = { text: DEFAULT_TEXT_TEMPLATE, ...(delivery.template ?? {}) };
  return renderTemplate(template, delivery, { textEscape });
}

/**
 * The Slack body of a delivery: `text` from the template (outputs Slack-escaped), and,
 * when the template has a `subject`, a header block above a mrkdwn section.
 */
export async function slackBody(delivery: ChannelDelivery): Promise<SlackBody> {
  const m = await rendered(delivery, "slack");
  const text = m.text ?? "";
  if (!m.subject) return { text: cut(text, 40_000) };
  return {
    // The subject is plain text (not escaped when rendered): escaped here for mrkdwn.
    text: cut(`${escapeSlackText(m.subject)}\n${text}`, 40_000),
    blocks: [
      { type: "header", text: { type: "plain_text", text: cut(m.subject, 150), emoji: true } },
      ...(text.trim()
        ? [{ type: "section", text: { type: "mrkdwn", text: cut(text, 3_000) } }]
        : []),
    ],
  };
}

/**
 * The Discord body of a delivery: `content` from the template's text, or, when the
 * template has a `subject`, one embed titled with it (description: the text, timestamp:
 * the due time). `allowed_mentions` is empty, so `@everyone` in a payload pings no one;
 * `nonce` (from the delivery key) with `enforce_nonce` lets Discord drop a repeat (CH-3).
 */
export async function discordBody(delivery: ChannelDelivery): Promise<DiscordBody> {
  const m = await rendered(delivery, "none");
  const text = m.text ?? "";
  const dedupe = { nonce: discordNonce(delivery.deliveryKey), enforce_nonce: true as const };
  if (!m.subject) {
    return { content: cut(text, 2_000), allowed_mentions: { parse: [] }, ...dedupe };
  }
  return {
    embeds: [
      {
        title: cut(m.subject, 256),
        ...(text.trim() ? { description: cut(text, 4_096) } : {}),
        timestamp: delivery.dueAt.toISOString(),
      },
    ],
    allowed_mentions: { parse: [] },
    ...dedupe,
  };
}

function createChatChannel(name: "slack" | "discord", options: ChatChannelOptions): ChatChannel {
  const base = httpChannelBase(options, `punctual-${name}/1`);
  const { timeoutCapMs, userAgent, logger, maxRetryAfterMs, now, http } = base;

  function inspect(target: unknown): { issues: FieldIssue[]; forbidden: boolean } {
    const { fields: t, issues } = targetFields(target, ["url"], "{ url }");
    if (t === null) return { issues, forbidden: false };
    const problem = checkTargetUrl(http, t.url);
    // The URL is the webhook's credential: never echoed back in an error.
    if (problem) issues.push({ field: "target.url", message: problem.message });
    return { issues, forbidden: problem?.forbidden ?? false };
  }

  /** Discord's `retry_after` (seconds, JSON body), else the `Retry-After` header. */
  function retryAfterMs(response: CappedResponse): number | null {
    if (name === "discord") {
      try {
        const parsed = JSON.parse(response.body) as { retry_after?: unknown };
        if (typeof parsed.retry_after === "number" && Number.isFinite(parsed.retry_after)) {
          return Math.min(Math.max(Math.ceil(parsed.retry_after * 1000), 0), maxRetryAfterMs);
        }
      } catch {
        // not JSON: fall back to the header
      }
    }
    return parseRetryAfter(headerValue(response.headers, "retry-after"), now(), maxRetryAfterMs);
  }

  function classify(response: CappedResponse): Error {
    const { status } = response;
    const excerpt = excerptOf(response.body);
    const detail = `${name} answered HTTP ${status}${excerpt ? `: ${excerpt}` : ""}`;
    if (status === 429) {
      const wait = retryAfterMs(response);
      if (wait !== null) {
        return new RateLimitedError(`${detail} (retry after ${wait} ms)`, wait, { status });
      }
      return new TransientError(detail, { code: "HTTP_RETRYABLE", status });
    }
    if (status === 408 || (status >= 500 && status <= 599)) {
      return new TransientError(detail, { code: "HTTP_RETRYABLE", status });
    }
    if (status >= 300 && status <= 399) {
      return new PermanentError(`${name} answered HTTP ${status} (redirects are not followed)`, {
        code: "HTTP_REDIRECT",
        status,
      });
    }
    return new PermanentError(detail, { code: "HTTP_REJECTED", status });
  }

  async function send(delivery: ChannelDelivery, ctx: SendContext): Promise<SendResult> {
    if (base.closed)
      throw new TransientError(`${name} channel is closed`, { code: "CHANNEL_CLOSED" });
    const { issues, forbidden } = inspect(delivery.target);
    if (issues.length > 0) {
      if (forbidden) logger.warn({ deliveryKey: delivery.deliveryKey }, `${name} target refused`);
      throw new PermanentError(
        `${name} target refused: ${issues.map((i) => `${i.field}: ${i.message}`).join("; ")}`,
        { code: forbidden ? "TARGET_FORBIDDEN" : "TARGET_INVALID" },
      );
    }
    const target = delivery.target as ChatTarget;
    const body = name === "slack" ? await slackBody(delivery) : await discordBody(delivery);
    let url = target.url;
    if (name === "discord") {
      const u = new URL(target.url);
      u.searchParams.set("wait", "true");
      url = u.toString();
    }
    const log = lazyChild(logger, {
      channel: name,
      deliveryKey: delivery.deliveryKey,
      attempt: delivery.attempt,
    });
    const response = await postCapped(http, {
      label: name,
      url,
      headers: { "content-type": "application/json", "user-agent": userAgent },
      body: JSON.stringify(body),
      timeoutMs: Math.min(ctx.timeoutMs, timeoutCapMs),
      signal: ctx.signal,
      maxResponseBytes: MAX_RESPONSE_BYTES,
      log,
    });
    log.debug({ status: response.status }, `${name} sent`);
    if (response.status >= 200 && response.status < 300) {
      let messageId: string | null = null;
      if (name === "discord") {
        try {
          const id = (JSON.parse(response.body) as { id?: unknown }).id;
          if (typeof id === "string") messageId = id;
        } catch {
          // 204 or not JSON: no id
        }
      }
      return { status: response.status, messageId };
    }
    throw classify(response);
  }

  return {
    name,
    idempotent: false,
    digests: true,
    validateTarget: targetValidator(inspect),
    send,
    close: base.close,
  };
}

/**
 * Creates the `slack` channel (CH-3): target `{ url }`, an incoming-webhook URL.
 * `validateTarget` throws {@link ValidationError} (`target`, `target.url`); `send` throws
 * the errors listed in the module comment.
 * @throws ValidationError (field `allowlist.<i>`) for a malformed allow-list entry.
 */
export function createSlackChannel(options: ChatChannelOptions = {}): ChatChannel {
  return createChatChannel("slack", options);
}

/**
 * Creates the `discord` channel (CH-3): target `{ url }`, a Discord webhook URL.
 * `validateTarget` throws {@link ValidationError} (`target`, `target.url`); `send` throws
 * the errors listed in the module comment.
 * @throws ValidationError (field `allowlist.<i>`) for a malformed allow-list entry.
 */
export function createDiscordChannel(options: ChatChannelOptions = {}): ChatChannel {
  return createChatChannel("discord", options);
}
