/**
 * Health (OPS-4) and metrics (OPS-3) of this process.
 */
import { schemaCompatibility } from "../store/migrator.js";
import { ping, type InstanceRow } from "../store/operations.js";
import type { AppContext } from "./context.js";

/** Health of this process (OPS-4). */
export interface Health {
  live: boolean;
  ready: boolean;
  checks: { database: boolean; schema: boolean; heartbeat: boolean };
  lastPassAt: string | null;
  detail: string[];
}

/** The body of `GET /readyz` (OPS-4): `ready` or `not_ready`, with the checks behind it. */
export function readinessBody(health: Health): {
  status: "ready" | "not_ready";
  checks: Health["checks"];
  lastPassAt: string | null;
  detail: string[];
} {
  return {
    status: health.ready ? "ready" : "not_ready",
    checks: health.checks,
    lastPassAt: health.lastPassAt,
    detail: health.detail,
  };
}

/**
 * OPS-4: liveness and readiness (database reachable, schema inside this release's
 * compatibility window (OPS-10), last pass fresh).
 * "Last pass" is the last *successful* one (every sweep succeeded): a scheduler whose ticks
 * keep starting but fail goes not-ready once it is `heartbeatStaleMs` old.
 */
export async function health(app: AppContext): Promise<Health> {
  const detail: string[] = [];
  let database = false;
  let schema = false;
  try {
    await ping(app.db);
    database = true;
    // OPS-10: any schema inside this release's compatibility window is ready.
    const c = await schemaCompatibility(app.db);
    schema = c.state === "current" || c.state === "ahead-compatible";
    if (!schema) {
      detail.push(
        c.state === "behind"
          ? `schema version ${c.database}, this release needs ${c.release}`
          : `schema version ${c.database} is newer than this release (${c.release}) and ` +
              (c.minReaderVersion === null
                ? "records no oldest compatible release"
                : `needs a release built for ${c.minReaderVersion} or later`),
      );
    }
  } catch (err) {
    detail.push(`database unreachable: ${err instanceof Error ? err.message : String(err)}`);
  }
  const last = app.scheduler.lastPassAt;
  const heartbeat =
    last !== null &&
    app.clock.now() - last <= app.config.scheduler.heartbeatStaleMs &&
    app.scheduler.running;
  if (!heartbeat) {
    const tick = app.scheduler.lastTickAt;
    const failing =
      tick !== null && (last === null || tick > last)
        ? `; ticks still start (last at ${new Date(tick).toISOString()}) but do not succeed`
        : "";
    detail.push(
      (last === null
        ? "no successful scheduler pass yet"
        : `last successful scheduler pass is stale (${new Date(last).toISOString()})`) + failing,
    );
  }
  return {
    live: true,
    ready: database && schema && heartbeat,
    checks: { database, schema, heartbeat },
    lastPassAt: last === null ? null : new Date(last).toISOString(),
    detail,
  };
}

/**
 * OPS-4, for `punctual healthcheck --database-url`: the running instances (on `host` only
 * when given), and those among them whose last successful pass (`last_pass_at`) is at most
 * `maxAgeMs` before `now` (Unix ms). A row whose ticks start (`last_tick_at`) but whose
 * passes fail is not fresh.
 */
export function heartbeatFreshness(
  rows: readonly InstanceRow[],
  p: { now: number; maxAgeMs: number; host?: string },
): { running: InstanceRow[]; fresh: InstanceRow[] } {
  const running = rows.filter((r) => r.stopped_at === null && (!p.host || r.host === p.host));
  const fresh = running.filter(
    (r) => r.last_pass_at !== null && p.now - r.last_pass_at.getTime() <= p.maxAgeMs,
  );
  return { running, fresh };
}

/**
 * Prometheus text exposition (OPS-13). The cluster gauges are those the last gauges sweep
 * set (computed under a lease by one process, read by the others): a scrape runs no query.
 */
export async function metricsText(app: AppContext): Promise<{ contentType: string; body: string }> {
  return {
    contentType: app.metrics.registry.contentType,
    body: await app.metrics.registry.metrics(),
  };
}
