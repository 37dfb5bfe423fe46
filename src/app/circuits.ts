/**
 * CH-7: the circuits of target hosts, for `punctual status` and `GET /v1/circuits`.
 * Circuits are per host and shared by every tenant (a host that fails fails for all).
 */
import type { CircuitView } from "../contracts/rate-limits.js";
import { listCircuitRows, type CircuitRow } from "../store/circuits.js";
import type { AppContext } from "./context.js";

/** The API view of a circuit. */
export function toCircuitView(row: CircuitRow): CircuitView {
  return {
    host: row.host,
    state: row.state,
    failures: Number(row.failures),
    backoffMs: row.backoff_ms === null ? null : Number(row.backoff_ms),
    retryAt: row.retry_at ? row.retry_at.toISOString() : null,
    openedAt: row.opened_at ? row.opened_at.toISOString() : null,
    updatedAt: row.updated_at.toISOString(),
  };
}

/** Circuits that are open, half-open, or count failures, by host. */
export async function listCircuits(app: AppContext): Promise<CircuitView[]> {
  return (await listCircuitRows(app.db)).map(toCircuitView);
}
