/**
 * The three systems of the delivery benchmark behind one shape: punctual (through its
 * public facade only, so the harness survives changes inside the scheduler),
 * graphile-worker and pg-boss (through their public APIs). Each side has
 * - `prepare`: create its schema in an empty database (used for a template database);
 * - `seed`: insert jobs, each with a key and a due instant;
 * - `done`: how many jobs its own ledger records as finished;
 * - `createWorker`: a worker that runs a handler per job with concurrency C.
 *
 * Peer variants: "defaults" sets only the concurrency; "batched" uses each peer's
 * documented batching settings (graphile-worker's local queue and batched completion,
 * pg-boss's batch fetch). punctual always runs with its shipped defaults plus concurrency
 * (and, for the recovery scenario, a short lease).
 */
import type pg from "pg";
import { Logger as GraphileLogger, makeWorkerUtils, run, runMigrations } from "graphile-worker";
import PgBoss from "pg-boss";
import { createPunctual, resolveConfig, type Channel, type Punctual } from "../../src/index.js";

/** Which system a variant belongs to. */
export type SystemName = "punctual" | "graphile-worker" | "pg-boss";

/** One configuration of one system, as shown in the tables. */
export interface Variant {
  id: string;
  system: SystemName;
  /** Short label for tables. */
  label: string;
  /** What was set besides concurrency, for the report. */
  settings: string;
}

/** graphile-worker's batching: a local queue per pool and batched completion. */
const GW_BATCHED = {
  localQueue: { size: 200 },
  completeJobBatchDelay: 0,
  failJobBatchDelay: 0,
  pollInterval: 500,
} as const;
/** pg-boss's batching: each of the C workers fetches up to this many jobs at once. */
const BOSS_BATCH = 1_000;
const BOSS_POLL_S = 0.5;

export const VARIANTS: Record<string, Variant> = {
  punctual: {
    id: "punctual",
    system: "punctual",
    label: "punctual",
    settings: "shipped defaults, concurrency = C",
  },
  "gw-defaults": {
    id: "gw-defaults",
    system: "graphile-worker",
    label: "graphile-worker",
    settings: "defaults, concurrentJobs = C",
  },
  "gw-batched": {
    id: "gw-batched",
    system: "graphile-worker",
    label: "graphile-worker batched",
    settings: `localQueue.size ${GW_BATCHED.localQueue.size}, completeJobBatchDelay 0, pollInterval ${GW_BATCHED.pollInterval} ms`,
  },
  "boss-defaults": {
    id: "boss-defaults",
    system: "pg-boss",
    label: "pg-boss",
    settings: "defaults, C work() loops of batchSize 1",
  },
  "boss-batched": {
    id: "boss-batched",
    system: "pg-boss",
    label: "pg-boss batched",
    settings: `C work() loops, batchSize ${BOSS_BATCH}, pollingIntervalSeconds ${BOSS_POLL_S}`,
  },
};

/** One job: its key (unique in a run) and when it is due, ms since the epoch. */
export interface JobSpec {
  key: string;
  dueMs: number;
}

/** Runs one job: resolves when the work is done. */
export type Handler = (key: string, dueMs: number) => Promise<void>;

const QUEUE = "bench";

/** A channel that hands every delivery to the benchmark's handler. */
function benchChannel(handler: Handler): Channel {
  return {
    name: "noop",
    idempotent: true,
    validateTarget() {},
    async send(delivery) {
      const payload = delivery.payload as { k: string };
      await handler(payload.k, delivery.dueAt.getTime());
      return {};
    },
  };
}

/**
 * punctual's scheduler options for concurrency C and, optionally, a lease. When the
 * shipped configuration wants the send timeout below the lease, it is set just below.
 */
export function punctualOptions(concurrency: number, leaseMs?: number): Record<string, number> {
  const options: Record<string, number> = { concurrency };
  if (leaseMs === undefined) return options;
  options.leaseMs = leaseMs;
  try {
    resolveConfig({ scheduler: options });
  } catch {
    options.sendTimeoutMs = Math.max(100, leaseMs - 1_000);
  }
  return options;
}

/** Creates a system's schema in the (empty) database at `url`. */
export async function prepare(system: SystemName, url: string): Promise<void> {
  if (system === "punctual") {
    const p = await createPunctual({ databaseUrl: url, migrate: true, logLevel: "silent" });
    await p.close();
  } else if (system === "graphile-worker") {
    await runMigrations({ connectionString: url, logger: quietGraphileLogger() });
  } else {
    const boss = await startBoss(url, { supervise: false });
    await boss.createQueue(QUEUE);
    await boss.stop({ graceful: false, wait: true });
  }
}

/**
 * Creates one one-off schedule per job through punctual's public facade, 5,000 per bulk
 * call: due at the job's instant, one reminder on the `noop` channel, payload `{ k: key }`.
 */
export async function seedPunctual(p: Punctual, jobs: readonly JobSpec[]): Promise<void> {
  for (let i = 0; i < jobs.length; i += 5_000) {
    const values = jobs.slice(i, i + 5_000).map(
      (j) =>
        p.validateSchedule({
          dtstart: new Date(j.dueMs).toISOString(),
          reminders: [{ key: "r", offset: "PT0S", channel: "noop" }],
          payload: { k: j.key },
          source: "bench",
          externalId: j.key,
        }).value,
    );
    await p.createSchedulesBulk(values);
  }
}

/** Inserts jobs through the system's own API. */
export async function seed(system: SystemName, url: string, jobs: JobSpec[]): Promise<void> {
  const chunk = 5_000;
  if (system === "punctual") {
    const p = await createPunctual({
      databaseUrl: url,
      logLevel: "silent",
      channels: [benchChannel(async () => {})],
    });
    await seedPunctual(p, jobs);
    await p.close();
  } else if (system === "graphile-worker") {
    const utils = await makeWorkerUtils({ connectionString: url, logger: quietGraphileLogger() });
    try {
      for (let i = 0; i < jobs.length; i += chunk) {
        await utils.addJobs(
          jobs.slice(i, i + chunk).map((j) => ({
            identifier: QUEUE,
            payload: { k: j.key, due: j.dueMs },
            runAt: new Date(j.dueMs),
          })),
        );
      }
    } finally {
      await utils.release();
    }
  } else {
    const boss = await startBoss(url, { supervise: false });
    for (let i = 0; i < jobs.length; i += chunk) {
      await boss.insert(
        jobs.slice(i, i + chunk).map((j) => ({
          name: QUEUE,
          data: { k: j.key, due: j.dueMs },
          startAfter: new Date(j.dueMs),
        })),
      );
    }
    await boss.stop({ graceful: false, wait: true });
  }
}

/**
 * How many of `total` seeded jobs the system's ledger records as finished: punctual's
 * `sent` deliveries, graphile-worker's jobs no longer in its table (it deletes finished
 * jobs), pg-boss's `completed` jobs (live table and archive). With `quick`, punctual
 * answers 0 at once while any row is open, and counts only when none is: the probe for
 * polling; count again without it for the figure reported.
 */
export async function done(
  system: SystemName,
  db: pg.Pool,
  total: number,
  options: { quick?: boolean } = {},
): Promise<number> {
  if (system === "punctual" && options.quick) {
    // While any row is still open (waiting or claimed) the answer is "not all": two
    // index probes that read a few entries, where counting sent rows scans the whole
    // table and its dead row versions (5–10 ms per probe at 20k rows, on the cores the
    // workers need). graphile-worker's probe gets cheaper as it drains (it deletes
    // finished jobs); this one stays cheap throughout.
    const open = await db.query<{ open: boolean }>(
      `select exists (select 1 from punctual_deliveries where claimable_at is not null)
           or exists (select 1 from punctual_deliveries where state = 'claimed') as open`,
    );
    if (open.rows[0]!.open) return 0;
  }
  if (system === "punctual") {
    const { rows } = await db.query<{ n: number }>(
      "select count(*)::int as n from punctual_deliveries where state = 'sent'",
    );
    return rows[0]!.n;
  }
  if (system === "graphile-worker") {
    const { rows } = await db.query<{ n: number }>(
      "select count(*)::int as n from graphile_worker.jobs",
    );
    return total - rows[0]!.n;
  }
  const { rows } = await db.query<{ n: number }>(
    `select (select count(*) from pgboss.job where name = $1 and state = 'completed')
          + (select count(*) from pgboss.archive where name = $1 and state = 'completed') as n`,
    [QUEUE],
  );
  return Number(rows[0]!.n);
}

/** A worker built but not yet taking jobs. */
export interface Worker {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Builds a worker of `variant` on `url` with concurrency C. */
export async function createWorker(
  variant: Variant,
  url: string,
  concurrency: number,
  handler: Handler,
  leaseMs?: number,
): Promise<Worker> {
  if (variant.system === "punctual") {
    const p = await createPunctual({
      databaseUrl: url,
      logLevel: "silent",
      channels: [benchChannel(handler)],
      scheduler: punctualOptions(concurrency, leaseMs),
    });
    return { start: () => p.start(), stop: () => p.close(0) };
  }
  if (variant.system === "graphile-worker") {
    const batched = variant.id === "gw-batched";
    let runner: Awaited<ReturnType<typeof run>> | null = null;
    return {
      async start() {
        runner = await run({
          noHandleSignals: true,
          logger: quietGraphileLogger(),
          taskList: {
            [QUEUE]: async (payload) => {
              const { k, due } = payload as { k: string; due: number };
              await handler(k, due);
            },
          },
          preset: {
            worker: {
              connectionString: url,
              concurrentJobs: concurrency,
              maxPoolSize: Math.max(10, concurrency + 2),
              ...(batched ? GW_BATCHED : {}),
            },
          },
        });
      },
      async stop() {
        await runner?.stop();
      },
    };
  }
  const batched = variant.id === "boss-batched";
  const boss = await startBoss(url, { max: Math.max(10, concurrency + 2) });
  return {
    async start() {
      for (let i = 0; i < concurrency; i++) {
        await boss.work<{ k: string; due: number }>(
          QUEUE,
          batched ? { batchSize: BOSS_BATCH, pollingIntervalSeconds: BOSS_POLL_S } : {},
          async (jobs) => {
            for (const job of jobs) await handler(job.data.k, job.data.due);
          },
        );
      }
    },
    async stop() {
      await boss.stop({ graceful: false, wait: true });
    },
  };
}

function quietGraphileLogger(): GraphileLogger {
  return new GraphileLogger(() => () => {});
}

async function startBoss(
  url: string,
  options: Partial<PgBoss.ConstructorOptions> = {},
): Promise<PgBoss> {
  const boss = new PgBoss({ connectionString: url, schedule: false, ...options });
  boss.on("error", () => {});
  await boss.start();
  return boss;
}
