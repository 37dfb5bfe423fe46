/**
 * The probe server of `punctual worker` (OPS-13, OPS-4): `GET /metrics`, `/healthz` and
 * `/readyz`, the same answers `punctual start` gives on its API port, on a port of their
 * own (`--metrics-port`, default {@link DEFAULT_METRICS_PORT}), so a worker is watched like
 * the API process. Nothing else is served.
 *
 * - `/metrics` is this process's registry: its own counters and histograms, the default
 *   process metrics, and the cluster gauges as the last gauges sweep set them (no query per
 *   scrape). With `PUNCTUAL_API_KEY` set it needs `Authorization: Bearer <key>`, as on
 *   `start`; without it only a peer on this machine is answered (judged by the socket's
 *   address), and `punctual worker` refuses to bind off loopback. `/healthz` and `/readyz`
 *   stay open.
 * - The Host check against DNS rebinding is the API's (API-7): loopback names and the
 *   listen address, plus `PUNCTUAL_ALLOWED_HOSTS`.
 */
import { Hono, type MiddlewareHandler } from "hono";
import { readinessBody } from "../app/health.js";
import type { Punctual } from "../app/punctual.js";
import { errorBody } from "./errors.js";
import { bearerToken, hostGuard, loopbackPeerGuard, tokenMatches } from "./security.js";

/** Port of a worker's probe server unless `--metrics-port` / `PUNCTUAL_METRICS_PORT` says otherwise. */
export const DEFAULT_METRICS_PORT = 9464;

/** Options of {@link createProbeApi}. */
export interface ProbeApiOptions {
  /** Listen address (for the Host check). */
  host: string;
  /** Bearer token `/metrics` requires (`PUNCTUAL_API_KEY`); none: open. */
  apiKey?: string;
  /** Extra Host names answered (`PUNCTUAL_ALLOWED_HOSTS`). */
  allowedHosts?: readonly string[];
}

function metricsAuth(apiKey: string): MiddlewareHandler {
  return async (c, next) => {
    const given = bearerToken(c);
    if (!tokenMatches(given, apiKey)) {
      c.header("WWW-Authenticate", 'Bearer realm="punctual"');
      return c.json(
        errorBody(
          "UNAUTHORIZED",
          given ? "Wrong API key." : "Send the API key as `Authorization: Bearer <key>`.",
        ),
        401,
      );
    }
    await next();
  };
}

/** Builds the probe app over a running {@link Punctual}. */
export function createProbeApi(punctual: Punctual, options: ProbeApiOptions): Hono {
  const app = new Hono();
  const hosts = hostGuard({
    keyed: options.apiKey !== undefined,
    listenHost: options.host,
    allowedHosts: options.allowedHosts ?? [],
  });
  if (hosts) app.use("*", hosts);
  // OPS-13: without a key, only a peer on this machine (by its socket's address) scrapes.
  app.use(
    "/metrics",
    options.apiKey !== undefined ? metricsAuth(options.apiKey) : loopbackPeerGuard(),
  );

  app.get("/healthz", (c) => c.json({ status: "ok" as const }, 200));

  app.get("/readyz", async (c) => {
    const health = await punctual.health();
    const body = readinessBody(health);
    return c.json(body, health.ready ? 200 : 503);
  });

  app.get("/metrics", async (c) => {
    const { contentType, body } = await punctual.metricsText();
    return c.text(body, 200, { "Content-Type": contentType });
  });

  app.notFound((c) =>
    c.json(
      errorBody("NOT_FOUND", `${c.req.path} is not served here: try /metrics, /healthz, /readyz`),
      404,
    ),
  );
  return app;
}
