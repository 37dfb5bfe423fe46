/**
 * Who is calling, and what they may do (API-2).
 *
 * - The operator's key (`PUNCTUAL_API_KEY`, or no key at all on a loopback-only server
 *   without one) is the **root** caller: every route, and any tenant through the
 *   `Punctual-Tenant` header (default tenant `default`).
 * - A tenant key (`POST /v1/api-keys`) acts inside its own tenant only, as its scopes
 *   allow: `read` the GET routes (and the rule preview), `write` also every other
 *   schedule, delivery and import route, `admin` also that tenant's keys and its own
 *   webhook signing secret (`/v1/tenant-webhook-secret`, read too). Another
 *   tenant's objects answer 404, as if they did not exist.
 * - A tenant's settings (`/v1/rate-limits`, `/v1/reminder-kinds`) are read with `read`
 *   and written with `admin`; its circuits (`/v1/circuits`, one per tenant and target
 *   host, CH-7) are read with `read`.
 * - Root only, whatever the scopes: `/metrics`, `/v1/status` and `/v1/instances` (every
 *   process of the cluster) and `/v1/webhook-secret` (the default secret signs the webhooks
 *   of every tenant without its own).
 * An unknown or revoked tenant key (`pk_…`) is 401, also on a server without
 * `PUNCTUAL_API_KEY`; there, any other token is ignored (no key is needed).
 */
import type { Context, MiddlewareHandler } from "hono";
import type { ApiKeyScope } from "../store/api-keys.js";
import type { Punctual } from "../app/punctual.js";
import { DEFAULT_TENANT, type CallContext } from "../app/context.js";
import { tenantNameSchema } from "../app/api-keys.js";
import { ForbiddenError, ValidationError } from "../errors/index.js";
import { errorBody } from "./errors.js";
import { bearerToken, tokenMatches } from "./security.js";
import type { SessionStore } from "./session.js";

/** How every tenant key begins (`pk_` and 32 random bytes in base64url). */
const TENANT_KEY_PREFIX = "pk_";

/** The header with which the root caller names the tenant it acts for. */
export const TENANT_HEADER = "punctual-tenant";

/** The authenticated caller of a request. */
export interface Caller {
  tenant: string;
  /** The operator: every route, any tenant. */
  root: boolean;
  /** What a tenant key may do (the root caller holds all three). */
  scopes: ReadonlySet<ApiKeyScope>;
  /**
   * OPS-16: who acts, as operator actions record it: `operator` (the operator's key or no
   * key), `api-key:<id>` (a tenant key), `dashboard:<tenant>` (a tenant's dashboard session).
   */
  actor?: string;
}

const ALL_SCOPES: ReadonlySet<ApiKeyScope> = new Set(["read", "write", "admin"]);
const callers = new WeakMap<Request, Caller>();

/**
 * Paths only the root caller may use, any method: metrics, the cluster's processes (with
 * every tenant's circuits) and the signing secret.
 */
const ROOT_PATHS = [/^\/metrics$/, /^\/v1\/status$/, /^\/v1\/instances$/, /^\/v1\/webhook-secret$/];
/** A tenant's settings (its rate limits and reminder kinds): read with `read`, written with `admin`. */
const SETTINGS_PATHS = [/^\/v1\/rate-limits(\/|$)/, /^\/v1\/reminder-kinds(\/|$)/];
/** Paths that need `admin`, any method: a tenant's keys and its own webhook signing secret. */
const ADMIN_PATHS = [/^\/v1\/api-keys(\/|$)/, /^\/v1\/tenant-webhook-secret$/];
/** POST routes that change nothing (need only `read`). */
const READ_ONLY_POSTS = [/^\/v1\/preview$/];

/**
 * The scope a request needs, or `root`. GET/HEAD read; other methods write; the paths
 * above are stricter.
 */
export function requiredScope(method: string, path: string): ApiKeyScope | "root" {
  if (ROOT_PATHS.some((p) => p.test(path))) return "root";
  const reading = method === "GET" || method === "HEAD" || method === "OPTIONS";
  if (SETTINGS_PATHS.some((p) => p.test(path))) return reading ? "read" : "admin";
  if (ADMIN_PATHS.some((p) => p.test(path))) return "admin";
  if (reading || (method === "POST" && READ_ONLY_POSTS.some((p) => p.test(path)))) return "read";
  return "write";
}

/** Each scope includes the weaker ones: `admin` ⊃ `write` ⊃ `read`. */
export function impliedScopes(scopes: ReadonlySet<ApiKeyScope>): ReadonlySet<ApiKeyScope> {
  const all = new Set(scopes);
  if (all.has("admin")) all.add("write");
  if (all.has("write")) all.add("read");
  return all;
}

function unauthorized(c: Context, message: string) {
  c.header("WWW-Authenticate", 'Bearer realm="punctual"');
  return c.json(errorBody("UNAUTHORIZED", message), 401);
}

/**
 * Authenticates `/v1/*` and `/metrics` and checks the route's scope ({@link requiredScope}).
 * `apiKey` is the operator's key (none: a request without a key is the root caller, as
 * before tenants existed); `localToken` (API-7) also counts as the root caller. With
 * `sessions`, a request without `Authorization` may present the dashboard's session
 * cookie instead, same-origin only and with the CSRF token on writes (`./session.ts`);
 * the session stands for the key it was opened with (its tenant and current scopes).
 */
export function authenticate(
  punctual: Punctual,
  options: {
    apiKey: string | undefined;
    localToken: string | undefined;
    sessions?: SessionStore;
  },
): MiddlewareHandler {
  return async (c, next) => {
    const given = bearerToken(c);
    let fromSession: Caller | null = null;
    if (given === null && options.sessions) {
      const session = await options.sessions.resolve(c);
      if (session.kind === "refused") return session.response;
      if (session.kind === "caller") fromSession = session.identity;
    }
    let caller: Caller;
    if (fromSession !== null) {
      caller = fromSession.root
        ? { ...fromSession, actor: "operator" }
        : {
            ...fromSession,
            scopes: impliedScopes(fromSession.scopes),
            actor: `dashboard:${fromSession.tenant}`,
          };
    } else if (given === null) {
      if (options.apiKey !== undefined) {
        return unauthorized(c, "Send the API key as `Authorization: Bearer <key>`.");
      }
      caller = { tenant: DEFAULT_TENANT, root: true, scopes: ALL_SCOPES };
    } else if (
      (options.apiKey !== undefined && tokenMatches(given, options.apiKey)) ||
      (options.apiKey === undefined &&
        options.localToken !== undefined &&
        tokenMatches(given, options.localToken))
    ) {
      caller = { tenant: DEFAULT_TENANT, root: true, scopes: ALL_SCOPES };
    } else if (options.apiKey === undefined && !given.startsWith(TENANT_KEY_PREFIX)) {
      // No operator key configured: a request needs none, and a token that is not a
      // tenant key is ignored as before tenants existed (a tenant key is always checked).
      caller = { tenant: DEFAULT_TENANT, root: true, scopes: ALL_SCOPES };
    } else {
      const identity = await punctual.identifyApiKey(given);
      if (!identity) return unauthorized(c, "Wrong API key (unknown or revoked).");
      caller = {
        tenant: identity.tenant,
        root: false,
        scopes: impliedScopes(identity.scopes),
        actor: `api-key:${identity.id}`,
      };
    }
    const asTenant = c.req.header(TENANT_HEADER);
    if (asTenant !== undefined) {
      if (!caller.root) {
        throw new ForbiddenError(
          "Punctual-Tenant is for the operator's key: a tenant key always acts in its own tenant",
        );
      }
      const parsed = tenantNameSchema.safeParse(asTenant);
      if (!parsed.success) {
        throw new ValidationError({
          field: "Punctual-Tenant",
          message: parsed.error.issues[0]?.message ?? "is not a tenant name",
          value: asTenant.slice(0, 100),
        });
      }
      caller = { ...caller, tenant: parsed.data };
    }
    const needed = requiredScope(c.req.method, c.req.path);
    if (needed === "root" ? !caller.root : !caller.scopes.has(needed)) {
      throw new ForbiddenError(
        needed === "root"
          ? `${c.req.method} ${c.req.path} is for the operator's key (PUNCTUAL_API_KEY), not a tenant key`
          : `${c.req.method} ${c.req.path} needs the "${needed}" scope; this key has ${[...caller.scopes].join(", ")}`,
      );
    }
    callers.set(c.req.raw, caller);
    return next();
  };
}

/** The caller of an authenticated request (the root caller of the default tenant if none was set). */
export function callerOf(c: Context): Caller {
  return callers.get(c.req.raw) ?? { tenant: DEFAULT_TENANT, root: true, scopes: ALL_SCOPES };
}

/** The tenant scope to hand to the application layer. */
export function tenantOf(c: Context): CallContext & { tenant: string } {
  const caller = callerOf(c);
  return { tenant: caller.tenant, actor: caller.actor ?? "operator" };
}
