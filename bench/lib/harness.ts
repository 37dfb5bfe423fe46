/**
 * What several benchmarks share: PostgreSQL for the ones that fill one database of their
 * own (explain, lists, recipients), a channel that sends nothing, the parameters of the
 * planner's delivery insert for the ones that plan rows by hand (claim-plan, layout), and
 * command-line and timing helpers.
 *
 * The server: DATABASE_URL (a server the benchmark may fill: it creates and drops its own
 * database there), else a throwaway cluster from scripts/pg-cluster.mjs.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import {
  createPunctual,
  type Channel,
  type Punctual,
  type PunctualOptions,
} from "../../src/index.js";
// @ts-expect-error -- a plain .mjs helper without types
import { findPgBin, startCluster } from "../../scripts/pg-cluster.mjs";

/** A channel `noop` that accepts any target and sends nothing; each send succeeds at once. */
export const noopChannel: Channel = {
  name: "noop",
  idempotent: true,
  validateTarget() {},
  async send() {
    return {};
  },
};

/** One benchmark's own database on PostgreSQL, with punctual migrated onto it. */
export interface BenchDatabase {
  /** punctual on the database: migrated, silent, one channel `noop` that sends nothing. */
  p: Punctual;
  /** A plain connected client on the database, for seeding and `EXPLAIN`. */
  db: pg.Client;
  /** Ends `db`, closes `p`, drops the database and stops the throwaway cluster, if any. */
  close(): Promise<void>;
}

/**
 * Creates (dropping it first if it is left from an earlier run) the database `name` on
 * DATABASE_URL's server, else on a throwaway cluster, and opens punctual and a client on it.
 * Exits the process (status 1) when there is neither DATABASE_URL nor a PostgreSQL server
 * installed. With `keep` the database is reused when it exists and left in place (only
 * useful with DATABASE_URL: a throwaway cluster is removed on close either way); `existed`
 * then says whether it was found.
 *
 * @param name the database's name, an SQL identifier (e.g. `punctual_bench_lists`).
 * @param options punctual's scheduler settings, if the benchmark needs others than the
 *   defaults, and `keep`.
 */
export async function benchDatabase(
  name: string,
  options: Pick<PunctualOptions, "scheduler"> & {
    /**
     * Keep the database: use it as found when it exists (no drop, no fresh create) and
     * leave it in place on close, so a later run can measure the same seeded data.
     */
    keep?: boolean;
  } = {},
): Promise<BenchDatabase & { existed: boolean }> {
  const { keep = false, ...punctualOptions } = options;
  let url = process.env.DATABASE_URL;
  let cluster: { url: string; stop(): void } | null = null;
  if (!url) {
    if (!findPgBin()) {
      console.error("PostgreSQL: no DATABASE_URL and no PostgreSQL server binaries; giving up");
      process.exit(1);
    }
    cluster = (await startCluster({})) as { url: string; stop(): void };
    url = cluster.url;
  }
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  const existed =
    (await admin.query("select 1 from pg_database where datname = $1", [name])).rowCount! > 0;
  if (!keep || !existed) {
    await admin.query(`drop database if exists ${name}`);
    await admin.query(`create database ${name}`);
  }
  const dbUrl = new URL(url);
  dbUrl.pathname = `/${name}`;

  const p = await createPunctual({
    databaseUrl: dbUrl.toString(),
    logLevel: "silent",
    channels: [noopChannel],
    migrate: true,
    ...punctualOptions,
  });
  const db = new pg.Client({ connectionString: dbUrl.toString() });
  await db.connect();
  return {
    p,
    db,
    existed: keep && existed,
    async close() {
      await db.end();
      await p.close(0);
      if (!keep) await admin.query(`drop database if exists ${name}`);
      await admin.end();
      cluster?.stop();
    },
  };
}

/**
 * The parameters of `INSERT_DELIVERIES_SQL` (src/store/deliveries/planning.ts) for one
 * pending delivery per instant of `at`, as the planner writes them: reminder `r` of
 * `scheduleId` on channel `log`, a fresh delivery key each, retried on a lost lease, at
 * most 5 attempts, not deferred, no recipient, not bypassing quiet hours. $1 (the
 * planning run's `now`) is null: the statement's own clock.
 */
export function plannedDeliveries(scheduleId: string, at: readonly Date[]): unknown[] {
  return [
    null,
    at.map(() => `dk_${randomUUID()}`),
    at.map(() => scheduleId),
    at.map(() => "r"),
    at,
    at,
    at.map(() => "log"),
    at.map(() => "retry"),
    at.map(() => 5),
    at.map(() => null),
    at.map(() => null),
    at.map(() => null),
  ];
}

/**
 * The value of the command-line option `--name`, given as `--name value` or `--name=value`;
 * undefined when it is absent.
 */
export function flag(name: string): string | undefined {
  const argv = process.argv.slice(2);
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
}

/** Whether the command line holds the switch `--name` (e.g. `--quick`). */
export function hasFlag(name: string): boolean {
  return process.argv.slice(2).includes(`--${name}`);
}

/** Milliseconds since `t0`, a `process.hrtime.bigint()` reading. */
export const ms = (t0: bigint): number => Number(process.hrtime.bigint() - t0) / 1e6;

/** The median of `xs` (the mean of the middle two when their number is even). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}
