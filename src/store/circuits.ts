/**
 * CH-7: one circuit per tenant and target host, shared by every process
 * (`punctual_tenant_circuits`, migration 0028): one tenant's failures to a host open that
 * tenant's circuit only, never another tenant's (before 0028, `punctual_circuits` kept one
 * per host for every tenant; an older release may still use it, this one does not).
 *
 * closed ──(N transient failures in a row, any process)──► open
 * open ──(retry_at passed: one process takes the probe)──► half_open
 * half_open ──probe sent──► closed · ──probe failed──► open, backoff doubled (capped)
 *
 * While a circuit is open, a claimed delivery to its host is given back unsent
 * (`DEFER_CLAIMS_SQL` in `deliveries/deferrals.ts`: attempt restored, so no attempt is spent and no deferral
 * counted) with `run_at` at the circuit's `retry_at`. Every statement takes `$1` = "now"
 * (NULL: the database clock).
 */
import type { Queryable } from "./database.js";
import { msAfterNow as AFTER, NOW } from "./deliveries/sql.js";
import { columnsOf, firstRow, rows } from "./statement.js";

/** A row of `punctual_circuits`. */
export interface CircuitRow {
  /** The tenant whose deliveries the circuit counts. */
  tenant: string;
  host: string;
  state: "closed" | "open" | "half_open";
  failures: number;
  backoff_ms: number | null;
  retry_at: Date | null;
  probe_owner: string | null;
  opened_at: Date | null;
  updated_at: Date;
}

/** Result columns of the statements returning {@link CircuitRow}. */
export const CIRCUIT_COLUMNS = columnsOf<CircuitRow>()([
  "tenant",
  "host",
  "state",
  "failures",
  "backoff_ms",
  "retry_at",
  "probe_owner",
  "opened_at",
  "updated_at",
]);

/**
 * Records one transient failure of a tenant's delivery to a host. $1 now, $2 tenant,
 * $3 host, $4 failures that open the circuit, $5 first backoff ms, $6 longest backoff ms. A failure while half-open (the
 * probe failed) reopens it with the backoff doubled; the Nth failure in a row while
 * closed opens it with the first backoff; while open it only counts.
 */
export const CIRCUIT_FAILURE_SQL = `
insert into punctual_tenant_circuits as c
  (tenant, host, state, failures, backoff_ms, retry_at, opened_at, updated_at)
values ($2, $3, case when 1 >= $4::int then 'open' else 'closed' end, 1,
        case when 1 >= $4::int then $5::int end,
        case when 1 >= $4::int then ${AFTER("$5::int")} end,
        case when 1 >= $4::int then ${NOW} end, ${NOW})
on conflict (tenant, host) do update
set failures = c.failures + 1,
    state = case when c.state = 'half_open' then 'open'
                 when c.state = 'closed' and c.failures + 1 >= $4::int then 'open'
                 else c.state end,
    backoff_ms = case when c.state = 'half_open' then least($6::int, coalesce(c.backoff_ms, $5::int) * 2)
                      when c.state = 'closed' and c.failures + 1 >= $4::int then $5::int
                      else c.backoff_ms end,
    retry_at = case when c.state = 'half_open' then ${AFTER("least($6::int, coalesce(c.backoff_ms, $5::int) * 2)")}
                    when c.state = 'closed' and c.failures + 1 >= $4::int then ${AFTER("$5::int")}
                    else c.retry_at end,
    opened_at = case when c.state = 'closed' and c.failures + 1 >= $4::int then ${NOW} else c.opened_at end,
    probe_owner = case when c.state = 'half_open' then null else c.probe_owner end,
    updated_at = ${NOW}
returning c.tenant, c.host, c.state, c.failures, c.backoff_ms, c.retry_at, c.probe_owner, c.opened_at, c.updated_at`;

/**
 * A tenant's send to the host succeeded: its circuit closes and its count starts over.
 * $1 now, $2 tenant, $3 host.
 */
export const CIRCUIT_SUCCESS_SQL = `
update punctual_tenant_circuits c
set state = 'closed', failures = 0, backoff_ms = null, retry_at = null, probe_owner = null,
    opened_at = null, updated_at = ${NOW}
where c.tenant = $2 and c.host = $3 and (c.state <> 'closed' or c.failures > 0)
returning c.tenant, c.host, c.state, c.failures, c.backoff_ms, c.retry_at, c.probe_owner, c.opened_at, c.updated_at`;

/**
 * Takes the probe of an open circuit whose wait is over (or whose last probe's turn
 * lapsed): one caller wins, the row's lock orders them. $1 now, $2 tenant, $3 host,
 * $4 owner, $5 how long the probe's turn lasts, ms. Returns the row when this caller has the probe.
 */
export const CIRCUIT_PROBE_SQL = `
update punctual_tenant_circuits c
set state = 'half_open', probe_owner = $4, retry_at = ${AFTER("$5::int")}, updated_at = ${NOW}
where c.tenant = $2 and c.host = $3 and c.state in ('open', 'half_open') and c.retry_at <= ${NOW}
returning c.tenant, c.host, c.state, c.failures, c.backoff_ms, c.retry_at, c.probe_owner, c.opened_at, c.updated_at`;

/** One tenant's circuit of a host. $1 tenant, $2 host. */
export const CIRCUIT_SQL = `
select c.tenant, c.host, c.state, c.failures, c.backoff_ms, c.retry_at, c.probe_owner, c.opened_at, c.updated_at
from punctual_tenant_circuits c where c.tenant = $1 and c.host = $2`;

/**
 * Circuits that are not closed or count failures, by tenant and host. $1 the tenant, or
 * NULL for every tenant's.
 */
export const LIST_CIRCUITS_SQL = `
select c.tenant, c.host, c.state, c.failures, c.backoff_ms, c.retry_at, c.probe_owner, c.opened_at, c.updated_at
from punctual_tenant_circuits c
where (c.state <> 'closed' or c.failures > 0) and ($1::text is null or c.tenant = $1)
order by c.tenant, c.host`;

/** Options of a circuit (the scheduler options `circuit*`). */
export interface CircuitPolicy {
  /** Consecutive transient failures that open the circuit. */
  failures: number;
  /** First wait before a probe, ms. */
  backoffMs: number;
  /** Longest wait between probes, ms. */
  maxBackoffMs: number;
}

/** CH-7: runs {@link CIRCUIT_FAILURE_SQL}. */
export async function recordCircuitFailure(
  db: Queryable,
  now: Date | null,
  tenant: string,
  host: string,
  policy: CircuitPolicy,
): Promise<CircuitRow | null> {
  return firstRow<CircuitRow>(db, CIRCUIT_FAILURE_SQL, [
    now,
    tenant,
    host,
    policy.failures,
    policy.backoffMs,
    policy.maxBackoffMs,
  ]);
}

/** CH-7: runs {@link CIRCUIT_SUCCESS_SQL}; null when the circuit was closed with no failures. */
export function recordCircuitSuccess(
  db: Queryable,
  now: Date | null,
  tenant: string,
  host: string,
): Promise<CircuitRow | null> {
  return firstRow<CircuitRow>(db, CIRCUIT_SUCCESS_SQL, [now, tenant, host]);
}

/** CH-7: runs {@link CIRCUIT_PROBE_SQL}; the row when this caller has the probe. */
export function takeCircuitProbe(
  db: Queryable,
  now: Date | null,
  tenant: string,
  host: string,
  owner: string,
  turnMs: number,
): Promise<CircuitRow | null> {
  return firstRow<CircuitRow>(db, CIRCUIT_PROBE_SQL, [now, tenant, host, owner, turnMs]);
}

/** CH-7: runs {@link CIRCUIT_SQL}. */
export function circuitOf(db: Queryable, tenant: string, host: string): Promise<CircuitRow | null> {
  return firstRow<CircuitRow>(db, CIRCUIT_SQL, [tenant, host]);
}

/** CH-7: runs {@link LIST_CIRCUITS_SQL}: `tenant`'s circuits, or every tenant's (null). */
export function listCircuitRows(
  db: Queryable,
  tenant: string | null = null,
): Promise<CircuitRow[]> {
  return rows<CircuitRow>(db, LIST_CIRCUITS_SQL, [tenant]);
}

/** Result columns of {@link CIRCUIT_FAILURE_SQL}. */
export const CIRCUIT_FAILURE_COLUMNS = CIRCUIT_COLUMNS;
/** Result columns of {@link CIRCUIT_SUCCESS_SQL}. */
export const CIRCUIT_SUCCESS_COLUMNS = CIRCUIT_COLUMNS;
/** Result columns of {@link CIRCUIT_PROBE_SQL}. */
export const CIRCUIT_PROBE_COLUMNS = CIRCUIT_COLUMNS;
/** Result columns of {@link LIST_CIRCUITS_SQL}. */
export const LIST_CIRCUITS_COLUMNS = CIRCUIT_COLUMNS;
