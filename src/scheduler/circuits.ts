/**
 * CH-7: the scheduler's side of the circuits per tenant and target host
 * (src/store/circuits.ts). A circuit is a tenant's view of a host: one tenant's failing
 * deliveries to a host hold back that tenant's deliveries only.
 *
 * Before a send, {@link CircuitBreaker.admit} decides from what this process knows: a host
 * with no recorded trouble is sent at once, with no database work (the common path); a
 * host whose circuit is open either gets this process's probe (one per opening, across
 * processes: the database row decides) or waits, and the executor gives the row back
 * unsent with its run time at the circuit's next probe. After a send,
 * {@link CircuitBreaker.record} counts a transient failure or a timeout against the host,
 * and a success closes a circuit this process knows to be troubled. What other processes
 * recorded reaches this one at its next maintenance pass ({@link CircuitBreaker.refresh}).
 */
import type { Clock } from "../clock/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { Database } from "../store/database.js";
import {
  circuitOf,
  listCircuitRows,
  recordCircuitFailure,
  recordCircuitSuccess,
  takeCircuitProbe,
  type CircuitPolicy,
  type CircuitRow,
} from "../store/circuits.js";
import { deferClaims } from "../store/deliveries/index.js";

export interface CircuitDeps {
  db: Database;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  owner: string;
  policy: CircuitPolicy;
  /** How long a probe's turn lasts before another process may probe, ms (the send timeout). */
  probeTurnMs: number;
}

/** What {@link CircuitBreaker.admit} decided for one send. */
export type Admission = { send: true; probe: boolean } | { send: false; until: Date };

/** Most target URLs whose host {@link targetHost} remembers; then it starts afresh. */
const HOST_CACHE_MAX = 1_000;
const hostOfUrl = new Map<string, string | null>();

/**
 * The circuit's host of a channel target: the host of its `url`, if it has one. Parsed
 * once per distinct URL (up to {@link HOST_CACHE_MAX} remembered), not once per send: a
 * burst to one receiver repeats the same URL on every row.
 */
export function targetHost(target: unknown): string | null {
  const url = (target as { url?: unknown } | null)?.url;
  if (typeof url !== "string") return null;
  const known = hostOfUrl.get(url);
  if (known !== undefined) return known;
  let host: string | null;
  try {
    host = new URL(url).host || null;
  } catch {
    host = null;
  }
  if (hostOfUrl.size >= HOST_CACHE_MAX) hostOfUrl.clear();
  hostOfUrl.set(url, host);
  return host;
}

const STATE_VALUE = { closed: 0, half_open: 1, open: 2 } as const;

/**
 * The name of a tenant's circuit of a host, `tenant/host` (a tenant name has no `/`): the
 * key of the breaker's memory and the `host` label of the circuit metrics.
 */
export function circuitName(tenant: string, host: string): string {
  return `${tenant}/${host}`;
}

export class CircuitBreaker {
  readonly #d: CircuitDeps;
  /** Circuits with recorded trouble (not closed, or failures counted) by {@link circuitName}, as last seen. */
  #known = new Map<string, CircuitRow>();

  constructor(deps: CircuitDeps) {
    this.#d = deps;
  }

  /** Reloads the troubled circuits of every process, and the state gauge. */
  async refresh(): Promise<void> {
    const list = await listCircuitRows(this.#d.db);
    const next = new Map(list.map((r) => [circuitName(r.tenant, r.host), r]));
    for (const name of this.#known.keys()) {
      if (!next.has(name)) this.#d.metrics.circuitState.set({ host: name }, 0);
    }
    this.#known = next;
    for (const [name, r] of next) {
      this.#d.metrics.circuitState.set({ host: name }, STATE_VALUE[r.state]);
    }
  }

  #remember(row: CircuitRow | null, name: string): void {
    if (!row || (row.state === "closed" && row.failures === 0)) this.#known.delete(name);
    else this.#known.set(name, row);
    this.#d.metrics.circuitState.set({ host: name }, row ? STATE_VALUE[row.state] : 0);
  }

  /**
   * Whether a send of `tenant`'s to `host` may go now. `nowMs` is the database clock (ms).
   * Throws the database error of a failed probe take.
   */
  async admit(tenant: string, host: string | null, nowMs: number): Promise<Admission> {
    if (host === null) return { send: true, probe: false };
    const name = circuitName(tenant, host);
    const known = this.#known.get(name);
    if (!known || known.state === "closed") return { send: true, probe: false };
    if (known.retry_at && known.retry_at.getTime() > nowMs) {
      return { send: false, until: known.retry_at };
    }
    const now = this.#d.clock.sqlNow();
    const probe = await takeCircuitProbe(
      this.#d.db,
      now,
      tenant,
      host,
      this.#d.owner,
      this.#d.probeTurnMs,
    );
    if (probe) {
      this.#remember(probe, name);
      this.#d.logger.info({ tenant, host }, "circuit half-open: sending one probe");
      return { send: true, probe: true };
    }
    const row = await circuitOf(this.#d.db, tenant, host);
    this.#remember(row, name);
    if (!row || row.state === "closed" || !row.retry_at) return { send: true, probe: false };
    return { send: false, until: row.retry_at };
  }

  /**
   * Counts a send's outcome against its tenant's circuit of its host: `transient` and
   * `timeout` are failures, `sent` a success; other outcomes (a permanent refusal, a rate
   * limit) say the host answered and change nothing. Never throws: a failure to record is
   * logged.
   */
  async record(tenant: string, host: string | null, outcome: string): Promise<void> {
    if (host === null) return;
    const name = circuitName(tenant, host);
    const now = this.#d.clock.sqlNow();
    try {
      if (outcome === "transient" || outcome === "timeout") {
        const row = await recordCircuitFailure(this.#d.db, now, tenant, host, this.#d.policy);
        const was = this.#known.get(name)?.state;
        this.#remember(row, name);
        if (row && row.state === "open" && was !== "open") {
          this.#d.logger.warn(
            { tenant, host, failures: row.failures, retryAt: row.retry_at },
            "circuit opened: this tenant's deliveries to this host wait for a probe",
          );
        }
      } else if (outcome === "sent" && this.#known.has(name)) {
        const row = await recordCircuitSuccess(this.#d.db, now, tenant, host);
        if (row) this.#d.logger.info({ tenant, host }, "circuit closed");
        this.#remember(null, name);
      }
    } catch (err) {
      this.#d.logger.warn({ err, tenant, host }, "could not record the circuit outcome");
    }
  }

  /** Gives a claimed row of `tenant`'s back unsent until `until` (no attempt spent). */
  async defer(
    tenant: string,
    host: string,
    held: { id: number; attempt: number },
    until: Date,
  ): Promise<boolean> {
    const back = await deferClaims(
      this.#d.db,
      this.#d.clock.sqlNow(),
      this.#d.owner,
      [held],
      until,
    );
    if (back.length > 0) this.#d.metrics.circuitDeferred.inc({ host: circuitName(tenant, host) });
    return back.length > 0;
  }
}
