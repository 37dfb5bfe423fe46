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
 * Sessions are stored in the database (`src/app/sessions.ts`, migration 0017): only a
 * hash of the id, so any API process on the same database serves any session, and a
 * restart logs nobody out. A session ends after {@link SESSION_IDLE_MS} without a
 * request, at logout, when its tenant key is revoked or deleted, or when the operator's
 * key it was opened with changes.
 */
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { Punctual } from "../app/punctual.js";
import { DEFAULT_TENANT } from "../app/context.js";
import {
  SESSION_IDLE_MS,
  sessionCsrf,
  type SessionIdentity,
  type SessionOwner,
} from "../app/sessions.js";
import { errorBody } from "./errors.js";
import { tokenMatches } from "./security.js";

/** Name of the session cookie. */
export const SESSION_COOKIE = "punctual_session";
/** Header a write sent with the session cookie carries the CSRF token in. */
export const CSRF_HEADER = "x-csrf-token";
export { SESSION_IDLE_MS };

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** A live session of a request's cookie. */
interface Session {
  id: string;
  csrf: string;
  identity: SessionIdentity;
}

/** What the cookie of a request stands for ({@link SessionStore.resolve}). */
export type SessionResolution =
  | { kind: "none" }
  | { kind: "caller"; identity: SessionIdentity }
  | { kind: "refused"; response: Response };

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

/** The sessions of one API ({@link registerSessionRoutes}), kept in its database. */
export class SessionStore {
  readonly #punctual: Punctual;

  constructor(punctual: Punctual) {
    this.#punctual = punctual;
  }

  /** The live session of a request's cookie (its expiry refreshed), or null. */
  async get(c: Context): Promise<Session | null> {
    const id = getCookie(c, SESSION_COOKIE);
    if (!id) return null;
    const identity = await this.#punctual.resolveSession(id);
    if (!identity) return null;
    return { id, csrf: sessionCsrf(id), identity };
  }

  /**
   * What the session cookie of a `/v1` request stands for: nothing (no cookie, or a
   * request with its own `Authorization`), the session's key (same-origin, and for a
   * write the right `X-CSRF-Token`), or a refusal.
   */
  async resolve(c: Context): Promise<SessionResolution> {
    if (c.req.header("authorization") !== undefined) return { kind: "none" };
    const session = await this.get(c);
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
    return { kind: "caller", identity: session.identity };
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

  /** Who a key is: the operator, a live tenant key, or nobody (null). */
  const identify = async (
    key: string,
  ): Promise<{ tenant: string; root: boolean; owner: SessionOwner } | null> => {
    if (options.apiKey !== undefined && tokenMatches(key, options.apiKey)) {
      return { tenant: DEFAULT_TENANT, root: true, owner: { operator: true } };
    }
    if (key.startsWith("pk_")) {
      const identity = await punctual.identifyApiKey(key);
      return identity
        ? { tenant: identity.tenant, root: false, owner: { apiKeyId: identity.id } }
        : null;
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
    const old = getCookie(c, SESSION_COOKIE);
    if (old) await punctual.closeSession(old);
    const { id, csrf } = await punctual.openSession(who.owner);
    setCookie(c, SESSION_COOKIE, id, cookieOptions(c));
    c.header("Cache-Control", "no-store");
    return c.json({
      authenticated: true,
      keyed: options.apiKey !== undefined,
      csrf,
      tenant: who.tenant,
      root: who.root,
    });
  });

  app.get("/ui/session", async (c) => {
    const refused = refuseCrossOrigin(c);
    if (refused) return refused;
    c.header("Cache-Control", "no-store");
    const keyed = options.apiKey !== undefined;
    const session = await sessions.get(c);
    if (session) {
      const { tenant, root } = session.identity;
      return c.json({ authenticated: true, keyed, csrf: session.csrf, tenant, root });
    }
    // Without a key the API needs none: the browser is the operator of tenant default.
    return keyed
      ? c.json({ authenticated: false, keyed, csrf: null, tenant: null, root: false })
      : c.json({ authenticated: true, keyed, csrf: null, tenant: "default", root: true });
  });

  app.post("/ui/logout", async (c) => {
    const refused = refuseCrossOrigin(c);
    if (refused) return refused;
    const session = await sessions.get(c);
    if (session) {
      if (!tokenMatches(c.req.header(CSRF_HEADER) ?? null, session.csrf)) {
        return c.json(
          errorBody("CSRF_TOKEN_INVALID", "Logging out needs the CSRF token in X-CSRF-Token."),
          403,
        );
      }
      await punctual.closeSession(session.id);
    }
    deleteCookie(c, SESSION_COOKIE, cookieOptions(c));
    return c.json({ authenticated: false });
  });
}
