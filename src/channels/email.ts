/**
 * The `email` channel (CH-2): one message per delivery over SMTP (nodemailer's SMTP
 * client and MIME composer), to the server of `PUNCTUAL_SMTP_URL`.
 *
 * Every message carries `Message-ID: <{deliveryKey}@{domain}>`, so a message resent after
 * an unknown outcome is recognisably the same one (mail clients thread and many filters
 * drop duplicates by Message-ID), but SMTP servers do not de-duplicate on it: the channel
 * is not idempotent, and a send whose outcome is unknown becomes `in_doubt` unless the
 * reminder opts into at-least-once (DEL-6).
 *
 * Outcomes (RFC 5321 reply classes):
 * - 250 after the message → sent; the Message-ID is recorded as the message id;
 * - a 4xx reply at any step (greeting 421, MAIL/RCPT 450/451/452, after DATA 451), and
 *   503 → {@link TransientError} `SMTP_DEFERRED` (the server refused it for now: nothing
 *   was delivered);
 * - a 5xx reply (550 mailbox unavailable, 554, 535 authentication failed) →
 *   {@link PermanentError} `SMTP_REJECTED`;
 * - a connection refused, lost or timed out before the message's final dot was written →
 *   {@link TransientError} `SMTP_CONNECTION` / `SEND_TIMEOUT`, not delivered;
 * - the same after the final dot, before the server's reply → `maybeDelivered`: the
 *   server may have queued it (in doubt at most once, DEL-5).
 *
 * The SMTP URL holds the server's password: it is never logged nor put in an error. Every
 * error leaving the channel (message, stack and cause) is redacted by the password's value,
 * in each form it can take on the way: as configured, URL-encoded and URL-decoded, and
 * base64 as AUTH PLAIN and AUTH LOGIN send it ({@link smtpSecretRedactor}).
 *
 * A password is never sent where it could be read on the wire: `smtp://` with credentials
 * needs `?requireTLS=true` (STARTTLS or no AUTH), or `?insecure=true` to accept clear text.
 *
 * The sender (`from`) must be an allowed one (`PUNCTUAL_SMTP_ALLOWED_FROM`, default the
 * address of `PUNCTUAL_SMTP_FROM` only), checked at create and again before each send. An
 * entry `tenant:pattern` allows the pattern to that tenant only, so one tenant cannot send
 * as another's addresses through the operator's SMTP account; a bare pattern allows it to
 * every tenant.
 */
import { Readable } from "node:stream";
import type { ConnectionOptions } from "node:tls";
import addressparser from "nodemailer/lib/addressparser";
import MailComposer from "nodemailer/lib/mail-composer";
import SMTPConnection from "nodemailer/lib/smtp-connection";
import { ConfigError, PermanentError, TransientError, ValidationError } from "../errors/index.js";
import type { FieldIssue } from "../errors/index.js";
import { lazyChild, silentLogger, type Logger } from "../observability/logger.js";
import {
  DEFAULT_SUBJECT_TEMPLATE,
  DEFAULT_TEXT_TEMPLATE,
  renderTemplate,
  type ReminderTemplate,
  type RenderedMessage,
} from "./template.js";
import type { Channel, ChannelDelivery, SendContext, SendResult, TargetContext } from "./types.js";

/** An e-mail reminder's target. Addresses are `a@example.com` or `Name <a@example.com>`. */
export interface EmailTarget {
  /** One address or several. */
  to: string | string[];
  cc?: string | string[];
  bcc?: string | string[];
  /** Sender; default `PUNCTUAL_SMTP_FROM`. */
  from?: string;
  /** Subject when the reminder's template has none. */
  subject?: string;
  replyTo?: string;
}

/** An SMTP server as read from its URL. */
export interface SmtpServer {
  host: string;
  port: number;
  /** Implicit TLS (`smtps:`); otherwise STARTTLS when the server offers it. */
  secure: boolean;
  /** Refuse to send unless STARTTLS succeeds (`?requireTLS=true`). */
  requireTLS: boolean;
  /** `?insecure=true`: credentials may go over `smtp://` without STARTTLS (clear text). */
  insecure: boolean;
  user?: string;
  pass?: string;
  /** The URL with its password replaced by `***`: safe to show. */
  redacted: string;
}

/** Options of {@link createEmailChannel}. */
export interface EmailChannelOptions {
  /**
   * `smtp://user:pass@host:587` (STARTTLS when offered; `?requireTLS=true` insists),
   * `smtps://user:pass@host:465` (implicit TLS). User and password are URL-encoded.
   * From `PUNCTUAL_SMTP_URL`.
   */
  url: string;
  /** Default sender (`PUNCTUAL_SMTP_FROM`); a target's `from` wins. */
  from?: string;
  /**
   * Senders a target's `from` may name (`PUNCTUAL_SMTP_ALLOWED_FROM`): addresses
   * (`a@example.com`), `*@example.com` (any address of that domain) or `*` (any), each
   * for every tenant, or for one tenant when written `tenant:pattern`
   * (`acme:*@acme.example`). The address of `from` is always allowed. Default none beyond it.
   */
  allowedFrom?: readonly string[];
  /** Domain of Message-IDs (`PUNCTUAL_SMTP_DOMAIN`); default the sender's domain. */
  domain?: string;
  /** Upper bound of one send, ms; the send uses min(this, `ctx.timeoutMs`). Default 30 000. */
  timeoutMs?: number;
  /** Most recipients (to + cc + bcc) of one message. Default 50. */
  maxRecipients?: number;
  /** Name given in EHLO. Default the machine's hostname. */
  clientName?: string;
  /** TLS options (a private CA, `servername`). */
  tls?: ConnectionOptions;
  /** Where to log sends (debug) and partial rejections (warn). Default silent. */
  logger?: Logger;
  /** Current time, epoch ms, for the `Date` header when the scheduler gives none. */
  now?: () => number;
  /**
   * API-14: the one-click unsubscribe URL of a delivery (RFC 8058), or null for none.
   * Called only for deliveries to a recipient (`delivery.recipient` set), with the send's
   * time (epoch ms); a URL makes the message carry `List-Unsubscribe: <url>` (RFC 2369)
   * and `List-Unsubscribe-Post: List-Unsubscribe=One-Click`. Absent: no such headers.
   */
  unsubscribeUrl?: (delivery: ChannelDelivery, nowMs: number) => string | null;
}

/** The e-mail channel. */
export interface EmailChannel extends Channel {
  readonly name: "email";
  readonly idempotent: false;
  /** The server, password redacted. */
  readonly server: Omit<SmtpServer, "pass">;
  close(): Promise<void>;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const ADDRESS =
  /^[^\s@<>()[\]\\,;:"]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
const DOMAIN =
  /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** The URL with its password replaced by `***`. */
function redactUrl(url: URL): string {
  const copy = new URL(url.href);
  if (copy.password) copy.password = "***";
  return copy.href;
}

/**
 * Reads an SMTP URL.
 * @throws ConfigError naming `PUNCTUAL_SMTP_URL` (with the password hidden) when it is
 *   not `smtp:` or `smtps:` with a host, or when it is `smtp:` with credentials but neither
 *   `?requireTLS=true` nor `?insecure=true` (the password could go over the wire in clear).
 */
export function parseSmtpUrl(text: string): SmtpServer {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError("PUNCTUAL_SMTP_URL is not a URL (expected smtp://user:pass@host:587)");
  }
  const redacted = redactUrl(url);
  if (url.protocol !== "smtp:" && url.protocol !== "smtps:") {
    throw new ConfigError(
      `PUNCTUAL_SMTP_URL must start with smtp:// or smtps:// (got ${redacted})`,
    );
  }
  if (!url.hostname) throw new ConfigError(`PUNCTUAL_SMTP_URL has no host (got ${redacted})`);
  const secure = url.protocol === "smtps:";
  const port = url.port ? Number(url.port) : secure ? 465 : 587;
  const requireTLS = url.searchParams.get("requireTLS") === "true";
  const insecure = url.searchParams.get("insecure") === "true";
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  if (!secure && !requireTLS && !insecure && (url.username || url.password)) {
    throw new ConfigError(
      `PUNCTUAL_SMTP_URL ${redacted} has credentials but no TLS: smtp:// sends AUTH in clear text ` +
        "when the server (or someone in between) offers no STARTTLS. Use smtps://…:465, add " +
        "?requireTLS=true (STARTTLS or no send), or add ?insecure=true to accept clear text.",
    );
  }
  return {
    host,
    port,
    secure,
    requireTLS,
    insecure,
    ...(url.username ? { user: safeDecode(url.username) } : {}),
    ...(url.password ? { pass: safeDecode(url.password) } : {}),
    redacted,
  };
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

const REDACTED = "***";

/**
 * A function that replaces every occurrence of the SMTP password in a text by `***`,
 * matching it by value in each form it can appear in: as configured (the URL's password
 * text, before and after URL-decoding), URL-encoded (`encodeURIComponent`, `encodeURI`,
 * either case of hex digits), read as Latin-1, and base64 as AUTH LOGIN (the password
 * alone) and AUTH PLAIN (`\0user\0password`, with and without the leading NUL) send it.
 * `urlText` is the configured URL: a password written there without URL-encoding is
 * matched as written, too. The identity when there is no password.
 */
export function smtpSecretRedactor(
  server: Pick<SmtpServer, "user" | "pass">,
  urlText?: string,
): (text: string) => string {
  const pass = server.pass;
  if (pass === undefined || pass === "") return (text) => text;
  const user = server.user ?? "";
  const forms = new Set<string>([
    pass,
    encodeURIComponent(pass),
    encodeURI(pass),
    safeDecode(pass),
    Buffer.from(pass, "utf8").toString("latin1"),
    Buffer.from(pass, "utf8").toString("base64"),
    Buffer.from(`\u0000${user}\u0000${pass}`, "utf8").toString("base64"),
    Buffer.from(`${user}\u0000${pass}`, "utf8").toString("base64"),
  ]);
  if (urlText !== undefined) {
    // The password as written: between the user's ":" and the last "@" of the authority.
    const authority = /^[a-z][a-z0-9+.-]*:\/\/(.*)@/is.exec(urlText)?.[1];
    const colon = authority?.indexOf(":") ?? -1;
    if (authority && colon >= 0) {
      const written = authority.slice(colon + 1);
      forms.add(written);
      forms.add(safeDecode(written));
    }
  }
  // Base64 without its padding, too (a server may echo it trimmed).
  for (const form of [...forms]) if (/=+$/.test(form)) forms.add(form.replace(/=+$/, ""));
  const list = [...forms].filter((f) => f.length > 0).sort((a, b) => b.length - a.length);
  const pattern = new RegExp(
    list.map((f) => f.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"),
    "giu",
  );
  return (text) => text.replace(pattern, REDACTED);
}

/**
 * A copy of an error fit to leave the channel: message, stack and cause (recursively)
 * passed through `redact`; a cause keeps only its name, message, stack, `code`,
 * `responseCode` and `response` (nodemailer's `command` may hold an AUTH line).
 */
function scrubError(err: unknown, redact: (text: string) => string, depth = 0): unknown {
  if (!(err instanceof Error)) {
    return typeof err === "string" ? redact(err) : err;
  }
  if (depth > 0) {
    const src = err as Error & { code?: unknown; responseCode?: unknown; response?: unknown };
    const copy = new Error(redact(src.message)) as Error & Record<string, unknown>;
    copy.name = src.name;
    copy.stack = src.stack === undefined ? undefined : redact(src.stack);
    if (src.code !== undefined) copy.code = src.code;
    if (src.responseCode !== undefined) copy.responseCode = src.responseCode;
    if (typeof src.response === "string") copy.response = redact(src.response);
    if (src.cause !== undefined && depth < 5) copy.cause = scrubError(src.cause, redact, depth + 1);
    return copy;
  }
  err.message = redact(err.message);
  if (err.stack !== undefined) err.stack = redact(err.stack);
  if (err.cause !== undefined) err.cause = scrubError(err.cause, redact, depth + 1);
  return err;
}

/** A tenant name (as API keys carry it): 1–64 letters, digits, `.`, `_` or `-`. */
const TENANT = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * One entry of `PUNCTUAL_SMTP_ALLOWED_FROM` read: `tenant:pattern` (that tenant only) or
 * `pattern` (every tenant, `tenant` null); the pattern lower-cased. An address has no `:`
 * and a tenant name none either, so the first `:` separates them.
 */
export function parseAllowedSender(entry: string): { tenant: string | null; pattern: string } {
  const text = entry.trim();
  const colon = text.indexOf(":");
  if (colon < 0) return { tenant: null, pattern: text.toLowerCase() };
  return {
    tenant: text.slice(0, colon),
    pattern: text
      .slice(colon + 1)
      .trim()
      .toLowerCase(),
  };
}

/** One entry of `PUNCTUAL_SMTP_ALLOWED_FROM`: `[tenant:]` and `*`, `*@domain` or an address. */
function allowedPatternValid(entry: string): boolean {
  const { tenant, pattern } = parseAllowedSender(entry);
  if (tenant !== null && !TENANT.test(tenant)) return false;
  if (pattern === "*") return true;
  if (pattern.startsWith("*@")) return DOMAIN.test(pattern.slice(2));
  return ADDRESS.test(pattern);
}

/**
 * Whether the sender `address` (the bare address, no display name) is allowed for
 * `tenant`: it is the default sender's address, or matches a pattern of `allowedFrom`
 * (case-insensitive) given for every tenant or for this tenant (`tenant:pattern`). Without
 * a tenant only the patterns for every tenant count.
 */
export function senderAllowed(
  address: string,
  defaults: {
    from?: string | undefined;
    allowedFrom?: readonly string[] | undefined;
    tenant?: string | undefined;
  },
): boolean {
  const a = address.toLowerCase();
  const own = defaults.from !== undefined ? mailbox(defaults.from) : null;
  if (own && own.address.toLowerCase() === a) return true;
  for (const raw of defaults.allowedFrom ?? []) {
    const { tenant, pattern: p } = parseAllowedSender(raw);
    if (tenant !== null && tenant !== defaults.tenant) continue;
    if (p === "*") return true;
    if (p.startsWith("*@")) {
      if (a.slice(a.lastIndexOf("@") + 1) === p.slice(2)) return true;
    } else if (p === a) {
      return true;
    }
  }
  return false;
}

/** Parses one address field; `null` when it is not exactly one plain mailbox. */
function mailbox(text: string): { name: string; address: string } | null {
  if (/[\r\n]/.test(text)) return null;
  const found = addressparser(text, { flatten: true });
  if (found.length !== 1) return null;
  const only = found[0]!;
  if (!ADDRESS.test(only.address)) return null;
  return { name: only.name, address: only.address };
}

function asList(value: unknown): unknown[] | null {
  if (value === undefined) return [];
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value;
  return null;
}

/**
 * Checks an e-mail target; issues name `target.<field>` (and the index in a list). A
 * `from` the server does not allow ({@link senderAllowed}) is an issue of `target.from`.
 */
export function emailTargetIssues(
  target: unknown,
  defaults: {
    from?: string | undefined;
    maxRecipients: number;
    allowedFrom?: readonly string[] | undefined;
    /** The schedule's tenant: its own allowed senders count too (`tenant:pattern`). */
    tenant?: string | undefined;
  },
): FieldIssue[] {
  if (typeof target !== "object" || target === null || Array.isArray(target)) {
    return [
      {
        field: "target",
        message: "must be an object { to, cc?, bcc?, from?, subject?, replyTo? }",
      },
    ];
  }
  const t = target as Record<string, unknown>;
  const issues: FieldIssue[] = [];
  const known = ["to", "cc", "bcc", "from", "subject", "replyTo"];
  for (const key of Object.keys(t)) {
    if (!known.includes(key)) {
      issues.push({ field: `target.${key}`, message: `unknown field; known: ${known.join(", ")}` });
    }
  }
  let recipients = 0;
  for (const field of ["to", "cc", "bcc"] as const) {
    const list = asList(t[field]);
    if (list === null) {
      issues.push({
        field: `target.${field}`,
        message: "must be an address or a list of addresses",
      });
      continue;
    }
    if (field === "to" && list.length === 0) {
      issues.push({ field: "target.to", message: "required: at least one address" });
    }
    const single = typeof t[field] === "string";
    list.forEach((entry, i) => {
      const at = single ? `target.${field}` : `target.${field}.${i}`;
      if (typeof entry !== "string" || !mailbox(entry)) {
        issues.push({ field: at, message: "not an e-mail address", value: entry });
      }
    });
    recipients += list.length;
  }
  if (recipients > defaults.maxRecipients) {
    issues.push({
      field: "target",
      message: `at most ${defaults.maxRecipients} recipients (to, cc and bcc together); got ${recipients}`,
    });
  }
  for (const field of ["from", "replyTo"] as const) {
    const value = t[field];
    if (value === undefined) continue;
    const parsed = typeof value === "string" ? mailbox(value) : null;
    if (!parsed) {
      issues.push({ field: `target.${field}`, message: "not an e-mail address", value });
    } else if (field === "from" && !senderAllowed(parsed.address, defaults)) {
      issues.push({
        field: "target.from",
        message:
          "sender not allowed on this server: use the default sender" +
          (defaults.from ? ` (${defaults.from})` : "") +
          " or one the operator allows this tenant in PUNCTUAL_SMTP_ALLOWED_FROM",
        value,
      });
    }
  }
  if (t.from === undefined && !defaults.from) {
    issues.push({
      field: "target.from",
      message: "required: no default sender is configured (PUNCTUAL_SMTP_FROM)",
    });
  }
  if (t.subject !== undefined) {
    if (typeof t.subject !== "string" || t.subject.length > 998 || /[\r\n]/.test(t.subject)) {
      issues.push({
        field: "target.subject",
        message: "must be one line of at most 998 characters",
      });
    }
  }
  return issues;
}

/** The Message-ID of a delivery: `<{deliveryKey}@{domain}>`. */
export function emailMessageId(deliveryKey: string, domain: string): string {
  return `<${deliveryKey}@${domain}>`;
}

/** Whether an SMTP failure happened on a connection (no reply code) rather than a reply. */
interface SmtpFailure {
  code?: string;
  responseCode?: number;
  permanent?: boolean;
  response?: string;
  message?: string;
}

function classify(err: unknown, bodySent: boolean, redactedServer: string): Error {
  const e = (err ?? {}) as SmtpFailure;
  const reply = e.response ? e.response.replace(/\s+/g, " ").slice(0, 200) : "";
  if (typeof e.responseCode === "number") {
    const detail = `SMTP server answered ${reply || e.responseCode}`;
    // nodemailer's `permanent` follows RFC 5321: 5xx but 503 (bad sequence) is permanent.
    const permanent = e.permanent ?? (e.responseCode >= 500 && e.responseCode !== 503);
    if (permanent) {
      return new PermanentError(detail, {
        code: "SMTP_REJECTED",
        status: e.responseCode,
        cause: err,
      });
    }
    return new TransientError(detail, {
      code: "SMTP_DEFERRED",
      status: e.responseCode,
      cause: err,
    });
  }
  const message = e.message ?? String(err);
  if (e.code === "EAUTH" || e.code === "ECONFIG") {
    return new PermanentError(`SMTP configuration refused: ${message}`, {
      code: "SMTP_CONFIG",
      cause: err,
    });
  }
  if (e.code === "EENVELOPE" || e.code === "EMESSAGE") {
    return new PermanentError(`SMTP message refused: ${message}`, {
      code: "SMTP_REJECTED",
      cause: err,
    });
  }
  if (e.code === "ETIMEDOUT") {
    return new TransientError(
      `SMTP server ${redactedServer} timed out${bodySent ? " after the message was sent" : ""}`,
      {
        code: "SEND_TIMEOUT",
        maybeDelivered: bodySent,
        cause: err,
      },
    );
  }
  return new TransientError(
    `SMTP connection to ${redactedServer} failed${bodySent ? " after the message was sent" : ""}: ${message}`,
    {
      code: "SMTP_CONNECTION",
      maybeDelivered: bodySent,
      cause: err,
    },
  );
}

/**
 * Creates the e-mail channel.
 *
 * `validateTarget` throws {@link ValidationError} naming `target.to.<i>`, `target.cc`,
 * `target.from` … with the offending address. `send` resolves
 * `{ status: 250, messageId: "<key@domain>" }` or throws as the module comment lists.
 *
 * @throws ConfigError for a bad `url`, `from` or `domain`.
 */
export function createEmailChannel(options: EmailChannelOptions): EmailChannel {
  const server = parseSmtpUrl(options.url);
  const { pass: _pass, ...shown } = server;
  const redact = smtpSecretRedactor(server, options.url);
  const allowedFrom = options.allowedFrom ?? [];
  for (const pattern of allowedFrom) {
    if (!allowedPatternValid(pattern.trim())) {
      throw new ConfigError(
        `PUNCTUAL_SMTP_ALLOWED_FROM has an entry that is not [tenant:] followed by an address, *@domain or * (got ${JSON.stringify(pattern)})`,
      );
    }
  }
  const timeoutCapMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxRecipients = options.maxRecipients ?? 50;
  const logger = options.logger ?? silentLogger();
  const now = options.now ?? Date.now;
  if (options.from !== undefined && !mailbox(options.from)) {
    throw new ConfigError(
      `PUNCTUAL_SMTP_FROM is not an e-mail address (got ${JSON.stringify(options.from)})`,
    );
  }
  if (options.domain !== undefined && !DOMAIN.test(options.domain)) {
    throw new ConfigError(
      `PUNCTUAL_SMTP_DOMAIN is not a domain name (got ${JSON.stringify(options.domain)})`,
    );
  }
  let closed = false;

  async function compose(
    delivery: ChannelDelivery,
    target: EmailTarget,
    date: Date,
  ): Promise<{
    raw: Promise<Buffer>;
    envelope: { from: string; to: string[] };
    messageId: string;
  }> {
    const from = target.from ?? (options.from as string);
    const sender = mailbox(from)!;
    const domain = options.domain ?? sender.address.slice(sender.address.lastIndexOf("@") + 1);
    const messageId = emailMessageId(delivery.deliveryKey, domain);
    const own = delivery.template ?? {};
    // A target's subject is literal text, never a template; the template's wins over it.
    const template: ReminderTemplate = {
      ...(target.subject === undefined ? { subject: DEFAULT_SUBJECT_TEMPLATE } : {}),
      ...(own.text === undefined && own.html === undefined ? { text: DEFAULT_TEXT_TEMPLATE } : {}),
      ...own,
    };
    const m: RenderedMessage = await renderTemplate(template, delivery);
    // API-14 (RFC 8058): one-click unsubscribe for mail to a recipient.
    const unsubscribe =
      delivery.recipient !== undefined && options.unsubscribeUrl
        ? options.unsubscribeUrl(delivery, date.getTime())
        : null;
    const composer = new MailComposer({
      from,
      to: asList(target.to) as string[],
      ...(target.cc !== undefined ? { cc: asList(target.cc) as string[] } : {}),
      ...(target.bcc !== undefined ? { bcc: asList(target.bcc) as string[] } : {}),
      ...(target.replyTo !== undefined ? { replyTo: target.replyTo } : {}),
      subject: m.subject ?? target.subject ?? "",
      ...(m.text !== undefined ? { text: m.text } : {}),
      ...(m.html !== undefined ? { html: m.html } : {}),
      messageId,
      date,
      headers: {
        // RFC 3834: an automatic message; out-of-office replies should not answer it.
        "Auto-Submitted": "auto-generated",
        "X-Punctual-Delivery-Key": delivery.deliveryKey,
        ...(unsubscribe !== null
          ? {
              "List-Unsubscribe": `<${unsubscribe}>`,
              "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            }
          : {}),
        // OPS-15: the trace id of this send's span (W3C traceparent's second field).
        ...(delivery.traceParent !== undefined
          ? { "X-Trace-Id": delivery.traceParent.split("-")[1] ?? "" }
          : {}),
      },
    });
    const node = composer.compile();
    const envelope = node.getEnvelope();
    return {
      raw: node.build(),
      envelope: { from: envelope.from || sender.address, to: envelope.to },
      messageId,
    };
  }

  async function send(delivery: ChannelDelivery, ctx: SendContext): Promise<SendResult> {
    try {
      return await sendOnce(delivery, ctx);
    } catch (err) {
      // Whatever leaves the channel (lastError, attempts[].error, the log) is redacted.
      throw scrubError(err, redact);
    }
  }

  async function sendOnce(delivery: ChannelDelivery, ctx: SendContext): Promise<SendResult> {
    if (closed) throw new TransientError("email channel is closed", { code: "CHANNEL_CLOSED" });
    const issues = emailTargetIssues(delivery.target, {
      from: options.from,
      maxRecipients,
      allowedFrom,
      tenant: delivery.tenant,
    });
    if (issues.length > 0) {
      throw new PermanentError(
        `email target refused: ${issues.map((i) => `${i.field}: ${i.message}`).join("; ")}`,
        { code: "TARGET_INVALID" },
      );
    }
    const target = delivery.target as EmailTarget;
    const composed = await compose(delivery, target, new Date((ctx.now ?? now)()));
    const raw = await composed.raw;
    if (ctx.signal.aborted) {
      throw new TransientError("email send aborted before it started", { code: "SEND_ABORTED" });
    }
    const budgetMs = Math.max(1, Math.min(ctx.timeoutMs, timeoutCapMs));
    const log = lazyChild(logger, {
      channel: "email",
      deliveryKey: delivery.deliveryKey,
      attempt: delivery.attempt,
    });

    return new Promise<SendResult>((resolve, reject) => {
      const conn = new SMTPConnection({
        host: server.host,
        port: server.port,
        secure: server.secure,
        requireTLS: server.requireTLS,
        connectionTimeout: budgetMs,
        greetingTimeout: budgetMs,
        socketTimeout: budgetMs,
        logger: false,
        ...(options.clientName ? { name: options.clientName } : {}),
        ...(options.tls ? { tls: options.tls } : {}),
      });
      // True once the whole message (and so its final dot) was handed to the socket: a
      // failure from then on may follow a delivery the server has already queued.
      let bodySent = false;
      let done = false;
      const finish = (err: Error | null, result?: SendResult): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        ctx.signal.removeEventListener("abort", onAbort);
        if (err) {
          conn.close();
          reject(err);
        } else {
          conn.quit();
          resolve(result as SendResult);
        }
      };
      const timer = setTimeout(() => {
        finish(
          new TransientError(
            `SMTP send did not finish within ${budgetMs} ms${bodySent ? " (after the message was sent)" : ""}`,
            { code: "SEND_TIMEOUT", maybeDelivered: bodySent },
          ),
        );
      }, budgetMs);
      const onAbort = (): void =>
        finish(
          new TransientError("email send aborted", {
            code: "SEND_ABORTED",
            maybeDelivered: bodySent,
            cause: ctx.signal.reason,
          }),
        );
      ctx.signal.addEventListener("abort", onAbort, { once: true });
      conn.on("error", (err: unknown) => finish(classify(err, bodySent, server.redacted)));
      const transmit = (): void => {
        const body = Readable.from([raw]);
        body.once("end", () => {
          bodySent = true;
        });
        conn.send(composed.envelope, body, (err, info) => {
          if (err) {
            finish(classify(err, bodySent, server.redacted));
            return;
          }
          if (info.rejected.length > 0) {
            log.warn(
              { rejected: info.rejected.length, accepted: info.accepted.length },
              "SMTP server refused some recipients; sent to the others",
            );
          }
          log.debug({ serverMessageId: info.serverMessageId ?? null }, "email sent");
          finish(null, { status: 250, messageId: composed.messageId });
        });
      };
      conn.connect((err?: unknown) => {
        if (err) {
          finish(classify(err, false, server.redacted));
          return;
        }
        if (server.user === undefined) {
          transmit();
          return;
        }
        conn.login({ user: server.user, pass: server.pass ?? "" }, (loginErr) => {
          if (loginErr) finish(classify(loginErr, false, server.redacted));
          else transmit();
        });
      });
    });
  }

  return {
    name: "email",
    idempotent: false,
    digests: true,
    server: shown,
    validateTarget(target: unknown, context: TargetContext = {}): void {
      const issues = emailTargetIssues(target, {
        from: options.from,
        maxRecipients,
        allowedFrom,
        tenant: context.tenant,
      });
      if (issues.length > 0) throw new ValidationError(issues);
    },
    send,
    /** Refuses new sends; sends in flight end by themselves (each within its budget). */
    close(): Promise<void> {
      closed = true;
      return Promise.resolve();
    },
  };
}
