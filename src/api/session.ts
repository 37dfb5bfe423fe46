/**
 * Browser sessions of the dashboard (API-6, API-2, API-7): the API key typed into the
 * dashboard's login form is kept on the server, and the browser holds only a random
 * session id in a cookie (`HttpOnly`, `SameSite=Strict`, `Path=/`, `Secure` over TLS).
 *
 * - `POST /ui/login` `{ key }` checks the key as the bearer check would (the operator's
 *   key, or a tenant key that is neither unknown nor revoked), starts a session and
 *   answers the session's CSRF token. A new login always gets a new id.
 * - `GET /ui/session` says who the browser is (tenant, operator or not, whether a key is
 *   needed) and repeats the CSRF token; only a page of this origin can read it.
 * - `POST /ui/logout` ends the session (CSRF token required).
 * - On `/v1/*` ({@link SessionStore.resolve}), the cookie stands for
 *   `Authorization: Bearer <key>` only for a same-origin request: one that says it comes
 *   from another site (`Sec-Fetch-Site` or `Origin`) is refused `403 CROSS_SITE_REQUEST`,
 *   and a write (not GET/HEAD/OPTIONS) must carry the token in `X-CSRF-Token`, else
 *   `403 CSRF_TOKEN_INVALID`. A request with its own `Authorization` ignores the cookie.
 *
 * Sessions live in this process's memory (a restart logs everyone out) and end after
 * {@link SESSION_IDLE_MS} without a request; at most {@link MAX_SESSIONS} are kept, the
 * least recently used dropped first. The key is checked again on every request, so a
 * revoked tenant key stops its sessions at once.
 */
import { randomBytes } from "node:crypto";
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { Punctual } from "../app/punctual.js";
import { errorBody } from "./errors.js";
import { tokenMatches } from "./security.js";

/** Name of the session cookie. */
export const SESSION_COOKIE = "punctual_session";
/** Header a write sent with the session cookie carries the CSRF token in. */
export const CSRF_HEADER = "x-csrf-token";
/** A session unused this long ends, ms (12 hours). */
export const SESSION_IDLE_MS = 12 * 3_600_000;
/** Sessions kept at most; the least recently used goes first. */
export const MAX_SESSIONS = 1_000;

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

interface Session {
  key: string;
  csrf: string;
  lastUsedMs: number;
}

/** What the cookie of a request stands for ({@link SessionStore.resolve}). */
export type SessionResolution =
  { kind: "none" } | { kind: "token"; token: string } | { kind: "refused"; response: Response };

const newSecret = (): string => randomBytes(32).toString("base64url");

/** Whether the request says it comes from a page of another origin. */
function crossOrigin(c: Context): string | null {
  const site = c.req.header("sec-fetch-site")?.trim().toLowerCase();
  if (site === "cross-site" || site === "same-site") return `Sec-Fetch-Site: ${site}`;
  const origin = c.req.header("origin");
  if (origin === undefined) return null;
  try {
    if (origin.trim() !== "null" && new URL(origin).host === new URL(c.req.url).host) return null;
  } catch {
    // not a URL: refused below
  }
  return `Origin: ${origin.slice(0, 200)}`;
}

/** The sessions of one API ({@link registerSessionRoutes}). */
export class SessionStore {
  readonly #sessions = new Map<string, Session>();
  readonly #now: () => number;

  /** @param now real time in ms (sessions end on wall time, not the scheduler's clock). */
  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Starts a session for `key`; returns its id and CSRF token. */
  open(key: string): { id: string; csrf: string } {
    while (this.#sessions.size >= MAX_SESSIONS) {
      const oldest = this.#sessions.keys().next().value;
      if (oldest === undefined) break;
      this.#sessions.delete(oldest);
    }
    const id = newSecret();
    const csrf = newSecret();
    this.#sessions.set(id, { key, csrf, lastUsedMs: this.#now() });
    return { id, csrf };
  }

  /** The live session of a request's cookie, refreshed, or null. */
  get(c: Context): (Session & { id: string }) | null {
    const id = getCookie(c, SESSION_COOKIE);
    if (!id) return null;
    const session = this.#sessions.get(id);
    if (!session) return null;
    if (this.#now() - session.lastUsedMs > SESSION_IDLE_MS) {
      this.#sessions.delete(id);
      return null;
    }
    session.lastUsedMs = this.#now();
    // Map order is recency order: move it to the end.
    this.#sessions.delete(id);
    this.#sessions.set(id, session);
    return { ...session, id };
  }

  /** Ends a session. */
  close(id: string): void {
    this.#sessions.delete(id);
  }

  /**
   * What the session cookie of a `/v1` request stands for: nothing (no cookie, or a
   * request with its own `Authorization`), the session's key (same-origin, and for a
   * write the right `X-CSRF-Token`), or a refusal.
   */
  resolve(c: Context): SessionResolution {
    if (c.req.header("authorization") !== undefined) return { kind: "none" };
    const session = this.get(c);
    if (!session) return { kind: "none" };
    const why = crossOrigin(c);
    if (why !== null) {
      return {
        kind: "refused",
        response: c.json(
          errorBody(
            "CROSS_SITE_REQUEST",
            `Refused ${c.req.method} ${c.req.path}: the dashboard's session cookie is accepted from its own origin only (${why}).`,
          ),
          403,
        ),
      };
    }
    if (!SAFE_METHODS.has(c.req.method)) {
      const given = c.req.header(CSRF_HEADER) ?? null;
      if (!tokenMatches(given, session.csrf)) {
        return {
          kind: "refused",
          response: c.json(
            errorBody(
              "CSRF_TOKEN_INVALID",
              `Refused ${c.req.method} ${c.req.path}: a write with the dashboard's session cookie needs its CSRF token in X-CSRF-Token.`,
            ),
            403,
          ),
        };
      }
    }
    return { kind: "token", token: session.key };
  }
}

/** Options of {@link registerSessionRoutes}: the API's configuration. */
export interface SessionRouteOptions {
  /** The operator's key (`api.apiKey`), or undefined. */
  apiKey: string | undefined;
}

/**
 * Registers `POST /ui/login`, `GET /ui/session` and `POST /ui/logout`. The routes refuse
 * a request from a page of another origin (`403 CROSS_SITE_REQUEST`) whether or not a
 * key is configured, so no other site can log a browser in or out.
 */
export function registerSessionRoutes(
  app: OpenAPIHono,
  punctual: Punctual,
  sessions: SessionStore,
  options: SessionRouteOptions,
): void {
  const refuseCrossOrigin = (c: Context): Response | null => {
    const why = crossOrigin(c);
    if (why === null) return null;
    return c.json(
      errorBody("CROSS_SITE_REQUEST", `Refused ${c.req.method} ${c.req.path} (${why}).`),
      403,
    );
  };

  /** Who a key is: the operator, a tenant key, or nobody (null). */
  const identify = async (key: string): Promise<{ tenant: string; root: boolean } | null> => {
    if (options.apiKey !== undefined && tokenMatches(key, options.apiKey)) {
      return { tenant: "default", root: true };
    }
    if (key.startsWith("pk_")) {
      const identity = await punctual.identifyApiKey(key);
      return identity ? { tenant: identity.tenant, root: false } : null;
    }
    return null;
  };

  const cookieOptions = (c: Context) =>
    ({
      httpOnly: true,
      sameSite: "Strict",
      path: "/",
      secure: new URL(c.req.url).protocol === "https:",
    }) as const;

  app.use(
    "/ui/login",
    bodyLimit({
      maxSize: 4_096,
      onError: (c) => c.json(errorBody("PAYLOAD_TOO_LARGE", "A login body is at most 4 KiB."), 413),
    }),
  );
  app.post("/ui/login", async (c) => {
    const refused = refuseCrossOrigin(c);
    if (refused) return refused;
    const type = (c.req.header("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
    if (type !== "application/json") {
      return c.json(
        errorBody("UNSUPPORTED_MEDIA_TYPE", "Send { key } with Content-Type: application/json."),
        415,
      );
    }
    const body: unknown = await c.req.json().catch(() => null);
    const key =
      body && typeof body === "object" && typeof (body as { key?: unknown }).key === "string"
        ? (body as { key: string }).key.trim()
        : "";
    const who = key === "" || key.length > 500 ? null : await identify(key);
    if (!who) {
      return c.json(errorBody("UNAUTHORIZED", "Wrong API key (unknown or revoked)."), 401);
    }
    const old = sessions.get(c);
    if (old) sessions.close(old.id);
    const { id, csrf } = sessions.open(key);
    setCookie(c, SESSION_COOKIE, id, cookieOptions(c));
    c.header("Cache-Control", "no-store");
    return c.json({ authenticated: true, keyed: options.apiKey !== undefined, csrf, ...who });
  });

  app.get("/ui/session", async (c) => {
    const refused = refuseCrossOrigin(c);
    if (refused) return refused;
    c.header("Cache-Control", "no-store");
    const keyed = options.apiKey !== undefined;
    const session = sessions.get(c);
    const who = session ? await identify(session.key) : null;
    if (session && !who) sessions.close(session.id);
    if (session && who) {
      return c.json({ authenticated: true, keyed, csrf: session.csrf, ...who });
    }
    // Without a key the API needs none: the browser is the operator of tenant default.
    return keyed
      ? c.json({ authenticated: false, keyed, csrf: null, tenant: null, root: false })
      : c.json({ authenticated: true, keyed, csrf: null, tenant: "default", root: true });
  });

  app.post("/ui/logout", (c) => {
    const refused = refuseCrossOrigin(c);
    if (refused) return refused;
    const session = sessions.get(c);
    if (session) {
      if (!tokenMatches(c.req.header(CSRF_HEADER) ?? null, session.csrf)) {
        return c.json(
          errorBody("CSRF_TOKEN_INVALID", "Logging out needs the CSRF token in X-CSRF-Token."),
          403,
        );
      }
      sessions.close(session.id);
    }
    deleteCookie(c, SESSION_COOKIE, cookieOptions(c));
    return c.json({ authenticated: false });
  });
}
