/**
 * The HTTP API (API-1, API-2, OPS-4): a Hono app over the {@link Punctual} facade.
 *
 * - Routes are declared once in `./routes.ts` with the zod schemas of `src/contracts`
 *   and `./schemas.ts`; `GET /openapi.json` is generated from them.
 * - Every 4xx/5xx body is `{ error: { code, message, issues? } }` (`./errors.ts`).
 * - With `config.api.apiKey` set, `/v1/*` and `/metrics` require
 *   `Authorization: Bearer <key>`; `/healthz`, `/readyz` and `/openapi.json` stay open.
 * - Web safety (API-7, `./security.ts`): the Host check against DNS rebinding, cross-site
 *   writes refused without a key, the webhook secret only with a key or the local token.
 * - No text PostgreSQL cannot store (NUL, lone surrogate) gets past validation: query
 *   parameters, the path and the headers stored are checked here, bodies by their schemas.
 * - Bodies larger than `config.api.bodyLimitBytes` are refused with 413 before parsing;
 *   `POST /v1/imports` has its own, larger limit ({@link importBodyLimit}), and so has
 *   `POST /v1/recipients:bulk` (`bulkRecipientsBodyLimit`).
 */
import type { IncomingMessage, Server as HttpServer, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createAdaptorServer } from "@hono/node-server";
import { OpenAPIHono } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ZodError, type z } from "zod";
import { importCalendar, type ImportOptions, type ImportSummary } from "../app/import.js";
import { summaryFields } from "../app/calendar-task.js";
import { readinessBody } from "../app/health.js";
import { slicedJson } from "./sliced-json.js";
import { contentEncodingGuard, jsonBodyGuard } from "./body-guard.js";
import type { Punctual } from "../app/punctual.js";
import { VERSION } from "../app/punctual.js";
import { NotFoundError, ValidationError, type FieldIssue } from "../errors/index.js";
import { DEFAULT_MAX_BYTES } from "../ical/index.js";
import { validateRule, type DstPolicy, type RecurrenceInput } from "../recurrence/index.js";
import { ruleInputOfBody, ruleInputOfRaw } from "../definition/index.js";
import { borrowRuleWork, offloadPool } from "../offload/index.js";
import { isUnstorableText } from "../contracts/index.js";
import { registerApiKeyRoutes } from "./api-keys.js";
import { authenticate, tenantOf } from "./auth.js";
import { errorBody, issuesFromZod, toErrorReply } from "./errors.js";
import { crossSiteGuard, hostGuard, loopbackPeerGuard, secretGuard } from "./security.js";
import { registerReminderKindRoutes } from "./kinds.js";
import {
  cancelScheduleRoute,
  createScheduleRoute,
  getDeliveryRoute,
  getScheduleRoute,
  healthzRoute,
  IMPORT_MEDIA_TYPES,
  importRoute,
  listDeliveriesRoute,
  getImportRoute,
  listImportsRoute,
  listInstancesRoute,
  listSchedulesRoute,
  metricsRoute,
  pauseScheduleRoute,
  previewRoute,
  readyzRoute,
  redriveDeliveryRoute,
  resolveDeliveryRoute,
  resumeScheduleRoute,
  statusRoute,
  webhookSecretRoute,
  updateScheduleRoute,
} from "./routes.js";
import type { ImportQuery } from "./schemas.js";
import { readInstancePage, readStatus } from "./status.js";
import { registerOperatorRoutes } from "./operator-handlers.js";
import { registerExplainRoutes } from "./explain-routes.js";
import { registerRecipientZoneRoutes } from "./recipient-zone-routes.js";
import { registerRateLimitRoutes } from "./rate-limit-routes.js";
import { registerWebhookSecretRoutes } from "./webhook-secret-routes.js";
import {
  bulkRecipientsBodyLimit,
  RECIPIENTS_BULK_PATH,
  registerRecipientRoutes,
} from "./recipient-routes.js";
import { registerUnsubscribeRoutes, UNSUBSCRIBE_PATH } from "./unsubscribe-routes.js";
import { registerOverviewRoute } from "./overview.js";
import { registerSessionRoutes, SessionStore } from "./session.js";
import { requestSpans } from "./tracing.js";

/** The Hono app returned by {@link createApi}. */
export type PunctualApi = OpenAPIHono;

/** Path of the generated OpenAPI document. */
export const OPENAPI_PATH = "/openapi.json";

/** Options of {@link createApi}. */
export interface ApiOptions {
  /**
   * The local token (API-7): without an API key, `GET /v1/webhook-secret` answers only a
   * request presenting it as `Authorization: Bearer <token>`. `punctual start` generates
   * one per run and writes it, readable by its user only, in the data folder, where
   * `punctual webhook-secret` on the same machine reads it. Unset: the route needs a key.
   */
  localToken?: string;
}

/** Headers whose value is stored or echoed, checked for unstorable text. */
const CHECKED_HEADERS = ["idempotency-key", "if-match"];

/**
 * API-7: refuses, with a 400 naming the field, a query parameter (name or value), a path
 * or a stored header that holds a NUL or a lone surrogate, before any route reads it.
 */
const storableTextGuard: MiddlewareHandler = async (c, next) => {
  const issues: FieldIssue[] = [];
  const message = "must not contain NUL characters or unpaired UTF-16 surrogates";
  if (isUnstorableText(c.req.path)) issues.push({ field: "path", message });
  for (const [name, values] of Object.entries(c.req.queries())) {
    if (isUnstorableText(name)) issues.push({ field: "(query)", message: `a name ${message}` });
    else if (values.some(isUnstorableText)) issues.push({ field: name, message });
  }
  for (const name of CHECKED_HEADERS) {
    const value = c.req.header(name);
    if (value !== undefined && isUnstorableText(value)) {
      issues.push({ field: name === "if-match" ? "If-Match" : "Idempotency-Key", message });
    }
  }
  if (issues.length > 0) throw new ValidationError(issues);
  await next();
};

/** The version in an `If-Match` header: `"3"`, `W/"3"` or `3`; `*` or none means any. */
function ifMatchVersion(header: string | undefined): number | undefined {
  const text = header?.trim();
  if (!text || text === "*") return undefined;
  const m = /^(?:W\/)?"?(\d{1,9})"?$/.exec(text);
  if (!m?.[1]) {
    throw new ValidationError({
      field: "If-Match",
      message: 'must be the schedule version, e.g. "3"',
      value: text,
    });
  }
  return Number(m[1]);
}

/** A delivery id from the path: a positive integer, else the delivery cannot exist. */
function deliveryId(text: string): number {
  const id = /^[1-9]\d{0,15}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(id)) throw new NotFoundError("delivery", text);
  return id;
}

/** `{id}` of an import: a positive integer, else no such import (API-5). */
function importId(text: string): number {
  const id = /^[1-9]\d{0,15}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(id)) throw new NotFoundError("import", text);
  return id;
}

const RECURRENCE_FIELDS = ["dtstart", "tzid", "rrule", "rdate", "exdate", "endsAt", "dst"];

/**
 * When a create body fails its schema elsewhere (say, no reminders), the recurrence
 * fields are still checked, so one reply names every bad field. Only runs when those
 * fields passed the schema themselves.
 */
function recurrenceIssues(raw: unknown, found: readonly FieldIssue[]): FieldIssue[] {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return [];
  if (found.some((i) => RECURRENCE_FIELDS.includes(i.field.split(".")[0] ?? ""))) return [];
  const body = raw as Record<string, unknown>;
  if (typeof body.dtstart !== "string") return [];
  try {
    validateRule({
      dtstart: body.dtstart,
      tzid: typeof body.tzid === "string" ? body.tzid : "UTC",
      rrule: typeof body.rrule === "string" ? body.rrule : null,
      rdate: Array.isArray(body.rdate) ? (body.rdate as string[]) : [],
      exdate: Array.isArray(body.exdate) ? (body.exdate as string[]) : [],
      endsAt: typeof body.endsAt === "string" ? body.endsAt : null,
      ...(body.dst && typeof body.dst === "object" ? { dst: body.dst as Partial<DstPolicy> } : {}),
    });
    return [];
  } catch (err) {
    return err instanceof ValidationError ? [...err.issues] : [];
  }
}

/**
 * The recurrence a schedule would have after `patch` (OPS-12), for the worker thread's
 * validation ahead of the edit: the stored fields with the patch's on top. Empty when the
 * patch changes no recurrence field or the schedule cannot be read; the edit itself reads
 * the schedule again under its lock, so a schedule changed in between only means the work
 * lent here is not used.
 */
async function patchedRecurrence(
  punctual: Punctual,
  id: string,
  patch: unknown,
  c: Context,
): Promise<RecurrenceInput[]> {
  if (!patch || typeof patch !== "object" || Array.isArray(patch)) return [];
  const sent = patch as Record<string, unknown>;
  if (!RECURRENCE_FIELDS.some((f) => Object.prototype.hasOwnProperty.call(sent, f))) return [];
  try {
    const current: Record<string, unknown> = { ...(await punctual.getSchedule(id, tenantOf(c))) };
    const stored = Object.fromEntries(RECURRENCE_FIELDS.map((f) => [f, current[f]]));
    const input = ruleInputOfRaw({ ...stored, ...sent });
    return input === null ? [] : [input];
  } catch {
    return [];
  }
}

/** Rejects a create request that failed its schema, naming every bad field. */
async function createFailed(error: z.ZodError, rawBody: Promise<unknown> | null): Promise<never> {
  const body = rawBody ? await rawBody.catch(() => null) : null;
  const issues = issuesFromZod(error, "", body);
  if (rawBody) issues.push(...recurrenceIssues(body, issues));
  throw new ValidationError(issues);
}

/** Turns a `/v1/schedules/:id` route pattern into a matcher for the 405 check. */
function patternToRegExp(path: string): RegExp {
  const escaped = path
    .split("/")
    .map((part) => (part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("/");
  return new RegExp(`^${escaped}$`);
}

/** Path of the iCalendar import route. */
export const IMPORTS_PATH = "/v1/imports";

/** Default window of an import dry run without `to`: 30 days after `from`. */
export const DRY_RUN_DEFAULT_DAYS = 30;

/**
 * Largest body `POST /v1/imports` accepts: the iCalendar module's file limit (20 MiB),
 * or `api.bodyLimitBytes` when that is larger. Calendars are the one upload that is
 * legitimately big, so the route does not share the 1 MiB default of the JSON routes.
 */
export function importBodyLimit(apiBodyLimitBytes: number): number {
  return Math.max(apiBodyLimitBytes, DEFAULT_MAX_BYTES);
}

/** The bare media type of a Content-Type header, lower case (`text/calendar`). */
function mediaTypeOf(header: string): string {
  return (header.split(";")[0] ?? "").trim().toLowerCase();
}

/**
 * Decodes an upload with the charset its Content-Type names (UTF-8 when none, or when
 * the name is unknown). A byte-order mark is dropped.
 */
function decodeBody(bytes: ArrayBuffer, contentType: string | undefined): string {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? "")?.[1];
  const decoder = (() => {
    try {
      return new TextDecoder(charset ?? "utf-8");
    } catch {
      return new TextDecoder("utf-8");
    }
  })();
  return decoder.decode(bytes);
}

/**
 * The import options of a `POST /v1/imports` query, checked strictly: the channel's
 * target is validated here once (not once per event), a request that cannot give any
 * event a reminder is refused, and `from`/`to` only go with `dryRun=true`. The offsets,
 * zone and source are checked by the import itself (fields `remind.N`, `tzid`, `source`).
 * @throws ValidationError naming each bad parameter.
 */
function importOptions(
  punctual: Punctual,
  query: ImportQuery,
  maxBytes: number,
): ImportOptions & { dryRun: boolean } {
  const issues: FieldIssue[] = [];
  const remind = query.remind === undefined ? [] : [query.remind].flat();
  const useAlarms = query.useAlarms === "true";
  const dryRun = query.dryRun === "true";
  const channel = query.channel ?? "webhook";
  if (remind.length === 0 && !useAlarms) {
    issues.push({
      field: "remind",
      message: "give at least one reminder offset (e.g. -PT15M), or useAlarms=true",
    });
  }
  let target: Record<string, unknown> | undefined;
  if (channel === "webhook") {
    target = query.target === undefined ? {} : { url: query.target };
    try {
      punctual.channels.get(channel).validateTarget(target);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      for (const issue of err.issues) {
        issues.push({
          ...issue,
          field: "target",
          message:
            query.target === undefined
              ? "is required with channel=webhook: the URL every reminder is posted to"
              : issue.message,
        });
      }
    }
  } else if (query.target !== undefined) {
    issues.push({
      field: "target",
      message: `is only for channel=webhook; channel=${channel} takes none`,
      value: query.target,
    });
  }
  if (!dryRun) {
    for (const field of ["from", "to"] as const) {
      if (query[field] !== undefined)
        issues.push({ field, message: "is only for dryRun=true", value: query[field] });
    }
  }
  if (issues.length > 0) throw new ValidationError(issues);
  return {
    source: query.source,
    remind,
    useAlarms,
    channel,
    ...(target !== undefined ? { target } : {}),
    ...(query.tzid !== undefined ? { defaultTzid: query.tzid } : {}),
    maxBytes,
    dryRun,
  };
}

/**
 * The field issues of a request part that failed its schema. For the query, unknown
 * parameters are named one by one (`remnd: unknown query parameter`) rather than as
 * `(body)`; `input` (the validated part) lets issues quote short values.
 */
function requestIssues(error: z.ZodError, target: string, input?: unknown): FieldIssue[] {
  if (target !== "query") return issuesFromZod(error, "", input);
  return error.issues.flatMap((issue): FieldIssue[] =>
    issue.code === "unrecognized_keys" && issue.path.length === 0
      ? issue.keys.map((key) => ({ field: key, message: "unknown query parameter" }))
      : issuesFromZod(new ZodError([issue]), "", input),
  );
}

/** Query parameters that may repeat (`POST /v1/imports?remind=-PT15M&remind=-PT1H`). */
const MULTI_VALUE_QUERY_PARAMETERS: ReadonlySet<string> = new Set(["remind"]);

/**
 * Every other query parameter of the API takes one value: a parameter given twice
 * (`?limit=1&limit=2`) is a 400 naming it, rather than a schema error about `NaN`.
 */
const singleQueryValues: MiddlewareHandler = async (c, next) => {
  const counts = new Map<string, number>();
  for (const key of new URL(c.req.url).searchParams.keys()) {
    if (MULTI_VALUE_QUERY_PARAMETERS.has(key)) continue;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const issues = [...counts]
    .filter(([, n]) => n > 1)
    .map(([field, n]) => ({ field, message: `given ${n} times; give it once` }));
  if (issues.length > 0) throw new ValidationError(issues);
  return next();
};

/** Rejects a request whose query failed its schema ({@link requestIssues}). */
function queryFailed(result: { success: boolean; error?: z.ZodError }): undefined {
  if (result.success || !result.error) return undefined;
  const { target, data } = result as { target?: string; data?: unknown };
  throw new ValidationError(requestIssues(result.error, target ?? "query", data));
}

/**
 * Builds the HTTP API over a running (or not yet started) punctual. Mount it with
 * {@link serveApi}, or call `app.request()` in tests. The Host check uses
 * `config.api.host` and `config.api.allowedHosts` (see `./security.ts`).
 */
export function createApi(punctual: Punctual, options: ApiOptions = {}): PunctualApi {
  const { config } = punctual;
  const keyed = config.api.apiKey !== undefined;
  const log = punctual.logger.child({ component: "api" });

  const app = new OpenAPIHono({
    // Request validation failures become a ValidationError naming each field.
    defaultHook: (result) => {
      if (!result.success) {
        // The hook's result carries the input it validated: issues can name the values.
        const { target, data } = result as { target?: string; data?: unknown };
        throw new ValidationError(requestIssues(result.error, target ?? "", data));
      }
    },
  });

  app.onError((err, c) => {
    const reply = toErrorReply(err);
    if (reply.internal)
      log.error({ err, method: c.req.method, path: c.req.path }, "request failed");
    if (reply.retryAfterSeconds !== undefined) {
      c.header("Retry-After", String(reply.retryAfterSeconds));
      // RESOURCE_BUSY: the busy resource is the one the request names (the error knows
      // only the locked table, when the server said).
      reply.body.error.resource = c.req.path;
      reply.body.error.message = `${c.req.method} ${c.req.path}: ${reply.body.error.message}`;
    }
    return c.json(reply.body, reply.status);
  });

  const methodsOn = (path: string): string[] => [
    ...new Set(
      app.routes
        .filter((r) => r.method !== "ALL" && patternToRegExp(r.path).test(path))
        .map((r) => r.method),
    ),
  ];

  app.notFound((c) => {
    const allowed = methodsOn(c.req.path);
    if (allowed.length > 0) {
      c.header("Allow", allowed.join(", "));
      return c.json(
        errorBody("METHOD_NOT_ALLOWED", `${c.req.method} is not allowed on ${c.req.path}`),
        405,
      );
    }
    // A trailing slash names no route (`/metrics/` is not `/metrics`): 404, with a hint.
    const trimmed = c.req.path.replace(/\/+$/, "");
    const hint =
      trimmed !== c.req.path && trimmed !== "" && methodsOn(trimmed).includes(c.req.method)
        ? ` (did you mean ${trimmed}?)`
        : "";
    return c.json(errorBody("NOT_FOUND", `No route ${c.req.method} ${c.req.path}${hint}`), 404);
  });

  // OPS-15: the request's server span (a no-op without an OpenTelemetry SDK).
  app.use("*", requestSpans());

  // Request log at debug level: method, path (no query, no headers), status, duration.
  app.use("*", async (c, next) => {
    const started = performance.now();
    await next();
    log.debug(
      {
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round(performance.now() - started),
      },
      "request",
    );
  });

  // API-7: DNS rebinding, then cross-site writes (without a key), before anything else.
  const hosts = hostGuard({
    keyed,
    listenHost: config.api.host,
    allowedHosts: config.api.allowedHosts,
  });
  if (hosts) app.use("*", hosts);
  if (!keyed) {
    const guard = crossSiteGuard();
    // API-14: a mail provider posts unsubscribe links from its own servers.
    app.use("*", (c, next) => (UNSUBSCRIBE_PATH.test(c.req.path) ? next() : guard(c, next)));
  }
  app.use("*", storableTextGuard);
  app.use("/v1/*", singleQueryValues);

  const limit = (maxSize: number, what: string): MiddlewareHandler =>
    bodyLimit({
      maxSize,
      onError: (c) =>
        c.json(
          errorBody("PAYLOAD_TOO_LARGE", `Request body larger than ${maxSize} bytes (${what}).`),
          413,
        ),
    });
  const importLimitBytes = importBodyLimit(config.api.bodyLimitBytes);
  const apiLimit = limit(config.api.bodyLimitBytes, "api.bodyLimitBytes");
  const importLimit = limit(importLimitBytes, "the iCalendar import limit");
  const bulkLimit = limit(
    bulkRecipientsBodyLimit(config.api.bodyLimitBytes),
    "the recipients bulk limit",
  );
  app.use("/v1/*", (c, next) =>
    (c.req.path === IMPORTS_PATH
      ? importLimit
      : c.req.path === RECIPIENTS_BULK_PATH
        ? bulkLimit
        : apiLimit)(c, next),
  );

  // API-2: every /v1 route and /metrics knows its caller (tenant, scopes) before it runs.
  // API-6: the dashboard's session cookie stands for the key on same-origin requests.
  const sessions = new SessionStore(punctual);
  registerSessionRoutes(app, punctual, sessions, { apiKey: config.api.apiKey });
  const auth = authenticate(punctual, {
    apiKey: config.api.apiKey,
    localToken: options.localToken,
    sessions,
  });
  // API-14: an unsubscribe link's signed token is its credential; it needs no API key.
  app.use("/v1/*", (c, next) => (UNSUBSCRIBE_PATH.test(c.req.path) ? next() : auth(c, next)));
  app.use("/v1/*", contentEncodingGuard);
  app.use("/v1/*", jsonBodyGuard);
  app.use("/metrics", auth);
  // OPS-13: without a key, /metrics answers only a peer on this machine (socket address).
  if (!keyed) app.use("/metrics", loopbackPeerGuard());
  app.use(webhookSecretRoute.path, secretGuard({ keyed, localToken: options.localToken }));

  app.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "Required on /v1/* and /metrics when PUNCTUAL_API_KEY is set",
  });

  registerApiKeyRoutes(app, punctual);

  // --- schedules ---------------------------------------------------------------------

  app.openapi(
    createScheduleRoute,
    async (c) => {
      const idempotencyKey = c.req.valid("header")["idempotency-key"];
      // The raw body, not the parsed one: a reminder naming a kind (DEL-11) takes the
      // kind's fields for those it left out, not the schema's defaults.
      const raw: unknown = await c.req.json();
      // OPS-12: the rule's validation walks done on a worker thread first.
      const input = ruleInputOfRaw(raw);
      const release = await borrowRuleWork(input === null ? [] : [input]);
      const result = await punctual
        .createSchedule(raw, {
          ...tenantOf(c),
          ...(idempotencyKey ? { idempotencyKey } : {}),
        })
        .finally(release);
      const body = result.warnings.length
        ? { ...result.schedule, warnings: result.warnings }
        : result.schedule;
      c.header("Location", `/v1/schedules/${result.schedule.id}`);
      if (!result.created) {
        c.header("Idempotent-Replayed", "true");
        return c.json(body, 200);
      }
      return c.json(body, 201);
    },
    (result, c) => {
      if (result.success) return undefined;
      return createFailed(result.error, result.target === "json" ? c.req.json() : null);
    },
  );

  app.openapi(listSchedulesRoute, async (c) =>
    c.json(await punctual.listSchedules(c.req.valid("query"), tenantOf(c)), 200),
  );

  app.openapi(getScheduleRoute, async (c) => {
    // OPS-13: the schedule with its missed occurrences, as the library's describe() has them.
    const d = await punctual.schedules.get(c.req.valid("param").id, tenantOf(c)).describe();
    c.header("ETag", `"${d.schedule.version}"`);
    return c.json({ ...d.schedule, missed: { ...d.missedSummary, items: d.missed } }, 200);
  });

  app.openapi(updateScheduleRoute, async (c) => {
    const { id } = c.req.valid("param");
    const version = ifMatchVersion(c.req.valid("header")["if-match"]);
    // The raw body, not the parsed one: a field is changed only when the caller sent it.
    const patch: unknown = await c.req.json();
    // OPS-12: a patch that changes the rule has it validated on a worker thread first.
    const release = await borrowRuleWork(await patchedRecurrence(punctual, id, patch, c));
    const result = await punctual
      .updateSchedule(id, patch, {
        ...tenantOf(c),
        ...(version === undefined ? {} : { version }),
      })
      .finally(release);
    c.header("ETag", `"${result.schedule.version}"`);
    return c.json(
      {
        ...result.schedule,
        realigned: result.realigned,
        ...(result.warnings.length ? { warnings: result.warnings } : {}),
      },
      200,
    );
  });

  app.openapi(cancelScheduleRoute, async (c) => {
    const { id } = c.req.valid("param");
    if (c.req.valid("query").purge === "true") {
      return c.json(await punctual.purgeSchedule(id, tenantOf(c)), 200);
    }
    return c.json(await punctual.cancelSchedule(id, tenantOf(c)), 200);
  });

  registerOperatorRoutes(app, punctual);
  registerExplainRoutes(app, punctual);
  registerRecipientZoneRoutes(app, punctual);

  app.openapi(pauseScheduleRoute, async (c) =>
    c.json(await punctual.pauseSchedule(c.req.valid("param").id, tenantOf(c)), 200),
  );

  app.openapi(resumeScheduleRoute, async (c) =>
    c.json(await punctual.resumeSchedule(c.req.valid("param").id, tenantOf(c)), 200),
  );

  // --- reminder kinds (DEL-11) ---------------------------------------------------------

  registerReminderKindRoutes(app, punctual);

  // --- deliveries --------------------------------------------------------------------

  app.openapi(listImportsRoute, async (c) =>
    c.json(await punctual.listImports(c.req.valid("query"), tenantOf(c)), 200),
  );

  app.openapi(getImportRoute, async (c) =>
    c.json(await punctual.getImport(importId(c.req.valid("param").id), tenantOf(c)), 200),
  );

  app.openapi(listDeliveriesRoute, async (c) =>
    c.json(await punctual.listDeliveries(c.req.valid("query"), tenantOf(c)), 200),
  );

  app.openapi(getDeliveryRoute, async (c) =>
    c.json(await punctual.getDelivery(deliveryId(c.req.valid("param").id), tenantOf(c)), 200),
  );

  app.openapi(redriveDeliveryRoute, async (c) =>
    c.json(await punctual.redriveDelivery(deliveryId(c.req.valid("param").id), tenantOf(c)), 200),
  );

  app.openapi(resolveDeliveryRoute, async (c) => {
    const id = deliveryId(c.req.valid("param").id);
    return c.json(
      await punctual.resolveDelivery(id, c.req.valid("json").outcome, tenantOf(c)),
      200,
    );
  });

  // --- imports (API-5) ---------------------------------------------------------------

  app.openapi(
    importRoute,
    async (c) => {
      // API-7: only text/calendar, never a type a web page may send without a preflight
      // (text/plain, forms) nor none at all.
      const contentType = c.req.header("content-type");
      const mediaType = contentType === undefined ? "" : mediaTypeOf(contentType);
      if (!IMPORT_MEDIA_TYPES.includes(mediaType)) {
        return c.json(
          errorBody(
            "UNSUPPORTED_MEDIA_TYPE",
            `Send the calendar as the body with Content-Type: ${IMPORT_MEDIA_TYPES.join(", ")} (got ${mediaType || "none"}).`,
          ),
          415,
        );
      }
      const query = c.req.valid("query");
      const { dryRun, ...options } = importOptions(punctual, query, importLimitBytes);
      // RFC 7240: `Prefer: respond-async` asks for what `async=true` does.
      const respondAsync =
        query.async === "true" ||
        (query.async === undefined &&
          /(^|[,\s])respond-async\s*($|[,;])/i.test(c.req.header("prefer") ?? ""));
      if (respondAsync && dryRun) {
        throw new ValidationError({
          field: "async",
          message: "is not for dryRun=true: a dry run stores nothing and answers at once",
          value: "true",
        });
      }
      const text = decodeBody(await c.req.arrayBuffer(), contentType);
      // OPS-12: the calendar is read on a worker thread.
      const readCalendar: ImportOptions["readCalendar"] = (t, o) =>
        offloadPool().run("parseCalendar", { text: t, options: o });
      if (respondAsync) {
        const started = await punctual.startImport(text, {
          ...options,
          tenant: tenantOf(c).tenant,
          readCalendar,
        });
        return c.json(started, 202, {
          location: `${IMPORTS_PATH}/${started.id}`,
          "preference-applied": "respond-async",
        });
      }
      if (dryRun) {
        const fromMs = query.from === undefined ? punctual.clock.now() : Date.parse(query.from);
        const toMs =
          query.to === undefined
            ? fromMs + DRY_RUN_DEFAULT_DAYS * 86_400_000
            : Date.parse(query.to);
        if (toMs <= fromMs) {
          throw new ValidationError({
            field: "to",
            message: "must be after from",
            value: query.to,
          });
        }
        // OPS-12: the whole dry run on a worker thread.
        const { result } = await offloadPool().run("dryRun", {
          text,
          options,
          fromMs,
          toMs,
        });
        return c.json(
          { from: new Date(fromMs).toISOString(), to: new Date(toMs).toISOString(), ...result },
          200,
        );
      }
      const started = performance.now();
      const { tenant } = tenantOf(c);
      // Imports of one source queue on its import lock (across processes on PostgreSQL).
      const summary = await importCalendar(punctual, text, {
        ...options,
        tenant,
        readCalendar,
      });
      log.info(
        { ...summaryFields(summary), ms: Math.round(performance.now() - started) },
        "calendar imported",
      );
      // OPS-12: a 50,000-event summary is 7 MB of JSON; written in slices, not one call.
      // The same bytes as c.json(summary, 200), typed as that for the route's contract.
      return c.body(slicedJson(summary, "schedules"), 200, {
        "content-type": "application/json",
      }) as unknown as ReturnType<typeof c.json<ImportSummary, 200>>;
    },
    queryFailed,
  );

  // --- recurrence --------------------------------------------------------------------

  app.openapi(previewRoute, async (c) => {
    const input = c.req.valid("json");
    // OPS-12: computed on a worker thread, never on this event loop.
    return c.json(
      await offloadPool().run("preview", {
        ...ruleInputOfBody(input),
        after: input.after ?? null,
        before: input.before ?? null,
        count: input.count,
      }),
      200,
    );
  });

  // --- operations --------------------------------------------------------------------

  app.openapi(statusRoute, async (c) => c.json(await readStatus(punctual), 200));
  app.openapi(listInstancesRoute, async (c) =>
    c.json(await readInstancePage(punctual, c.req.valid("query")), 200),
  );
  registerOverviewRoute(app, punctual);

  registerRateLimitRoutes(app, punctual);
  registerRecipientRoutes(app, punctual);
  registerUnsubscribeRoutes(app, punctual);
  registerWebhookSecretRoutes(app, punctual);

  app.openapi(webhookSecretRoute, (c) => c.json({ ...punctual.webhookSecret }, 200));

  app.openapi(healthzRoute, (c) => c.json({ status: "ok" as const }, 200));

  app.openapi(readyzRoute, async (c) => {
    const health = await punctual.health();
    const body = readinessBody(health);
    return health.ready ? c.json(body, 200) : c.json(body, 503);
  });

  app.openapi(metricsRoute, async (c: Context) => {
    const { contentType, body } = await punctual.metricsText();
    return c.text(body, 200, { "Content-Type": contentType });
  });

  app.get(OPENAPI_PATH, (c) =>
    c.json(
      app.getOpenAPIDocument({
        openapi: "3.0.3",
        info: {
          title: "punctual",
          version: VERSION,
          description:
            "Durable reminder scheduler. Errors: `{ error: { code, message, issues? } }`.",
        },
      }),
    ),
  );

  return app;
}

/** A listening HTTP server. */
export interface ServedApi {
  /** Base URL with the real port (useful with port 0), e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** Port actually bound. */
  port: number;
  /**
   * Stops accepting connections, closes idle keep-alive connections, and resolves when
   * the open requests finished (or after `graceMs`, closing what is left).
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * Puts a check in front of the adapter's request listener: a `Host` header is
 * lower-cased (host names are case-insensitive, RFC 3986 §3.2.2, and the adapter refuses
 * `LOCALHOST:8080` with an empty 400), and a `Host` that is not a valid authority is
 * answered `400 BAD_HOST` with a JSON body naming it, never an empty reply.
 */
function guardHostHeader(server: HttpServer): void {
  const listeners = server.listeners("request") as ((
    req: IncomingMessage,
    res: ServerResponse,
  ) => void)[];
  server.removeAllListeners("request");
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const host = req.headers.host;
    if (host !== undefined) {
      const lower = host.toLowerCase();
      if (!isValidAuthority(lower)) {
        const body = JSON.stringify(
          errorBody(
            "BAD_HOST",
            `Host header ${JSON.stringify(host.slice(0, 200))} is not a valid host[:port]`,
          ),
        );
        res.writeHead(400, { "content-type": "application/json", connection: "close" });
        res.end(body);
        return;
      }
      req.headers.host = lower;
    }
    for (const listener of listeners) listener.call(server, req, res);
  });
}

/** Whether `host` is exactly what `URL` reads back as its host (name and optional port). */
function isValidAuthority(host: string): boolean {
  try {
    const url = new URL(`http://${host}/`);
    return url.host === host || `${url.host}:80` === host;
  } catch {
    return false;
  }
}

/**
 * Listens on `host:port` (port 0 picks a free port). A client that has not sent a
 * request's headers within `headersTimeoutMs` (default 10,000 ms), or the whole request
 * within `requestTimeoutMs` (default 30,000 ms), gets 408 and its connection is closed
 * (Node's `headersTimeout` / `requestTimeout`; its own default of 300 s let stalled
 * bodies hold sockets for minutes).
 * @throws the listen error (EADDRINUSE, EACCES …).
 */
export async function serveApi(
  app: { fetch: (request: Request) => Response | Promise<Response> },
  options: { host: string; port: number; requestTimeoutMs?: number; headersTimeoutMs?: number },
): Promise<ServedApi> {
  const requestTimeout = options.requestTimeoutMs ?? 30_000;
  // Node requires headersTimeout ≤ requestTimeout.
  const headersTimeout = Math.min(options.headersTimeoutMs ?? 10_000, requestTimeout);
  const server = createAdaptorServer({
    fetch: app.fetch,
    hostname: options.host,
    serverOptions: {
      requestTimeout,
      headersTimeout,
      // How often Node looks for expired requests (its default, 30 s, outlasts them).
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(headersTimeout / 4))),
    },
  });
  guardHostHeader(server as HttpServer);
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once("error", onError);
    server.listen(options.port, options.host, () => {
      server.off("error", onError);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    close(graceMs = 5_000) {
      closing ??= new Promise<void>((resolve) => {
        const http = server as HttpServer;
        const timer = setTimeout(() => http.closeAllConnections?.(), graceMs);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        http.closeIdleConnections?.();
      });
      return closing;
    },
  };
}
