/**
 * Delivery throughput: N one-off reminders all due now, a no-op channel, one scheduler
 * process (and, on PostgreSQL, two), measured from start until every row is `sent`.
 * Each engine gets a fresh database. Peers (graphile-worker, pg-boss) did 6–8k jobs/s on
 * these machines with batched handlers; see docs/benchmarks.md.
 *
 *   node --import tsx bench/delivery.ts [N]            (default 20,000)
 *   DATABASE_URL=… node --import tsx bench/delivery.ts  (else a throwaway cluster)
 */
import { performance } from "node:perf_hooks";
import { createPunctual, type Punctual } from "../src/app/punctual.js";
import type { Channel } from "../src/channels/types.js";
import { silentLogger } from "../src/observability/logger.js";
import type { Database } from "../src/store/database.js";
import { openPglite } from "../src/store/pglite.js";
import { openPostgres } from "../src/store/postgres.js";
import { migrate } from "../src/store/migrator.js";
// @ts-expect-error -- a plain .mjs helper without types
import { findPgBin, startCluster } from "../scripts/pg-cluster.mjs";

const N = Number(process.argv[2] ?? 20_000);

const noop: Channel = {
  name: "noop",
  idempotent: true,
  validateTarget() {},
  async send() {
    return {};
  },
};

async function seed(p: Punctual): Promise<void> {
  const due = new Date(Date.now() - 1_000).toISOString();
  const values = Array.from(
    { length: N },
    (_, i) =>
      p.validateSchedule({
        dtstart: due,
        reminders: [{ key: "r", offset: "PT0S", channel: "noop" }],
        source: "bench",
        externalId: `e${i}`,
      }).value,
  );
  for (let i = 0; i < values.length; i += 5_000)
    await p.createSchedulesBulk(values.slice(i, i + 5_000));
}

async function sentCount(db: Database): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "select count(*) as n from punctual_deliveries where state = 'sent'",
  );
  return rows[0]!.n;
}

async function run(label: string, databases: Database[]): Promise<void> {
  const options = {
    concurrency: Number(process.env.BENCH_CONCURRENCY ?? 200),
    claimBatch: Number(process.env.BENCH_BATCH ?? 200),
    pollMs: 2_000,
  };
  const workers: Punctual[] = [];
  for (const db of databases) {
    workers.push(
      await createPunctual({
        database: db,
        logger: silentLogger(),
        channels: [noop],
        scheduler: options,
      }),
    );
  }
  const seeder = workers[0]!;
  let t = performance.now();
  await seed(seeder);
  const seedMs = performance.now() - t;
  // Planning is part of the work: the rows do not exist until the first tick.
  t = performance.now();
  for (const w of workers) await w.start();
  while ((await sentCount(seeder.db)) < N) await new Promise((r) => setTimeout(r, 25));
  const ms = performance.now() - t;
  for (const w of workers) await w.close(0);
  console.log(
    `${label}: ${N} deliveries in ${(ms / 1000).toFixed(2)} s = ${Math.round((N / ms) * 1000)}/s ` +
      `(seeding ${N} schedules: ${(seedMs / 1000).toFixed(2)} s)`,
  );
}

console.log(`node ${process.version}, ${process.arch}, ${N} deliveries, no-op channel`);
{
  const db = await openPglite({ dataDir: null });
  await migrate(db);
  await run("PGlite, 1 process", [db]);
  await db.close();
}
let url = process.env.DATABASE_URL;
let cluster: { url: string; stop(): void } | null = null;
if (!url && findPgBin()) {
  cluster = await startCluster();
  url = cluster!.url;
}
if (url) {
  for (const workers of [1, 2]) {
    const admin = openPostgres({ url });
    const name = `punctual_bench_${Date.now()}`;
    await admin.query(`create database ${name}`);
    const target = new URL(url);
    target.pathname = `/${name}`;
    const dbs = Array.from({ length: workers }, () =>
      openPostgres({ url: target.toString(), maxConnections: 10 }),
    );
    await migrate(dbs[0]!);
    await run(`PostgreSQL, ${workers} scheduler(s) in one process`, dbs);
    for (const db of dbs) await db.close();
    await admin.query(`drop database ${name} with (force)`);
    await admin.close();
  }
} else {
  console.log("PostgreSQL: skipped (no DATABASE_URL and no PostgreSQL binaries)");
}
cluster?.stop();
