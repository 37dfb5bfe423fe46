/**
 * `npm run bench:explain`: the explanation of one schedule (OPS-16) over 366 days of an
 * hourly rule — 8,784 entries — on PostgreSQL with many other stored deliveries. Seeds
 * background schedules and their deliveries with `INSERT … SELECT generate_series` (a failed
 * attempt recorded for every tenth of them), then
 * one hourly schedule (through punctual) with a delivery row for every hour of 2028 (most
 * sent, 2% dead, 8% pending) and one attempt row per tried delivery, and times, through
 * punctual's own `explainSchedule` (what `GET /v1/schedules/{id}/explain` runs): the
 * whole window as one page of 10,000 and walked in pages of 1,000. Prints medians, and for
 * the page of 10,000 the CPU time of this process and of the database server's processes
 * (when the server runs on this machine) per call.
 *
 *   npm run bench:explain                               2M background deliveries
 *   npm run bench:explain -- --deliveries 10000000      the issue's 10M
 *   npm run bench:explain -- --quick                    200k, a smoke run
 *   npm run bench:explain -- --keep                     keep the seeded database; a later
 *                                                       run with --keep measures it again
 *                                                       without seeding (DATABASE_URL only)
 *
 * Besides the timings it prints the plans of the explanation's statements (`EXPLAIN
 * (ANALYZE, BUFFERS)`): the rows they read must not grow with the table.
 *
 * PostgreSQL: DATABASE_URL (a database it may fill: it creates and drops
 * `punctual_bench_explain` there), else a throwaway cluster from scripts/pg-cluster.mjs.
 */
import { readdirSync, readFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import * as explainStore from "../src/store/explain.js";
import { benchDatabase, flag, hasFlag, median, ms } from "./lib/harness.js";

const quick = hasFlag("quick");
const DELIVERIES = Number(flag("deliveries") ?? (quick ? 200_000 : 2_000_000));
const SCHEDULES = Math.max(1, Math.round(DELIVERIES / 100));
const REPEAT = Number(flag("repeat") ?? (quick ? 5 : 15));
const FROM = "2028-01-01T00:00:00Z";
const TO = "2029-01-01T00:00:00Z";

const keep = hasFlag("keep");
const { p, db, close, existed } = await benchDatabase("punctual_bench_explain", { keep });

/**
 * CPU time (ms) of the database server's processes so far: the children of the postmaster
 * of the bench's own connection, from `/proc/<pid>/schedstat` (time on a CPU, ns). Null
 * when the server is not a local process this one can read (a remote DATABASE_URL; one
 * whose backend's pid happens to be a local process's would be misread: measure locally).
 */
const postmaster = await (async () => {
  const pid = (await db.query<{ p: number }>("select pg_backend_pid() p")).rows[0]!.p;
  try {
    return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
  } catch {
    return null;
  }
})();
function serverCpuMs(): number | null {
  if (postmaster === null) return null;
  let ns = 0;
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      if (Number(stat.split(") ")[1]!.split(" ")[1]) !== postmaster) continue;
      ns += Number(readFileSync(`/proc/${name}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // the process ended meanwhile
    }
  }
  return ns / 1e6;
}

const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.ceil(xs.length * 0.9) - 1]!;

// --- seed --------------------------------------------------------------------------------

const t0 = process.hrtime.bigint();
const found = existed
  ? (
      await db.query<{ id: string }>(
        "select id from punctual_schedules where source is distinct from 'bg' limit 1",
      )
    ).rows[0]
  : undefined;
const scheduleId = found ? found.id : await seed();

/** Seeds the background and the explained schedule; returns the latter's id. */
async function seed(): Promise<string> {
  // Background: planned-out schedules, 100 daily deliveries each, all sent.
  await db.query(
    `insert into punctual_schedules (tenant, source, external_id, dtstart, recurring,
                                     plan_complete, created_at)
     select 'default', 'bg', 'bg-' || g, '2027-01-04T09:00:00', true, true,
            '2026-01-01T00:00:00Z'::timestamptz + g * interval '1 second'
     from generate_series(1, $1::int) g`,
    [SCHEDULES],
  );
  await db.query(
    `insert into punctual_reminders (schedule_id, key, offset_duration, channel)
     select id, 'r', 'PT0S', 'noop' from punctual_schedules`,
  );
  await db.query(
    `insert into punctual_deliveries (delivery_key, schedule_id, reminder_key, occurrence_at,
                                      due_at, run_at, state, channel, on_lost_lease, attempt,
                                      sent_at)
     select s.id::text || ':' || k, s.id, 'r', o, o, o, 'sent', 'noop', 'retry', 1, o
     from punctual_schedules s, generate_series(1, 100) k,
          lateral (select '2028-01-01T00:00:00Z'::timestamptz + k * interval '1 day'
                          + (hashtext(s.id::text) % 3600) * interval '1 second' as o) x`,
  );
  // A failed try on every tenth background delivery: the attempts table is not only the
  // explained schedule's.
  await db.query(
    `insert into punctual_attempts (delivery_id, attempt, worker, started_at, ended_at, outcome,
                                    status, error)
     select d.id, 1, 'bench-worker', d.due_at, d.due_at + interval '2 s', 'transient', 503,
            '503 unavailable'
     from punctual_deliveries d where d.id % 10 = 0`,
  );
  // The schedule explained: hourly, perpetual (no expansion cap), one reminder.
  const { schedule } = await p.createSchedule({
    dtstart: "2028-01-01T00:00:00Z",
    rrule: "FREQ=HOURLY",
    perpetual: true,
    reminders: [{ key: "r", offset: "PT0S", channel: "noop" }],
  });
  await db.query(
    `insert into punctual_deliveries (delivery_key, schedule_id, reminder_key, occurrence_at,
                                      due_at, run_at, state, channel, on_lost_lease, attempt,
                                      sent_at, finished_at, reason)
     select 'x:' || k, $1::uuid, 'r', o, o, o, st, 'noop', 'retry',
            case when st = 'pending' then 0 else 1 end,
            case when st = 'sent' then o end, case when st = 'dead' then o end,
            case when st = 'dead' then 'PERMANENT' end
     from generate_series(0, 8783) k,
          lateral (select '2028-01-01T00:00:00Z'::timestamptz + k * interval '1 hour' as o,
                          case when k % 50 = 0 then 'dead' when k % 50 between 1 and 4 then 'pending'
                               else 'sent' end as st) x`,
    [schedule.id],
  );
  await db.query(
    `insert into punctual_attempts (delivery_id, attempt, worker, started_at, ended_at, outcome,
                                    status, error)
     select d.id, 1, 'bench-worker', d.due_at, d.due_at + interval '120 ms',
            case when d.state = 'dead' then 'permanent' else 'sent' end,
            case when d.state = 'dead' then 410 else 200 end,
            case when d.state = 'dead' then '410 gone' end
     from punctual_deliveries d where d.schedule_id = $1::uuid and d.state <> 'pending'`,
    [schedule.id],
  );
  for (const t of [
    "punctual_schedules",
    "punctual_reminders",
    "punctual_deliveries",
    "punctual_attempts",
  ]) {
    await db.query(`vacuum analyze ${t}`);
  }
  return schedule.id;
}
const seeded = ms(t0);
const count = (await db.query<{ d: string }>("select count(*) d from punctual_deliveries")).rows[0]!
  .d;

// --- measure -----------------------------------------------------------------------------

const loadAtStart = loadavg()
  .map((l) => l.toFixed(2))
  .join(" ");
const whole: number[] = [];
const wholeCpu: number[] = [];
const wholeServerCpu: number[] = [];
const withJson: number[] = [];
const firstPage: number[] = [];
const paged: number[] = [];
let entries = 0;
let pages = 0;
let bytes = 0;
for (let i = 0; i < REPEAT + 1; i++) {
  const s0 = serverCpuMs();
  const a = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  const one = await p.explainSchedule(scheduleId, { from: FROM, to: TO, limit: 10_000 });
  const took = ms(a);
  const cpu = process.cpuUsage(c0);
  const s1 = serverCpuMs();
  if (i > 0) wholeCpu.push((cpu.user + cpu.system) / 1000);
  if (i > 0 && s0 !== null && s1 !== null) wholeServerCpu.push(s1 - s0);
  const body = JSON.stringify(one); // what the route sends
  const tookWithJson = ms(a);
  entries = one.entries.length;
  bytes = body.length;
  if (i > 0) {
    // the first run warms caches
    whole.push(took);
    withJson.push(tookWithJson);
  }
  const b = process.hrtime.bigint();
  let cursor: string | undefined;
  pages = 0;
  do {
    const page = await p.explainSchedule(scheduleId, {
      from: FROM,
      to: TO,
      limit: 1_000,
      ...(cursor ? { cursor } : {}),
    });
    if (pages === 0 && i > 0) firstPage.push(ms(b));
    pages++;
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  if (i > 0) paged.push(ms(b));
}
const loadAtEnd = loadavg()
  .map((l) => l.toFixed(2))
  .join(" ");

// The statements alone (the database's part), as EXPLAIN ANALYZE reports them, with the
// plan of each: the rows and buffers they read must not depend on the table's size.
const statements: Array<{ label: string; sql: string; params: unknown[] }> = [
  {
    label: "page statement (10,001 rows, their attempts and actions)",
    sql: explainStore.EXPLAIN_PAGE_SQL,
    params: ["default", scheduleId, FROM, TO, null, null, null, 10_001],
  },
];
// As the store runs the page statement (EXPLAIN_SERIAL_SQL, there local to its transaction).
await db.query("set max_parallel_workers_per_gather = 0");
await db.query("set jit = off");
const sqlMs = statements.map(() => [] as number[]);
const plans: string[] = [];
for (const [k, st] of statements.entries()) {
  for (let i = 0; i < REPEAT; i++) {
    const { rows } = await db.query(`explain (analyze, format json) ${st.sql}`, st.params);
    sqlMs[k]!.push(
      (rows[0] as { "QUERY PLAN": Array<{ "Execution Time": number }> })["QUERY PLAN"][0]![
        "Execution Time"
      ],
    );
  }
  const { rows } = await db.query<{ "QUERY PLAN": string }>(
    `explain (analyze, buffers, costs off, timing off, summary off) ${st.sql}`,
    st.params,
  );
  // A page's ids are listed in full in the plan: shorten them.
  const line = (r: { "QUERY PLAN": string }) =>
    `    ${r["QUERY PLAN"].replace(/'\{[^']{80,}\}'/g, (m) => `'{${m.split(",").length} ids}'`)}`;
  plans.push(`${st.label}:\n${rows.map(line).join("\n")}`);
}

// --- report ------------------------------------------------------------------------------

const version = (await db.query<{ v: string }>("select current_setting('server_version') v"))
  .rows[0]!.v;
console.log(`# Explain benchmark${quick ? " (--quick)" : ""}`);
console.log(
  `date ${new Date().toISOString()}; ${cpus()[0]?.model ?? "cpu?"}, ${cpus().length} cores, ` +
    `${Math.round(totalmem() / 2 ** 30)} GiB; load average ${loadAtStart} → ${loadAtEnd}; ` +
    `PostgreSQL ${version}`,
);
console.log(
  `${found ? "reused" : "seeded"} ${Number(count).toLocaleString("en-US")} deliveries` +
    `${found ? "" : ` in ${(seeded / 1000).toFixed(0)} s`}; ` +
    `explained ${entries.toLocaleString("en-US")} entries (${FROM} … ${TO}, ` +
    `${(bytes / 1e6).toFixed(1)} MB of JSON); ${REPEAT} runs each\n`,
);
const row = (label: string, xs: number[]) =>
  console.log(`| ${label} | ${median(xs).toFixed(1)} | ${p90(xs).toFixed(1)} |`);
console.log("| explain | median ms | p90 ms |");
console.log("|---|---:|---:|");
row("one page of 10,000", whole);
row("one page of 10,000: CPU of this process", wholeCpu);
if (wholeServerCpu.length > 0) row("one page of 10,000: CPU of the server", wholeServerCpu);
row("one page of 10,000 and its JSON", withJson);
row("first page of 1,000 (the default)", firstPage);
row(`${pages} pages of 1,000`, paged);
for (const [k, st] of statements.entries()) row(`${st.label} alone`, sqlMs[k]!);
console.log("\nPlans (EXPLAIN ANALYZE, BUFFERS):\n");
console.log(plans.join("\n"));

await close();
