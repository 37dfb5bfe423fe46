/**
 * Configuration from environment variables (the CLI layers its flags on top).
 * Every variable is listed in {@link ENV_VARS} with the option it sets, so `--help` and
 * the README's configuration table name the same things.
 */
import type { z } from "zod";
import { ConfigError } from "../errors/index.js";
import { schedulerOptionsSchema, type ConfigInput } from "./index.js";

type Kind = "string" | "int" | "bool" | "list";

/** Environment variable → configuration path, kind and meaning. */
export const ENV_VARS: ReadonlyArray<{ name: string; path: string; kind: Kind; help: string }> = [
  {
    name: "DATABASE_URL",
    path: "databaseUrl",
    kind: "string",
    help: "PostgreSQL URL; unset = embedded PGlite",
  },
  {
    name: "PUNCTUAL_DATA_DIR",
    path: "dataDir",
    kind: "string",
    help: "embedded data folder (default ./punctual-data)",
  },
  {
    name: "PUNCTUAL_TAKE_OVER_LOCK",
    path: "takeOverLock",
    kind: "bool",
    help: "take over a data folder lock another host left (once 60 s stale)",
  },
  {
    name: "PUNCTUAL_ALLOW_SHARED_DATA_DIR",
    path: "allowSharedDataDir",
    kind: "bool",
    help: "open a data folder other users may read (default: refused; new folders are 0700)",
  },
  {
    name: "PUNCTUAL_LOG_LEVEL",
    path: "logLevel",
    kind: "string",
    help: "fatal|error|warn|info|debug|trace|silent",
  },
  {
    name: "PUNCTUAL_METRICS_NAMED_LABELS",
    path: "metricsNamedLabels",
    kind: "bool",
    help: "tenant names and target hosts in metric labels (default: an opaque h_<sha256> value)",
  },
  {
    name: "PUNCTUAL_WEBHOOK_SECRET",
    path: "webhookSecret",
    kind: "string",
    help: "default webhook signing secret (whsec_…)",
  },
  {
    name: "PUNCTUAL_ALLOW_PRIVATE_TARGETS",
    path: "allowPrivateTargets",
    kind: "bool",
    help: "allow webhook targets in private/loopback ranges",
  },
  {
    name: "PUNCTUAL_SMTP_URL",
    path: "email.smtpUrl",
    kind: "string",
    help: "e-mail server, smtp://user:pass@host:587 or smtps://…:465 (enables the email channel)",
  },
  {
    name: "PUNCTUAL_SMTP_FROM",
    path: "email.from",
    kind: "string",
    help: "default e-mail sender, e.g. Reminders <reminders@example.com>",
  },
  {
    name: "PUNCTUAL_SMTP_ALLOWED_FROM",
    path: "email.allowedFrom",
    kind: "list",
    help: "other senders a reminder's from may name, comma-separated: a@example.com, *@example.com, *; tenant:a@example.com for one tenant only (default: PUNCTUAL_SMTP_FROM only)",
  },
  {
    name: "PUNCTUAL_SMTP_DOMAIN",
    path: "email.domain",
    kind: "string",
    help: "domain of Message-IDs <deliveryKey@domain> (default the sender's domain)",
  },
  {
    name: "PUNCTUAL_PUBLIC_URL",
    path: "publicUrl",
    kind: "string",
    help: "public base URL of the API for one-click unsubscribe links in e-mail (unset: no List-Unsubscribe header)",
  },
  {
    name: "PUNCTUAL_HOST",
    path: "api.host",
    kind: "string",
    help: "API listen address (default 127.0.0.1)",
  },
  { name: "PUNCTUAL_PORT", path: "api.port", kind: "int", help: "API port (default 8080)" },
  {
    name: "PUNCTUAL_API_KEY",
    path: "api.apiKey",
    kind: "string",
    help: "bearer token required by the API",
  },
  {
    name: "PUNCTUAL_ALLOWED_HOSTS",
    path: "api.allowedHosts",
    kind: "list",
    help: "extra Host names the API answers, comma-separated (name or name:port; * = any)",
  },
  {
    name: "PUNCTUAL_REQUEST_TIMEOUT_MS",
    path: "api.requestTimeoutMs",
    kind: "int",
    help: "most time a client may take to send a whole API request, ms (default 30000)",
  },
  {
    name: "PUNCTUAL_HEADERS_TIMEOUT_MS",
    path: "api.headersTimeoutMs",
    kind: "int",
    help: "most time a client may take to send an API request's headers, ms (default 10000)",
  },
  {
    name: "PUNCTUAL_LOCK_TIMEOUT_MS",
    path: "lockTimeoutMs",
    kind: "int",
    help: "longest a request waits for a row lock another transaction holds, ms; then 503 RESOURCE_BUSY (default 5000, 0 = no limit)",
  },
  {
    name: "PUNCTUAL_LEASE_MS",
    path: "scheduler.leaseMs",
    kind: "int",
    help: "lease on a claimed delivery, ms (default 60000)",
  },
  {
    name: "PUNCTUAL_SEND_TIMEOUT_MS",
    path: "scheduler.sendTimeoutMs",
    kind: "int",
    help: "budget of one send, ms; may exceed the lease (default 30000)",
  },
  {
    name: "PUNCTUAL_LEASE_MARGIN_MS",
    path: "scheduler.leaseMarginMs",
    kind: "int",
    help: "lease safety margin before a send, ms (default 5000, ≤ lease/4)",
  },
  {
    name: "PUNCTUAL_PREFETCH",
    path: "scheduler.prefetch",
    kind: "int",
    help: "claimed rows held beyond the send slots (default 300)",
  },
  {
    name: "PUNCTUAL_POLL_MS",
    path: "scheduler.pollMs",
    kind: "int",
    help: "safety-net poll, ms (default 2000)",
  },
  {
    name: "PUNCTUAL_CONCURRENCY",
    path: "scheduler.concurrency",
    kind: "int",
    help: "sends in flight per process (default 100)",
  },
  {
    name: "PUNCTUAL_DIGEST_CONCURRENCY",
    path: "scheduler.digestConcurrency",
    kind: "int",
    help: "digest sends in flight per process, off the maintenance pass (default 16)",
  },
  {
    name: "PUNCTUAL_MAX_ATTEMPTS",
    path: "scheduler.maxAttempts",
    kind: "int",
    help: "attempts before dead (default 5)",
  },
  {
    name: "PUNCTUAL_RATE_LIMIT_MAX_DEFERRALS",
    path: "scheduler.rateLimitMaxDeferrals",
    kind: "int",
    help: "Retry-After deferrals before dead RATE_LIMITED (default 20)",
  },
  {
    name: "PUNCTUAL_RATE_LIMIT_MAX_AGE_MS",
    path: "scheduler.rateLimitMaxAgeMs",
    kind: "int",
    help: "longest deferral by Retry-After since the first try, ms (default 86400000)",
  },
  {
    name: "PUNCTUAL_RATE_LIMIT_MAX_DELAY_MS",
    path: "scheduler.rateLimitMaxDelayMs",
    kind: "int",
    help: "longest Retry-After honoured, ms (default 3600000)",
  },
  {
    name: "PUNCTUAL_MAX_RATE_LIMITS_PER_TENANT",
    path: "scheduler.maxRateLimitsPerTenant",
    kind: "int",
    help: "most rate limits one tenant may have (default 1000)",
  },
  {
    name: "PUNCTUAL_CIRCUIT_FAILURES",
    path: "scheduler.circuitFailures",
    kind: "int",
    help: "consecutive transient failures to one host that open its circuit (default 5, 1–1000)",
  },
  {
    name: "PUNCTUAL_CIRCUIT_BACKOFF_MS",
    path: "scheduler.circuitBackoffMs",
    kind: "int",
    help: "wait before an open circuit's first probe, ms; doubles per failed probe (default 30000)",
  },
  {
    name: "PUNCTUAL_CIRCUIT_MAX_BACKOFF_MS",
    path: "scheduler.circuitMaxBackoffMs",
    kind: "int",
    help: "longest wait between probes of an open circuit, ms (default 600000)",
  },
  {
    name: "PUNCTUAL_PLAN_AHEAD_MS",
    path: "scheduler.planAheadMs",
    kind: "int",
    help: "planning horizon, ms (default 3600000)",
  },
  {
    name: "PUNCTUAL_MAX_EXPANSION_DAYS",
    path: "scheduler.maxExpansionDays",
    kind: "int",
    help: "cap of unbounded series, days (default 366)",
  },
  {
    name: "PUNCTUAL_RETENTION_DAYS",
    path: "scheduler.retentionDays",
    kind: "int",
    help: "sent, skipped and cancelled deliveries are deleted after this many days (default 30)",
  },
  {
    name: "PUNCTUAL_ATTEMPT_RETENTION_DAYS",
    path: "scheduler.attemptRetentionDays",
    kind: "int",
    help: "attempt-log rows are deleted after this many days (default: with their delivery)",
  },
  {
    name: "PUNCTUAL_INSTANCE_PRUNE_AFTER_MS",
    path: "scheduler.instancePruneAfterMs",
    kind: "int",
    help: "instances whose heartbeat stopped this long ago leave the status, ms (default 86400000)",
  },
  {
    name: "PUNCTUAL_GAUGES_EVERY_MS",
    path: "scheduler.gaugesEveryMs",
    kind: "int",
    help: "cluster gauges computed by one process this often, ms (default 15000)",
  },
  {
    name: "PUNCTUAL_SHUTDOWN_GRACE_MS",
    path: "scheduler.shutdownGraceMs",
    kind: "int",
    help: "time for in-flight sends at shutdown, ms (default 10000)",
  },
];

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split(".");
  let node = target;
  for (const part of parts.slice(0, -1)) {
    node[part] = (node[part] as Record<string, unknown> | undefined) ?? {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts[parts.length - 1]!] = value;
}

/**
 * The scheduler option a `scheduler.*` variable sets, checked alone (range, minimum), so a
 * value out of range is refused naming the variable and its value rather than the option
 * path only (OPS-5). Cross-option rules stay with `resolveConfig`.
 */
function checkSchedulerValue(name: string, path: string, raw: string, value: unknown): void {
  if (!path.startsWith("scheduler.")) return;
  const shape = schedulerOptionsSchema.shape as Record<string, z.ZodType>;
  const field = shape[path.slice("scheduler.".length)];
  const result = field?.safeParse(value);
  if (!result || result.success) return;
  const issue = result.error.issues[0];
  const bound =
    issue?.code === "too_small"
      ? ` (at least ${String(issue.minimum)})`
      : issue?.code === "too_big"
        ? ` (at most ${String(issue.maximum)})`
        : `: ${issue?.message ?? "invalid"}`;
  throw new ConfigError(`${name} is out of range${bound} (got "${raw}")`);
}

/**
 * Reads {@link ENV_VARS} from `env` into a configuration input (unset and empty
 * variables are ignored).
 * @throws ConfigError naming the variable and its value for a value of the wrong kind, or
 *   (scheduler options) out of the option's range.
 */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): ConfigInput {
  const out: Record<string, unknown> = {};
  for (const v of ENV_VARS) {
    const raw = env[v.name];
    if (raw === undefined || raw === "") continue;
    let value: unknown = raw;
    if (v.kind === "int") {
      if (!/^\d+$/.test(raw.trim()))
        throw new ConfigError(`${v.name} must be a whole number (got "${raw}")`);
      value = Number(raw);
    } else if (v.kind === "bool") {
      const b = raw.trim().toLowerCase();
      if (!["true", "false", "1", "0", "yes", "no"].includes(b)) {
        throw new ConfigError(`${v.name} must be true or false (got "${raw}")`);
      }
      value = ["true", "1", "yes"].includes(b);
    } else if (v.kind === "list") {
      value = raw
        .split(",")
        .map((item) => item.trim())
        .filter((item) => item !== "");
    }
    checkSchedulerValue(v.name, v.path, raw, value);
    setPath(out, v.path, value);
  }
  return out as ConfigInput;
}

/** Deep-merges configuration inputs, later ones winning (flags over environment). */
export function mergeConfig(...inputs: ConfigInput[]): ConfigInput {
  const out: Record<string, unknown> = {};
  for (const input of inputs) {
    for (const [k, v] of Object.entries(input ?? {})) {
      if (v === undefined) continue;
      if (v && typeof v === "object" && !Array.isArray(v) && out[k] && typeof out[k] === "object") {
        out[k] = mergeConfig(out[k] as ConfigInput, v as ConfigInput);
      } else {
        out[k] = v;
      }
    }
  }
  return out as ConfigInput;
}
