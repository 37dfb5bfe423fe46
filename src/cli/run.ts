/**
 * The long-running and database commands: `start` (API + scheduler), `worker`
 * (scheduler only), `migrate`, and the database form of `healthcheck` (OPS-4).
 */
import { hostname } from "node:os";
import type { Command } from "commander";
import { lookup } from "node:dns/promises";
import { createServer, isIP } from "node:net";
import { createProbeApi } from "../api/probes.js";
import { isLoopbackAddress } from "../api/security.js";
import { createApi, serveApi, type ServedApi } from "../api/server.js";
import { registerDashboard } from "../dashboard/index.js";
import { heartbeatFreshness } from "../app/health.js";
import { createPunctual, openDatabase, VERSION, type Punctual } from "../app/punctual.js";
import { resolveConfig, type ConfigInput } from "../config/index.js";
import { configFromEnv, mergeConfig } from "../config/env.js";
import type { Database } from "../store/database.js";
import { migrate, schemaVersion } from "../store/migrator.js";
import { listInstances, type InstanceRow } from "../store/operations.js";
import { createLogger, type LogLevel } from "../observability/logger.js";
import { startOtelSdk } from "../observability/otel-sdk.js";
import { removeLocalToken, writeLocalToken } from "./local-token.js";
import { CliError, EXIT_FAILURE, EXIT_STARTUP, reportError } from "./errors.js";
import { jsonText, table } from "./format.js";

/** Output streams (tests may pass their own). */
export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

/**
 * What a module that adds commands to the program takes from it: the flags every remote
 * command has (`--url`, `--json`, the environment help) and the examples' help text.
 */
export interface CommandHelpers {
  remoteOptions: (cmd: Command) => Command;
  example: (lines: string[]) => string;
}

/** Options shared by `start`, `worker` and `migrate`. */
export interface DatabaseFlags {
  dataDir: string;
  databaseUrl?: string;
  /** Take over a stale lock another host left on the data folder. */
  takeOverLock?: boolean;
  /** Open a data folder other users may read (`--allow-shared-data-dir`). */
  allowSharedDataDir?: boolean;
  migrate?: boolean;
  logLevel?: LogLevel;
}

/** `worker` flags. */
export interface WorkerFlags extends DatabaseFlags {
  /** Port of the probe server (/metrics, /healthz, /readyz); `off`: none. */
  metricsPort: number | "off";
  /** The port is the default, not chosen: a busy default falls back to a free port. */
  metricsPortDefaulted?: boolean;
  /** Its listen address. */
  metricsHost: string;
  /** OPS-15: start the OpenTelemetry SDK (OTLP/HTTP export) when an endpoint is set. */
  otel?: boolean;
}

/** `start` flags. */
export interface StartFlags extends DatabaseFlags {
  host: string;
  port: number;
  /** OPS-15: start the OpenTelemetry SDK (OTLP/HTTP export) when an endpoint is set. */
  otel?: boolean;
}

/**
 * OPS-15: starts the OpenTelemetry SDK for `--otel`, before anything else runs (so the
 * first request and planning pass are traced). Without an OTLP endpoint in the
 * environment it says so on stderr and starts nothing (the process runs untraced).
 */
async function otelFor(flag: boolean | undefined, io: Io, env: NodeJS.ProcessEnv) {
  if (!flag) return null;
  const sdk = await startOtelSdk(env, VERSION);
  if (!sdk) {
    io.err(
      "punctual: --otel given, but neither OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set: nothing is exported (set one, e.g. http://127.0.0.1:4318)\n",
    );
  }
  return sdk;
}

/**
 * Whether a server listening on `host` is reachable from this machine only, judged by the
 * addresses it binds, not by its name: an IP address is checked as it is, a name by every
 * address it resolves to (`localhost` pointed elsewhere in /etc/hosts is not loopback).
 * A wildcard (`0.0.0.0`, `::`) or a name that does not resolve is not.
 */
export async function listensOnLoopbackOnly(host: string): Promise<boolean> {
  const h = host.replace(/^\[|\]$/g, "");
  if (isIP(h) !== 0) return isLoopbackAddress(h);
  try {
    const found = await lookup(h, { all: true });
    return found.length > 0 && found.every((a) => isLoopbackAddress(a.address));
  } catch {
    return false;
  }
}

/**
 * Configuration from the environment (every variable of `ENV_VARS`, e.g.
 * `PUNCTUAL_LEASE_MS`, `PUNCTUAL_ALLOW_PRIVATE_TARGETS`), with flags winning.
 * Secrets come only from the environment.
 * @throws ConfigError naming a variable with a bad value.
 */
export function configFromFlags(flags: DatabaseFlags, env: NodeJS.ProcessEnv): ConfigInput {
  const fromEnv = configFromEnv(env);
  // The API address comes from start's own flags; workers serve only their metrics port.
  delete (fromEnv as { api?: unknown }).api;
  return mergeConfig(fromEnv, {
    dataDir: flags.dataDir,
    ...(flags.databaseUrl ? { databaseUrl: flags.databaseUrl } : {}),
    ...(flags.takeOverLock ? { takeOverLock: true } : {}),
    ...(flags.allowSharedDataDir ? { allowSharedDataDir: true } : {}),
    migrate: Boolean(flags.migrate),
    ...(flags.logLevel ? { logLevel: flags.logLevel } : {}),
  });
}

/** One phrase describing the database, without credentials. */
function describeDatabase(db: Database): string {
  return db.engine === "pglite"
    ? `${db.description} (embedded: one process per folder; survives a crash, not a power loss)`
    : `${db.description} (server)`;
}

/**
 * How long (ms) after the first stop signal a repeat of it counts as the same request: a
 * terminal's Ctrl-C signals the whole process group, so under `npm start` this process
 * gets SIGINT from the terminal and again from npm, which forwards it.
 */
export const REPEATED_SIGNAL_MS = 1_000;

/** Set once `start` or `worker` runs and waits for its stop signal. */
let serving = false;

/**
 * True once this process runs a server (`start`, `worker`) that stops on a signal: a
 * closed stdout or stderr must not end it then (main.ts), or its clean stop is skipped.
 */
export function isServing(): boolean {
  return serving;
}

/**
 * Stops cleanly on SIGTERM/SIGINT (OPS-6): runs `stop`, then exits 0 (1 if stopping
 * failed). A second signal exits at once — unless it repeats the first within
 * {@link REPEATED_SIGNAL_MS}, which is the same request delivered twice.
 */
function exitOnSignals(punctual: Punctual, io: Io, stop: () => Promise<void>): void {
  let stopping: { signal: NodeJS.Signals; at: number } | null = null;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      if (signal === stopping.signal && performance.now() - stopping.at < REPEATED_SIGNAL_MS) {
        return;
      }
      io.err(`punctual: ${signal} again: exiting now.\n`);
      process.exit(signal === "SIGINT" ? 130 : 143);
    }
    stopping = { signal, at: performance.now() };
    io.err(
      `punctual: ${signal} received: stopping (in-flight sends get up to ${punctual.config.scheduler.shutdownGraceMs} ms)…\n`,
    );
    punctual.logger.info({ signal }, "shutting down");
    stop().then(
      () => {
        punctual.logger.info("stopped");
        punctual.logger.flush(() => process.exit(0));
      },
      (err: unknown) => {
        process.exitCode = reportError(err, io.err);
        punctual.logger.flush(() => process.exit(EXIT_FAILURE));
      },
    );
  };
  process.on("SIGTERM", handler);
  process.on("SIGINT", handler);
  serving = true;
}

/** The CliError for an address `start` cannot listen on, or null for any other error. */
function listenError(err: unknown, host: string, port: number): CliError | null {
  const code = (err as NodeJS.ErrnoException).code;
  if (code !== "EADDRINUSE" && code !== "EACCES" && code !== "EADDRNOTAVAIL") return null;
  return new CliError(
    `Cannot listen on ${host}:${port} (${code}). Choose another --port / PUNCTUAL_PORT or --host / PUNCTUAL_HOST.`,
    EXIT_STARTUP,
  );
}

/**
 * Binds `host:port` for a moment and lets it go: a busy or forbidden address is reported
 * at once. Port 0 (any free port) is not probed.
 * @throws CliError (exit 2) when the address cannot be bound.
 */
async function ensureCanListen(host: string, port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (err) => reject(listenError(err, host, port) ?? err));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/**
 * `punctual start`: the HTTP API and the scheduler in one process. Resolves once both
 * run; the process then lives until SIGTERM/SIGINT.
 * @throws CliError (exit 2) on a non-loopback host without PUNCTUAL_API_KEY or a busy port;
 *   ConfigError, SchemaMismatchError, DataDirLockedError from the boot gates (OPS-5).
 */
export async function runStart(flags: StartFlags, io: Io, env = process.env): Promise<void> {
  const apiKey = env.PUNCTUAL_API_KEY || undefined;
  if (!apiKey && !(await listensOnLoopbackOnly(flags.host))) {
    throw new CliError(
      `Refusing to listen on ${flags.host}: it is not a loopback address and PUNCTUAL_API_KEY is not set, ` +
        `so anyone who can reach this host could read and create schedules. Set PUNCTUAL_API_KEY ` +
        `(at least 16 characters; clients send "Authorization: Bearer <key>"), or listen on 127.0.0.1.`,
      EXIT_STARTUP,
    );
  }
  // A busy port is refused before the database opens and migrates (seconds on a first
  // start), not after; the listen below still handles a port taken in between.
  await ensureCanListen(flags.host, flags.port);
  const otel = await otelFor(flags.otel, io, env);
  // API-7: extra Host names come from the environment like the key (flags set host/port).
  const allowedHosts = configFromEnv(env).api?.allowedHosts;
  const punctual = await createPunctual({
    ...configFromFlags(flags, env),
    api: {
      host: flags.host,
      port: flags.port,
      ...(apiKey ? { apiKey } : {}),
      ...(allowedHosts ? { allowedHosts } : {}),
    },
    role: "start",
  });
  otel?.bridge(punctual.metrics.registry);
  // API-7: without a key, the webhook secret is served only to `punctual webhook-secret`
  // on this machine, which reads this token from the data folder.
  let localToken: string | undefined;
  if (!apiKey) {
    try {
      localToken = await writeLocalToken(flags.dataDir);
    } catch (err) {
      punctual.logger.warn(
        { err, dataDir: flags.dataDir },
        "could not write the local API token: `punctual webhook-secret` needs PUNCTUAL_API_KEY",
      );
    }
  }
  const dropToken = async () => {
    if (localToken) await removeLocalToken(flags.dataDir, localToken).catch(() => undefined);
  };
  let served: ServedApi;
  try {
    const app = createApi(punctual, localToken ? { localToken } : {});
    // API-6: the dashboard at /ui, on the API's own origin.
    if (!registerDashboard(app)) {
      punctual.logger.warn("the dashboard's files are missing from this build: /ui answers 503");
    }
    served = await serveApi(app, {
      host: flags.host,
      port: flags.port,
      requestTimeoutMs: punctual.config.api.requestTimeoutMs,
      headersTimeoutMs: punctual.config.api.headersTimeoutMs,
    });
  } catch (err) {
    await dropToken();
    await punctual.close(0);
    throw listenError(err, flags.host, flags.port) ?? err;
  }
  await punctual.start();
  // Handlers first, then the lines that say it runs: whoever waits for them may signal
  // at once, and a signal before the handler would end the process without its stop.
  exitOnSignals(punctual, io, async () => {
    await served.close();
    await dropToken();
    await punctual.close();
    await otel?.shutdown();
  });
  io.err(
    `punctual ${VERSION} listening on ${served.url} — database: ${describeDatabase(punctual.db)}` +
      `${apiKey ? " — API key required" : ""} — dashboard at ${served.url}/ui/` +
      `${otel ? ` — traces to ${otel.endpoint}` : ""}\n`,
  );
  punctual.logger.info(
    { url: served.url, database: punctual.db.description, engine: punctual.db.engine },
    "punctual started",
  );
}

/**
 * `punctual worker`: the scheduler loop without the API, for extra processes on PostgreSQL,
 * with its probe server (/metrics, /healthz, /readyz, OPS-13) on `metricsPort` unless `off`.
 * Resolves once running; the process lives until SIGTERM/SIGINT.
 * @throws CliError (exit 2) when the metrics port cannot be bound, or would be bound off
 *   loopback without PUNCTUAL_API_KEY.
 */
export async function runWorker(flags: WorkerFlags, io: Io, env = process.env): Promise<void> {
  if (!flags.databaseUrl) {
    io.err(
      `punctual: note: no --database-url / DATABASE_URL, so this worker uses the embedded database in ${flags.dataDir}. ` +
        `Embedded mode allows one process per data folder: this worker cannot run beside \`punctual start\` on the same folder. ` +
        `Extra workers need PostgreSQL.\n`,
    );
  }
  // OPS-13: /metrics names schedules' traffic; off this machine it needs the API key.
  const metricsKey = env.PUNCTUAL_API_KEY || undefined;
  if (
    flags.metricsPort !== "off" &&
    !metricsKey &&
    !(await listensOnLoopbackOnly(flags.metricsHost))
  ) {
    throw new CliError(
      `Refusing to serve metrics on ${flags.metricsHost}: it is not a loopback address and PUNCTUAL_API_KEY is not set, ` +
        `so anyone who can reach this host could read /metrics. Set PUNCTUAL_API_KEY (scrapers send ` +
        `"Authorization: Bearer <key>"), or serve on 127.0.0.1 (--metrics-host), or --metrics-port off.`,
      EXIT_STARTUP,
    );
  }
  const otel = await otelFor(flags.otel, io, env);
  const punctual = await createPunctual({ ...configFromFlags(flags, env), role: "worker" });
  otel?.bridge(punctual.metrics.registry);
  let probes: ServedApi | null = null;
  let fellBack = false;
  if (flags.metricsPort !== "off") {
    const apiKey = metricsKey;
    const allowedHosts = configFromEnv(env).api?.allowedHosts;
    const probeApi = createProbeApi(punctual, {
      host: flags.metricsHost,
      ...(apiKey ? { apiKey } : {}),
      ...(allowedHosts ? { allowedHosts } : {}),
    });
    try {
      try {
        probes = await serveApi(probeApi, { host: flags.metricsHost, port: flags.metricsPort });
      } catch (err) {
        // A second worker on one host finds the default port taken: it serves on a free
        // port instead, and says so (a port chosen by flag or environment still fails).
        if (!flags.metricsPortDefaulted || (err as NodeJS.ErrnoException).code !== "EADDRINUSE")
          throw err;
        probes = await serveApi(probeApi, { host: flags.metricsHost, port: 0 });
        fellBack = true;
        punctual.logger.warn(
          { defaultPort: flags.metricsPort, port: probes.port },
          `metrics port ${flags.metricsPort} is taken (another worker on this host?): serving on ${probes.port}; set --metrics-port / PUNCTUAL_METRICS_PORT to choose one`,
        );
      }
    } catch (err) {
      await punctual.close(0);
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "EADDRINUSE" || code === "EACCES" || code === "EADDRNOTAVAIL") {
        throw new CliError(
          `Cannot serve metrics on ${flags.metricsHost}:${flags.metricsPort} (${code}). ` +
            `Choose another --metrics-port / PUNCTUAL_METRICS_PORT (0 picks a free one), or turn it off with --metrics-port off.`,
          EXIT_STARTUP,
        );
      }
      throw err;
    }
  }
  await punctual.start();
  // The scheduler's timers do not keep the process alive on their own.
  const keepAlive = setInterval(() => undefined, 1 << 30);
  exitOnSignals(punctual, io, async () => {
    clearInterval(keepAlive);
    await probes?.close();
    await punctual.close();
    await otel?.shutdown();
  });
  io.err(
    `punctual ${VERSION} worker running — database: ${describeDatabase(punctual.db)}` +
      (probes
        ? ` — metrics on ${probes.url}/metrics` +
          (fellBack
            ? ` (metrics port ${flags.metricsPort} is taken: another worker on this host?)\n`
            : "\n")
        : " — no metrics port\n"),
  );
  punctual.logger.info(
    {
      database: punctual.db.description,
      engine: punctual.db.engine,
      owner: punctual.scheduler.owner,
      metrics: probes ? `${probes.url}/metrics` : null,
    },
    "worker started",
  );
}

/** `punctual migrate`: applies pending migrations and prints what it did. */
export async function runMigrate(
  flags: DatabaseFlags & { json?: boolean; force?: boolean },
  io: Io,
): Promise<void> {
  const config = resolveConfig({
    dataDir: flags.dataDir,
    ...(flags.databaseUrl ? { databaseUrl: flags.databaseUrl } : {}),
    takeOverLock:
      Boolean(flags.takeOverLock) ||
      configFromEnv({ PUNCTUAL_TAKE_OVER_LOCK: process.env.PUNCTUAL_TAKE_OVER_LOCK })
        .takeOverLock === true,
    allowSharedDataDir:
      Boolean(flags.allowSharedDataDir) ||
      configFromEnv({ PUNCTUAL_ALLOW_SHARED_DATA_DIR: process.env.PUNCTUAL_ALLOW_SHARED_DATA_DIR })
        .allowSharedDataDir === true,
  });
  // Warnings (a stale lock taken over) go to stderr, so --json output stays parseable.
  const warnings = createLogger({ level: "warn", destination: { write: (line) => io.err(line) } });
  const db = await openDatabase(config, warnings);
  try {
    const applied = await migrate(db, undefined, {
      ...(flags.force ? { liveWithinMs: 0 } : {}),
      onRetry: (version, err, attempt, waitMs) =>
        warnings.warn(
          { version, err, attempt, waitMs },
          "migration rolled back by a lock conflict with another process: trying it again",
        ),
    });
    const version = await schemaVersion(db);
    if (flags.json) {
      io.out(jsonText({ database: db.description, applied, version }));
    } else if (applied.length > 0) {
      io.out(
        `Applied migration${applied.length > 1 ? "s" : ""} ${applied.join(", ")} to ${db.description}; schema at version ${version}.\n`,
      );
    } else {
      io.out(`${db.description}: schema up to date at version ${version}; nothing to apply.\n`);
    }
  } finally {
    await db.close();
  }
}

/**
 * `punctual healthcheck --database-url …` (OPS-4), for processes that serve no HTTP:
 * healthy when a running scheduler instance (on this host only with `thisHost`) completed
 * a successful pass within `maxAgeMs` (a worker whose ticks start but fail is unhealthy).
 * Ages are measured against this machine's clock.
 * @returns the exit code.
 */
export async function healthcheckDatabase(
  flags: { databaseUrl: string; maxAgeMs: number; thisHost?: boolean; json?: boolean },
  io: Io,
): Promise<number> {
  const config = resolveConfig({ databaseUrl: flags.databaseUrl, dataDir: null });
  const logger = createLogger({ level: "silent" });
  const db = await openDatabase(config, logger);
  try {
    let rows: InstanceRow[];
    try {
      rows = await listInstances(db, { now: null, windowMs: 0 });
    } catch (err) {
      io.err(
        `unhealthy: cannot read heartbeats from ${db.description}: ${err instanceof Error ? err.message : String(err)}\n`,
      );
      return EXIT_FAILURE;
    }
    const me = hostname();
    const now = Date.now();
    const { running: candidates, fresh } = heartbeatFreshness(rows, {
      now,
      maxAgeMs: flags.maxAgeMs,
      ...(flags.thisHost ? { host: me } : {}),
    });
    const healthy = fresh.length > 0;
    if (flags.json) {
      io.out(
        jsonText({
          healthy,
          maxAgeMs: flags.maxAgeMs,
          instances: candidates.map((r) => ({
            id: r.id,
            host: r.host,
            pid: Number(r.pid),
            role: r.role,
            lastPassAt: r.last_pass_at?.toISOString() ?? null,
            ageMs: r.last_pass_at ? now - r.last_pass_at.getTime() : null,
            lastTickAt: r.last_tick_at?.toISOString() ?? null,
          })),
        }),
      );
    } else if (healthy) {
      io.out(
        `healthy: ${fresh.length} scheduler instance(s)${flags.thisHost ? ` on ${me}` : ""} passed within ${flags.maxAgeMs} ms\n`,
      );
    } else {
      io.err(
        `unhealthy: no running scheduler instance${flags.thisHost ? ` on ${me}` : ""} passed within ${flags.maxAgeMs} ms (${db.description})\n`,
      );
      if (candidates.length > 0) {
        io.err(
          table(candidates, [
            { header: "INSTANCE", cell: (r) => r.id },
            { header: "ROLE", cell: (r) => r.role },
            { header: "LAST PASS", cell: (r) => r.last_pass_at?.toISOString() },
            { header: "LAST TICK", cell: (r) => r.last_tick_at?.toISOString() },
          ]),
        );
      }
    }
    return healthy ? 0 : EXIT_FAILURE;
  } finally {
    await db.close();
  }
}
