/**
 * CH-7: the circuits of target hosts, for `punctual status` and `GET /v1/circuits`.
 * Circuits are per tenant and host: one tenant's failures to a host hold back that
 * tenant's deliveries only, and a tenant sees its own circuits only.
 */
import type { CircuitView } from "../contracts/rate-limits.js";
import { listCircuitRows, type CircuitRow } from "../store/circuits.js";
import { tenantOf, type AppContext, type CallContext } from "./context.js";

/** The API view of a circuit. */
export function toCircuitView(row: CircuitRow): CircuitView {
  return {
    tenant: row.tenant,
    host: row.host,
    state: row.state,
    failures: Number(row.failures),
    backoffMs: row.backoff_ms === null ? null : Number(row.backoff_ms),
    retryAt: row.retry_at ? row.retry_at.toISOString() : null,
    openedAt: row.opened_at ? row.opened_at.toISOString() : null,
    updatedAt: row.updated_at.toISOString(),
  };
}

/**
 * The caller's tenant's circuits that are open, half-open, or count failures, by host;
 * every tenant's with `everyTenant` (the cluster status, the operator's).
 */
export async function listCircuits(
  app: AppContext,
  ctx: CallContext = {},
  options: { everyTenant?: boolean } = {},
): Promise<CircuitView[]> {
  const tenant = options.everyTenant ? null : tenantOf(ctx);
  return (await listCircuitRows(app.db, tenant)).map(toCircuitView);
}
