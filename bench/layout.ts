/**
 * Layouts of the delivery hot path, measured statement by statement on PostgreSQL: what one
 * delivery costs the database (backend CPU, WAL bytes, heap updates that were HOT) from its
 * planned insert through its claim, one lease renewal and its settle, for the shipped layout
 * and for narrow queue tables beside the ledger (docs/benchmarks.md, "Layouts of the hot
 * path"). One connection, no worker: the statements alone, so the figures do not depend on
 * the worker's CPU or on how many workers share the machine.
 *
 *   node --import tsx bench/layout.ts       a throwaway cluster (or DATABASE_URL=…)
 *   BENCH_DUE=20000 BENCH_BATCH=100 BENCH_ROUNDS=3 (defaults; --quick: 2,000 and 1 round)
 *   BENCH_LAYOUTS=wide,queue-hot (default: every layout below)
 *
 * Layouts (each in a fresh database, migrated to the current schema):
 * - `wide`: the shipped statements (CLAIM_SQL, RENEW_SQL, SETTLE_SQL): the claim and the
 *   settle each update the wide ledger row (non-HOT: its state is indexed);
 * - `wide-less-state-id`: `wide` without the full `(state, id)` index (migration 0025), to
 *   price one full index on the hot path;
 * - `queue-partial`: a narrow queue table (due/claimed rows: id, run_at, attempt, lease,
 *   channel, limiter, expiry, stale limit; fillfactor 70) with a partial claim index
 *   (`lease_owner is null`) and a partial lease index; the claim updates the queue row only
 *   (non-HOT: it leaves the claim index), the settle deletes it and updates the ledger once;
 * - `queue-hot`: the same table with one full `(run_at, id)` index and no lease index: the
 *   claim and the renewal change no indexed column, so both are HOT; the claim skips leased
 *   rows it meets in the index (the in-flight rows), recovery walks the same index.
 * - `queue-hot-ff50`: `queue-hot` with fillfactor 50 (room for a claim and a renewal per row);
 * - `queue-append`: `queue-hot-ff50`, and the settle inserts a narrow outcome row instead of
 *   updating the ledger row (the ceiling of "the ledger is written once");
 * - `queue-lean-ledger`: `queue-hot-ff50` with a ledger whose indexes name no column the hot
 *   path changes (fillfactor 70): the settle's update of the ledger row is HOT.
 * In the queue layouts the ledger row is written twice in its life (planned insert, settle)
 * and the sending attempt is kept on it by the settle, as today.
 */
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { openPostgres } from "../src/store/postgres.js";
import { migrate } from "../src/store/migrator.js";
import {
  CLAIM_SQL,
  INSERT_DELIVERIES_SQL,
  RENEW_SQL,
  SETTLE_SQL,
} from "../src/store/deliveries/index.js";
// @ts-expect-error -- a plain .mjs helper without types
import { findPgBin, startCluster } from "../scripts/pg-cluster.mjs";
import { plannedDeliveries } from "./lib/harness.js";

const QUICK = process.argv.includes("--quick");
const DUE = Number(process.env.BENCH_DUE ?? (QUICK ? 2_000 : 20_000));
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
/** Rows leased by other workers ahead of the due rows in the `cycle` phase. */
const INFLIGHT = Number(process.env.BENCH_INFLIGHT ?? (QUICK ? 400 : 2_000));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (QUICK ? 1 : 3));
const OWNER = "bench#1#layout";
const TICK_US = 10_000; // /proc clock ticks are 1/100 s on Linux (USER_HZ)

type Layout =
  | "wide"
  | "wide-less-state-id"
  | "queue-partial"
  | "queue-hot"
  | "queue-hot-ff50"
  | "queue-append"
  | "queue-lean-ledger";

/** The queue table of a queue layout, created beside the shipped schema. */
function queueDdl(layout: Layout): string {
  const indexes =
    layout === "queue-partial"
      ? `create index bench_queue_claimable on bench_queue (run_at, id) where lease_owner is null;
         create index bench_queue_leased on bench_queue (lease_owner) where lease_owner is not null;`
      : `create index bench_queue_run_at on bench_queue (run_at, id);`;
  const fillfactor = layout === "queue-hot" || layout === "queue-partial" ? 70 : 50;
  const outcomes =
    layout === "queue-append"
      ? `create table bench_outcomes (
           id bigint primary key, state text not null, attempt integer not null,
           sent_at timestamptz not null, sent_by text not null, send_started_at timestamptz not null);`
      : "";
  return `${outcomes}
create table bench_queue (
  id bigint primary key,
  run_at timestamptz not null,
  attempt integer not null default 0,
  lease_owner text,
  lease_expires_at timestamptz,
  channel text not null,
  limiter text,
  expires_at timestamptz,
  stale_at timestamptz
) with (fillfactor = ${fillfactor});
${indexes}`;
}

/** The append settle: the fenced delete and one narrow outcome row; the wide row is not updated. */
const APPEND_SETTLE_SQL = `
with input as (
  select * from unnest($2::bigint[], $3::int[], $4::timestamptz[]) as u(id, attempt, started_at)
),
gone as (
  delete from bench_queue q using input u
  where q.id = any($2::bigint[]) and q.id = u.id and q.attempt = u.attempt
    and q.lease_owner is not null and q.lease_owner = $1
  returning q.id, q.attempt, u.started_at
)
insert into bench_outcomes (id, state, attempt, sent_at, sent_by, send_started_at)
select g.id, 'sent', g.attempt, now(), $1, g.started_at from gone g
returning id`;

/**
 * The ledger of `queue-lean-ledger`: no index names a column the hot path changes (state,
 * run_at, lease, updated_at), and pages keep room, so the settle's update is HOT. What the
 * dropped indexes serve (claim, lease, stale and expiry sweeps, open problems, retention,
 * paging by state) would have to move to the queue or to narrow tables of their own.
 */
const LEAN_LEDGER_DDL = `
drop index punctual_deliveries_schedule, punctual_deliveries_claimable, punctual_deliveries_lease,
  punctual_deliveries_stale, punctual_deliveries_expiry, punctual_deliveries_open_problems,
  punctual_deliveries_finished_at, punctual_deliveries_state_id;
create index punctual_deliveries_schedule_only on punctual_deliveries (schedule_id);
alter table punctual_deliveries set (fillfactor = 70);`;

/** Planned rows enter the queue with their ledger row (the planner's insert, then this). */
const QUEUE_INSERT_SQL = `
insert into bench_queue (id, run_at, channel, limiter, expires_at, stale_at)
select d.id, d.run_at, d.channel, d.limiter, d.expires_at, d.stale_at
from punctual_deliveries d
where d.id > $1`;

/** The queue claim: the queue row takes the lease; the ledger is read by primary key only. */
const QUEUE_CLAIM_SQL = `
with due as (
  select q.id from bench_queue q
  where q.lease_owner is null and q.run_at <= now()
    and coalesce(q.expires_at > now(), true) and coalesce(q.stale_at > now(), true)
    and coalesce(q.channel = any($3::text[]), false)
  order by q.run_at, q.id
  limit $2
  for update skip locked
),
claimed as (
  update bench_queue q
  set lease_owner = $1, lease_expires_at = now() + interval '600 seconds',
      attempt = q.attempt + 1
  where q.id = any(array(select id from due))
  returning q.id, q.attempt, q.run_at, q.lease_expires_at
)
select c.id, c.attempt, c.lease_expires_at, d.delivery_key, d.schedule_id, d.reminder_key,
       d.occurrence_at, d.due_at, d.failures, d.max_attempts, d.deferrals, d.channel,
       (select s.payload from punctual_schedules s where s.id = d.schedule_id) as payload,
       (select r.target from punctual_reminders r
         where r.schedule_id = d.schedule_id and r.key = d.reminder_key) as target
from claimed c
cross join lateral (select * from punctual_deliveries x where x.id = c.id) d
order by c.run_at, c.id`;

/** The queue renewal: the lease lives on the narrow row only. */
const QUEUE_RENEW_SQL = `
update bench_queue q set lease_expires_at = now() + interval '600 seconds'
from unnest($2::bigint[], $3::int[]) as u(id, attempt)
where q.id = u.id and q.attempt = u.attempt and q.lease_owner = $1
  and q.lease_expires_at > now()
returning q.id`;

/**
 * The queue settle of sent rows: the fenced delete (id, attempt, leased, owner) and the one
 * ledger update, with the sending attempt kept on the ledger row. The ledger rows are found
 * by primary key from an array of the deleted ids and joined to the input (the planner
 * guesses 100 rows for it): joined to the `gone` CTE instead, whose size the planner
 * guesses as one row, the plan probed an index once per row (20,100 buffers for a batch of
 * 100, or a walk of the `(state, id)` index per row once analyzed).
 */
const QUEUE_SETTLE_SQL = `
with input as (
  select * from unnest($2::bigint[], $3::int[], $4::timestamptz[]) as u(id, attempt, started_at)
),
gone as (
  delete from bench_queue q using input u
  where q.id = any($2::bigint[]) and q.id = u.id and q.attempt = u.attempt
    and q.lease_owner is not null and q.lease_owner = $1
  returning q.id, q.attempt, u.started_at
)
update punctual_deliveries d
set state = 'sent', attempt = u.attempt, sent_at = now(), first_attempt_at = u.started_at,
    sent_by = $1, send_started_at = u.started_at, updated_at = now()
from input u
where d.id = any(array(select id from gone)) and d.id = u.id
returning d.id`;

interface Costs {
  cpuUs: number;
  walBytes: number;
  wallUs: number;
  upd: number;
  hot: number;
}

async function backendTicks(c: pg.Client, pid: number): Promise<number> {
  void c;
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return Number(f[11]) + Number(f[12]); // utime, stime (fields 14, 15)
}

async function wal(c: pg.Client): Promise<bigint> {
  const { rows } = await c.query<{ lsn: string }>(
    "select (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::text as lsn",
  );
  return BigInt(rows[0]!.lsn.split(".")[0]!);
}

async function tableUpdates(c: pg.Client): Promise<{ upd: number; hot: number }> {
  await c.query("select pg_stat_force_next_flush()");
  await c.query("select 1");
  const { rows } = await c.query<{ upd: string; hot: string }>(
    `select coalesce(sum(n_tup_upd), 0) as upd, coalesce(sum(n_tup_hot_upd), 0) as hot
     from pg_stat_user_tables where relname in ('punctual_deliveries', 'bench_queue', 'bench_outcomes')`,
  );
  return { upd: Number(rows[0]!.upd), hot: Number(rows[0]!.hot) };
}

/** Runs `fn` and returns what it cost the backend of `c`. */
async function measure(c: pg.Client, pid: number, fn: () => Promise<void>): Promise<Costs> {
  const s0 = await tableUpdates(c);
  const t0 = await backendTicks(c, pid);
  const w0 = await wal(c);
  const start = performance.now();
  await fn();
  const wallUs = (performance.now() - start) * 1000;
  const w1 = await wal(c);
  const t1 = await backendTicks(c, pid);
  const s1 = await tableUpdates(c);
  return {
    cpuUs: (t1 - t0) * TICK_US,
    walBytes: Number(w1 - w0),
    wallUs,
    upd: s1.upd - s0.upd,
    hot: s1.hot - s0.hot,
  };
}

async function fresh(admin: pg.Client, base: string, name: string): Promise<string> {
  await admin.query(`drop database if exists ${name}`);
  await admin.query(`create database ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

/** One layout, one round: returns the costs of each phase per delivery. */
async function run(admin: pg.Client, base: string, layout: Layout): Promise<Record<string, Costs>> {
  const url = await fresh(admin, base, `bench_layout_${layout.replaceAll("-", "_")}`);
  const db = openPostgres({ url });
  await migrate(db);
  await db.close();
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query("set enable_seqscan = off; set enable_bitmapscan = off");
  const wide = layout === "wide" || layout === "wide-less-state-id";
  if (!wide) await c.query(queueDdl(layout));
  if (layout === "queue-lean-ledger") await c.query(LEAN_LEDGER_DDL);
  if (layout === "wide-less-state-id") await c.query("drop index punctual_deliveries_state_id");
  for (const t of ["punctual_deliveries", ...(wide ? [] : ["bench_queue"])])
    await c.query(`alter table ${t} set (autovacuum_enabled = false)`);
  const pid = (await c.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;
  const { rows: srows } = await c.query<{ id: string }>(
    `insert into punctual_schedules (dtstart, tzid, recurring, payload)
     values ('2027-01-04T09:00:00', 'UTC', false, '{"n":1}') returning id`,
  );
  const scheduleId = srows[0]!.id;
  await c.query(
    `insert into punctual_reminders (schedule_id, key, offset_duration, channel)
     values ($1, 'r', 'PT0S', 'log')`,
    [scheduleId],
  );
  type Held = Array<{ id: number; attempt: number }>;
  const plan = async (n0: number, dueAt: number) => {
    for (let i = 0; i < n0; i += BATCH) {
      const n = Math.min(BATCH, n0 - i);
      const at = Array.from({ length: n }, (_, j) => new Date(dueAt + i + j));
      await c.query("begin");
      const { rows: mark } = await c.query<{ id: string | null }>(
        "select max(id) as id from punctual_deliveries",
      );
      await c.query(INSERT_DELIVERIES_SQL, plannedDeliveries(scheduleId, at));
      if (!wide) await c.query(QUEUE_INSERT_SQL, [mark[0]!.id ?? 0]);
      await c.query("commit");
    }
  };
  const claim = async (limit: number): Promise<Held> => {
    const { rows } = wide
      ? await c.query<{ id: number; attempt: number }>(CLAIM_SQL, [
          null,
          OWNER,
          600_000,
          limit,
          ["log"],
          [],
        ])
      : await c.query<{ id: number; attempt: number }>(QUEUE_CLAIM_SQL, [OWNER, limit, ["log"]]);
    return rows.map((r) => ({ id: Number(r.id), attempt: r.attempt }));
  };
  const renew = async (b: Held) => {
    const ids = b.map((r) => r.id);
    const attempts = b.map((r) => r.attempt);
    if (wide) await c.query(RENEW_SQL, [null, OWNER, 600_000, ids, attempts]);
    else await c.query(QUEUE_RENEW_SQL, [OWNER, ids, attempts]);
  };
  const settle = async (b: Held) => {
    const ids = b.map((r) => r.id);
    const attempts = b.map((r) => r.attempt);
    const started = b.map(() => new Date());
    if (wide) {
      const sent = b.map(() => "sent");
      const none = b.map(() => null);
      const zero = b.map(() => 0);
      await c.query(SETTLE_SQL, [
        ...[null, OWNER, ids, attempts, sent, none, none, none, zero],
        ...[started, sent, none, none, zero],
      ]);
    } else if (layout === "queue-append") {
      await c.query(APPEND_SETTLE_SQL, [OWNER, ids, attempts, started]);
    } else {
      await c.query(QUEUE_SETTLE_SQL, [OWNER, ids, attempts, started]);
    }
  };
  const out: Record<string, Costs> = {};
  // Phases apart: plan everything, claim everything (each claim leaves its rows leased),
  // renew each batch once, settle each batch as sent.
  out.plan = await measure(c, pid, () => plan(DUE, Date.now() - 60_000));
  const held: Held[] = [];
  out.claim = await measure(c, pid, async () => {
    for (let b = await claim(BATCH); b.length > 0; b = await claim(BATCH)) held.push(b);
  });
  // Renewals run unpinned, as the worker runs them (renewLeases), over analyzed tables.
  await c.query("analyze; set enable_seqscan = on; set enable_bitmapscan = on");
  out.renew = await measure(c, pid, async () => {
    for (const b of held) await renew(b);
  });
  await c.query("set enable_seqscan = off; set enable_bitmapscan = off");
  out.settle = await measure(c, pid, async () => {
    for (const b of held) await settle(b);
  });
  const settled = held.reduce((n, b) => n + b.length, 0);
  if (settled !== DUE) throw new Error(`${layout}: claimed ${settled} of ${DUE}`);
  // A worker's cycle in a burst (claim a batch, settle it) with INFLIGHT rows of other
  // workers leased ahead of the due rows, as in a burst with several workers.
  await plan(DUE, Date.now() - 50_000);
  const ahead = await claim(INFLIGHT);
  out.cycle = await measure(c, pid, async () => {
    for (let b = await claim(BATCH); b.length > 0; b = await claim(BATCH)) await settle(b);
  });
  await settle(ahead);
  const { rows: sent } = await c.query<{ n: number }>(
    layout === "queue-append"
      ? "select count(*)::int as n from bench_outcomes where state = 'sent'"
      : "select count(*)::int as n from punctual_deliveries where state = 'sent'",
  );
  if (sent[0]!.n !== 2 * DUE) throw new Error(`${layout}: ${sent[0]!.n} of ${2 * DUE} sent`);
  await c.end();
  await admin.query(`drop database ${new URL(url).pathname.slice(1)}`);
  return out;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  if (!(INFLIGHT < DUE))
    throw new Error(`BENCH_INFLIGHT (${INFLIGHT}) must be below BENCH_DUE (${DUE})`);
  let base = process.env.DATABASE_URL;
  let cluster: { url: string; stop(): void } | null = null;
  if (!base) {
    if (!findPgBin()) {
      console.log("layout: no DATABASE_URL and no PostgreSQL binaries; skipped");
      return;
    }
    cluster = (await startCluster()) as { url: string; stop(): void };
    base = cluster.url;
  }
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  const layouts: Layout[] = (
    process.env.BENCH_LAYOUTS ??
    "wide,wide-less-state-id,queue-partial,queue-hot,queue-hot-ff50,queue-append,queue-lean-ledger"
  ).split(",") as Layout[];
  const all: Record<string, Record<string, Costs[]>> = {};
  for (let r = 0; r < ROUNDS; r++) {
    for (const layout of layouts) {
      const costs = await run(admin, base, layout);
      for (const [phase, c] of Object.entries(costs)) ((all[layout] ??= {})[phase] ??= []).push(c);
    }
  }
  console.log(
    `${DUE} due now, batches of ${BATCH}, one connection, medians of ${ROUNDS}; per delivery`,
  );
  console.log(
    "layout         phase    backend CPU µs   wall µs   WAL bytes   updates   HOT updates",
  );
  for (const layout of layouts) {
    for (const phase of ["plan", "claim", "renew", "settle", "cycle"]) {
      const cs = all[layout]![phase]!;
      const n = phase === "cycle" ? DUE - INFLIGHT : DUE;
      const per = (f: (c: Costs) => number) => median(cs.map(f)) / n;
      console.log(
        `${layout.padEnd(14)} ${phase.padEnd(8)} ${per((c) => c.cpuUs)
          .toFixed(0)
          .padStart(14)} ${per((c) => c.wallUs)
          .toFixed(0)
          .padStart(9)} ${per((c) => c.walBytes)
          .toFixed(0)
          .padStart(11)} ${per((c) => c.upd)
          .toFixed(2)
          .padStart(9)} ${per((c) => c.hot)
          .toFixed(2)
          .padStart(13)}`,
      );
    }
  }
  await admin.end();
  cluster?.stop();
}

await main();
