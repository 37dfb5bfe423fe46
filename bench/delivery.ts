/**
 * Delivery benchmark: punctual beside graphile-worker and pg-boss on one PostgreSQL 15
 * cluster with fsync on, in one run, so the ratios compare like with like on a noisy
 * machine. See bench/README.md for what each scenario measures and how to run one alone.
 *
 *   node --import tsx bench/delivery.ts [--quick] [--only burst,lateness,recovery,stored,pglite]
 *     [--jobs 20000] [--cap-s 60] [--rates 100,500] [--seconds 20] [--recovery-jobs 2000]
 *     [--lease-ms 5000] [--recovery-cap-s 35] [--stored 10000,1000000] [--variants all|batched|gw-batched,…]
 *
 * PostgreSQL: DATABASE_URL (a server you own; fsync should be on), else a throwaway
 * cluster started with fsync on. Workers run in child processes (bench/lib/worker.ts);
 * this process seeds, reads each system's ledger and times.
 */
import { execFileSync, fork, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { createPunctual, type Channel } from "../src/index.js";
import {
  done,
  prepare,
  punctualOptions,
  seed,
  seedPunctual,
  VARIANTS,
  type JobSpec,
  type SystemName,
  type Variant,
} from "./lib/systems.js";
// @ts-expect-error -- a plain .mjs helper without types
import { findPgBin, startCluster } from "../scripts/pg-cluster.mjs";
import { noopChannel } from "./lib/harness.js";

const { values: flags } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    only: { type: "string" },
    jobs: { type: "string" },
    "cap-s": { type: "string" },
    rates: { type: "string" },
    seconds: { type: "string" },
    "recovery-jobs": { type: "string" },
    "lease-ms": { type: "string" },
    "recovery-cap-s": { type: "string" },
    stored: { type: "string" },
    variants: { type: "string" },
    burst: { type: "string" },
  },
  // Flags meant for other bench files (npm run bench forwards all of them) are ignored.
  strict: false,
});
const quick = flags.quick === true;
const str = (v: string | boolean | undefined) => (typeof v === "string" ? v : undefined);
const num = (
  flag: string | boolean | undefined,
  env: string,
  full: number,
  small: number,
): number => Number(str(flag) ?? process.env[env] ?? (quick ? small : full));
const list = (
  flag: string | boolean | undefined,
  env: string,
  full: string,
  small: string,
): number[] => (str(flag) ?? process.env[env] ?? (quick ? small : full)).split(",").map(Number);

const SIZES = {
  jobs: num(flags.jobs, "BENCH_JOBS", 20_000, 1_000),
  capMs: num(flags["cap-s"], "BENCH_CAP_S", 60, 3) * 1_000,
  rates: list(flags.rates, "BENCH_RATES", "100,500", "100,500"),
  seconds: num(flags.seconds, "BENCH_SECONDS", 20, 2),
  recoveryJobs: num(flags["recovery-jobs"], "BENCH_RECOVERY_JOBS", 2_000, 300),
  leaseMs: num(flags["lease-ms"], "PUNCTUAL_LEASE_MS", 5_000, 3_000),
  recoveryCapMs: num(flags["recovery-cap-s"], "BENCH_RECOVERY_CAP_S", 35, 5) * 1_000,
  stored: list(flags.stored, "BENCH_STORED", "10000,1000000", "10000,50000"),
};
const scenarios = new Set(
  (str(flags.only) ?? process.env.BENCH_ONLY ?? "burst,lateness,recovery,stored,pglite").split(","),
);
const variantWords = (
  str(flags.variants) ??
  process.env.BENCH_VARIANTS ??
  (quick ? "batched" : "all")
).split(",");
/** `all`, `batched`, or peer variant ids (`--variants gw-batched`: one peer, a shorter run). */
const PEERS = variantWords.includes("all")
  ? ["gw-defaults", "gw-batched", "boss-defaults", "boss-batched"]
  : variantWords.includes("batched")
    ? ["gw-batched", "boss-batched"]
    : variantWords.filter((id) => id in VARIANTS && id !== "punctual");
if (PEERS.length === 0) throw new Error(`--variants: none of ${variantWords.join(",")} is a peer`);
const CONCURRENCY = 8;
/** Burst rows as [C, processes]: `--burst 8x1,8x2` (or BENCH_BURST) runs only those. */
const BURST_ROWS = (str(flags.burst) ?? process.env.BENCH_BURST ?? "1x1,8x1,1x2,8x2")
  .split(",")
  .map((row) => row.split("x").map(Number) as [number, number]);

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
/** A ratio with two significant digits (0.0042×, 0.31×, 1.6×). */
const ratio = (r: number) => (Number.isFinite(r) ? `${Number(r.toPrecision(2))}×` : "n/a");

// ---------------------------------------------------------------------------------------
// PostgreSQL: one cluster, a migrated template database per system, a fresh copy per run.

let url = process.env.DATABASE_URL;
let cluster: { url: string; stop(): void } | null = null;
const needsPg = ["burst", "lateness", "recovery", "stored"].some((s) => scenarios.has(s));
if (!url && needsPg) {
  if (!findPgBin()) {
    console.error("PostgreSQL: no DATABASE_URL and no PostgreSQL server binaries; giving up");
    process.exit(1);
  }
  cluster = (await startCluster({ durable: true })) as { url: string; stop(): void };
  url = cluster.url;
}
const stopCluster = () => {
  try {
    cluster?.stop();
  } catch {
    // already gone
  }
  cluster = null;
};
process.on("SIGINT", () => {
  for (const child of children) child.kill("SIGKILL");
  stopCluster();
  process.exit(130);
});

const admin = url ? new pg.Pool({ connectionString: url, max: 2 }) : null;
// A dropped run database ends its idle connections: not an error of the benchmark.
admin?.on("error", () => {});
const dbUrl = (name: string) => {
  const u = new URL(url!);
  u.pathname = `/${name}`;
  return u.toString();
};
const templates = new Map<SystemName, string>();
let runs = 0;

async function template(system: SystemName): Promise<string> {
  let name = templates.get(system);
  if (name) return name;
  name = `bench_tpl_${system.replace("-", "_")}`;
  await admin!.query(`drop database if exists ${name} with (force)`);
  await admin!.query(`create database ${name}`);
  await prepare(system, dbUrl(name));
  templates.set(system, name);
  return name;
}

/** A fresh database holding only `system`'s schema; `drop()` removes it. */
async function freshDb(system: SystemName) {
  const tpl = await template(system);
  const name = `bench_run_${process.pid}_${++runs}`;
  await admin!.query(`create database ${name} template ${tpl}`);
  const pool = new pg.Pool({ connectionString: dbUrl(name), max: 2 });
  pool.on("error", () => {});
  return {
    url: dbUrl(name),
    pool,
    async drop() {
      await pool.end();
      await admin!.query(`drop database if exists ${name} with (force)`);
    },
  };
}

// ---------------------------------------------------------------------------------------
// Worker processes.

const children = new Set<ChildProcess>();
const workerFile = fileURLToPath(new URL("./lib/worker.ts", import.meta.url));
/** BENCH_CPU_PROF=<folder>: every worker process writes a `--cpu-prof` profile there. */
const profileFlags = process.env.BENCH_CPU_PROF
  ? ["--cpu-prof", "--cpu-prof-dir", process.env.BENCH_CPU_PROF]
  : [];

interface Spawned {
  ready: Promise<void>;
  go(): Promise<void>;
  stop(): Promise<Array<[string, number]>>;
  /** The worker process's CPU time (user + system) since "go", µs. */
  cpu(): Promise<number>;
  kill(): void;
  /** Keys whose handler started, in "hang" mode. */
  hung: string[];
}

function spawnWorker(
  variant: Variant,
  dbUrlForRun: string,
  concurrency: number,
  mode: "noop" | "hang",
  leaseMs?: number,
): Spawned {
  const child = fork(
    workerFile,
    [JSON.stringify({ variant: variant.id, url: dbUrlForRun, concurrency, mode, leaseMs })],
    {
      execArgv: ["--import", "tsx", ...profileFlags],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    },
  );
  children.add(child);
  const hung: string[] = [];
  const waiters = new Map<string, (m: Record<string, unknown>) => void>();
  const waitFor = (type: string, timeoutMs: number) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${variant.id} worker: no "${type}" in ${timeoutMs} ms`)),
        timeoutMs,
      );
      waiters.set(type, (m) => {
        clearTimeout(timer);
        resolve(m);
      });
    });
  child.on("message", (m: Record<string, unknown>) => {
    if (m.type === "start") hung.push(String(m.key));
    waiters.get(String(m.type))?.(m);
  });
  child.on("exit", () => {
    children.delete(child);
    waiters.get("report")?.({ type: "report", starts: [] });
  });
  const ready = waitFor("ready", 60_000).then(() => undefined);
  return {
    ready,
    hung,
    async go() {
      const started = waitFor("started", 60_000);
      child.send({ type: "go" });
      await started;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return [];
      const report = waitFor("report", 30_000);
      child.send({ type: "stop" });
      const m = await report.catch(() => ({ starts: [] }));
      return (m.starts ?? []) as Array<[string, number]>;
    },
    async cpu() {
      const answer = waitFor("cpu", 10_000);
      child.send({ type: "cpu" });
      const m = await answer.catch(() => ({ us: NaN }));
      return Number(m.us);
    },
    kill() {
      child.kill("SIGKILL");
    },
  };
}

function jobsDue(count: number, firstMs: number, stepMs: number, tag: string): JobSpec[] {
  return Array.from({ length: count }, (_, i) => ({
    key: `${tag}${i}`,
    dueMs: Math.round(firstMs + i * stepMs),
  }));
}

/** Polls `count()` until it reaches `target` or `capMs` passes; returns elapsed ms. */
async function waitUntil(
  count: () => Promise<number>,
  target: number,
  capMs: number,
  everyMs = 50,
): Promise<{ ms: number; reached: number }> {
  const t0 = performance.now();
  let reached = 0;
  while (performance.now() - t0 < capMs) {
    reached = await count();
    if (reached >= target) break;
    await sleep(everyMs);
  }
  return { ms: performance.now() - t0, reached };
}

// ---------------------------------------------------------------------------------------
// CPU of the PostgreSQL server, from /proc (a server on this machine only).

let clockTicks: number | null = null;
let postmasterPid: number | null | undefined;

/** utime, stime, cutime, cstime of a process, in clock ticks; null when unreadable. */
function procTimes(pid: number): { ppid: number; own: number; children: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name, which is in parentheses and may hold spaces.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return {
      ppid: Number(f[1]),
      own: Number(f[11]) + Number(f[12]),
      children: Number(f[13]) + Number(f[14]),
    };
  } catch {
    return null;
  }
}

/**
 * CPU time of the whole PostgreSQL server so far, µs: the postmaster, its live children
 * (backends, autovacuum, WAL writer, checkpointer...) and, through the postmaster's
 * cutime/cstime, every child that has exited. Null when the server's processes cannot
 * be read (a remote DATABASE_URL, or not Linux).
 */
async function serverCpuUs(): Promise<number | null> {
  if (postmasterPid === undefined) {
    postmasterPid = null;
    try {
      const { rows } = await admin!.query<{ pid: number }>("select pg_backend_pid() as pid");
      const backend = procTimes(Number(rows[0]!.pid));
      if (backend && procTimes(backend.ppid)) postmasterPid = backend.ppid;
      clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
    } catch {
      postmasterPid = null;
    }
  }
  if (postmasterPid === null || !clockTicks) return null;
  const main = procTimes(postmasterPid);
  if (!main) return null;
  let ticks = main.own + main.children;
  for (const name of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(name)) continue;
    const t = procTimes(Number(name));
    if (t && t.ppid === postmasterPid) ticks += t.own;
  }
  return (ticks / clockTicks) * 1e6;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

// ---------------------------------------------------------------------------------------
// 1. Burst.

interface BurstResult {
  rate: number;
  done: number;
  ms: number;
  seedMs: number;
  duplicates: number;
  /** CPU of the worker processes (or, in process, of this process) per delivery, µs. */
  workerUs: number;
  /** CPU of the PostgreSQL server per delivery, µs; null when not measured (PGlite). */
  dbUs: number | null;
}

async function burst(variant: Variant, concurrency: number, procs: number): Promise<BurstResult> {
  const db = await freshDb(variant.system);
  try {
    const n = SIZES.jobs;
    // Worker processes start up while the jobs are seeded; none takes a job before "go".
    const workers = Array.from({ length: procs }, () =>
      spawnWorker(variant, db.url, concurrency, "noop"),
    );
    let t = performance.now();
    await seed(variant.system, db.url, jobsDue(n, Date.now() - 1_000, 0, "b"));
    const seedMs = performance.now() - t;
    await Promise.all(workers.map((w) => w.ready));
    const db0 = await serverCpuUs();
    t = performance.now();
    await Promise.all(workers.map((w) => w.go()));
    const probe = await waitUntil(
      () => done(variant.system, db.pool, n, { quick: true }),
      n,
      SIZES.capMs - (performance.now() - t),
    );
    const ms = performance.now() - t;
    // CPU is read as soon as the probe has seen the end, before the final count.
    const [db1, ...workerCpu] = await Promise.all([serverCpuUs(), ...workers.map((w) => w.cpu())]);
    const reached = probe.reached >= n ? probe.reached : await done(variant.system, db.pool, n);
    const starts = (await Promise.all(workers.map((w) => w.stop()))).flat();
    const duplicates = starts.length - new Set(starts.map(([k]) => k)).size;
    const per = Math.max(1, reached);
    return {
      rate: (reached / ms) * 1000,
      done: reached,
      ms,
      seedMs,
      duplicates,
      workerUs: (workerCpu as number[]).reduce((a, b) => a + b, 0) / per,
      dbUs: db0 !== null && db1 !== null ? (db1 - db0) / per : null,
    };
  } finally {
    await db.drop();
  }
}

// ---------------------------------------------------------------------------------------
// 2. Lateness.

interface LatenessResult {
  p50: number;
  p99: number;
  max: number;
  behind: number;
  total: number;
  overrunMs: number;
  duplicates: number;
}

/**
 * Summarises handler starts (`[key, start − due ms]`) of `jobs`: each job's first start
 * that happened by `end` (ms) counts; the rest are left behind.
 */
function latenessOf(
  jobs: readonly JobSpec[],
  starts: ReadonlyArray<[string, number]>,
  end: number,
  overrunMs: number,
): LatenessResult {
  const due = new Map(jobs.map((j) => [j.key, j.dueMs]));
  const firstLate = new Map<string, number>();
  for (const [key, late] of starts) {
    if (!firstLate.has(key) && due.get(key)! + late <= end) firstLate.set(key, late);
  }
  const sorted = [...firstLate.values()].sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? NaN,
    behind: jobs.length - firstLate.size,
    total: jobs.length,
    overrunMs,
    duplicates: starts.length - new Set(starts.map(([k]) => k)).size,
  };
}

async function lateness(variant: Variant, perSecond: number): Promise<LatenessResult> {
  const db = await freshDb(variant.system);
  try {
    const n = Math.round(perSecond * SIZES.seconds);
    // The worker process is up before the due times are chosen, so only seeding (and
    // not a process start on a busy machine) has to fit in the lead.
    const workers = [spawnWorker(variant, db.url, CONCURRENCY, "noop")];
    await Promise.all(workers.map((w) => w.ready));
    const first = Date.now() + 2_000 + n * (variant.system === "punctual" ? 1.5 : 0.5);
    const jobs = jobsDue(n, first, 1000 / perSecond, "l");
    await seed(variant.system, db.url, jobs);
    await Promise.all(workers.map((w) => w.go()));
    const overrunMs = Math.max(0, Date.now() - first);
    const last = jobs[jobs.length - 1]!.dueMs;
    const tail = quick ? 2_000 : 5_000;
    await sleep(Math.max(0, last + tail - Date.now()));
    const end = Date.now();
    const starts = (await Promise.all(workers.map((w) => w.stop()))).flat();
    return latenessOf(jobs, starts, end, overrunMs);
  } finally {
    await db.drop();
  }
}

// ---------------------------------------------------------------------------------------
// 3. Recovery after kill -9.

interface RecoveryResult {
  inFlight: number;
  doneAtKill: number;
  msToAll: number | null;
  stuck: number;
  rerun: number;
  total: number;
}

async function recovery(variant: Variant): Promise<RecoveryResult> {
  const db = await freshDb(variant.system);
  try {
    const n = SIZES.recoveryJobs;
    const lease = variant.system === "punctual" ? SIZES.leaseMs : undefined;
    const victim = spawnWorker(variant, db.url, CONCURRENCY, "hang", lease);
    const rescuer = spawnWorker(variant, db.url, CONCURRENCY, "noop", lease);
    await seed(variant.system, db.url, jobsDue(n, Date.now() - 1_000, 0, "r"));
    await Promise.all([victim.ready, rescuer.ready]);
    await victim.go();
    const t0 = performance.now();
    while (victim.hung.length < Math.min(CONCURRENCY, n) && performance.now() - t0 < 20_000)
      await sleep(20);
    await sleep(300); // let batched claims and prefetches land
    victim.kill();
    const inFlight = victim.hung.length;
    const doneAtKill = await done(variant.system, db.pool, n);
    const killedAt = performance.now();
    await rescuer.go();
    const { reached } = await waitUntil(
      () => done(variant.system, db.pool, n),
      n,
      SIZES.recoveryCapMs,
      100,
    );
    const msToAll = reached >= n ? performance.now() - killedAt : null;
    const starts = await rescuer.stop();
    const hung = new Set(victim.hung);
    const rerun = new Set(starts.map(([k]) => k).filter((k) => hung.has(k))).size;
    return { inFlight, doneAtKill, msToAll, stuck: n - reached, rerun, total: n };
  } finally {
    await db.drop();
  }
}

// ---------------------------------------------------------------------------------------
// 4. Idle pass and a 100-row claim over many finished deliveries (punctual, PostgreSQL).

interface StoredResult {
  stored: number;
  insertMs: number;
  idleTickMs: number | null;
  idleTicks: number;
  claimMs: number;
  claimTickMs: number | null;
}

/** Sum and count of punctual's tick-duration histogram, from its metrics text. */
async function tickStats(p: {
  metricsText(): Promise<{ body: string }>;
}): Promise<{ sum: number; count: number } | null> {
  const { body } = await p.metricsText();
  const sum = /^punctual_tick_duration_seconds_sum(?:\{[^}]*\})? ([0-9.e+-]+)$/m.exec(body);
  const count = /^punctual_tick_duration_seconds_count(?:\{[^}]*\})? ([0-9.e+-]+)$/m.exec(body);
  return sum && count ? { sum: Number(sum[1]) * 1000, count: Number(count[1]) } : null;
}

const perTick = (
  a: { sum: number; count: number } | null,
  b: { sum: number; count: number } | null,
) => (a && b && b.count > a.count ? (b.sum - a.sum) / (b.count - a.count) : null);

async function stored(total: number): Promise<StoredResult> {
  const db = await freshDb("punctual");
  let sent = 0;
  const channel: Channel = {
    name: "noop",
    idempotent: true,
    validateTarget() {},
    async send() {
      sent++;
      return {};
    },
  };
  const open = () =>
    createPunctual({
      databaseUrl: db.url,
      logLevel: "silent",
      channels: [channel],
      // Shipped defaults; a short safety-net poll only so the idle window holds many passes.
      scheduler: { pollMs: 200 },
    });
  try {
    // One delivery sent through the facade is the model of every stored row.
    await seed("punctual", db.url, jobsDue(1, Date.now() - 1_000, 0, "model"));
    let p = await open();
    await p.start();
    await waitUntil(() => done("punctual", db.pool, 1), 1, 30_000);
    await p.close(0);
    // Copy it `total - 1` times in SQL, with its own key and an earlier occurrence.
    const { rows: cols } = await db.pool.query<{ column_name: string }>(
      `select column_name from information_schema.columns
        where table_name = 'punctual_deliveries' and is_identity = 'NO' and is_generated = 'NEVER'
        order by ordinal_position`,
    );
    const names = cols.map((c) => c.column_name);
    const expr = (c: string) =>
      c === "delivery_key"
        ? `t.delivery_key || ':' || g`
        : ["occurrence_at", "due_at", "run_at"].includes(c)
          ? `t.${c} - g * interval '1 second'`
          : `t.${c}`;
    const t = performance.now();
    const step = 1_000_000;
    for (let from = 1; from < total; from += step) {
      const to = Math.min(total - 1, from + step - 1);
      await db.pool.query(
        `insert into punctual_deliveries (${names.join(", ")})
         select ${names.map(expr).join(", ")}
           from (select * from punctual_deliveries order by id limit 1) t,
                generate_series(${from}::int, ${to}::int) g`,
      );
    }
    await db.pool.query("vacuum analyze punctual_deliveries");
    const insertMs = performance.now() - t;

    p = await open();
    await p.start();
    await sleep(1_000);
    const a = await tickStats(p);
    await sleep(quick ? 2_000 : 5_000);
    const b = await tickStats(p);
    // 100 due now: one claim of 100 at the default concurrency and claim batch.
    sent = 0;
    await seed("punctual", db.url, jobsDue(100, Date.now() - 1_000, 0, "c"));
    const { ms: claimMs } = await waitUntil(async () => sent, 100, 30_000, 5);
    const c = await tickStats(p);
    await p.close(0);
    return {
      stored: total,
      insertMs,
      idleTickMs: perTick(a, b),
      idleTicks: a && b ? b.count - a.count : 0,
      claimMs,
      claimTickMs: perTick(b, c),
    };
  } finally {
    await db.drop();
  }
}

// ---------------------------------------------------------------------------------------
// 5. PGlite burst (punctual in this process, in memory).

async function pgliteBurst(concurrency: number): Promise<BurstResult> {
  const p = await createPunctual({
    dataDir: null,
    logLevel: "silent",
    channels: [noopChannel],
    scheduler: punctualOptions(concurrency),
  });
  try {
    const n = SIZES.jobs;
    const due = new Date(Date.now() - 1_000).toISOString();
    let t = performance.now();
    for (let i = 0; i < n; i += 5_000) {
      const values = Array.from(
        { length: Math.min(5_000, n - i) },
        (_, j) =>
          p.validateSchedule({
            dtstart: due,
            reminders: [{ key: "r", offset: "PT0S", channel: "noop" }],
            payload: { k: `p${i + j}` },
            source: "bench",
            externalId: `p${i + j}`,
          }).value,
      );
      await p.createSchedulesBulk(values);
    }
    const seedMs = performance.now() - t;
    t = performance.now();
    const cpu0 = process.cpuUsage();
    await p.start();
    const count = async () => {
      const { rows } = await p.db.query<{ n: number }>(
        "select count(*)::int as n from punctual_deliveries where state = 'sent'",
      );
      return Number(rows[0]!.n);
    };
    const { reached, ms } = await waitUntil(count, n, SIZES.capMs, 100);
    const cpu = process.cpuUsage(cpu0);
    return {
      rate: (reached / ms) * 1000,
      done: reached,
      ms,
      seedMs,
      duplicates: 0,
      // The embedded engine runs in this process: its CPU is in this figure too.
      workerUs: (cpu.user + cpu.system) / Math.max(1, reached),
      dbUs: null,
    };
  } finally {
    await p.close(0);
  }
}

/**
 * Lateness on the embedded engine: punctual on PGlite in memory, in this process (the
 * embedded engine has no second process), C = 8, jobs due one after another at R due/s.
 * Seeding runs in the same process before the scheduler starts, so the first due time
 * leaves room for it; a row says by how much seeding overran.
 */
async function pgliteLateness(perSecond: number): Promise<LatenessResult> {
  const n = Math.round(perSecond * SIZES.seconds);
  const starts: Array<[string, number]> = [];
  const channel: Channel = {
    name: "noop",
    idempotent: true,
    validateTarget() {},
    async send(delivery) {
      starts.push([(delivery.payload as { k: string }).k, Date.now() - delivery.dueAt.getTime()]);
      return {};
    },
  };
  const p = await createPunctual({
    dataDir: null,
    logLevel: "silent",
    channels: [channel],
    scheduler: punctualOptions(CONCURRENCY),
  });
  try {
    const first = Date.now() + 3_000 + n * 3;
    const jobs = jobsDue(n, first, 1000 / perSecond, "lite");
    await seedPunctual(p, jobs);
    await p.start();
    const overrunMs = Math.max(0, Date.now() - first);
    const last = jobs[jobs.length - 1]!.dueMs;
    const end = last + (quick ? 2_000 : 5_000);
    await sleep(Math.max(0, end - Date.now()));
    return latenessOf(jobs, starts, end, overrunMs);
  } finally {
    await p.close(0);
  }
}

// ---------------------------------------------------------------------------------------
// Report.

const started = performance.now();
const [load1, load5, load15] = loadavg().map((l) => l.toFixed(2));
let pgVersion = "n/a";
let fsync = "n/a";
if (admin) {
  const { rows } = await admin.query<{ v: string; f: string }>(
    "select current_setting('server_version') as v, current_setting('fsync') as f",
  );
  pgVersion = rows[0]!.v;
  fsync = rows[0]!.f;
}
console.log(`# Delivery benchmark${quick ? " (--quick: small sizes, a smoke run)" : ""}`);
console.log(
  `date ${new Date().toISOString()}; ${cpus()[0]?.model ?? "cpu?"}, ${cpus().length} cores, ` +
    `${Math.round(totalmem() / 2 ** 30)} GiB; load average ${load1} ${load5} ${load15}; ` +
    `node ${process.version}; PostgreSQL ${pgVersion} (fsync ${fsync})`,
);
console.log(
  `sizes: burst ${fmt(SIZES.jobs)} jobs (cap ${secs(SIZES.capMs)}), lateness ${SIZES.rates.join(" and ")} due/s ` +
    `for ${SIZES.seconds} s, recovery ${fmt(SIZES.recoveryJobs)} jobs (lease ${SIZES.leaseMs} ms, ` +
    `wait ≤ ${secs(SIZES.recoveryCapMs)}), stored ${SIZES.stored.map(fmt).join(" vs ")}`,
);
console.log("variants:");
for (const id of ["punctual", ...PEERS])
  console.log(`  ${VARIANTS[id]!.label}: ${VARIANTS[id]!.settings}`);

/** Deliveries per second of CPU (worker + database server, or the one process). */
const perCpuSecond = (r: BurstResult) => 1e6 / (r.workerUs + (r.dbUs ?? 0));
const cell = (r: BurstResult) =>
  (r.done >= SIZES.jobs ? `${fmt(r.rate)}/s` : `${fmt(r.rate)}/s (${fmt(r.done)} in cap)`) +
  `, ${fmt(perCpuSecond(r))}/CPU-s`;
const us = (v: number | null) => (v === null || !Number.isFinite(v) ? "n/a" : `${fmt(v)} µs`);
/** CPU rows printed after the burst table: [row label, system label, result]. */
const cpuRows: Array<[string, string, BurstResult]> = [];

const pgBurst = new Map<string, BurstResult>();
let sectionStart = performance.now();
/** Prints how long the scenario that just ended took, with the load average now. */
function section(): void {
  const ms = performance.now() - sectionStart;
  if (ms > 1_000) console.log(`\n(${secs(ms)}; load average now ${loadavg()[0]!.toFixed(2)})`);
  sectionStart = performance.now();
}
try {
  if (scenarios.has("burst")) {
    console.log(
      `\n## 1. Burst: ${fmt(SIZES.jobs)} due now, no-op handler, start → ledger says all done\n`,
    );
    const cols = ["punctual", ...PEERS];
    console.log(
      `| C | processes | ${cols.map((c) => VARIANTS[c]!.label).join(" | ")} | punctual ÷ best peer |`,
    );
    console.log(`|---|---|${cols.map(() => "---:|").join("")}---:|`);
    for (const [c, procs] of BURST_ROWS) {
      const row: BurstResult[] = [];
      for (const id of cols) {
        const r = await burst(VARIANTS[id]!, c, procs);
        if (r.duplicates) console.error(`  ${id}: ${r.duplicates} duplicate handler starts`);
        row.push(r);
      }
      pgBurst.set(`${c}/${procs}`, row[0]!);
      row.forEach((r, i) => cpuRows.push([`${c} | ${procs}`, VARIANTS[cols[i]!]!.label, r]));
      const best = Math.max(...row.slice(1).map((r) => r.rate));
      const bestId = cols[1 + row.slice(1).findIndex((r) => r.rate === best)]!;
      console.log(
        `| ${c} | ${procs} | ${row.map(cell).join(" | ")} | ` +
          `${ratio(row[0]!.rate / best)} (vs ${VARIANTS[bestId]!.label}) |`,
      );
    }
    console.log(
      "\nCPU per delivery in the same runs, from the workers' start until the ledger said all " +
        "done: worker processes from `process.cpuUsage()`, the PostgreSQL server (every " +
        "backend and background process, the probe's included) from `/proc`.\n",
    );
    console.log(
      "| C | processes | system | jobs/s | deliveries per CPU-second | worker CPU per delivery | database CPU per delivery |",
    );
    console.log("|---|---|---|---:|---:|---:|---:|");
    for (const [rowLabel, label, r] of cpuRows)
      console.log(
        `| ${rowLabel} | ${label} | ${fmt(r.rate)} | ${fmt(perCpuSecond(r))} | ${us(r.workerUs)} | ${us(r.dbUs)} |`,
      );
  }

  section();
  if (scenarios.has("lateness")) {
    console.log(
      `\n## 2. Lateness: handler start − due time, C = ${CONCURRENCY}, ${SIZES.seconds} s of due jobs\n`,
    );
    console.log("| due/s | system | p50 | p99 | max | left behind | note |");
    console.log("|---:|---|---:|---:|---:|---:|---|");
    for (const rate of SIZES.rates) {
      for (const id of ["punctual", "gw-batched", "boss-batched", "pglite"]) {
        if (id === "pglite" && !scenarios.has("pglite")) continue;
        const r =
          id === "pglite" ? await pgliteLateness(rate) : await lateness(VARIANTS[id]!, rate);
        const note = [
          r.overrunMs ? `seeding overran by ${fmt(r.overrunMs)} ms` : "",
          r.duplicates ? `${r.duplicates} duplicate starts` : "",
        ]
          .filter(Boolean)
          .join("; ");
        const late = (v: number) => (Number.isNaN(v) ? "none started" : `${fmt(v)} ms`);
        console.log(
          `| ${rate} | ${id === "pglite" ? "punctual on PGlite (in process)" : VARIANTS[id]!.label} | ${late(r.p50)} | ${late(r.p99)} | ` +
            `${late(r.max)} | ${fmt(r.behind)} of ${fmt(r.total)} | ${note} |`,
        );
      }
    }
  }

  section();
  if (scenarios.has("recovery")) {
    console.log(
      `\n## 3. Recovery: a worker (C = ${CONCURRENCY}) holding claimed jobs is SIGKILLed; ` +
        `another worker finishes the rest\n`,
    );
    console.log(
      "| system | in its handlers at kill | time from kill to all done | still not done at the end | re-run after kill |",
    );
    console.log("|---|---:|---:|---:|---:|");
    for (const id of ["punctual", "gw-batched", "boss-batched"]) {
      const r = await recovery(VARIANTS[id]!);
      console.log(
        `| ${VARIANTS[id]!.label}${id === "punctual" ? ` (lease ${SIZES.leaseMs} ms)` : " (its default lock expiry)"} | ` +
          `${r.inFlight} | ${r.msToAll === null ? `not within ${secs(SIZES.recoveryCapMs)}` : secs(r.msToAll)} | ` +
          `${fmt(r.stuck)} of ${fmt(r.total)} | ${r.rerun} |`,
      );
    }
  }

  section();
  if (scenarios.has("stored")) {
    console.log(
      "\n## 4. punctual over many finished deliveries (PostgreSQL): idle pass and a 100-row claim\n",
    );
    if (Math.max(...SIZES.stored) < 10_000_000)
      console.log(
        "Largest size below 10M to fit the run's time; `--stored 10000,10000000` measures 10M.\n",
      );
    console.log(
      "| stored deliveries | insert + analyze | idle pass (mean tick) | ticks | 100 due → 100 sent | mean tick then |",
    );
    console.log("|---:|---:|---:|---:|---:|---:|");
    for (const total of SIZES.stored) {
      const r = await stored(total);
      const ms = (v: number | null) => (v === null ? "n/a" : `${v.toFixed(1)} ms`);
      console.log(
        `| ${fmt(r.stored)} | ${secs(r.insertMs)} | ${ms(r.idleTickMs)} | ${r.idleTicks} | ` +
          `${ms(r.claimMs)} | ${ms(r.claimTickMs)} |`,
      );
    }
  }

  section();
  if (scenarios.has("pglite")) {
    console.log(`\n## 5. punctual's burst on PGlite (in memory, 1 process) and PostgreSQL\n`);
    console.log(
      "| C | PGlite | PostgreSQL, 1 process | PGlite ÷ PostgreSQL | PGlite: CPU per delivery (this process, engine included) |",
    );
    console.log("|---|---:|---:|---:|---:|");
    for (const c of [1, 8]) {
      const lite = await pgliteBurst(c);
      const server = pgBurst.get(`${c}/1`);
      console.log(
        `| ${c} | ${cell(lite)} | ${server ? cell(server) : "(burst not run)"} | ` +
          `${server ? ratio(lite.rate / server.rate) : "n/a"} | ${us(lite.workerUs)} |`,
      );
    }
  }
  section();
} finally {
  for (const child of children) child.kill("SIGKILL");
  if (admin) {
    for (const name of templates.values())
      await admin.query(`drop database if exists ${name} with (force)`).catch(() => {});
    await admin.end();
  }
  stopCluster();
}
const [e1, e5, e15] = loadavg().map((l) => l.toFixed(2));
console.log(
  `\ntotal ${secs(performance.now() - started)}; load average at the end ${e1} ${e5} ${e15}`,
);
