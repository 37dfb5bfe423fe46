/**
 * The `webhook` channel (CH-1): one signed JSON POST per delivery, following Standard
 * Webhooks. Receivers get the delivery key as `webhook-id` and are expected to
 * de-duplicate on it, so the channel declares itself idempotent (DEL-6): a send whose
 * outcome is unknown is retried with the same id.
 *
 * Outcome classification (DEL-4, DEL-5, DEL-13):
 * - 2xx → sent;
 * - 408, 5xx, network errors, timeouts → {@link TransientError};
 * - 429 or 503 with `Retry-After` → {@link RateLimitedError}; without it, transient;
 * - 3xx (redirects are never followed) and other 4xx → {@link PermanentError};
 * - a target that is or resolves to a private address → {@link PermanentError} with code
 *   `TARGET_FORBIDDEN`, unless allowed (no SSRF).
 */
import { PermanentError, RateLimitedError, TransientError } from "../errors/index.js";
import type { FieldIssue } from "../errors/index.js";
import { lazyChild } from "../observability/logger.js";
import {
  checkTargetUrl,
  excerptOf,
  headerValue,
  parseRetryAfter as parseRetryAfterHeader,
  postCapped,
  httpChannelBase,
  targetFields,
  targetValidator,
  type HttpChannelOptions,
} from "./http.js";
import { renderTemplate, type RenderedMessage } from "./template.js";
import { signWebhook, WEBHOOK_SECRET_PREFIX } from "./webhook-signature.js";
import {
  reminderMessage,
  type Channel,
  type ChannelDelivery,
  type ReminderMessage,
  type SendContext,
  type SendResult,
} from "./types.js";

export {
  signWebhook,
  verifyWebhook,
  webhookSecretKey,
  WEBHOOK_SECRET_PREFIX,
  DEFAULT_TOLERANCE_SECONDS,
} from "./webhook-signature.js";
export type { WebhookHeaders } from "./webhook-signature.js";

/** A webhook reminder's target. */
export interface WebhookTarget {
  /** `http:` or `https:` URL the delivery is POSTed to. */
  url: string;
  /** Signing secret for this target (`whsec_<base64>`); overrides the channel default. */
  secret?: string;
}

/** The `type` field of every webhook body. */
export const WEBHOOK_EVENT_TYPE = "reminder.due";

/** The JSON body of a webhook request. Instants are ISO 8601 UTC with `Z`. */
export interface WebhookBody extends ReminderMessage {
  type: typeof WEBHOOK_EVENT_TYPE;
  /** The reminder's template rendered (CH-6); present only when it has one. */
  rendered?: RenderedMessage;
}

export type { ResolveHost } from "./http.js";

/** Options of {@link createWebhookChannel}. */
/**
 * Options of {@link createWebhookChannel}: those of every HTTP channel (its `user-agent`
 * defaults to `punctual-webhook/1`, `now` also stamps `webhook-timestamp`) and these.
 */
export interface WebhookChannelOptions extends HttpChannelOptions {
  /**
   * Default signing secret (`whsec_<base64>`, from `PUNCTUAL_WEBHOOK_SECRET` via config);
   * a target's own `secret` wins. With neither, targets are refused.
   */
  secret?: string;
  /**
   * The default secrets at send time, when they can change while the process runs (OPS-11:
   * a rotation stored in the database): `current` replaces `secret`, and each of `previous`
   * (secrets inside their overlap window) adds a signature, so the `webhook-signature`
   * header carries one space-separated `v1,` entry per secret (Standard Webhooks). Used only
   * for targets without their own secret; null falls back to `secret`. `tenant` is the
   * delivery's tenant: a tenant with its own secret gets that one (CH-1, API-2).
   */
  signingSecrets?: (
    nowMs: number,
    tenant: string | undefined,
  ) => { current: string; previous: readonly string[] } | null;
  /** Bytes of a response body read before the connection is closed. Default 65 536. */
  maxResponseBytes?: number;
}

/** The webhook channel, with a `close()` that releases its pooled connections. */
export interface WebhookChannel extends Channel {
  readonly name: "webhook";
  readonly idempotent: true;
  /** Closes idle connections and refuses new sends; waits for in-flight ones. */
  close(): Promise<void>;
}

const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * Creates the webhook channel.
 *
 * `validateTarget` throws {@link ValidationError} (`target`, `target.url`,
 * `target.secret`). `send` resolves `{ status, messageId }` on 2xx (`messageId` from the
 * response's `webhook-id` or `x-message-id` header, else null) and otherwise throws
 * {@link TransientError}, {@link RateLimitedError} or {@link PermanentError} as listed in
 * the module comment.
 *
 * @throws ValidationError (field `allowlist.<i>`) for a malformed allow-list entry.
 */
export function createWebhookChannel(options: WebhookChannelOptions = {}): WebhookChannel {
  const base = httpChannelBase(options, "punctual-webhook/1");
  const { timeoutCapMs, userAgent, logger, maxRetryAfterMs, now, http } = base;
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;

  function inspect(target: unknown): {
    issues: FieldIssue[];
    forbidden: boolean;
    target?: WebhookTarget;
  } {
    const { fields: t, issues } = targetFields(target, ["url", "secret"], "{ url, secret? }");
    if (t === null) return { issues, forbidden: false };
    let forbidden = false;
    const problem = checkTargetUrl(http, t.url);
    if (problem) {
      forbidden = problem.forbidden;
      issues.push({
        field: "target.url",
        message: problem.message,
        ...(problem.message.includes("credentials") ? {} : { value: t.url }),
      });
    }
    if (t.secret !== undefined) {
      if (typeof t.secret !== "string" || t.secret === "") {
        issues.push({ field: "target.secret", message: "must be a non-empty string" });
      } else if (
        t.secret.startsWith(WEBHOOK_SECRET_PREFIX) &&
        !/^[A-Za-z0-9+/]+={0,2}$/.test(t.secret.slice(WEBHOOK_SECRET_PREFIX.length))
      ) {
        issues.push({
          field: "target.secret",
          message: "whsec_ secret must be followed by base64",
        });
      }
    } else if (options.secret === undefined) {
      issues.push({
        field: "target.secret",
        message: "required: no default webhook secret is configured (PUNCTUAL_WEBHOOK_SECRET)",
      });
    }
    return issues.length > 0
      ? { issues, forbidden }
      : {
          issues,
          forbidden,
          target: { url: t.url as string, secret: t.secret as string | undefined },
        };
  }

  const parseRetryAfter = (value: string | undefined): number | null =>
    parseRetryAfterHeader(value, now(), maxRetryAfterMs);

  async function send(delivery: ChannelDelivery, ctx: SendContext): Promise<SendResult> {
    if (base.closed)
      throw new TransientError("webhook channel is closed", { code: "CHANNEL_CLOSED" });
    const checked = inspect(delivery.target);
    if (!checked.target) {
      const message = checked.issues.map((i) => `${i.field}: ${i.message}`).join("; ");
      if (checked.forbidden)
        logger.warn({ deliveryKey: delivery.deliveryKey }, "webhook target refused");
      throw new PermanentError(`webhook target refused: ${message}`, {
        code: checked.forbidden ? "TARGET_FORBIDDEN" : "TARGET_INVALID",
      });
    }
    const target = checked.target;
    const id = ctx.idempotencyKey || delivery.deliveryKey;
    const body: WebhookBody = { type: WEBHOOK_EVENT_TYPE, ...reminderMessage(delivery) };
    if (delivery.template) body.rendered = await renderTemplate(delivery.template, delivery);
    const text = JSON.stringify(body);
    const nowMs = (ctx.now ?? now)();
    const timestamp = Math.floor(nowMs / 1000);
    // inspect() guarantees a target secret or a default one.
    const live =
      target.secret === undefined
        ? (options.signingSecrets?.(nowMs, delivery.tenant) ?? null)
        : null;
    const secrets = live
      ? [live.current, ...live.previous]
      : [(target.secret ?? options.secret) as string];
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "user-agent": userAgent,
      "webhook-id": id,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": secrets.map((s) => signWebhook(s, id, timestamp, text)).join(" "),
    };
    // OPS-15: W3C Trace Context, so the receiver's span is a child of this send's.
    if (delivery.traceParent !== undefined) headers.traceparent = delivery.traceParent;
    const started = now();
    const log = lazyChild(logger, {
      channel: "webhook",
      deliveryKey: delivery.deliveryKey,
      attempt: delivery.attempt,
    });
    const response = await postCapped(http, {
      label: "webhook",
      url: target.url,
      headers,
      body: text,
      timeoutMs: Math.min(ctx.timeoutMs, timeoutCapMs),
      signal: ctx.signal,
      maxResponseBytes,
      log,
    });
    const status = response.status;
    log.debug({ status, durationMs: now() - started }, "webhook sent");
    if (status >= 200 && status < 300) {
      return {
        status,
        messageId:
          headerValue(response.headers, "webhook-id") ??
          headerValue(response.headers, "x-message-id") ??
          null,
      };
    }
    throw classifyStatus(status, response.headers, response.body, parseRetryAfter);
  }

  return {
    name: "webhook",
    idempotent: true,
    digests: true,
    validateTarget: targetValidator(inspect),
    send,
    close: base.close,
  };
}

function classifyStatus(
  status: number,
  headers: Record<string, string | string[] | undefined>,
  body: string,
  parseRetryAfter: (value: string | undefined) => number | null,
): Error {
  const excerpt = excerptOf(body);
  const detail = `webhook receiver answered HTTP ${status}${excerpt ? `: ${excerpt}` : ""}`;
  if (status === 429 || status === 503) {
    const retryAfterMs = parseRetryAfter(headerValue(headers, "retry-after"));
    if (retryAfterMs !== null)
      return new RateLimitedError(`${detail} (retry after ${retryAfterMs} ms)`, retryAfterMs, {
        status,
      });
    return new TransientError(detail, { code: "HTTP_RETRYABLE", status });
  }
  if (status === 408 || (status >= 500 && status <= 599)) {
    return new TransientError(detail, { code: "HTTP_RETRYABLE", status });
  }
  if (status >= 300 && status <= 399) {
    const location = headerValue(headers, "location");
    return new PermanentError(
      `webhook receiver answered HTTP ${status} (redirects are not followed${location ? `; location ${location}` : ""})`,
      { code: "HTTP_REDIRECT", status },
    );
  }
  return new PermanentError(detail, { code: "HTTP_REJECTED", status });
}
