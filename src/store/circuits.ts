/**
 * CH-7: one circuit per target host, shared by every process (`punctual_circuits`,
 * migration 0010).
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
 * Records one transient failure to a host. $1 now, $2 host, $3 failures that open the
 * circuit, $4 first backoff ms, $5 longest backoff ms. A failure while half-open (the
 * probe failed) reopens it with the backoff doubled; the Nth failure in a row while
 * closed opens it with the first backoff; while open it only counts.
 */
export const CIRCUIT_FAILURE_SQL = `
insert into punctual_circuits as c
  (host, state, failures, backoff_ms, retry_at, opened_at, updated_at)
values ($2, case when 1 >= $3::int then 'open' else 'closed' end, 1,
        case when 1 >= $3::int then $4::int end,
        case when 1 >= $3::int then ${AFTER("$4::int")} end,
        case when 1 >= $3::int then ${NOW} end, ${NOW})
on conflict (host) do update
set failures = c.failures + 1,
    state = case when c.state = 'half_open' then 'open'
                 when c.state = 'closed' and c.failures + 1 >= $3::int then 'open'
                 else c.state end,
    backoff_ms = case when c.state = 'half_open' then least($5::int, coalesce(c.backoff_ms, $4::int) * 2)
                      when c.state = 'closed' and c.failures + 1 >= $3::int then $4::int
                      else c.backoff_ms end,
    retry_at = case when c.state = 'half_open' then ${AFTER("least($5::int, coalesce(c.backoff_ms, $4::int) * 2)")}
                    when c.state = 'closed' and c.failures + 1 >= $3::int then ${AFTER("$4::int")}
                    else c.retry_at end,
    opened_at = case when c.state = 'closed' and c.failures + 1 >= $3::int then ${NOW} else c.opened_at end,
    probe_owner = case when c.state = 'half_open' then null else c.probe_owner end,
    updated_at = ${NOW}
returning c.host, c.state, c.failures, c.backoff_ms, c.retry_at, c.probe_owner, c.opened_at, c.updated_at`;

/** A send to the host succeeded: the circuit closes and its count starts over. $1 now, $2 host. */
export const CIRCUIT_SUCCESS_SQL = `
update punctual_circuits c
set state = 'closed', failures = 0, backoff_ms = null, retry_at = null, probe_owner = null,
    opened_at = null, updated_at = ${NOW}
where c.host = $2 and (c.state <> 'closed' or c.failures > 0)
returning c.host, c.state, c.failures, c.backoff_ms, c.retry_at, c.probe_owner, c.opened_at, c.updated_at`;

/**
 * Takes the probe of an open circuit whose wait is over (or whose last probe's turn
 * lapsed): one caller wins, the row's lock orders them. $1 now, $2 host, $3 owner,
 * $4 how long the probe's turn lasts, ms. Returns the row when this caller has the probe.
 */
export const CIRCUIT_PROBE_SQL = `
update punctual_circuits c
set state = 'half_open', probe_owner = $3, retry_at = ${AFTER("$4::int")}, updated_at = ${NOW}
where c.host = $2 and c.state in ('open', 'half_open') and c.retry_at <= ${NOW}
returning c.host, c.state, c.failures, c.backoff_ms, c.retry_at, c.probe_owner, c.opened_at, c.updated_at`;

/** One circuit. $1 host. */
export const CIRCUIT_SQL = `
select c.host, c.state, c.failures, c.backoff_ms, c.retry_at, c.probe_owner, c.opened_at, c.updated_at
from punctual_circuits c where c.host = $1`;

/** Circuits that are not closed or count failures, by host. */
export const LIST_CIRCUITS_SQL = `
select c.host, c.state, c.failures, c.backoff_ms, c.retry_at, c.probe_owner, c.opened_at, c.updated_at
from punctual_circuits c where c.state <> 'closed' or c.failures > 0 order by c.host`;

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
  host: string,
  policy: CircuitPolicy,
): Promise<CircuitRow | null> {
  return firstRow<CircuitRow>(db, CIRCUIT_FAILURE_SQL, [
    now,
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
  host: string,
): Promise<CircuitRow | null> {
  return firstRow<CircuitRow>(db, CIRCUIT_SUCCESS_SQL, [now, host]);
}

/** CH-7: runs {@link CIRCUIT_PROBE_SQL}; the row when this caller has the probe. */
export function takeCircuitProbe(
  db: Queryable,
  now: Date | null,
  host: string,
  owner: string,
  turnMs: number,
): Promise<CircuitRow | null> {
  return firstRow<CircuitRow>(db, CIRCUIT_PROBE_SQL, [now, host, owner, turnMs]);
}

/** CH-7: runs {@link CIRCUIT_SQL}. */
export function circuitOf(db: Queryable, host: string): Promise<CircuitRow | null> {
  return firstRow<CircuitRow>(db, CIRCUIT_SQL, [host]);
}

/** CH-7: runs {@link LIST_CIRCUITS_SQL}. */
export function listCircuitRows(db: Queryable): Promise<CircuitRow[]> {
  return rows<CircuitRow>(db, LIST_CIRCUITS_SQL, []);
}

/** Result columns of {@link CIRCUIT_FAILURE_SQL}. */
export const CIRCUIT_FAILURE_COLUMNS = CIRCUIT_COLUMNS;
/** Result columns of {@link CIRCUIT_SUCCESS_SQL}. */
export const CIRCUIT_SUCCESS_COLUMNS = CIRCUIT_COLUMNS;
/** Result columns of {@link CIRCUIT_PROBE_SQL}. */
export const CIRCUIT_PROBE_COLUMNS = CIRCUIT_COLUMNS;
/** Result columns of {@link LIST_CIRCUITS_SQL}. */
export const LIST_CIRCUITS_COLUMNS = CIRCUIT_COLUMNS;
