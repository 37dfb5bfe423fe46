/**
 * The claim and the sweeps against a table whose statistics are stale: rows inserted
 * faster than ANALYZE runs (PGlite has no autovacuum; on PostgreSQL autovacuum is turned
 * off for the run so "before ANALYZE" stays true). Each statement runs 7 times inside a
 * transaction that is rolled back, so every run sees the same rows; the median is printed.
 *
 *   node --import tsx bench/claim-plan.ts              PGlite, and PostgreSQL when available
 *   DATABASE_URL=… node --import tsx bench/claim-plan.ts
 *   BENCH_DUE=20000 BENCH_PAUSED=50000 BENCH_FINISHED=200000 (defaults)
 *
 * Cases: a claim of 8 and of 100 over BENCH_DUE due rows; the same with BENCH_PAUSED due
 * rows of one paused schedule beside them; the wake-up query; an idle pass (misfire,
 * wake-up, recover, claim) over BENCH_FINISHED finished rows, then over 10× as many.
 */
import { performance } from "node:perf_hooks";
import { randomUUID } from "node:crypto";
import type { Database, Queryable } from "../src/store/database.js";
import { openPglite } from "../src/store/pglite.js";
import { openPostgres } from "../src/store/postgres.js";
import { migrate } from "../src/store/migrator.js";
import {
  CLAIM_SQL,
  INSERT_DELIVERIES_SQL,
  NEXT_WAKE_SQL,
  RECOVER_SQL,
} from "../src/store/deliveries/index.js";
import { SELECT_STALE_SQL } from "../src/store/planning.js";
import { SET_SCHEDULE_STATE_SQL } from "../src/store/schedules.js";
// @ts-expect-error -- a plain .mjs helper without types
import { findPgBin, startCluster } from "../scripts/pg-cluster.mjs";
import { plannedDeliveries } from "./lib/harness.js";

const DUE = Number(process.env.BENCH_DUE ?? 20_000);
const PAUSED = Number(process.env.BENCH_PAUSED ?? 50_000);
const FINISHED = Number(process.env.BENCH_FINISHED ?? 200_000);
const RUNS = 7;

class Rollback extends Error {}

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  "Rows Removed by Filter"?: number;
  "Rows Removed by Index Recheck"?: number;
  Plans?: PlanNode[];
}

/**
 * Rows of punctual_deliveries the statement's scans produced or filtered out (EXPLAIN
 * ANALYZE, rolled back): the work it did, whatever the machine's load.
 */
async function rowsRead(db: Database, sql: string, params: unknown[]): Promise<number> {
  let total = 0;
  try {
    await db.transaction(async (tx) => {
      const { rows } = await tx.query<Record<string, unknown>>(
        `explain (analyze, format json) ${sql}`,
        params,
      );
      let value = Object.values(rows[0]!)[0];
      if (typeof value === "string") value = JSON.parse(value);
      const walk = (n: PlanNode): void => {
        if (n["Relation Name"] === "punctual_deliveries" && /Scan/.test(n["Node Type"])) {
          const loops = n["Actual Loops"] ?? 1;
          total +=
            ((n["Actual Rows"] ?? 0) +
              (n["Rows Removed by Filter"] ?? 0) +
              (n["Rows Removed by Index Recheck"] ?? 0)) *
            loops;
        }
        for (const c of n.Plans ?? []) walk(c);
      };
      walk((value as Array<{ Plan: PlanNode }>)[0]!.Plan);
      throw new Rollback();
    });
  } catch (err) {
    if (!(err instanceof Rollback)) throw err;
  }
  return total;
}

/** "12.34 ms, 20000 rows read" for `sql`. */
async function measure(db: Database, sql: string, params: unknown[]): Promise<string> {
  const ms = await median(db, sql, params);
  return `${ms.toFixed(2).padStart(8)} ms  ${String(await rowsRead(db, sql, params)).padStart(6)} rows read`;
}

/** Median time (ms) of `sql` with `params`, each run rolled back. */
async function median(db: Database, sql: string, params: unknown[]): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    try {
      await db.transaction(async (tx) => {
        const t = performance.now();
        await tx.query(sql, params);
        times.push(performance.now() - t);
        throw new Rollback();
      });
    } catch (err) {
      if (!(err instanceof Rollback)) throw err;
    }
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

async function schedule(db: Queryable, recurring = false): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `insert into punctual_schedules (dtstart, tzid, recurring, payload)
     values ('2027-01-04T09:00:00', 'UTC', $1, '{}') returning id`,
    [recurring],
  );
  const id = rows[0]!.id;
  await db.query(
    `insert into punctual_reminders (schedule_id, key, offset_duration, channel)
     values ($1, 'r', 'PT0S', 'log')`,
    [id],
  );
  return id;
}

/** `n` one-off deliveries of `scheduleId`, due at `dueAt` + i ms, planned like the planner does. */
async function deliveries(db: Queryable, scheduleId: string, n: number, dueAt: number) {
  for (let i = 0; i < n; i += 5_000) {
    const size = Math.min(5_000, n - i);
    const at = Array.from({ length: size }, (_, j) => new Date(dueAt + i + j));
    await db.query(INSERT_DELIVERIES_SQL, plannedDeliveries(scheduleId, at));
  }
}

/** `n` finished (sent) rows: what a year of deliveries leaves behind. */
async function finished(db: Queryable, scheduleId: string, n: number) {
  await db.query(
    `insert into punctual_deliveries
       (delivery_key, schedule_id, reminder_key, occurrence_at, due_at, run_at, state, attempt,
        channel, on_lost_lease, sent_at)
     select 'dk_f_' || g || '_' || $3, $1, 'r', t, t, t, 'sent', 1, 'log', 'retry', t
     from generate_series(1, $2::int) g,
          lateral (select now() - interval '30 days' + g * interval '1 second' as t) x`,
    [scheduleId, n, randomUUID()],
  );
}

const claim = (limit: number) => [null, "bench#1#x", 60_000, limit, ["log"], []];

async function report(label: string, db: Database): Promise<void> {
  await migrate(db);
  if (db.engine === "postgres") {
    for (const t of ["punctual_deliveries", "punctual_schedules", "punctual_reminders"])
      await db.query(`alter table ${t} set (autovacuum_enabled = false)`);
  }
  const out: string[] = [];
  const line = (name: string, cell: string) => out.push(`  ${name.padEnd(58)} ${cell}`);
  const now = Date.now();
  const schedules = await Promise.all(Array.from({ length: 4 }, () => schedule(db)));
  for (const s of schedules) await deliveries(db, s, DUE / 4, now - 600_000);
  for (const phase of ["before ANALYZE", "after ANALYZE"]) {
    if (phase === "after ANALYZE") await db.query("analyze");
    line(`claim 8 over ${DUE} due, ${phase}`, await measure(db, CLAIM_SQL, claim(8)));
    line(`claim 100 over ${DUE} due, ${phase}`, await measure(db, CLAIM_SQL, claim(100)));
  }
  // A paused schedule's due rows beside them, inserted after the last ANALYZE.
  const paused = await schedule(db);
  await deliveries(db, paused, PAUSED, now - 1_200_000);
  await db.query(SET_SCHEDULE_STATE_SQL, [null, "default", paused, "active", "paused"]);
  for (const phase of ["stale statistics", "after ANALYZE"]) {
    if (phase === "after ANALYZE") await db.query("analyze");
    line(
      `claim 8, + ${PAUSED} due of a paused schedule, ${phase}`,
      await measure(db, CLAIM_SQL, claim(8)),
    );
    line(
      `wake-up, + ${PAUSED} due of a paused schedule, ${phase}`,
      await measure(db, NEXT_WAKE_SQL, [null, ["log"]]),
    );
  }
  console.log(`${label}\n${out.join("\n")}`);
}

/** An idle pass: nothing due, nothing stale, nothing leased, over `n` finished rows. */
async function idle(label: string, db: Database, sizes: number[]): Promise<void> {
  await migrate(db);
  const s = await schedule(db, true);
  const out: string[] = [];
  let stored = 0;
  for (const n of sizes) {
    await finished(db, s, n - stored);
    stored = n;
    for (const phase of ["stale statistics", "after ANALYZE"]) {
      if (phase === "after ANALYZE") await db.query("analyze");
      const cells: string[] = [];
      for (const [k, sql, params] of [
        ["misfire", SELECT_STALE_SQL, [null, 500]],
        ["wake-up", NEXT_WAKE_SQL, [null, ["log"]]],
        ["recover", RECOVER_SQL, [null, 100, 0]],
        ["claim 100", CLAIM_SQL, claim(100)],
      ] as const) {
        const ms = await median(db, sql, [...params]);
        cells.push(`${k} ${ms.toFixed(2)} ms / ${await rowsRead(db, sql, [...params])} rows`);
      }
      out.push(`  idle pass over ${n} finished rows, ${phase}: ${cells.join(", ")}`);
    }
  }
  console.log(`${label}\n${out.join("\n")}`);
}

console.log(`node ${process.version}, ${process.arch}, median of ${RUNS} runs, each rolled back`);
{
  const db = await openPglite({ dataDir: null });
  await report("PGlite", db);
  await db.close();
  const idleDb = await openPglite({ dataDir: null });
  await idle("PGlite", idleDb, [FINISHED / 10, FINISHED]);
  await idleDb.close();
}
let url = process.env.DATABASE_URL;
let cluster: { url: string; stop(): void } | null = null;
if (!url && findPgBin()) {
  cluster = await startCluster();
  url = cluster!.url;
}
if (url) {
  const admin = openPostgres({ url });
  for (const [label, run] of [
    ["PostgreSQL", (db: Database) => report("PostgreSQL", db)],
    [
      "PostgreSQL",
      (db: Database) => idle("PostgreSQL", db, [FINISHED / 10, FINISHED, FINISHED * 10]),
    ],
  ] as const) {
    const name = `punctual_bench_${Date.now()}`;
    await admin.query(`create database ${name}`);
    const target = new URL(url);
    target.pathname = `/${name}`;
    const db = openPostgres({ url: target.toString() });
    try {
      await run(db);
    } finally {
      await db.close();
      await admin.query(`drop database ${name} with (force)`);
    }
    void label;
  }
  await admin.close();
} else {
  console.log("PostgreSQL: skipped (no DATABASE_URL and no PostgreSQL binaries)");
}
cluster?.stop();
