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
import { lookup as dnsLookup } from "node:dns/promises";
import type { LookupAddress } from "node:dns";
import { Agent, buildConnector, request } from "undici";
import type { Dispatcher } from "undici";
import {
  PermanentError,
  RateLimitedError,
  TransientError,
  ValidationError,
} from "../errors/index.js";
import type { FieldIssue } from "../errors/index.js";
import { silentLogger } from "../observability/logger.js";
import type { Logger } from "../observability/logger.js";
import { TargetAllowlist, isForbiddenAddress, isIpLiteral, isLocalhostName } from "./address.js";
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
}

/** Resolves a hostname to its addresses (the shape of `dns.promises.lookup(h, { all: true })`). */
export type ResolveHost = (hostname: string) => Promise<LookupAddress[]>;

/** Options of {@link createWebhookChannel}. */
export interface WebhookChannelOptions {
  /**
   * Default signing secret (`whsec_<base64>`, from `PUNCTUAL_WEBHOOK_SECRET` via config);
   * a target's own `secret` wins. With neither, targets are refused.
   */
  secret?: string;
  /** Allow private, loopback and link-local targets (`PUNCTUAL_ALLOW_PRIVATE_TARGETS`). Default false. */
  allowPrivateTargets?: boolean;
  /** Hostnames (`hooks.internal`, `*.svc.local`), IPs or CIDRs allowed even when private. */
  allowlist?: readonly string[];
  /** Upper bound of one send in milliseconds; the send uses min(this, `ctx.timeoutMs`). Default 10 000. */
  timeoutMs?: number;
  /** `user-agent` header. Default `punctual-webhook/1`. */
  userAgent?: string;
  /** Where to log sends (debug) and refused targets (warn). Default silent. */
  logger?: Logger;
  /** Bytes of a response body read before the connection is closed. Default 65 536. */
  maxResponseBytes?: number;
  /** Ceiling of a receiver's `Retry-After`, in milliseconds. Default 3 600 000 (1 hour). */
  maxRetryAfterMs?: number;
  /** Hostname resolution (tests, custom DNS). Default `dns.promises.lookup` with `all: true`. */
  resolve?: ResolveHost;
  /** Current time in epoch milliseconds, for `webhook-timestamp` and HTTP-date `Retry-After`. Default `Date.now`. */
  now?: () => number;
}

/** The webhook channel, with a `close()` that releases its pooled connections. */
export interface WebhookChannel extends Channel {
  readonly name: "webhook";
  readonly idempotent: true;
  /** Closes idle connections and refuses new sends; waits for in-flight ones. */
  close(): Promise<void>;
}

/** Raised inside the connector when a target address is refused; mapped to `TARGET_FORBIDDEN`. */
class ForbiddenTargetError extends Error {
  readonly code = "TARGET_FORBIDDEN";
  constructor(
    readonly hostname: string,
    readonly address: string,
  ) {
    super(
      hostname === address
        ? `target address ${address} is private, loopback or reserved`
        : `target host ${hostname} resolves to ${address}, a private, loopback or reserved address`,
    );
  }
}

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;
const DEFAULT_MAX_RETRY_AFTER_MS = 60 * 60 * 1000;
const EXCERPT_CHARS = 200;

const defaultResolve: ResolveHost = (hostname) => dnsLookup(hostname, { all: true });

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
  const allowPrivate = options.allowPrivateTargets === true;
  const allowlist = new TargetAllowlist(options.allowlist ?? []);
  const timeoutCapMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const userAgent = options.userAgent ?? "punctual-webhook/1";
  const logger = options.logger ?? silentLogger();
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const maxRetryAfterMs = options.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS;
  const resolve = options.resolve ?? defaultResolve;
  const now = options.now ?? Date.now;

  /** Whether an IP address may be connected to. */
  const addressAllowed = (address: string): boolean =>
    allowPrivate || !isForbiddenAddress(address) || allowlist.allowsAddress(address);

  /** Whether a URL hostname may be used before any DNS (literal IPs and `localhost`). */
  const hostAllowedEarly = (hostname: string): boolean => {
    if (allowPrivate || allowlist.allowsHost(hostname)) return true;
    if (isIpLiteral(hostname)) return addressAllowed(hostname);
    if (isLocalhostName(hostname)) {
      return allowlist.allowsAddress("127.0.0.1") && allowlist.allowsAddress("::1");
    }
    return true;
  };

  // The address check runs where the socket is opened, on the addresses DNS returned for
  // this very connection: a name that resolves to a public address at validation and to a
  // private one at send time (DNS rebinding) is still refused.
  // Node's `lookup` option has three callback shapes (single, `all: true`); typed loosely here.
  type LookupCallback = (
    err: NodeJS.ErrnoException | null,
    address: string | LookupAddress[],
    family?: number,
  ) => void;
  const guardedLookup = (
    hostname: string,
    opts: { family?: number | string; all?: boolean },
    callback: LookupCallback,
  ): void => {
    resolve(hostname).then(
      (found) => {
        const family = opts.family === "IPv4" ? 4 : opts.family === "IPv6" ? 6 : opts.family;
        const addresses =
          family === 4 || family === 6 ? found.filter((a) => a.family === family) : found;
        const first = addresses[0];
        if (!first) {
          const err: NodeJS.ErrnoException = new Error(`no address found for ${hostname}`);
          err.code = "ENOTFOUND";
          callback(err, []);
          return;
        }
        if (!allowPrivate && !allowlist.allowsHost(hostname)) {
          const bad = addresses.find((a) => !addressAllowed(a.address));
          if (bad) {
            callback(new ForbiddenTargetError(hostname, bad.address), []);
            return;
          }
        }
        if (opts.all) callback(null, addresses);
        else callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, []),
    );
  };

  const baseConnect = buildConnector({
    timeout: timeoutCapMs,
    // undici's types do not carry net's `lookup` option through; it is passed to net/tls.connect.
    lookup: guardedLookup as unknown as undefined,
  });
  const connect: buildConnector.connector = (connectOptions, callback) => {
    const { hostname } = connectOptions;
    if (isIpLiteral(hostname) && !allowlist.allowsHost(hostname) && !addressAllowed(hostname)) {
      callback(new ForbiddenTargetError(hostname, hostname), null);
      return;
    }
    baseConnect(connectOptions, callback);
  };
  const agent = new Agent({ connect, keepAliveTimeout: 4_000 });
  let closed = false;

  function inspect(target: unknown): {
    issues: FieldIssue[];
    forbidden: boolean;
    target?: WebhookTarget;
  } {
    if (typeof target !== "object" || target === null || Array.isArray(target)) {
      return {
        issues: [{ field: "target", message: "must be an object { url, secret? }" }],
        forbidden: false,
      };
    }
    const t = target as Record<string, unknown>;
    const issues: FieldIssue[] = [];
    let forbidden = false;
    for (const key of Object.keys(t)) {
      if (key !== "url" && key !== "secret")
        issues.push({ field: `target.${key}`, message: "unknown field" });
    }
    if (typeof t.url !== "string" || t.url === "") {
      issues.push({ field: "target.url", message: "required: an http(s) URL", value: t.url });
    } else {
      let url: URL | null = null;
      try {
        url = new URL(t.url);
      } catch {
        issues.push({ field: "target.url", message: "not a valid URL", value: t.url });
      }
      if (url) {
        if (url.protocol !== "http:" && url.protocol !== "https:") {
          issues.push({ field: "target.url", message: "must use http or https", value: t.url });
        } else if (url.username || url.password) {
          issues.push({ field: "target.url", message: "must not contain credentials" });
        } else if (!hostAllowedEarly(url.hostname)) {
          forbidden = true;
          issues.push({
            field: "target.url",
            message:
              "private, loopback, link-local or reserved address refused (allow it with allowPrivateTargets or the allow-list)",
            value: t.url,
          });
        }
      }
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

  function parseRetryAfter(value: string | undefined): number | null {
    if (value === undefined) return null;
    const text = value.trim();
    let ms: number;
    if (/^\d+$/.test(text)) ms = Number(text) * 1000;
    else {
      const at = Date.parse(text);
      if (Number.isNaN(at)) return null;
      ms = at - now();
    }
    return Math.min(Math.max(ms, 0), maxRetryAfterMs);
  }

  async function send(delivery: ChannelDelivery, ctx: SendContext): Promise<SendResult> {
    if (closed) throw new TransientError("webhook channel is closed", { code: "CHANNEL_CLOSED" });
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
    // inspect() guarantees one of the two is present.
    const secret = (target.secret ?? options.secret) as string;
    const id = ctx.idempotencyKey || delivery.deliveryKey;
    const body: WebhookBody = { type: WEBHOOK_EVENT_TYPE, ...reminderMessage(delivery) };
    const text = JSON.stringify(body);
    const timestamp = Math.floor((ctx.now ?? now)() / 1000);
    const headers = {
      "content-type": "application/json",
      "user-agent": userAgent,
      "webhook-id": id,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": signWebhook(secret, id, timestamp, text),
    };

    const timeoutMs = Math.max(1, Math.min(ctx.timeoutMs, timeoutCapMs));
    if (ctx.signal.aborted) {
      throw new TransientError("webhook send aborted before it started", { code: "SEND_ABORTED" });
    }
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error(`webhook timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    const onAbort = (): void => controller.abort(ctx.signal.reason);
    ctx.signal.addEventListener("abort", onAbort, { once: true });
    const started = now();
    const log = logger.child({
      channel: "webhook",
      deliveryKey: delivery.deliveryKey,
      attempt: delivery.attempt,
    });

    try {
      let response: Dispatcher.ResponseData;
      try {
        response = await request(target.url, {
          method: "POST",
          headers,
          body: text,
          signal: controller.signal,
          dispatcher: agent,
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        });
      } catch (err) {
        throw classifyFailure(err, timedOut, ctx.signal.aborted, timeoutMs, log);
      }
      let excerpt: string;
      try {
        excerpt = await readCapped(response.body, maxResponseBytes);
      } catch (err) {
        // The status is known; a body cut short only matters for a 2xx, where it is
        // ignored, and for errors, whose class the status already decides.
        excerpt = "";
        if (response.statusCode < 200 || response.statusCode >= 300) {
          log.debug({ err }, "webhook response body unreadable");
        }
      }
      const status = response.statusCode;
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
      throw classifyStatus(status, response.headers, excerpt, parseRetryAfter);
    } finally {
      clearTimeout(timer);
      ctx.signal.removeEventListener("abort", onAbort);
    }
  }

  return {
    name: "webhook",
    idempotent: true,
    validateTarget(target: unknown): void {
      const { issues } = inspect(target);
      if (issues.length > 0) throw new ValidationError(issues);
    },
    send,
    async close(): Promise<void> {
      closed = true;
      await agent.close();
    },
  };
}

function headerValue(
  headers: Record<string, string | string[] | undefined>,
  name: string,
): string | undefined {
  const value = headers[name];
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined || first === "" ? undefined : first;
}

/**
 * Reads at most `cap` bytes of a response body as UTF-8; a longer body is cut and its
 * stream destroyed, which closes the connection instead of draining it.
 */
async function readCapped(body: Dispatcher.ResponseData["body"], cap: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    const room = cap - size;
    if (chunk.length >= room) {
      chunks.push(chunk.subarray(0, room));
      size = cap;
      break; // leaving the loop destroys the stream
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  if (!body.destroyed && size >= cap) body.destroy();
  return Buffer.concat(chunks).toString("utf8");
}

function excerptOf(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > EXCERPT_CHARS ? `${flat.slice(0, EXCERPT_CHARS)}…` : flat;
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
    return new TransientError(detail, { code: "HTTP_RETRYABLE" });
  }
  if (status === 408 || (status >= 500 && status <= 599)) {
    return new TransientError(detail, { code: "HTTP_RETRYABLE" });
  }
  if (status >= 300 && status <= 399) {
    const location = headerValue(headers, "location");
    return new PermanentError(
      `webhook receiver answered HTTP ${status} (redirects are not followed${location ? `; location ${location}` : ""})`,
      { code: "HTTP_REDIRECT" },
    );
  }
  return new PermanentError(detail, { code: "HTTP_REJECTED" });
}

function findForbidden(err: unknown): ForbiddenTargetError | null {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && current; depth++) {
    if (current instanceof ForbiddenTargetError) return current;
    current = (current as { cause?: unknown }).cause;
  }
  return null;
}

const UNDICI_TIMEOUT_CODES = new Set([
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/** Error codes raised before the request was sent: retrying them cannot duplicate anything. */
const NOT_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

function classifyFailure(
  err: unknown,
  timedOut: boolean,
  aborted: boolean,
  timeoutMs: number,
  log: Logger,
): Error {
  const forbidden = findForbidden(err);
  if (forbidden) {
    log.warn({ host: forbidden.hostname, address: forbidden.address }, "webhook target refused");
    return new PermanentError(`webhook ${forbidden.message}`, {
      code: "TARGET_FORBIDDEN",
      cause: err,
    });
  }
  const code =
    (err as { code?: unknown } | null)?.code ??
    ((err as { cause?: { code?: unknown } } | null)?.cause?.code as unknown);
  // Failures before any byte of the request left this host cannot have been delivered.
  const neverSent = typeof code === "string" && NOT_SENT_CODES.has(code);
  if (timedOut || (typeof code === "string" && UNDICI_TIMEOUT_CODES.has(code))) {
    return new TransientError(`webhook timed out after ${timeoutMs} ms`, {
      code: "SEND_TIMEOUT",
      cause: err,
      maybeDelivered: !neverSent,
    });
  }
  if (aborted)
    return new TransientError("webhook send aborted", {
      code: "SEND_ABORTED",
      cause: err,
      maybeDelivered: true,
    });
  const message = err instanceof Error ? err.message : String(err);
  return new TransientError(
    `webhook network error${typeof code === "string" ? ` ${code}` : ""}: ${message}`,
    {
      maybeDelivered: !neverSent,
      code: "NETWORK_ERROR",
      cause: err,
    },
  );
}
