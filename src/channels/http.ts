/**
 * Outbound HTTP for the channels that POST to a URL a reminder names (webhook, Slack,
 * Discord): one pooled undici agent whose connector refuses private, loopback and
 * link-local addresses unless an operator allows them (CH-1, no SSRF), and the failure
 * classification they share (DEL-4, DEL-5).
 *
 * The address check runs where the socket is opened, on the addresses DNS returned for
 * that very connection: a name that resolves to a public address when the target is
 * validated and to a private one at send time (DNS rebinding) is still refused.
 */
import { lookup as dnsLookup } from "node:dns/promises";
import type { LookupAddress } from "node:dns";
import { Agent, buildConnector, request } from "undici";
import type { Dispatcher } from "undici";
import {
  PermanentError,
  TransientError,
  ValidationError,
  type FieldIssue,
} from "../errors/index.js";
import { silentLogger, type LineLog, type Logger } from "../observability/logger.js";
import { TargetAllowlist, isForbiddenAddress, isIpLiteral, isLocalhostName } from "./address.js";

/** Resolves a hostname to its addresses (the shape of `dns.promises.lookup(h, { all: true })`). */
export type ResolveHost = (hostname: string) => Promise<LookupAddress[]>;

/** Raised inside the connector when a target address is refused; mapped to `TARGET_FORBIDDEN`. */
export class ForbiddenTargetError extends Error {
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

/** Options of {@link createGuardedHttp}. */
export interface GuardedHttpOptions {
  /** Allow private, loopback and link-local targets. Default false. */
  allowPrivateTargets?: boolean;
  /** Hostnames, `*.` wildcards, IPs or CIDRs allowed even when private. */
  allowlist?: readonly string[];
  /** Longest a connection (DNS, TCP, TLS) may take, ms. */
  connectTimeoutMs: number;
  /** Hostname resolution (tests, custom DNS). Default `dns.promises.lookup` with `all: true`. */
  resolve?: ResolveHost;
}

/** A guarded agent and the early (pre-DNS) check of a URL's hostname. */
export interface GuardedHttp {
  readonly agent: Agent;
  /** Whether a URL hostname may be used before any DNS (literal IPs and `localhost`). */
  hostAllowedEarly(hostname: string): boolean;
  /** Closes pooled connections. */
  close(): Promise<void>;
}

/** The options every HTTP channel (webhook, Slack, Discord) takes. */
export interface HttpChannelOptions {
  /** Allow private, loopback and link-local targets (`PUNCTUAL_ALLOW_PRIVATE_TARGETS`). Default false. */
  allowPrivateTargets?: boolean;
  /** Hostnames (`hooks.internal`, `*.svc.local`), IPs or CIDRs allowed even when private. */
  allowlist?: readonly string[];
  /** Upper bound of one send in milliseconds; the send uses min(this, `ctx.timeoutMs`). Default 10 000. */
  timeoutMs?: number;
  /** `user-agent` header. Default `punctual-<channel>/1`. */
  userAgent?: string;
  /** Where to log sends (debug) and refused targets (warn). Default silent. */
  logger?: Logger;
  /** Ceiling of a receiver's retry delay (`Retry-After`), in milliseconds. Default 3 600 000 (1 hour). */
  maxRetryAfterMs?: number;
  /** Hostname resolution (tests, custom DNS). Default `dns.promises.lookup` with `all: true`. */
  resolve?: ResolveHost;
  /** Current time in epoch milliseconds (HTTP-date `Retry-After`, signatures). Default `Date.now`. */
  now?: () => number;
}

/** An HTTP channel's options with their defaults filled in, its guarded agent and its state. */
export interface HttpChannelBase {
  readonly timeoutCapMs: number;
  readonly userAgent: string;
  readonly logger: Logger;
  readonly maxRetryAfterMs: number;
  readonly now: () => number;
  readonly http: GuardedHttp;
  /** Whether {@link HttpChannelBase.close} was called: a send then fails as `CHANNEL_CLOSED`. */
  readonly closed: boolean;
  /** Refuses new sends and closes the pooled connections. */
  close(): Promise<void>;
}

/**
 * The set-up every HTTP channel shares: `options` with their defaults (`userAgent` when
 * none is given) and the guarded agent (connect timeout: the send's upper bound).
 * @throws ValidationError (field `allowlist.<i>`) for a malformed allow-list entry.
 */
export function httpChannelBase(options: HttpChannelOptions, userAgent: string): HttpChannelBase {
  const timeoutCapMs = options.timeoutMs ?? 10_000;
  const http = createGuardedHttp({
    allowPrivateTargets: options.allowPrivateTargets,
    allowlist: options.allowlist,
    connectTimeoutMs: timeoutCapMs,
    ...(options.resolve ? { resolve: options.resolve } : {}),
  });
  let closed = false;
  return {
    timeoutCapMs,
    userAgent: options.userAgent ?? userAgent,
    logger: options.logger ?? silentLogger(),
    maxRetryAfterMs: options.maxRetryAfterMs ?? 60 * 60 * 1000,
    now: options.now ?? Date.now,
    http,
    get closed() {
      return closed;
    },
    async close(): Promise<void> {
      closed = true;
      await http.close();
    },
  };
}

/**
 * A channel's `validateTarget` from its `inspect` (which lists every issue of a target).
 * @throws ValidationError naming each bad field of the target.
 */
export function targetValidator(
  inspect: (target: unknown) => { issues: FieldIssue[] },
): (target: unknown) => void {
  return (target) => {
    const { issues } = inspect(target);
    if (issues.length > 0) throw new ValidationError(issues);
  };
}

const defaultResolve: ResolveHost = (hostname) => dnsLookup(hostname, { all: true });

/**
 * Creates the guarded agent.
 * @throws ValidationError (field `allowlist.<i>`) for a malformed allow-list entry.
 */
export function createGuardedHttp(options: GuardedHttpOptions): GuardedHttp {
  const allowPrivate = options.allowPrivateTargets === true;
  const allowlist = new TargetAllowlist(options.allowlist ?? []);
  const resolve = options.resolve ?? defaultResolve;

  const addressAllowed = (address: string): boolean =>
    allowPrivate || !isForbiddenAddress(address) || allowlist.allowsAddress(address);

  const hostAllowedEarly = (hostname: string): boolean => {
    if (allowPrivate || allowlist.allowsHost(hostname)) return true;
    if (isIpLiteral(hostname)) return addressAllowed(hostname);
    if (isLocalhostName(hostname)) {
      return allowlist.allowsAddress("127.0.0.1") && allowlist.allowsAddress("::1");
    }
    return true;
  };

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
    timeout: options.connectTimeoutMs,
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
  return {
    agent,
    hostAllowedEarly,
    close: () => agent.close(),
  };
}

/**
 * CH-1: the fields of a channel's target, each field not in `known` named as an issue
 * (`target.<field>: unknown field`); when the target is not a JSON object, `fields` is
 * null and the one issue says it must be an object of `shape` (e.g. `{ url }`).
 */
export function targetFields(
  target: unknown,
  known: readonly string[],
  shape: string,
): { fields: Record<string, unknown> | null; issues: FieldIssue[] } {
  if (typeof target !== "object" || target === null || Array.isArray(target)) {
    return { fields: null, issues: [{ field: "target", message: `must be an object ${shape}` }] };
  }
  const fields = target as Record<string, unknown>;
  const issues: FieldIssue[] = Object.keys(fields)
    .filter((key) => !known.includes(key))
    .map((key) => ({ field: `target.${key}`, message: "unknown field" }));
  return { fields, issues };
}

/**
 * Checks a target URL without DNS: `http:`/`https:` only, no credentials, and a hostname
 * the guard allows before resolution.
 * @returns null when fine, else the problem and whether it is a refused private address.
 */
export function checkTargetUrl(
  http: GuardedHttp,
  value: unknown,
): { message: string; forbidden: boolean } | null {
  if (typeof value !== "string" || value === "") {
    return { message: "required: an http(s) URL", forbidden: false };
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { message: "not a valid URL", forbidden: false };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return { message: "must use http or https", forbidden: false };
  }
  if (url.username || url.password) {
    return { message: "must not contain credentials", forbidden: false };
  }
  if (!http.hostAllowedEarly(url.hostname)) {
    return {
      message:
        "private, loopback, link-local or reserved address refused (allow it with PUNCTUAL_ALLOW_PRIVATE_TARGETS=true, or in the library with allowPrivateTargets or the allow-list)",
      forbidden: true,
    };
  }
  return null;
}

/** The first value of a response header, or undefined when absent or empty. */
export function headerValue(
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
export async function readCapped(
  body: Dispatcher.ResponseData["body"],
  cap: number,
): Promise<string> {
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

const EXCERPT_CHARS = 200;

/** A response body flattened to one line of at most 200 characters. */
export function excerptOf(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > EXCERPT_CHARS ? `${flat.slice(0, EXCERPT_CHARS)}…` : flat;
}

/**
 * A `Retry-After` header (delay seconds or an HTTP date) in ms, clamped to [0, maxMs].
 * @returns null when absent or unreadable.
 */
export function parseRetryAfter(
  value: string | undefined,
  nowMs: number,
  maxMs: number,
): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  let ms: number;
  if (/^\d+$/.test(text)) ms = Number(text) * 1000;
  else {
    const at = Date.parse(text);
    if (Number.isNaN(at)) return null;
    ms = at - nowMs;
  }
  return Math.min(Math.max(ms, 0), maxMs);
}

/** A response: status, headers and up to `maxResponseBytes` of the body. */
export interface CappedResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One POST through a {@link GuardedHttp}. */
export interface PostRequest {
  /** Channel name for messages (`webhook`, `slack`, …). */
  label: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Budget of the whole exchange (connect, headers, body), ms. */
  timeoutMs: number;
  /** The send's abort signal. */
  signal: AbortSignal;
  maxResponseBytes: number;
  /** The send's lines (a lazy child: made only when a line is written). */
  log: LineLog;
}

/**
 * POSTs one body and reads the answer, whatever its status. Redirects are never
 * followed.
 * @throws TransientError (`SEND_TIMEOUT`, `SEND_ABORTED`, `NETWORK_ERROR`, with
 *   `maybeDelivered` unless the request never left) or PermanentError
 *   (`TARGET_FORBIDDEN`) when the request got no answer.
 */
export async function postCapped(http: GuardedHttp, req: PostRequest): Promise<CappedResponse> {
  const timeoutMs = Math.max(1, req.timeoutMs);
  if (req.signal.aborted) {
    throw new TransientError(`${req.label} send aborted before it started`, {
      code: "SEND_ABORTED",
    });
  }
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Error(`${req.label} timed out after ${timeoutMs} ms`));
  }, timeoutMs);
  const onAbort = (): void => controller.abort(req.signal.reason);
  req.signal.addEventListener("abort", onAbort, { once: true });
  try {
    let response: Dispatcher.ResponseData;
    try {
      response = await request(req.url, {
        method: "POST",
        headers: req.headers,
        body: req.body,
        signal: controller.signal,
        dispatcher: http.agent,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
    } catch (err) {
      throw classifyFailure(req.label, err, timedOut, req.signal.aborted, timeoutMs, req.log);
    }
    let body: string;
    try {
      body = await readCapped(response.body, req.maxResponseBytes);
    } catch (err) {
      // The status is known; a body cut short only matters for a 2xx, where it is
      // ignored, and for errors, whose class the status already decides.
      body = "";
      if (response.statusCode < 200 || response.statusCode >= 300) {
        req.log.debug({ err }, `${req.label} response body unreadable`);
      }
    }
    return { status: response.statusCode, headers: response.headers, body };
  } finally {
    clearTimeout(timer);
    req.signal.removeEventListener("abort", onAbort);
  }
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

/** Maps a request that got no answer to the steering error it deserves. */
export function classifyFailure(
  label: string,
  err: unknown,
  timedOut: boolean,
  aborted: boolean,
  timeoutMs: number,
  log: LineLog,
): Error {
  const forbidden = findForbidden(err);
  if (forbidden) {
    log.warn({ host: forbidden.hostname, address: forbidden.address }, `${label} target refused`);
    return new PermanentError(`${label} ${forbidden.message}`, {
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
    return new TransientError(`${label} timed out after ${timeoutMs} ms`, {
      code: "SEND_TIMEOUT",
      cause: err,
      maybeDelivered: !neverSent,
    });
  }
  if (aborted)
    return new TransientError(`${label} send aborted`, {
      code: "SEND_ABORTED",
      cause: err,
      maybeDelivered: true,
    });
  const message = err instanceof Error ? err.message : String(err);
  return new TransientError(
    `${label} network error${typeof code === "string" ? ` ${code}` : ""}: ${message}`,
    {
      maybeDelivered: !neverSent,
      code: "NETWORK_ERROR",
      cause: err,
    },
  );
}
