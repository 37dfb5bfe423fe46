/**
 * Web safety of the HTTP API (API-7): what keeps a web page the user happens to visit
 * from driving a server that has no API key (the default on loopback).
 *
 * - **Host check** ({@link hostGuard}): a page that rebinds its own DNS name to 127.0.0.1
 *   sends its name in `Host`. Without a key only the listen address and the loopback
 *   names (`localhost`, `127.0.0.1`, `[::1]`) with the port the request arrived on are
 *   answered, plus the names of `api.allowedHosts`. With a key the check runs only when
 *   `api.allowedHosts` lists names (a key already stops a rebinding page).
 * - **Cross-site writes** ({@link crossSiteGuard}): without a key, a request other than
 *   GET/HEAD/OPTIONS is refused when its `Origin` is another origin (or `null`) or its
 *   `Sec-Fetch-Site` is `cross-site`/`same-site`. Clients that are not browsers (curl, the
 *   CLI) send neither and pass. Hono's `csrf` middleware does not fit: it inspects only
 *   form-like content types and refuses a write that carries neither header, which would
 *   shut out curl and the CLI.
 * - **Secret route** ({@link secretGuard}): `GET /v1/webhook-secret` answers only with
 *   the configured API key, or, without one, the local token that `punctual start` writes
 *   in its data folder for `punctual webhook-secret` on the same machine.
 *
 * Every refusal is `403` with the API's error body, naming what was refused.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";
import type { IncomingMessage } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { errorBody } from "./errors.js";

/** Host names always answered by a server without an API key. */
export const LOOPBACK_HOST_NAMES: readonly string[] = ["localhost", "127.0.0.1", "[::1]"];

/** Methods that change nothing, never refused as cross-site. */
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Options of the guards: the API's configuration. */
export interface WebSafetyOptions {
  /** Whether an API key is configured (`api.apiKey`). */
  keyed: boolean;
  /** Listen address (`api.host`): `127.0.0.1`, `::1`, `localhost`, a name, `0.0.0.0`. */
  listenHost: string;
  /** `api.allowedHosts`: `name` (any port), `name:port`, or `*`. */
  allowedHosts: readonly string[];
}

/** A Host name as the URL parser writes it: lower case, IPv6 in brackets. */
function normalizedName(name: string): string | null {
  const bare = name.trim().replace(/^\[|\]$/g, "");
  if (bare === "") return null;
  try {
    return new URL(`http://${bare.includes(":") ? `[${bare}]` : bare}`).hostname;
  } catch {
    return null;
  }
}

/** Splits `name`, `name:port`, `[v6]` or `[v6]:port` into a normalized name and port. */
function splitEntry(entry: string): { name: string | null; port: string | null } {
  const m = /^(\[[^\]]*\]|[^:]+)(?::(\d{1,5}))?$/.exec(entry.trim());
  if (!m?.[1]) return { name: normalizedName(entry), port: null };
  return { name: normalizedName(m[1]), port: m[2] ?? null };
}

/** The socket a request arrived on, when served by `@hono/node-server`. */
function socketOf(c: Context): { localPort?: number; localAddress?: string } | undefined {
  const env = c.env as { incoming?: IncomingMessage } | undefined;
  return env?.incoming?.socket;
}

/** The request's host as `URL` reads it: name and port (`80` when none). */
function requestHost(c: Context): { name: string; port: string; host: string } {
  const url = new URL(c.req.url);
  return { name: url.hostname, port: url.port || "80", host: url.host };
}

const forbidden = (c: Context, code: string, message: string) =>
  c.json(errorBody(code, message), 403);

/**
 * DNS-rebinding protection: refuses a request whose `Host` names neither this server
 * (its listen address or a loopback name, with the port the request arrived on) nor an
 * entry of `allowedHosts`. Answers `403 HOST_NOT_ALLOWED`. A request on a socket without
 * a `Host` header (HTTP/1.0; no browser sends one) passes; an in-process request
 * (`app.request`) is judged by its URL. Returns `null` when no check applies:
 * an API key is configured and `allowedHosts` is empty, or `allowedHosts` holds `*`.
 */
export function hostGuard(options: WebSafetyOptions): MiddlewareHandler | null {
  if (options.allowedHosts.includes("*")) return null;
  if (options.keyed && options.allowedHosts.length === 0) return null;
  const anyPort = new Set<string>();
  const exact = new Set<string>();
  for (const entry of options.allowedHosts) {
    const { name, port } = splitEntry(entry);
    if (!name) continue;
    if (port === null) anyPort.add(name);
    else exact.add(`${name}:${port}`);
  }
  // The listen address counts unless it is a wildcard, which names no host.
  const own = new Set(LOOPBACK_HOST_NAMES);
  const listen = normalizedName(options.listenHost);
  if (listen && listen !== "0.0.0.0" && listen !== "[::]") own.add(listen);

  return async (c, next) => {
    const socket = socketOf(c);
    // HTTP/1.0 without Host: the URL holds the listen address; no browser does this.
    if (socket && c.req.header("host") === undefined) return next();
    const { name, port, host } = requestHost(c);
    const local = socket?.localAddress ? normalizedName(socket.localAddress) : null;
    const arrivedOn = socket?.localPort;
    const ownName = own.has(name) || name === local;
    const portMatches = arrivedOn === undefined || Number(port) === arrivedOn;
    if ((ownName && portMatches) || anyPort.has(name) || exact.has(`${name}:${port}`)) {
      return next();
    }
    return forbidden(
      c,
      "HOST_NOT_ALLOWED",
      `Host "${host}" is not allowed: this server answers only ${[...own].join(", ")}` +
        `${arrivedOn === undefined ? "" : ` on port ${arrivedOn}`}` +
        `${anyPort.size + exact.size > 0 ? ` and ${[...anyPort, ...exact].join(", ")}` : ""}` +
        " (protection against DNS rebinding). List other names in PUNCTUAL_ALLOWED_HOSTS.",
    );
  };
}

/**
 * Refuses cross-site writes when no API key is configured: a request other than
 * GET/HEAD/OPTIONS whose `Sec-Fetch-Site` is `cross-site` or `same-site`, or whose
 * `Origin` is not this server's (`null` included). Answers `403 CROSS_SITE_REQUEST`.
 */
export function crossSiteGuard(): MiddlewareHandler {
  return async (c, next) => {
    if (SAFE_METHODS.has(c.req.method)) return next();
    const fetchSite = c.req.header("sec-fetch-site")?.trim().toLowerCase();
    const refuse = (why: string) =>
      forbidden(
        c,
        "CROSS_SITE_REQUEST",
        `Refused ${c.req.method} ${c.req.path} from a web page of another site (${why}). ` +
          "Without an API key this API takes writes only from its own origin and from clients " +
          "that are not browsers (curl, the punctual CLI); set PUNCTUAL_API_KEY to call it from elsewhere.",
      );
    if (fetchSite === "cross-site" || fetchSite === "same-site") {
      return refuse(`Sec-Fetch-Site: ${fetchSite}`);
    }
    const origin = c.req.header("origin");
    if (origin !== undefined) {
      let originHost: string | null = null;
      try {
        originHost = origin.trim() === "null" ? null : new URL(origin).host;
      } catch {
        originHost = null;
      }
      if (originHost !== requestHost(c).host) return refuse(`Origin: ${origin.slice(0, 200)}`);
    }
    return next();
  };
}

const sha256 = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest();

/** The bearer token of a request, or null. */
export function bearerToken(c: Context): string | null {
  const header = c.req.header("authorization") ?? "";
  const match = /^Bearer[ ]+(.+)$/i.exec(header.trim());
  return match?.[1] ?? null;
}

/** Constant-time comparison of a presented token with the expected one (both hashed). */
export function tokenMatches(given: string | null, expected: string): boolean {
  return given !== null && timingSafeEqual(sha256(given), sha256(expected));
}

/**
 * Guards `GET /v1/webhook-secret`. With an API key configured the bearer check of
 * `/v1/*` already ran, so the request passes. Without one, only the local token
 * (`localToken`, written by `punctual start` in its data folder) opens it; with no
 * local token (the API embedded in another program) the route is closed. Answers
 * `403 SECRET_NEEDS_KEY` otherwise.
 */
export function secretGuard(options: {
  keyed: boolean;
  localToken: string | undefined;
}): MiddlewareHandler {
  return async (c, next) => {
    if (options.keyed) return next();
    if (options.localToken !== undefined && tokenMatches(bearerToken(c), options.localToken)) {
      return next();
    }
    return forbidden(
      c,
      "SECRET_NEEDS_KEY",
      "GET /v1/webhook-secret is refused: no API key is configured, so the secret is given only to " +
        "`punctual webhook-secret` run on this machine (it presents the local token of the data folder), " +
        "or with PUNCTUAL_API_KEY set on the server and sent as `Authorization: Bearer <key>`.",
    );
  };
}

/**
 * Whether `address` (an IP address as a socket reports it) is a loopback address:
 * 127.0.0.0/8, `::1`, or an IPv4-mapped `::ffff:127.x.y.z`. Names are not addresses: false.
 */
export function isLoopbackAddress(address: string): boolean {
  const a = address.replace(/^\[|\]$/g, "").toLowerCase();
  if (isIP(a) === 4) return a.startsWith("127.");
  if (isIP(a) !== 6) return false;
  if (a === "::1" || a === "0:0:0:0:0:0:0:1") return true;
  const mapped = /^(?:0{0,4}:){0,5}:?ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(a)?.[1];
  return mapped !== undefined && mapped.startsWith("127.");
}

/**
 * OPS-13: without an API key, `/metrics` answers only a peer on this machine, judged by
 * the address the request's socket came from (never the `Host` header, which any client
 * sets). Answers `403 METRICS_NEEDS_KEY` to any other peer. An in-process request
 * (`app.request`, no socket) passes.
 */
export function loopbackPeerGuard(): MiddlewareHandler {
  return async (c, next) => {
    const env = c.env as { incoming?: IncomingMessage } | undefined;
    const peer = env?.incoming?.socket?.remoteAddress;
    if (env?.incoming === undefined || (peer !== undefined && isLoopbackAddress(peer))) {
      return next();
    }
    return forbidden(
      c,
      "METRICS_NEEDS_KEY",
      `/metrics is served without an API key only to this machine (the request came from ${peer ?? "an unknown address"}). ` +
        "Set PUNCTUAL_API_KEY on the server and scrape with `Authorization: Bearer <key>`.",
    );
  };
}
