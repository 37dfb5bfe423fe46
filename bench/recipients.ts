/**
 * `npm run bench:recipients`: planning a daily floating schedule for 100,000 recipients
 * (API-11) on PostgreSQL. Seeds the recipients (spread over eight zones) with one
 * `INSERT … SELECT generate_series`, creates the schedule through punctual (`floating:
 * true`, its recipients added in pages of 10,000 through `putScheduleRecipients`, what
 * `PUT /v1/schedules/{id}/recipients` runs), then ticks the scheduler until every
 * recipient's first delivery exists (every membership's watermark past the first day), and
 * reports the time that took (`firstDayRows`: recipients with a delivery) and the longest
 * stretch the event loop was held (a 1 ms interval timer's largest lateness), and the
 * process's heap and resident set at the start of planning and at their peak (sampled every
 * 50 ms; run two sizes to see whether the peak grows with the audience). Under
 * `node --expose-gc` it also collects after each tick and reports the largest heap left
 * behind by a pass (`retainedAfterTickPeak`), which garbage does not inflate.
 * Target (issue 23): the first day's rows within 30 s, no stretch over 100 ms.
 *
 *   npm run bench:recipients                      100,000 recipients
 *   npm run bench:recipients -- --recipients 20000
 *
 * PostgreSQL: DATABASE_URL (a database it may fill: it creates and drops
 * `punctual_bench_recipients` there), else a throwaway cluster from scripts/pg-cluster.mjs.
 */
import { cpus, loadavg } from "node:os";
import { benchDatabase, flag, ms } from "./lib/harness.js";

const RECIPIENTS = Number(flag("recipients") ?? 100_000);
const PAGE = 10_000;
const ZONES = [
  "Europe/Berlin",
  "America/New_York",
  "Australia/Sydney",
  "Australia/Lord_Howe",
  "Asia/Tokyo",
  "America/Los_Angeles",
  "Asia/Kolkata",
  "UTC",
];

const { p, db, close } = await benchDatabase("punctual_bench_recipients", {
  // The first day is planned whole: due times up to two days ahead.
  scheduler: { planAheadMs: 2 * 86_400_000 },
});

// --- seed --------------------------------------------------------------------------------
const t0 = process.hrtime.bigint();
await db.query(
  `insert into punctual_recipients (tenant, id, tzid, targets)
   select 'default', 'u-' || g, ($2::text[])[1 + g % array_length($2::text[], 1)],
          '{"noop": {}}'::jsonb
   from generate_series(1, $1::int) g`,
  [RECIPIENTS, ZONES],
);
const ids = Array.from({ length: RECIPIENTS }, (_, i) => `u-${i + 1}`);
const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
const { schedule } = await p.createSchedule({
  dtstart: `${tomorrow}T09:00:00`,
  floating: true,
  rrule: "FREQ=DAILY",
  perpetual: true,
  recipients: [],
  reminders: [{ key: "r", channel: "noop" }],
});
const tAdd = process.hrtime.bigint();
for (let i = 0; i < ids.length; i += PAGE) {
  await p.putScheduleRecipients(schedule.id, { add: ids.slice(i, i + PAGE) });
}
const addMs = ms(tAdd);
const seeded = ms(t0);

// --- measure -----------------------------------------------------------------------------
let maxStretch = 0;
let last = performance.now();
const timer = setInterval(() => {
  const now = performance.now();
  maxStretch = Math.max(maxStretch, now - last - 1);
  last = now;
}, 1);
// Memory while planning: the heap and resident set, sampled every 50 ms (the planner works
// in batches, so the peak should not grow with the audience: compare two sizes).
const mb = (bytes: number) => Math.round(bytes / 1_048_576);
const memAtStart = process.memoryUsage();
let heapPeak = memAtStart.heapUsed;
let rssPeak = memAtStart.rss;
const memTimer = setInterval(() => {
  const m = process.memoryUsage();
  heapPeak = Math.max(heapPeak, m.heapUsed);
  rssPeak = Math.max(rssPeak, m.rss);
}, 50);
const collect = (globalThis as { gc?: () => void }).gc;
let retainedPeak = 0;
const load0 = loadavg()[0]!;
const tPlan = process.hrtime.bigint();
let ticks = 0;
for (;;) {
  ticks++;
  const report = await p.scheduler.tick();
  if (collect) {
    // What a pass leaves behind (garbage aside): `node --expose-gc` makes this measurable.
    collect();
    retainedPeak = Math.max(retainedPeak, process.memoryUsage().heapUsed);
  }
  if (report.failedSweep) throw new Error(`sweep ${report.failedSweep} failed`);
  const left = Number(
    (
      await db.query<{ n: string }>(
        `select count(*) as n from punctual_schedule_recipients where planned_until < $1`,
        [`${tomorrow}T23:59:59+14:00`],
      )
    ).rows[0]!.n,
  );
  if (left === 0) break;
}
const planMs = ms(tPlan);
clearInterval(timer);
clearInterval(memTimer);
const planned = Number(
  (
    await db.query<{ n: string }>(
      `select count(distinct recipient_id) as n from punctual_deliveries where schedule_id = $1`,
      [schedule.id],
    )
  ).rows[0]!.n,
);
const rows = Number(
  (await db.query<{ n: string }>(`select count(*) as n from punctual_deliveries`)).rows[0]!.n,
);

console.log(
  JSON.stringify(
    {
      recipients: RECIPIENTS,
      zones: ZONES.length,
      seedMs: Math.round(seeded),
      addInPagesMs: Math.round(addMs),
      planMs: Math.round(planMs),
      ticks,
      firstDayRows: planned,
      rowsPlanned: rows,
      maxEventLoopStretchMs: Math.round(maxStretch),
      heapUsedMb: {
        atStart: mb(memAtStart.heapUsed),
        peak: mb(heapPeak),
        ...(collect ? { retainedAfterTickPeak: mb(retainedPeak) } : {}),
      },
      rssMb: { atStart: mb(memAtStart.rss), peak: mb(rssPeak) },
      loadAverage: [load0, loadavg()[0]].map((x) => Number(x!.toFixed(2))),
      cpus: cpus().length,
    },
    null,
    2,
  ),
);

await close();
