#!/usr/bin/env node
// `npm run chaos`: the delivery guarantee under faults, end to end, on real processes.
//
// Starts a throwaway PostgreSQL cluster (scripts/pg-cluster.mjs), a webhook receiver
// (scripts/chaos-receiver.mjs) and a TCP proxy (scripts/chaos-proxy.mjs) on 127.0.0.1, and
// N `punctual worker` processes (built CLI, dist/) that reach PostgreSQL through the proxy
// with a short lease. It creates the reminders in bulk through the library facade, each a
// one-off webhook to the receiver, due over the next `--duration` seconds, and while they
// fall due it:
//   - kills a worker with SIGKILL every ~2 s and starts a replacement at once;
//   - restarts PostgreSQL (`pg_ctl restart`, fast then immediate mode);
//   - resets every worker connection at the proxy (TCP RST);
//   - stops one worker (SIGSTOP) for longer than its lease, then resumes it (SIGCONT);
//   - stalls one worker while its claim is in flight (DEL-16): a trigger holds that worker's
//     next claim inside the database, the worker is stopped (SIGSTOP) before it reads the
//     reply, and resumed only after the lease that claim granted has ended; any of those
//     rows it then sends is a failure (it sent on a lease that was no longer its own);
//   - runs one worker slot with its wall clock 30 s ahead (libfaketime, Debian `faketime`).
// Then it waits, bounded, for every delivery to settle, reads the database and the
// receiver's log, prints a report and exits:
//   0  nothing lost, nothing early, no reminder under a second key, no bad signature;
//   1  one of those happened (the report lists samples);
//   2  the run itself could not be carried out (missing tools, setup failure).
// Re-sends of the same webhook-id and in_doubt rows are reported, not failures: the
// guarantee is one effect per key at a de-duplicating receiver (README, "How the guarantee
// works"). docs/chaos.md explains every line of the report.
//
// Usage: npm run chaos [-- --reminders N --duration S --workers N --json --ci ...]
//        (`npm run chaos` builds first; `node scripts/chaos.mjs` uses dist/ as it is.)
// Everything it starts is stopped on exit, on failure and on Ctrl-C; every loop is bounded.
import { fork, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { analyse, FINAL_STATES, formatReport } from "./chaos-report.mjs";
import { findPgBin, startCluster, stopCluster } from "./pg-cluster.mjs";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const isRoot = typeof process.getuid === "function" && process.getuid() === 0;

// ---------------------------------------------------------------------------------------
// Options

const USAGE = `usage: node scripts/chaos.mjs [options]
  --reminders N        reminders to create (default 20000; --ci 3000)
  --duration S         seconds over which they fall due, and chaos runs (default 60; --ci 40)
  --workers N          worker processes (default 4)
  --lease-ms MS        PUNCTUAL_LEASE_MS of the workers (default 5000)
  --kill-every-ms MS   mean time between two SIGKILLs (default 2000; 0 = none)
  --pg-restarts N      PostgreSQL restarts during the run (default 2; --ci 1)
  --proxy-resets N     connection resets at the proxy (default 3; --ci 2)
  --skew-s S           wall-clock skew of one worker slot, seconds (default 30; 0 = none)
  --no-pause           do not stop a worker past its lease
  --no-stall           do not stall a worker while its claim is in flight
  --settle-s S         longest wait for deliveries to settle after the run (default 300)
  --early-ms MS        tolerance before dueAt before a receipt counts as early (default 100)
  --ci                 the short version for CI (about 2 minutes)
  --json               print the report as JSON on stdout (progress stays on stderr)
  --keep               keep the run folder (logs) even when the run passes
  -h, --help           this text`;

function readOptions(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      reminders: { type: "string" },
      duration: { type: "string" },
      workers: { type: "string" },
      "lease-ms": { type: "string" },
      "kill-every-ms": { type: "string" },
      "pg-restarts": { type: "string" },
      "proxy-resets": { type: "string" },
      "skew-s": { type: "string" },
      "no-pause": { type: "boolean", default: false },
      "no-stall": { type: "boolean", default: false },
      "settle-s": { type: "string" },
      "early-ms": { type: "string" },
      ci: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      keep: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  const ci = values.ci;
  const int = (name, fallback, min, max) => {
    const raw = values[name];
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      throw new UsageError(`--${name} must be a whole number in [${min}, ${max}] (got "${raw}")`);
    }
    return Number(raw);
  };
  const leaseMs = int("lease-ms", 5_000, 1_000, 600_000);
  return {
    help: values.help,
    ci,
    json: values.json,
    keep: values.keep,
    reminders: int("reminders", ci ? 3_000 : 20_000, 1, 1_000_000),
    durationS: int("duration", ci ? 40 : 60, 5, 3_600),
    workers: int("workers", 4, 1, 32),
    leaseMs,
    // The send budget must stay below the lease (configuration rule).
    sendTimeoutMs: Math.min(2_000, Math.floor(leaseMs / 2)),
    killEveryMs: int("kill-every-ms", 2_000, 0, 600_000),
    pgRestarts: int("pg-restarts", ci ? 1 : 2, 0, 10),
    proxyResets: int("proxy-resets", ci ? 2 : 3, 0, 100),
    skewS: int("skew-s", 30, 0, 3_600),
    pause: !values["no-pause"],
    stall: !values["no-stall"],
    settleS: int("settle-s", 300, 5, 3_600),
    earlyMs: int("early-ms", 100, 0, 60_000),
  };
}

class UsageError extends Error {}

/**
 * The stalled worker's connections carry this `application_name` (in its database URL);
 * the trigger installed by {@link installStallTrigger} holds only their claims.
 */
const STALLED_APP = "punctual-chaos-stalled";

/**
 * The slot whose worker is stalled mid-claim: the last one, when there are at least three
 * (slot 0 runs skewed, slot 1 is the one stopped at random); null: no stall.
 */
function stalledSlot(opts) {
  return opts.stall && opts.workers >= 3 ? opts.workers - 1 : null;
}

/**
 * DEL-16 fault: a one-shot trigger. Once `chaos_stall.armed` is set, the next claim made
 * by a connection named {@link STALLED_APP} disarms it and sleeps `seconds` inside the
 * statement: the claim's `now()`, and so the lease it grants, was fixed before the sleep,
 * so the worker gets its reply (after a stop, see the run loop) only after the lease began.
 */
async function installStallTrigger(url, seconds) {
  await withClient(url, async (c) => {
    await c.query(`
      create table if not exists chaos_stall (armed boolean not null);
      insert into chaos_stall select false where not exists (select 1 from chaos_stall);
      create or replace function chaos_stall_claim() returns trigger language plpgsql as $$
      begin
        if current_setting('application_name') = '${STALLED_APP}' then
          update chaos_stall set armed = false where armed;
          if found then perform pg_sleep(${seconds}); end if;
        end if;
        return new;
      end $$;
      drop trigger if exists chaos_stall_claim on punctual_deliveries;
      create trigger chaos_stall_claim before update on punctual_deliveries for each row
        when (new.state = 'claimed' and old.state <> 'claimed')
        execute function chaos_stall_claim();`);
  });
}
class SetupError extends Error {}

// ---------------------------------------------------------------------------------------
// Small helpers

const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const startedAt = Date.now();
function say(text) {
  const t = ((Date.now() - startedAt) / 1000).toFixed(1).padStart(6);
  process.stderr.write(`[chaos ${t}s] ${text}\n`);
}

/** libfaketime's preload library: `dpkg -L libfaketime` first, then the usual places. */
function findFaketime() {
  const listed = spawnSync("dpkg", ["-L", "libfaketime"], { encoding: "utf8" });
  const fromDpkg = (listed.stdout ?? "")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => /\/libfaketime\.so\.1$/.test(l));
  const candidates = [
    ...fromDpkg,
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
  ];
  return candidates.find((p) => existsSync(p)) ?? null;
}

/** Runs a PostgreSQL server tool (as `postgres` when we are root), without blocking. */
function runPgTool(bin, tool, args) {
  const exe = join(bin, tool);
  const [cmd, argv] = isRoot ? ["runuser", ["-u", "postgres", "--", exe, ...args]] : [exe, args];
  return new Promise((resolve) => {
    const child = spawn(cmd, argv, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    child.on("error", (err) => resolve({ code: -1, output: String(err) }));
    // 'exit', not 'close': the restarted postmaster must not hold us (its output goes to -l).
    child.on("exit", (code) => resolve({ code: code ?? -1, output: output.trim() }));
  });
}

/** Forks a helper script and resolves with its "listening" port. */
function forkHelper(script, args, label) {
  return new Promise((resolve, reject) => {
    const child = fork(join(root, "scripts", script), args, {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const timer = setTimeout(
      () => reject(new SetupError(`${label} did not start within 15 s`)),
      15_000,
    );
    child.once("error", (err) => reject(new SetupError(`${label}: ${err.message}`)));
    child.once("exit", (code) => reject(new SetupError(`${label} exited early (code ${code})`)));
    child.on("message", (msg) => {
      if (msg?.type === "listening") {
        clearTimeout(timer);
        resolve({ child, port: msg.port });
      }
    });
  });
}

/** Sends an IPC request and waits for the reply of the same type (bounded). */
function ask(child, msg, timeoutMs = 5_000) {
  return new Promise((resolve) => {
    if (!child.connected) return resolve(null);
    const timer = setTimeout(() => {
      child.off("message", onMessage);
      resolve(null);
    }, timeoutMs);
    const onMessage = (reply) => {
      if (reply?.type !== msg.type) return;
      clearTimeout(timer);
      child.off("message", onMessage);
      resolve(reply);
    };
    child.on("message", onMessage);
    child.send(msg);
  });
}

function waitExit(child, timeoutMs) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

function alive(child) {
  return Boolean(child) && child.exitCode === null && child.signalCode === null;
}

// ---------------------------------------------------------------------------------------
// What the run started (cleanup reads this)

const state = {
  cluster: null,
  receiver: null,
  proxy: null,
  /** @type {Array<Worker>} */
  workers: [],
  stopping: false,
  runDir: null,
  /** --keep: the run folder stays even on an interrupted run. */
  keep: false,
};

/**
 * @typedef {{ slot: number; child: import("node:child_process").ChildProcess; pid: number;
 *   skewed: boolean; spawnedAt: number; readyAt: number | null; expected: boolean;
 *   paused: boolean }} Worker
 */

/** Synchronous last-resort cleanup: safe to call from 'exit' and signal handlers. */
function cleanupNow() {
  state.stopping = true;
  for (const w of state.workers) {
    if (!alive(w.child)) continue;
    try {
      process.kill(w.pid, "SIGCONT");
      process.kill(w.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  for (const helper of [state.receiver, state.proxy]) {
    if (alive(helper)) helper.kill("SIGKILL");
  }
  if (state.cluster) {
    const c = state.cluster;
    state.cluster = null;
    try {
      stopCluster({ dir: c.dir, bin: c.bin });
    } catch (err) {
      process.stderr.write(
        `chaos: could not stop the PostgreSQL cluster in ${c.dir}: ${err.message}\n`,
      );
    }
  }
}

process.on("exit", cleanupNow);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    process.stderr.write(`chaos: ${signal}: stopping everything\n`);
    cleanupNow();
    if (state.runDir && !state.keep) rmSync(state.runDir, { recursive: true, force: true });
    process.exit(130);
  });
}

// ---------------------------------------------------------------------------------------
// Workers

let spawnCount = 0;
const MAX_SPAWNS = 2_000;
const workerEvents = { killed: 0, unexpectedExits: [], bootMs: [] };

function spawnWorker(slot, ctx) {
  if (state.stopping || spawnCount >= MAX_SPAWNS) return null;
  spawnCount += 1;
  const skewed = ctx.opts.skewS > 0 && slot === 0;
  const databaseUrl =
    slot === stalledSlot(ctx.opts)
      ? `${ctx.proxyUrl}?application_name=${STALLED_APP}`
      : ctx.proxyUrl;
  const env = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    PUNCTUAL_LEASE_MS: String(ctx.opts.leaseMs),
    PUNCTUAL_SEND_TIMEOUT_MS: String(ctx.opts.sendTimeoutMs),
    PUNCTUAL_ALLOW_PRIVATE_TARGETS: "true",
    PUNCTUAL_WEBHOOK_SECRET: ctx.secret,
    PUNCTUAL_LOG_LEVEL: process.env.PUNCTUAL_LOG_LEVEL || "warn",
  };
  if (skewed) {
    env.LD_PRELOAD = [ctx.faketime, process.env.LD_PRELOAD].filter(Boolean).join(" ");
    env.FAKETIME = `+${ctx.opts.skewS}s`;
    // Only the wall clock moves; timers (monotonic clock) stay true.
    env.FAKETIME_DONT_FAKE_MONOTONIC = "1";
  }
  const child = spawn(process.execPath, [join(root, "bin", "punctual.js"), "worker"], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  /** @type {Worker} */
  const w = {
    slot,
    child,
    pid: child.pid ?? -1,
    skewed,
    spawnedAt: Date.now(),
    readyAt: null,
    expected: false,
    paused: false,
  };
  const log = createWriteStream(join(state.runDir, `worker-${slot}-${w.pid}.log`));
  child.stdout.pipe(log, { end: false });
  child.stderr.on("data", (chunk) => {
    log.write(chunk);
    if (w.readyAt === null && String(chunk).includes("worker running")) {
      w.readyAt = Date.now();
      workerEvents.bootMs.push(w.readyAt - w.spawnedAt);
    }
  });
  child.on("error", (err) => log.write(`spawn error: ${err.message}\n`));
  log.on("error", () => undefined);
  // 'close' comes after the last output: only then is the log complete.
  child.on("close", (code, signal) => log.end(`\n[exit code=${code} signal=${signal}]\n`));
  child.on("exit", (code, signal) => {
    if (w.expected || state.stopping) return;
    workerEvents.unexpectedExits.push({
      slot,
      pid: w.pid,
      code,
      signal,
      afterMs: Date.now() - w.spawnedAt,
      booted: w.readyAt !== null,
    });
    say(
      `worker ${w.pid} (slot ${slot}) exited by itself (code ${code}, signal ${signal}, ${w.readyAt ? "after boot" : "before boot"}): replacing it`,
    );
    setTimeout(() => replaceSlot(slot, ctx), 1_000);
  });
  state.workers.push(w);
  return w;
}

/**
 * DEL-16 fault, one run: arms the stall trigger, waits (bounded) for the stalled slot's
 * claim to be held inside the database, stops that worker (SIGSTOP), reads which rows the
 * claim took once it committed, and resumes the worker `ms` after the stop (longer than
 * the lease). Resolves with what happened; `note` says why it did not, if it did not.
 */
async function stallMidClaim(url, slot, ms, tStart) {
  const startedMs = Date.now() - tStart;
  const none = (note) => {
    say(`stall: did not happen (${note})`);
    return { slot, pid: null, atMs: startedMs, ms, rows: null, note };
  };
  await withClient(url, (c) => c.query("update chaos_stall set armed = true"));
  /** @type {{ pid: number; xact_start: string } | undefined} */
  let held;
  for (let i = 0; i < 150 && !held; i++) {
    const { rows } = await withClient(url, (c) =>
      c.query(
        `select pid, xact_start::text from pg_stat_activity
          where application_name = $1 and wait_event = 'PgSleep'`,
        [STALLED_APP],
      ),
    );
    held = rows[0];
    if (!held) await sleep(100);
  }
  const target = current(slot);
  if (!held) {
    await withClient(url, (c) => c.query("update chaos_stall set armed = false"));
    return none("the stalled slot made no claim within 15 s");
  }
  if (!target || !alive(target.child)) return none("the stalled slot's worker was gone");
  target.paused = true;
  process.kill(target.pid, "SIGSTOP");
  const stoppedAt = Date.now();
  say(`stall: worker ${target.pid} (slot ${slot}) stopped with its claim in flight, for ${ms} ms`);
  // The claim commits while the worker is stopped; then its rows are visible.
  for (let i = 0; i < 100; i++) {
    const { rows } = await withClient(url, (c) =>
      c.query("select 1 from pg_stat_activity where pid = $1 and state = 'active'", [held.pid]),
    );
    if (rows.length === 0) break;
    await sleep(50);
  }
  const { rows: claimed } = await withClient(url, (c) =>
    c.query(
      `select delivery_key, attempt from punctual_deliveries
        where claimed_at = $1::timestamptz and lease_owner like '%#' || $2 || '#%'`,
      [held.xact_start, String(target.pid)],
    ),
  );
  await sleep(ms - (Date.now() - stoppedAt));
  if (alive(target.child)) process.kill(target.pid, "SIGCONT");
  target.paused = false;
  say(`stall: worker ${target.pid} resumed; its held claim had taken ${claimed.length} rows`);
  return { slot, pid: target.pid, atMs: startedMs, ms, rows: claimed };
}

function current(slot) {
  for (let i = state.workers.length - 1; i >= 0; i--) {
    const w = state.workers[i];
    if (w.slot === slot) return w;
  }
  return null;
}

function replaceSlot(slot, ctx) {
  const w = current(slot);
  if (w && alive(w.child)) return;
  spawnWorker(slot, ctx);
}

// ---------------------------------------------------------------------------------------
// The database, read directly (never through the proxy)

async function withClient(url, fn) {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  client.on("error", () => undefined);
  try {
    await client.connect();
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function stateCounts(url, source) {
  try {
    return await withClient(url, async (c) => {
      const { rows } = await c.query(
        `select d.state, count(*)::int as n
           from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
          where s.source = $1 group by d.state`,
        [source],
      );
      return Object.fromEntries(rows.map((r) => [r.state, r.n]));
    });
  } catch {
    return null;
  }
}

const finalCount = (counts) => FINAL_STATES.reduce((sum, s) => sum + (counts?.[s] ?? 0), 0);

// ---------------------------------------------------------------------------------------
// The run

async function run(opts) {
  const dist = join(root, "dist", "index.js");
  if (!existsSync(dist) || !existsSync(join(root, "dist", "cli", "main.js"))) {
    throw new SetupError(
      "dist/ is missing: run `npm run build` (or use `npm run chaos`, which builds)",
    );
  }
  const pgBin = findPgBin();
  if (!pgBin) {
    throw new SetupError(
      "no PostgreSQL server binaries (initdb, pg_ctl): install postgresql-15 (apt-get install postgresql-15)",
    );
  }
  const faketime = opts.skewS > 0 ? findFaketime() : null;
  if (opts.skewS > 0 && !faketime) {
    throw new SetupError(
      "libfaketime not found: install Debian's `faketime` (apt-get install faketime), or pass --skew-s 0",
    );
  }

  state.runDir = mkdtempSync(join(tmpdir(), "punctual-chaos-"));
  state.keep = opts.keep;
  const runId = randomBytes(4).toString("hex");
  const source = `chaos-${runId}`;
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  say(
    `run ${runId}: ${opts.reminders} reminders over ${opts.durationS} s, ${opts.workers} workers, lease ${opts.leaseMs} ms; logs in ${state.runDir}`,
  );

  // 1. PostgreSQL, proxy, receiver.
  const cluster = await startCluster({ bin: pgBin });
  state.cluster = cluster;
  // The throwaway cluster acknowledges commits before writing their WAL
  // (synchronous_commit=off), so an immediate restart would forget acknowledged claims
  // and outcomes: duplicates and losses of the harness, not of punctual. Every session
  // of the run commits durably (a role setting wins over the server's command line;
  // fsync=off stays harmless, the machine itself does not crash).
  await withClient(cluster.url, async (c) => {
    await c.query("alter role postgres set synchronous_commit = on");
  });
  const commitMode = await withClient(cluster.url, async (c) => {
    const { rows } = await c.query("show synchronous_commit");
    return rows[0]?.synchronous_commit;
  });
  if (commitMode !== "on") {
    throw new SetupError(`synchronous_commit is ${commitMode} after alter role; expected on`);
  }
  say(`PostgreSQL on 127.0.0.1:${cluster.port} (${cluster.bin}), synchronous_commit on`);
  const proxy = await forkHelper("chaos-proxy.mjs", ["--target", String(cluster.port)], "proxy");
  state.proxy = proxy.child;
  const receiverLog = join(state.runDir, "receiver.jsonl");
  const receiver = await forkHelper(
    "chaos-receiver.mjs",
    ["--secret", secret, "--log", receiverLog],
    "receiver",
  );
  state.receiver = receiver.child;
  const proxyUrl = `postgres://postgres@127.0.0.1:${proxy.port}/postgres`;
  const receiverUrl = `http://127.0.0.1:${receiver.port}/hook`;
  say(`proxy on 127.0.0.1:${proxy.port}, receiver on ${receiverUrl}`);

  // 2. Schema, and the facade that creates the reminders (direct connection).
  const { createPunctual } = await import(pathToFileURL(dist).href);
  const facade = await createPunctual({
    databaseUrl: cluster.url,
    migrate: true,
    allowPrivateTargets: true,
    webhookSecret: secret,
    logLevel: "error",
    role: "chaos",
  });

  if (stalledSlot(opts) !== null) await installStallTrigger(cluster.url, 1);

  // 3. Workers.
  const ctx = { opts, proxyUrl, secret, faketime };
  for (let slot = 0; slot < opts.workers; slot++) spawnWorker(slot, ctx);
  const bootDeadline = Date.now() + 60_000;
  while (
    Date.now() < bootDeadline &&
    state.workers.some((w) => alive(w.child) && w.readyAt === null)
  ) {
    await sleep(100);
  }
  const booted = state.workers.filter((w) => w.readyAt !== null).length;
  if (booted === 0) throw new SetupError(`no worker started within 60 s (see ${state.runDir})`);
  say(
    `${booted}/${opts.workers} workers running${faketime ? `, slot 0 ${opts.skewS} s ahead (libfaketime)` : ""}`,
  );

  // 4. Reminders, due in ascending order over [tStart, tStart + duration), created in
  //    batches while the chaos runs (each batch covers a later stretch of due times, so
  //    creation stays ahead of them unless the machine is slower than one batch per
  //    stretch; a reminder created after its due time is only late, never wrong).
  const leadMs = 5_000;
  const tStart = Date.now() + leadMs;
  const spanMs = opts.durationS * 1_000;
  const dueAt = new Float64Array(opts.reminders);
  for (let n = 0; n < opts.reminders; n++) {
    dueAt[n] = tStart + Math.floor((n * spanMs) / opts.reminders);
  }
  const idByN = new Map();
  const creation = { done: false, ms: 0, createdAfterDue: 0, error: null };
  // A PostgreSQL restart holds the creation between two batches (the facade talks to the
  // server directly): `hold` is set while a restart runs, `batchDone` settles when the
  // batch in flight is stored.
  const gate = { hold: null, batchDone: Promise.resolve() };
  /** Stores one batch; after an error, keeps what was committed and retries the rest. */
  const storeBatch = async (values) => {
    for (let attempt = 1; values.length > 0; attempt++) {
      try {
        const ids = await facade.createSchedulesBulk(values);
        for (const [externalId, id] of ids) idByN.set(Number(externalId.slice(1)), id);
        return;
      } catch (err) {
        if (attempt >= 5) throw err;
        say(`creation: batch failed (${err.message}); retrying what was not stored`);
        await sleep(1_000 * attempt);
        // The commit may have happened with its reply lost.
        const stored = await withClient(cluster.url, async (c) => {
          const { rows } = await c.query(
            "select id, external_id from punctual_schedules where source = $1 and external_id = any($2)",
            [source, values.map((v) => v.externalId)],
          );
          return rows;
        }).catch(() => []);
        for (const r of stored) idByN.set(Number(r.external_id.slice(1)), r.id);
        const have = new Set(stored.map((r) => r.external_id));
        values = values.filter((v) => !have.has(v.externalId));
      }
    }
  };
  const createAll = async () => {
    const began = Date.now();
    const BATCH = 1_000;
    for (let first = 0; first < opts.reminders; first += BATCH) {
      for (let guard = 0; gate.hold && guard < 1_000; guard++) await gate.hold;
      const values = [];
      const last = Math.min(opts.reminders, first + BATCH);
      for (let n = first; n < last; n++) {
        const { value } = facade.validateSchedule({
          dtstart: new Date(dueAt[n]).toISOString(),
          tzid: "UTC",
          payload: { run: runId, n },
          source,
          externalId: `n${n}`,
          reminders: [
            {
              key: "chaos",
              offset: "PT0S",
              channel: "webhook",
              target: { url: receiverUrl, secret },
            },
          ],
        });
        values.push(value);
      }
      const storing = storeBatch(values);
      gate.batchDone = storing.catch(() => undefined);
      await storing;
      const doneAt = Date.now();
      for (let n = first; n < last; n++) if (dueAt[n] < doneAt) creation.createdAfterDue += 1;
      // Let the chaos loop run between batches.
      await sleep(0);
    }
    await facade.close();
    creation.ms = Date.now() - began;
    say(
      `created ${idByN.size} reminders in ${(creation.ms / 1000).toFixed(1)} s` +
        (creation.createdAfterDue > 0
          ? ` (${creation.createdAfterDue} after their due time: those are late, not lost)`
          : ""),
    );
  };
  const creating = createAll().then(
    () => (creation.done = true),
    (err) => {
      creation.done = true;
      creation.error = err;
    },
  );

  // 5. Chaos while they fall due.
  const chaos = {
    kills: [],
    killsSkipped: 0,
    pgRestarts: [],
    proxyResets: [],
    pause: null,
    stall: null,
    skew: faketime ? { seconds: opts.skewS, slot: 0 } : null,
  };
  const tEnd = tStart + spanMs;
  const events = [];
  for (let k = 0; k < opts.proxyResets; k++) {
    events.push({
      at: tStart + Math.floor(((k + 0.5) / opts.proxyResets) * spanMs),
      kind: "proxy-reset",
    });
  }
  for (let k = 0; k < opts.pgRestarts; k++) {
    events.push({
      at: tStart + Math.floor(((k + 1) / (opts.pgRestarts + 1)) * spanMs),
      kind: "pg-restart",
      mode: k % 2 === 0 ? "fast" : "immediate",
    });
  }
  const pauseMs = opts.leaseMs + 3_000;
  if (opts.pause && spanMs > pauseMs + 2_000) {
    events.push({ at: tStart + Math.floor(0.4 * spanMs), kind: "pause" });
  }
  // The stall: armed late in the run (after the pause has ended), held past the lease.
  if (stalledSlot(opts) !== null && spanMs > pauseMs + 2_000) {
    events.push({ at: tStart + Math.floor(0.7 * spanMs), kind: "stall" });
  }
  events.sort((a, b) => a.at - b.at);
  const jitter = () => opts.killEveryMs * (0.75 + Math.random() * 0.5);
  let nextKill = opts.killEveryMs > 0 ? tStart + jitter() : Infinity;
  let nextProgress = tStart;
  let pausedWorker = null;
  const pendingActions = [];
  const restartFailures = [];
  let restarting = false;
  /** Two restarts stay 5 s apart, also when the first one was postponed. */
  let restartAgainAt = 0;

  if (Date.now() < tStart) {
    say(`first reminder due in ${((tStart - Date.now()) / 1000).toFixed(1)} s`);
    await sleep(tStart - Date.now());
  }
  say("chaos starts");
  for (let guard = 0; guard < 1_000_000; guard++) {
    const now = Date.now();
    if (now >= tEnd) break;
    if (now >= nextProgress) {
      nextProgress = now + 5_000;
      const stats = await ask(receiver.child, { type: "stats" }, 1_000);
      const db = await ask(proxy.child, { type: "stats" }, 1_000);
      const up = state.workers.filter((w) => alive(w.child));
      const ready = up.filter((w) => w.readyAt !== null && !w.paused).length;
      say(
        `t+${((now - tStart) / 1000).toFixed(0)} s: ${stats?.requests ?? "?"} webhooks received; ` +
          `workers ${ready} running, ${up.length - ready} booting or paused; ` +
          `${db?.open ?? "?"} database connections; ${chaos.kills.length} killed`,
      );
    }
    if (now >= nextKill) {
      nextKill = now + jitter();
      const candidates = [];
      for (let slot = 0; slot < opts.workers; slot++) {
        const w = current(slot);
        if (w && alive(w.child) && !w.paused && w.readyAt !== null) candidates.push(w);
      }
      // Never the last running worker (unless there is only one): at least one keeps
      // sending while the others boot (on a loaded machine a boot can take longer than
      // the kill interval).
      const victim =
        candidates.length >= Math.min(2, opts.workers)
          ? candidates[Math.floor(Math.random() * candidates.length)]
          : undefined;
      if (!victim) chaos.killsSkipped += 1;
      if (victim) {
        victim.expected = true;
        victim.child.kill("SIGKILL");
        workerEvents.killed += 1;
        chaos.kills.push({ atMs: now - tStart, pid: victim.pid, slot: victim.slot });
        spawnWorker(victim.slot, ctx);
      }
    }
    // A restart waits for the previous one, and holds the creation meanwhile.
    const ready = events.findIndex(
      (e) => now >= e.at && (e.kind !== "pg-restart" || (!restarting && now >= restartAgainAt)),
    );
    const event = ready >= 0 ? events.splice(ready, 1)[0] : undefined;
    if (event) {
      if (event.kind === "proxy-reset") {
        const reply = await ask(proxy.child, { type: "reset" });
        chaos.proxyResets.push({ atMs: now - tStart, dropped: reply?.dropped ?? null });
        say(`proxy: reset ${reply?.dropped ?? "?"} connections`);
      } else if (event.kind === "pg-restart") {
        say(`PostgreSQL: restart (${event.mode})`);
        restarting = true;
        let began = Date.now();
        const data = join(cluster.dir, "data");
        const log = join(cluster.dir, "postgres.log");
        // Run in the background: kills go on while the server is away.
        let release = () => undefined;
        if (!creation.done) gate.hold = new Promise((resolve) => (release = resolve));
        pendingActions.push(
          gate.batchDone
            .then(() => {
              began = Date.now();
              return runPgTool(cluster.bin, "pg_ctl", [
                "restart",
                "-D",
                data,
                "-m",
                event.mode,
                "-l",
                log,
                "-w",
                "-t",
                "60",
              ]);
            })
            .then(({ code, output }) => {
              gate.hold = null;
              release();
              restarting = false;
              restartAgainAt = Date.now() + 5_000;
              const ms = Date.now() - began;
              chaos.pgRestarts.push({ atMs: began - tStart, mode: event.mode, ms, ok: code === 0 });
              say(
                `PostgreSQL: ${code === 0 ? "back" : `restart FAILED (${output})`} after ${ms} ms`,
              );
              if (code !== 0) restartFailures.push(output);
            }),
        );
      } else if (event.kind === "stall") {
        pendingActions.push(
          stallMidClaim(cluster.url, stalledSlot(opts), pauseMs, tStart)
            .catch((err) => {
              say(`stall: did not happen (${err.message})`);
              return { slot: stalledSlot(opts), pid: null, rows: null, note: err.message };
            })
            .then((stall) => {
              chaos.stall = stall;
            }),
        );
      } else if (event.kind === "pause") {
        const target = current(opts.workers > 1 ? 1 : 0);
        if (target && alive(target.child)) {
          target.paused = true;
          pausedWorker = target;
          process.kill(target.pid, "SIGSTOP");
          chaos.pause = { pid: target.pid, slot: target.slot, atMs: now - tStart, ms: pauseMs };
          say(
            `worker ${target.pid} (slot ${target.slot}) stopped for ${pauseMs} ms (lease ${opts.leaseMs} ms)`,
          );
          pendingActions.push(
            sleep(pauseMs).then(() => {
              if (alive(target.child)) process.kill(target.pid, "SIGCONT");
              target.paused = false;
              pausedWorker = null;
              say(`worker ${target.pid} resumed`);
            }),
          );
        }
      }
    }
    const nextAt = Math.min(tEnd, nextKill, nextProgress, events[0]?.at ?? Infinity);
    await sleep(Math.max(20, Math.min(250, nextAt - Date.now())));
  }
  for (const e of events) {
    say(`${e.kind} did not happen: no time left`);
  }
  chaos.skipped = events.map((e) => e.kind);
  await creating;
  if (creation.error) throw creation.error;
  if (idByN.size !== opts.reminders) {
    throw new SetupError(`created ${idByN.size} of ${opts.reminders} reminders`);
  }
  await Promise.all(pendingActions);
  if (restartFailures.length > 0) {
    throw new SetupError(`pg_ctl restart failed: ${restartFailures.join("\n")}`);
  }
  if (pausedWorker && alive(pausedWorker.child)) process.kill(pausedWorker.pid, "SIGCONT");
  say(
    `chaos over: ${chaos.kills.length} kills, ${chaos.pgRestarts.length} PostgreSQL restarts, ${chaos.proxyResets.length} proxy resets`,
  );

  // 6. Settle: every delivery final and the receiver quiet, or no progress for a while.
  const settleStarted = Date.now();
  const settleDeadline = settleStarted + opts.settleS * 1_000;
  const stallMs = Math.max(30_000, 6 * opts.leaseMs);
  let lastProgressAt = Date.now();
  let lastSeen = "";
  let counts = null;
  let settled = false;
  while (Date.now() < settleDeadline) {
    counts = await stateCounts(cluster.url, source);
    const stats = await ask(receiver.child, { type: "stats" }, 1_000);
    const seen = `${finalCount(counts)}/${stats?.requests}`;
    if (seen !== lastSeen) {
      lastSeen = seen;
      lastProgressAt = Date.now();
    }
    const quietFor = stats ? Date.now() - stats.lastAt : 0;
    if (counts && finalCount(counts) >= opts.reminders && quietFor >= 2_000) {
      settled = true;
      break;
    }
    if (Date.now() - lastProgressAt > stallMs) break;
    await sleep(1_000);
  }
  const settleMs = Date.now() - settleStarted;
  say(
    settled
      ? `settled in ${(settleMs / 1000).toFixed(1)} s`
      : `NOT settled after ${(settleMs / 1000).toFixed(1)} s: ${JSON.stringify(counts)}`,
  );

  // 7. Stop workers (SIGTERM, then SIGKILL), the receiver (flushes its log) and the proxy.
  state.stopping = true;
  const running = state.workers.filter((w) => alive(w.child));
  for (const w of running) {
    w.expected = true;
    w.child.kill("SIGTERM");
  }
  await Promise.all(
    running.map(async (w) => {
      if (!(await waitExit(w.child, 15_000))) w.child.kill("SIGKILL");
    }),
  );
  receiver.child.send({ type: "stop" });
  if (!(await waitExit(receiver.child, 10_000))) receiver.child.kill("SIGKILL");
  proxy.child.send({ type: "stop" });
  if (!(await waitExit(proxy.child, 5_000))) proxy.child.kill("SIGKILL");

  // 8. Read the database and the receiver's log.
  const rows = await withClient(cluster.url, async (c) => {
    const { rows: r } = await c.query(
      `select d.delivery_key, d.schedule_id, d.reminder_key, d.state, d.attempt, d.reason,
              s.external_id
         from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
        where s.source = $1`,
      [source],
    );
    return r;
  });
  // What the stopped worker's attempts became (the attempt log, DEL-14): `settled: false`
  // is a send whose outcome was fenced out because its lease had ended meanwhile.
  let pausedAttempts = null;
  if (chaos.pause) {
    pausedAttempts = await withClient(cluster.url, async (c) => {
      const { rows: r } = await c.query(
        `select a.outcome, a.settled, count(*)::int as n
           from punctual_delivery_attempts a
           join punctual_deliveries d on d.id = a.delivery_id
           join punctual_schedules s on s.id = d.schedule_id
          where s.source = $1 and a.worker like '%#' || $2 || '#%'
          group by 1, 2 order by 1, 2`,
        [source, String(chaos.pause.pid)],
      );
      return r;
    }).catch(() => null);
  }
  const received = readFileSync(receiverLog, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
  // Which of the stopped worker's fenced attempts reached the receiver, and whether the
  // request arrived after it was resumed (a send started by a worker whose lease had ended).
  let pausedSends = null;
  if (chaos.pause) {
    const fenced = await withClient(cluster.url, async (c) => {
      const { rows: r } = await c.query(
        `select d.delivery_key, a.attempt
           from punctual_delivery_attempts a
           join punctual_deliveries d on d.id = a.delivery_id
           join punctual_schedules s on s.id = d.schedule_id
          where s.source = $1 and a.worker like '%#' || $2 || '#%' and not a.settled`,
        [source, String(chaos.pause.pid)],
      );
      return r;
    }).catch(() => null);
    if (fenced) {
      const wanted = new Set(fenced.map((f) => `${f.delivery_key}#${f.attempt}`));
      const resumedAt = tStart + chaos.pause.atMs + chaos.pause.ms;
      pausedSends = { fenced: fenced.length, received: 0, receivedAfterResume: 0 };
      for (const a of received) {
        if (!a.ok || !wanted.has(`${a.id}#${a.attempt}`)) continue;
        pausedSends.received += 1;
        if (a.recvMs >= resumedAt) pausedSends.receivedAfterResume += 1;
      }
    }
  }

  return buildReport({
    opts,
    runId,
    dueAt,
    idByN,
    rows,
    received,
    chaos,
    pausedAttempts,
    pausedSends,
    creation,
    timing: {
      createMs: creation.ms,
      chaosMs: tEnd - tStart,
      settleMs,
      settled,
      totalMs: Date.now() - startedAt,
    },
  });
}

// ---------------------------------------------------------------------------------------
// The report: the verdict (scripts/chaos-report.mjs) plus what the run did

function buildReport({
  opts,
  runId,
  dueAt,
  idByN,
  rows,
  received,
  chaos,
  pausedAttempts,
  pausedSends,
  creation,
  timing,
}) {
  const reminders = [...idByN].map(([n, scheduleId]) => ({ n, scheduleId, dueAtMs: dueAt[n] }));
  const findings = analyse({
    reminders,
    rows,
    arrivals: received,
    earlyToleranceMs: opts.earlyMs,
    stalledClaim: chaos.stall?.rows ?? null,
  });
  const boot = [...workerEvents.bootMs].sort((a, b) => a - b);
  return {
    ...findings,
    run: runId,
    createdAfterDue: creation.createdAfterDue,
    config: {
      reminders: opts.reminders,
      durationS: opts.durationS,
      workers: opts.workers,
      leaseMs: opts.leaseMs,
      sendTimeoutMs: opts.sendTimeoutMs,
      killEveryMs: opts.killEveryMs,
      earlyToleranceMs: opts.earlyMs,
      env: Object.fromEntries(
        Object.entries(process.env).filter(([k]) => k.startsWith("PUNCTUAL_")),
      ),
    },
    chaos: {
      kills: chaos.kills.length,
      pgRestarts: chaos.pgRestarts,
      proxyResets: chaos.proxyResets,
      killsSkipped: chaos.killsSkipped,
      pause: chaos.pause ? { ...chaos.pause, attempts: pausedAttempts, sends: pausedSends } : null,
      stall: chaos.stall
        ? {
            slot: chaos.stall.slot,
            pid: chaos.stall.pid,
            atMs: chaos.stall.atMs,
            ms: chaos.stall.ms,
            claimed: chaos.stall.rows?.length ?? null,
            note: chaos.stall.note ?? null,
          }
        : null,
      skew: chaos.skew,
      skipped: chaos.skipped,
    },
    workers: {
      spawned: spawnCount,
      bootMsP50: boot.length > 0 ? boot[Math.floor(boot.length / 2)] : null,
      unexpectedExits: workerEvents.unexpectedExits,
    },
    timing: {
      createS: +(timing.createMs / 1000).toFixed(1),
      chaosS: +(timing.chaosMs / 1000).toFixed(1),
      settleS: +(timing.settleMs / 1000).toFixed(1),
      settled: timing.settled,
      totalS: +(timing.totalMs / 1000).toFixed(1),
    },
  };
}

// ---------------------------------------------------------------------------------------

async function main() {
  let opts;
  try {
    opts = readOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`chaos: ${err.message}\n${USAGE}\n`);
    return 2;
  }
  if (opts.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let report;
  try {
    report = await run(opts);
  } catch (err) {
    process.stderr.write(
      `chaos: the run could not be carried out: ${err instanceof Error ? err.stack : err}\n`,
    );
    if (state.runDir) process.stderr.write(`chaos: logs kept in ${state.runDir}\n`);
    cleanupNow();
    return 2;
  }
  cleanupNow();
  if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else process.stdout.write(formatReport(report));
  if (report.ok && !opts.keep) rmSync(state.runDir, { recursive: true, force: true });
  else say(`logs kept in ${state.runDir}`);
  return report.ok ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`chaos: ${err?.stack ?? err}\n`);
    cleanupNow();
    process.exitCode = 2;
  },
);
