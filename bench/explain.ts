/**
 * `npm run bench:explain`: the explanation of one schedule (OPS-16) over 366 days of an
 * hourly rule — 8,784 entries — on PostgreSQL with many other stored deliveries. Seeds
 * background schedules and their deliveries with `INSERT … SELECT generate_series`, then
 * one hourly schedule (through punctual) with a delivery row for every hour of 2028 (most
 * sent, 2% dead, 8% pending) and one attempt row per tried delivery, and times, through
 * punctual's own `explainSchedule` (what `GET /v1/schedules/{id}/explain` runs): the
 * whole window as one page of 10,000 and walked in pages of 1,000. Prints medians.
 *
 *   npm run bench:explain                               2M background deliveries
 *   npm run bench:explain -- --deliveries 10000000      the 10M
 *   npm run bench:explain -- --quick                    200k, a smoke run
 *
 * PostgreSQL: DATABASE_URL (a database it may fill: it creates and drops
 * `punctual_bench_explain` there), else a throwaway cluster from scripts/pg-cluster.mjs.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { EXPLAIN_DELIVERIES_SQL } from "../src/store/explain.js";
import { benchDatabase, flag, hasFlag, median, ms } from "./lib/harness.js";

const quick = hasFlag("quick");
const DELIVERIES = Number(flag("deliveries") ?? (quick ? 200_000 : 2_000_000));
const SCHEDULES = Math.max(1, Math.round(DELIVERIES / 100));
const REPEAT = Number(flag("repeat") ?? (quick ? 5 : 15));
const FROM = "2028-01-01T00:00:00Z";
const TO = "2029-01-01T00:00:00Z";

const { p, db, close } = await benchDatabase("punctual_bench_explain");

const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.ceil(xs.length * 0.9) - 1]!;

// --- seed --------------------------------------------------------------------------------

const t0 = process.hrtime.bigint();
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
const seeded = ms(t0);
const count = (await db.query<{ d: string }>("select count(*) d from punctual_deliveries")).rows[0]!
  .d;

// --- measure -----------------------------------------------------------------------------

const whole: number[] = [];
const paged: number[] = [];
let entries = 0;
let pages = 0;
for (let i = 0; i < REPEAT + 1; i++) {
  const a = process.hrtime.bigint();
  const one = await p.explainSchedule(schedule.id, { from: FROM, to: TO, limit: 10_000 });
  const took = ms(a);
  entries = one.entries.length;
  if (i > 0) whole.push(took); // the first run warms caches
  const b = process.hrtime.bigint();
  let cursor: string | undefined;
  pages = 0;
  do {
    const page = await p.explainSchedule(schedule.id, {
      from: FROM,
      to: TO,
      limit: 1_000,
      ...(cursor ? { cursor } : {}),
    });
    pages++;
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  if (i > 0) paged.push(ms(b));
}

// The rows statement alone (the database's part), as EXPLAIN ANALYZE reports it.
const sqlMs: number[] = [];
for (let i = 0; i < REPEAT; i++) {
  const { rows } = await db.query(`explain (analyze, format json) ${EXPLAIN_DELIVERIES_SQL}`, [
    "default",
    schedule.id,
    FROM,
    TO,
    null,
    null,
    null,
    10_001,
  ]);
  sqlMs.push(
    (rows[0] as { "QUERY PLAN": Array<{ "Execution Time": number }> })["QUERY PLAN"][0]![
      "Execution Time"
    ],
  );
}

// --- report ------------------------------------------------------------------------------

const [l1, l5, l15] = loadavg().map((l) => l.toFixed(2));
const version = (await db.query<{ v: string }>("select current_setting('server_version') v"))
  .rows[0]!.v;
console.log(`# Explain benchmark${quick ? " (--quick)" : ""}`);
console.log(
  `date ${new Date().toISOString()}; ${cpus()[0]?.model ?? "cpu?"}, ${cpus().length} cores, ` +
    `${Math.round(totalmem() / 2 ** 30)} GiB; load average ${l1} ${l5} ${l15}; PostgreSQL ${version}`,
);
console.log(
  `seeded ${Number(count).toLocaleString("en-US")} deliveries in ${(seeded / 1000).toFixed(0)} s; ` +
    `explained ${entries.toLocaleString("en-US")} entries (${FROM} … ${TO}); ${REPEAT} runs each\n`,
);
console.log("| explain | median ms | p90 ms |");
console.log("|---|---:|---:|");
console.log(`| one page of 10,000 | ${median(whole).toFixed(1)} | ${p90(whole).toFixed(1)} |`);
console.log(
  `| rows statement alone (10,001 rows) | ${median(sqlMs).toFixed(1)} | ${p90(sqlMs).toFixed(1)} |`,
);
console.log(`| ${pages} pages of 1,000 | ${median(paged).toFixed(1)} | ${p90(paged).toFixed(1)} |`);

await close();
