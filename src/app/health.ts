/**
 * Health (OPS-4) and metrics (OPS-3) of this process.
 */
import { expectedVersion, schemaVersion } from "../store/migrator.js";
import { ping } from "../store/operations.js";
import type { AppContext } from "./context.js";

/** Health of this process (OPS-4). */
export interface Health {
  live: boolean;
  ready: boolean;
  checks: { database: boolean; schema: boolean; heartbeat: boolean };
  lastPassAt: string | null;
  detail: string[];
}

/** OPS-4: liveness and readiness (database reachable, schema current, last pass fresh). */
export async function health(app: AppContext): Promise<Health> {
  const detail: string[] = [];
  let database = false;
  let schema = false;
  try {
    await ping(app.db);
    database = true;
    const version = await schemaVersion(app.db);
    schema = version === expectedVersion();
    if (!schema) detail.push(`schema version ${version}, expected ${expectedVersion()}`);
  } catch (err) {
    detail.push(`database unreachable: ${err instanceof Error ? err.message : String(err)}`);
  }
  const last = app.scheduler.lastPassAt;
  const heartbeat =
    last !== null &&
    app.clock.now() - last <= app.config.scheduler.heartbeatStaleMs &&
    app.scheduler.running;
  if (!heartbeat)
    detail.push(last === null ? "no scheduler pass yet" : "last scheduler pass is stale");
  return {
    live: true,
    ready: database && schema && heartbeat,
    checks: { database, schema, heartbeat },
    lastPassAt: last === null ? null : new Date(last).toISOString(),
    detail,
  };
}

/** Prometheus text exposition, with gauges refreshed from the database. */
export async function metricsText(app: AppContext): Promise<{ contentType: string; body: string }> {
  try {
    await app.scheduler.refreshGauges();
  } catch (err) {
    app.logger.warn({ err }, "could not refresh gauges");
  }
  return {
    contentType: app.metrics.registry.contentType,
    body: await app.metrics.registry.metrics(),
  };
}
