/**
 * Configuration, declared once (docs/configuration.md is generated from the same facts).
 * Units are in the names (`leaseMs`). `resolveConfig` validates once into a frozen object;
 * unknown keys are errors that suggest the nearest known key. Invalid configuration stops
 * the process at start (OPS-5).
 */
import { z } from "zod";
import { ConfigError } from "../errors/index.js";
import { LOG_LEVELS } from "../observability/logger.js";

/**
 * Longest duration a timer can wait, ms: Node's `setTimeout` limit (2^31 − 1, about
 * 24.8 days); a longer one would fire at once, in a loop.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/** Longest horizon or age a setting may name, ms: 366 days. */
export const MAX_HORIZON_MS = 31_622_400_000;

/** A duration setting, whole milliseconds in `[min, max]` (default max {@link MAX_TIMER_MS}). */
const ms = (def: number, min = 0, max = MAX_TIMER_MS) =>
  z.number().int().min(min).max(max).default(def);

/** The scheduler's options, with units and defaults. */
export const schedulerOptionsSchema = z
  .object({
    /** Lease on a claimed delivery, ms (database clock). Default 60 s. */
    leaseMs: ms(60_000, 1_000),
    /**
     * Budget of one send, ms, for channels without their own timeout. Independent of the
     * lease: the lease is renewed while a send runs (DEL-16). Default 30 s.
     */
    sendTimeoutMs: ms(30_000, 100),
    /**
     * Safety margin on a lease, ms: no send starts with less lease left, and a send whose
     * lease could not be renewed is aborted this long before it ends (DEL-16). At most a
     * quarter of `leaseMs` is used. Default 5 s.
     */
    leaseMarginMs: ms(5_000, 0),
    /** Safety-net poll: the longest wait between two ticks, ms. Default 2 s. */
    pollMs: ms(2_000, 10),
    /** How far ahead planning materializes deliveries, ms. Default 1 h. */
    planAheadMs: ms(3_600_000, 60_000, MAX_HORIZON_MS),
    /** Unbounded, non-perpetual series are capped this many days after their start (REC-5). */
    maxExpansionDays: z.number().int().min(1).max(36_600).default(366),
    /** Most deliveries one worker sends at once (its free send slots). Default 100. */
    concurrency: z.number().int().min(1).max(1_000).default(100),
    /**
     * DEL-19: most digest sends in flight per process, beside `concurrency`. Digests are sent
     * off the maintenance pass; a digest whose receiver hangs holds one of these slots (up
     * to the send timeout), never the pass. Default 16.
     */
    digestConcurrency: z.number().int().min(1).max(1_000).default(16),
    /**
     * Most rows one claim statement takes. Default 300: under a burst a claim's fixed cost
     * (about 1.5 ms of database CPU) is shared by up to this many rows (docs/benchmarks.md).
     */
    claimBatch: z.number().int().min(1).max(1_000).default(300),
    /**
     * Most claimed rows held beyond the send slots, waiting for one (DEL-13): a crash
     * strands at most `concurrency + prefetch` rows. The producer holds less when sends are
     * slow (about 300 ms of measured throughput), so the full amount is held only while a
     * burst drains faster than 1,000 per second. Default 300.
     */
    prefetch: z.number().int().min(0).max(10_000).default(300),
    /** Attempts before a delivery is dead with SEND_FAILED (DEL-4). Default 5. */
    maxAttempts: z.number().int().min(1).max(100).default(5),
    /** First retry delay, ms; doubles per failure. Default 1 s. */
    backoffBaseMs: ms(1_000, 1),
    /** Longest retry delay, ms (DEL-4: 1 hour). */
    backoffCapMs: ms(3_600_000, 1),
    /**
     * Most Retry-After deferrals of one delivery (DEL-13). A deferral (429 / 503 with
     * Retry-After) spends no attempt; once this many were granted, the next one is dead
     * with reason `RATE_LIMITED`. Default 20.
     */
    rateLimitMaxDeferrals: z.number().int().min(0).max(10_000).default(20),
    /**
     * Longest a delivery is deferred by Retry-After, ms since its first try began (DEL-13);
     * a rate limit after that is dead `RATE_LIMITED`. Default 24 h.
     */
    rateLimitMaxAgeMs: ms(86_400_000, 1_000, MAX_HORIZON_MS),
    /** Longest Retry-After honoured, ms; a longer one is shortened to it (DEL-13). Default 1 h. */
    rateLimitMaxDelayMs: ms(3_600_000, 1_000),
    /**
     * DEL-13: most rate limits one tenant may have; setting a new key past it is refused
     * (409 `CONFLICT` naming the key and the cap). Every limit with due rows costs
     * the claim one locked statement, so the cap keeps one tenant from slowing every other
     * one's claims. Default 1,000.
     */
    maxRateLimitsPerTenant: z.number().int().min(1).max(1_000_000).default(1_000),
    /**
     * CH-7: consecutive transient failures (any process) to one target host that open its
     * circuit. Default 5.
     */
    circuitFailures: z.number().int().min(1).max(1_000).default(5),
    /** CH-7: wait before the first probe of an opened circuit, ms; doubles per failed probe. Default 30 s. */
    circuitBackoffMs: ms(30_000, 10),
    /** CH-7: longest wait between probes of an open circuit, ms. Default 10 min. */
    circuitMaxBackoffMs: ms(600_000, 10),
    /** Schedules planned per planning transaction. Default 1,000. */
    planBatch: z.number().int().min(1).max(10_000).default(1_000),
    /** Longest a planning sweep runs before dispatch gets its turn, ms. Default 1 s. */
    planBudgetMs: ms(1_000, 10),
    /** Stale-occurrence rows handled per misfire pass. Default 5,000. */
    misfireBatch: z.number().int().min(1).max(100_000).default(5_000),
    /** Expired leases recovered per pass. Default 1,000. */
    recoverBatch: z.number().int().min(1).max(100_000).default(1_000),
    /** Sent / skipped / cancelled deliveries are deleted after this many days. Default 30. */
    retentionDays: z.number().int().min(1).max(3_650).default(30),
    /**
     * Attempt-log rows (failures, deferrals, timeouts, recovered leases) are deleted after
     * this many days; `null` keeps them as long as their delivery row (`retentionDays`).
     * The attempt that sent a delivery is kept on its row. Default null.
     */
    attemptRetentionDays: z.number().int().min(1).max(3_650).nullable().default(null),
    /** Retention runs at most this often, ms. Default 10 min. */
    retentionEveryMs: ms(600_000, 1_000),
    /**
     * Instance rows whose last heartbeat is older than this are deleted (a killed process
     * never marks itself stopped), ms. `punctual status` marks them stale after
     * `heartbeatStaleMs` already. Default 24 h.
     */
    instancePruneAfterMs: ms(86_400_000, 60_000, MAX_HORIZON_MS),
    /**
     * The cluster gauges (backlog, overdue, retry waiting, oldest due age, in doubt, dead)
     * are computed this often by the process holding their lease, and read this often by
     * the others (OPS-13), ms. Default 15 s.
     */
    gaugesEveryMs: ms(15_000, 1_000),
    /** Readiness fails when the last pass is older than this, ms. Default 60 s. */
    heartbeatStaleMs: ms(60_000, 1_000),
    /** On SIGTERM, in-flight sends get this long to finish, ms. Default 10 s. */
    shutdownGraceMs: ms(10_000, 0),
    /** Warn when this process's clock differs from the database's by more, ms. Default 2 s. */
    clockSkewWarnMs: ms(2_000, 0),
    /** Error logs of a failing streak: one line every this many ticks (OPS-2). */
    errorLogEveryTicks: z.number().int().min(1).max(1_000_000).default(30),
  })
  .strict();

export const configSchema = z
  .object({
    /** PostgreSQL URL; when absent, the embedded database is used. */
    databaseUrl: z.string().min(1).optional(),
    /** Embedded data folder; `null` = in memory (tests). Default `./punctual-data`. */
    dataDir: z.string().min(1).nullable().default("./punctual-data"),
    /**
     * Take over the embedded data folder's lock left by another host (a re-created
     * container on the same volume) once its holder has not refreshed it for 60 s. A lock
     * of this host is taken over whenever its process is gone, without this.
     */
    takeOverLock: z.boolean().default(false),
    /**
     * Open an embedded data folder that group or others may read (its mode has any of
     * 0o077). Default false: such a folder is refused at start; a new one is made 0700.
     */
    allowSharedDataDir: z.boolean().default(false),
    /**
     * Longest an operation (API request, CLI command, library call that writes or reads a
     * schedule, a delivery, a recipient…) waits for a row lock another transaction holds,
     * ms: PostgreSQL's `lock_timeout`, set local to the operation's transaction. Past it
     * the operation fails with `ResourceBusyError` (HTTP 503 `RESOURCE_BUSY` with
     * `Retry-After`) and nothing of it is written, instead of holding a pooled connection
     * while a stalled worker holds the lock. The scheduler's own statements, the migrator
     * and the import lock wait as before. 0 turns the limit off. Default 5 s.
     */
    lockTimeoutMs: ms(5_000, 0, 3_600_000),
    /** Apply pending migrations at start (always on for the embedded database). */
    migrate: z.boolean().default(false),
    logLevel: z.enum(LOG_LEVELS).default("info"),
    /**
     * Tenant names, rate-limit keys and target hosts as they are in metric labels
     * (`punctual_rate_limit_*`, `punctual_circuit_*`). Default false: those labels hold an
     * opaque value, `h_` and 12 hex digits of the name's SHA-256.
     */
    metricsNamedLabels: z.boolean().default(false),
    /** Default webhook signing secret (`whsec_…`). */
    webhookSecret: z.string().min(1).optional(),
    /**
     * API-14: the public base URL of the API as recipients' mail clients reach it
     * (`https://punctual.example.com`), for one-click unsubscribe links (RFC 8058). Unset:
     * e-mail carries no `List-Unsubscribe` header. http(s), no query or fragment.
     */
    publicUrl: z
      .string()
      .min(1)
      .refine(
        (text) => {
          try {
            const url = new URL(text);
            return (
              (url.protocol === "https:" || url.protocol === "http:") &&
              url.search === "" &&
              url.hash === "" &&
              url.username === "" &&
              url.password === ""
            );
          } catch {
            return false;
          }
        },
        { message: "must be an http(s) URL without credentials, query or fragment" },
      )
      .optional(),
    /** Allow webhook targets in private, loopback and link-local ranges (CH-1). */
    allowPrivateTargets: z.boolean().default(false),
    /**
     * The `email` channel (CH-2); registered only when `smtpUrl` is set. The URL holds the
     * server's password: it is never logged.
     */
    email: z
      .object({
        /** `smtp://user:pass@host:587` (STARTTLS) or `smtps://user:pass@host:465`. */
        smtpUrl: z.string().min(1).optional(),
        /** Default sender, `Name <a@example.com>` or `a@example.com`. */
        from: z.string().min(1).optional(),
        /** Domain of Message-IDs `<deliveryKey@domain>`; default the sender's domain. */
        domain: z.string().min(1).optional(),
        /**
         * Senders a reminder's `target.from` may name, besides `from`'s address: addresses,
         * `*@domain` (every address of the domain) or `*` (any), for every tenant, or for
         * one tenant as `tenant:pattern`. Default none: only `from`.
         */
        allowedFrom: z.array(z.string().min(1).max(400)).max(1_000).default([]),
      })
      .strict()
      .default({ allowedFrom: [] }),
    api: z
      .object({
        host: z.string().min(1).default("127.0.0.1"),
        port: z.number().int().min(0).max(65_535).default(8080),
        /** Bearer token required by the API; mandatory on a non-loopback host. */
        apiKey: z.string().min(16).optional(),
        /** Largest request body, bytes. Default 1 MiB. */
        bodyLimitBytes: z.number().int().min(1_024).max(1_073_741_824).default(1_048_576),
        /**
         * Most time a client may take to send a whole request (headers and body), ms;
         * past it the connection is closed with 408. Default 30,000 (30 s).
         */
        requestTimeoutMs: z.number().int().min(100).max(3_600_000).default(30_000),
        /** Most time a client may take to send a request's headers, ms. Default 10,000. */
        headersTimeoutMs: z.number().int().min(100).max(3_600_000).default(10_000),
        /**
         * Extra names the API answers in the `Host` header (API-7): `name` (any port) or
         * `name:port`; `*` turns the check off. Without an API key the listen address and
         * loopback names are always allowed and nothing else by default; with a key, no
         * Host check runs unless this lists names. Default none.
         */
        allowedHosts: z
          .array(
            z
              .string()
              .min(1)
              .max(260)
              .regex(/^(\*|[^\s/,]+)$/, "must be a host name, name:port, or *"),
          )
          .max(100)
          .default([]),
      })
      .strict()
      .default({
        host: "127.0.0.1",
        port: 8080,
        bodyLimitBytes: 1_048_576,
        requestTimeoutMs: 30_000,
        headersTimeoutMs: 10_000,
        allowedHosts: [],
      }),
    scheduler: schedulerOptionsSchema.default(schedulerOptionsSchema.parse({})),
  })
  .strict();

/** The validated, frozen configuration ({@link resolveConfig}): every option with its default. */
export type PunctualConfig = Readonly<z.infer<typeof configSchema>>;
/** The scheduler's options with their defaults (leases, retries, planning; units in the names). */
export type SchedulerOptions = Readonly<z.infer<typeof schedulerOptionsSchema>>;
/**
 * The configuration as callers give it: every key optional (the defaults apply), unknown
 * keys rejected. `scheduler` takes a partial {@link SchedulerOptions}.
 */
export type ConfigInput = z.input<typeof configSchema>;

function levenshtein(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++)
      d[i]![j] = Math.min(
        d[i - 1]![j]! + 1,
        d[i]![j - 1]! + 1,
        d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
  return d[a.length]![b.length]!;
}

function suggest(key: string, known: string[]): string {
  const best = known
    .map((k) => ({ k, d: levenshtein(key.toLowerCase(), k.toLowerCase()) }))
    .sort((x, y) => x.d - y.d)[0];
  return best && best.d <= Math.max(2, key.length / 3) ? ` (did you mean "${best.k}"?)` : "";
}

function knownKeysAt(path: PropertyKey[]): string[] {
  let schema: z.ZodType = configSchema;
  for (const part of path) {
    const inner = (schema as unknown as { unwrap?: () => z.ZodType }).unwrap?.() ?? schema;
    const shape = (inner as unknown as { shape?: Record<string, z.ZodType> }).shape;
    if (!shape || typeof part !== "string" || !shape[part]) return [];
    schema = shape[part];
  }
  const inner = (schema as unknown as { unwrap?: () => z.ZodType }).unwrap?.() ?? schema;
  return Object.keys((inner as unknown as { shape?: Record<string, unknown> }).shape ?? {});
}

/**
 * Validates configuration into a frozen object.
 * @throws ConfigError listing every problem, each with its path; unknown keys get a suggestion.
 */
export function resolveConfig(input: ConfigInput = {}): PunctualConfig {
  const result = configSchema.safeParse(input);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => {
      const path = issue.path.join(".") || "(root)";
      if (issue.code === "unrecognized_keys") {
        const known = knownKeysAt(issue.path);
        return issue.keys
          .map(
            (k) => `${path === "(root)" ? "" : path + "."}${k}: unknown option${suggest(k, known)}`,
          )
          .join("\n  ");
      }
      return `${path}: ${issue.message}`;
    });
    throw new ConfigError(`Invalid configuration:\n  ${lines.join("\n  ")}`);
  }
  const config = result.data;
  return deepFreeze(config);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
