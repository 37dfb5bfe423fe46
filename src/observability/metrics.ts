/**
 * Prometheus metrics (OPS-3, OPS-13): one table of names, units and labels, in code and in
 * docs/operations.md. Each scheduler owns a registry (several in one process stay apart).
 * Recording never throws into the loop.
 *
 * Counters and histograms count what this process did (summed over processes they are the
 * cluster's totals); the cluster gauges (backlog, overdue, retry waiting, oldest due age, in
 * doubt, dead) are the last values one process computed under a database lease and
 * stored, so every process serves the same figures and a scrape counts no rows.
 */
import { createHash } from "node:crypto";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

/** Final outcomes of a delivery, as `punctual_deliveries_total` counts them (OPS-13). */
export const FINAL_OUTCOMES = ["sent", "dead", "in_doubt", "skipped", "cancelled"] as const;

/** A final outcome of a delivery ({@link FINAL_OUTCOMES}). */
export type FinalOutcome = (typeof FINAL_OUTCOMES)[number];

/** Buckets of the lateness histograms, seconds. */
const LATENESS_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 15, 60, 300, 900, 3600];

/** Options of {@link createMetrics}. */
export interface MetricsOptions {
  /**
   * Also collect prom-client's default process metrics (CPU, memory, event-loop lag, GC)
   * on this registry. The CLI processes turn it on; a library embedding several
   * schedulers in one process leaves it off (its host usually collects them). Default false.
   */
  processMetrics?: boolean;
  /**
   * Put tenant names, rate-limit keys and target host names into label values as they are
   * (`key="acme/newsletter"`, `host="hooks.example.com"`). Default false: those labels
   * carry {@link opaqueLabel} instead, so a scrape names no tenant and no target host
   * (`PUNCTUAL_METRICS_NAMED_LABELS`).
   */
  namedLabels?: boolean;
}

/**
 * The label value that stands for a tenant-derived name (a rate-limit key `tenant/key`,
 * a target host) when names are kept out of metrics: `h_` and the first 12 hex digits of
 * the name's SHA-256. The same name gives the same value in every process; an operator
 * finds a name's series with `printf %s NAME | sha256sum`.
 */
export function opaqueLabel(name: string): string {
  return `h_${createHash("sha256").update(name, "utf8").digest("hex").slice(0, 12)}`;
}

/**
 * Makes `metric` replace the value of `label` by {@link opaqueLabel} wherever labels are
 * given (`set`, `inc`, `dec`, `labels`, `remove`), in place.
 */
function opaque<T extends Gauge<string> | Counter<string>>(metric: T, label: string): T {
  const hide = (arg: unknown): unknown => {
    if (typeof arg !== "object" || arg === null) return arg;
    const labels = arg as Record<string, unknown>;
    if (typeof labels[label] !== "string") return arg;
    return { ...labels, [label]: opaqueLabel(labels[label]) };
  };
  const m = metric as unknown as Record<string, unknown>;
  for (const method of ["set", "inc", "dec", "labels", "remove"]) {
    const original = m[method];
    if (typeof original !== "function") continue;
    const fn = original as (...args: unknown[]) => unknown;
    m[method] = (...args: unknown[]) =>
      fn.apply(metric, args.length > 0 ? [hide(args[0]), ...args.slice(1)] : args);
  }
  return metric;
}

/** The metric set of one punctual process. */
export interface Metrics {
  registry: Registry;
  /**
   * Unix seconds of the last successful scheduler pass (every sweep succeeded), per
   * instance: what staleness alerts read.
   */
  lastPass: Gauge<"instance">;
  /** Unix seconds the last scheduler tick started, successful or not, per instance. */
  lastTick: Gauge<"instance">;
  /** Deliveries due now and not yet claimed. */
  dueBacklog: Gauge;
  /** Deliveries due more than 15 minutes ago and not settled. */
  overdue: Gauge;
  /** Deliveries in state retry: failed at least once, waiting for their next try. */
  retryWaiting: Gauge;
  /** Age of the oldest delivery the claim may take now, seconds (0 when none is due). */
  oldestDueAge: Gauge;
  /** Unix seconds the cluster gauges were computed (by whichever process held the lease). */
  gaugesComputed: Gauge;
  /** Deliveries in state in_doubt. */
  inDoubt: Gauge;
  /** Deliveries in state dead. */
  dead: Gauge;
  /**
   * Attempts by channel and outcome (`sent`, `transient`, `permanent`, `rate_limited`,
   * `timeout`, `lease_expired`): `punctual_attempts_total`.
   */
  attempts: Counter<"channel" | "outcome">;
  /**
   * Deliveries by channel and final outcome ({@link FINAL_OUTCOMES}), once each, by the
   * process whose statement made it final: `punctual_deliveries_total`.
   */
  outcomes: Counter<"channel" | "outcome">;
  /** Seconds between due time and the start of a delivery's first attempt. */
  lateness: Histogram<"channel">;
  /** Seconds between due time and the start of a retry (second attempt on). */
  retryLateness: Histogram<"channel">;
  /** Settings version this process runs on (OPS-11). */
  settingsVersion: Gauge;
  /** Changes of the database-held settings this process picked up (OPS-11). */
  settingsChanges: Counter;
  /** Instances pruned from the status because their heartbeat stopped long ago. */
  instancesPruned: Counter;
  /** Seconds one scheduler tick took. */
  tickDuration: Histogram;
  /** Failures by sweep (plan, dispatch, recover, misfire, retention, heartbeat). */
  sweepFailures: Counter<"sweep">;
  /** Settles that found their lease lost (DEL-2). */
  leaseLost: Counter;
  /** Schedules quarantined because their stored rule no longer parses (REC-3). */
  quarantined: Counter;
  /** Unbounded, non-perpetual series capped at the expansion limit (REC-5). */
  seriesTruncated: Counter;
  /** Stored rules read with lenient repairs, once per schedule and rule per process (REC-3). */
  ruleRepairs: Counter;
  /** Deliveries skipped by the misfire policy, by reason (stale, expired). */
  skipped: Counter<"reason">;
  /**
   * OPS-13: missed occurrences, by reason (`stale`, `expired`): deliveries the misfire
   * sweep recorded as skipped, counted once each by the process whose statement skipped
   * them (what `GET /v1/schedules/{id}` lists under `missed`).
   */
  missedOccurrences: Counter<"reason">;
  /** Absolute difference between this process's clock and the database's, seconds. */
  clockSkew: Gauge;
  /**
   * Claims given back unsent (DEL-16), by reason: `shutdown` (a stopping process),
   * `orphan` (a claim whose reply was lost), `lease_low` (too little lease left to start
   * the send), `lease_lost` (a renewal found the row taken over).
   */
  claimsReleased: Counter<"reason">;
  /**
   * Operations (API requests, CLI commands, library calls) that gave up waiting for a lock
   * another transaction held past `lockTimeoutMs` (HTTP 503 `RESOURCE_BUSY`), by the
   * locked table (`relation`, `unknown` when the server did not name one).
   */
  lockTimeouts: Counter<"relation">;
  /** DEL-13: tokens in each limiter's bucket (`tenant/key`) as this process last read it. */
  rateLimitTokens: Gauge<"key">;
  /** DEL-13: claims of a limited key cut short by its bucket or concurrency cap. */
  rateLimitThrottled: Counter<"key">;
  /** CH-7: circuit state per tenant and target host (`host` = `tenant/host`): 0 closed, 1 half-open, 2 open. */
  circuitState: Gauge<"host">;
  /** CH-7: deliveries that waited for an open circuit instead of being sent, by `tenant/host`. */
  circuitDeferred: Counter<"host">;
}

/** Creates the metric set on a fresh registry. */
export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.processMetrics) collectDefaultMetrics({ register: registry });
  const r = [registry];
  const named = options.namedLabels === true;
  const hideLabel = <T extends Gauge<string> | Counter<string>>(metric: T, label: string): T =>
    named ? metric : opaque(metric, label);
  return {
    registry,
    lastPass: new Gauge({
      name: "punctual_scheduler_last_pass_timestamp_seconds",
      help: "Unix time of the last successful scheduler pass (every sweep succeeded).",
      labelNames: ["instance"],
      registers: r,
    }),
    lastTick: new Gauge({
      name: "punctual_scheduler_last_tick_timestamp_seconds",
      help: "Unix time the last scheduler tick started, whether or not it succeeded.",
      labelNames: ["instance"],
      registers: r,
    }),
    dueBacklog: new Gauge({
      name: "punctual_due_backlog",
      help: "Deliveries due now and not yet claimed.",
      registers: r,
    }),
    overdue: new Gauge({
      name: "punctual_overdue_deliveries",
      help: "Deliveries due more than 15 minutes ago and not yet settled.",
      registers: r,
    }),
    retryWaiting: new Gauge({
      name: "punctual_retry_waiting_deliveries",
      help: "Deliveries that failed at least once and wait for their next try.",
      registers: r,
    }),
    oldestDueAge: new Gauge({
      name: "punctual_oldest_due_age_seconds",
      help: "Age of the oldest delivery due now and not yet claimed (0 when none is due).",
      registers: r,
    }),
    gaugesComputed: new Gauge({
      name: "punctual_gauges_computed_timestamp_seconds",
      help: "Unix time the cluster gauges were last computed (by the process holding the lease).",
      registers: r,
    }),
    inDoubt: new Gauge({
      name: "punctual_in_doubt_deliveries",
      help: "Deliveries whose outcome is unknown (in_doubt): need a person.",
      registers: r,
    }),
    dead: new Gauge({
      name: "punctual_dead_deliveries",
      help: "Dead-lettered deliveries.",
      registers: r,
    }),
    attempts: new Counter({
      name: "punctual_attempts_total",
      help: "Delivery attempts by channel and outcome.",
      labelNames: ["channel", "outcome"],
      registers: r,
    }),
    outcomes: new Counter({
      name: "punctual_deliveries_total",
      help: "Deliveries by channel and final outcome (sent, dead, in_doubt, skipped, cancelled), once each.",
      labelNames: ["channel", "outcome"],
      registers: r,
    }),
    lateness: new Histogram({
      name: "punctual_delivery_lateness_seconds",
      help: "Seconds between a delivery's due time and the start of its first attempt.",
      labelNames: ["channel"],
      buckets: LATENESS_BUCKETS,
      registers: r,
    }),
    retryLateness: new Histogram({
      name: "punctual_retry_lateness_seconds",
      help: "Seconds between a delivery's due time and the start of a retry.",
      labelNames: ["channel"],
      buckets: LATENESS_BUCKETS,
      registers: r,
    }),
    settingsVersion: new Gauge({
      name: "punctual_settings_version",
      help: "Version of the database-held settings this process runs on.",
      registers: r,
    }),
    settingsChanges: new Counter({
      name: "punctual_settings_changes_total",
      help: "Changes of the database-held settings this process picked up.",
      registers: r,
    }),
    instancesPruned: new Counter({
      name: "punctual_instances_pruned_total",
      help: "Instance rows deleted because their heartbeat stopped longer ago than the prune age.",
      registers: r,
    }),
    tickDuration: new Histogram({
      name: "punctual_tick_duration_seconds",
      help: "Duration of one scheduler tick.",
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: r,
    }),
    sweepFailures: new Counter({
      name: "punctual_sweep_failures_total",
      help: "Failed sweeps by name.",
      labelNames: ["sweep"],
      registers: r,
    }),
    leaseLost: new Counter({
      name: "punctual_lease_lost_total",
      help: "Settles that found their lease lost and changed nothing.",
      registers: r,
    }),
    quarantined: new Counter({
      name: "punctual_schedules_quarantined_total",
      help: "Schedules set invalid because their stored rule no longer parses.",
      registers: r,
    }),
    seriesTruncated: new Counter({
      name: "punctual_series_truncated_total",
      help: "Unbounded, non-perpetual series capped at the expansion limit.",
      registers: r,
    }),
    ruleRepairs: new Counter({
      name: "punctual_rule_repairs_total",
      help: "Stored rules read with repairs (logged once per schedule and rule per process).",
      registers: r,
    }),
    skipped: new Counter({
      name: "punctual_deliveries_skipped_total",
      help: "Deliveries skipped by the misfire policy, by reason.",
      labelNames: ["reason"],
      registers: r,
    }),
    missedOccurrences: new Counter({
      name: "punctual_missed_occurrences_total",
      help: "Occurrences the misfire sweep recorded as skipped (missed), once each, by reason (stale, expired).",
      labelNames: ["reason"],
      registers: r,
    }),
    clockSkew: new Gauge({
      name: "punctual_clock_skew_seconds",
      help: "Absolute difference between this process's clock and the database clock.",
      registers: r,
    }),
    claimsReleased: new Counter({
      name: "punctual_claims_released_total",
      help: "Claimed deliveries this process gave back or dropped without sending, by reason.",
      labelNames: ["reason"],
      registers: r,
    }),
    lockTimeouts: new Counter({
      name: "punctual_lock_timeouts_total",
      help: "Operations that gave up waiting for a lock another transaction held (503 RESOURCE_BUSY), by locked table.",
      labelNames: ["relation"],
      registers: r,
    }),
    rateLimitTokens: hideLabel(
      new Gauge({
        name: "punctual_rate_limit_tokens",
        help: "Tokens in each rate limit's bucket (tenant/key), as this process last read it.",
        labelNames: ["key"],
        registers: r,
      }),
      "key",
    ),
    rateLimitThrottled: hideLabel(
      new Counter({
        name: "punctual_rate_limit_throttled_total",
        help: "Claims of a rate-limited key cut short by its token bucket or concurrency cap.",
        labelNames: ["key"],
        registers: r,
      }),
      "key",
    ),
    circuitState: hideLabel(
      new Gauge({
        name: "punctual_circuit_state",
        help: "Circuit of each tenant and target host (tenant/host): 0 closed, 1 half-open, 2 open.",
        labelNames: ["host"],
        registers: r,
      }),
      "host",
    ),
    circuitDeferred: hideLabel(
      new Counter({
        name: "punctual_circuit_deferred_total",
        help: "Deliveries that waited for an open circuit instead of being sent, by tenant/host.",
        labelNames: ["host"],
        registers: r,
      }),
      "host",
    ),
  };
}
