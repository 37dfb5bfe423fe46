/**
 * `npm run bench:lists`: list pages at scale (API-3) on PostgreSQL. Seeds schedules (one
 * reminder each) and their deliveries with `INSERT … SELECT generate_series`, then times,
 * through punctual's own list operations (`listSchedules`, `listDeliveries`: what
 * `GET /v1/schedules` and `GET /v1/deliveries` run), the first page and the 1,000th page
 * (its cursor built from the row before it, as a client walking there would hold it) of
 * 100 rows, both orders, and filtered lists, and the first page with `total=true`.
 * Prints medians and the indexes each page's plan uses (`EXPLAIN`). See bench/README.md.
 *
 *   npm run bench:lists                                   1M schedules, 10M deliveries
 *   npm run bench:lists -- --schedules 200000 --deliveries 2000000
 *   npm run bench:lists -- --quick                        20k / 200k, a smoke run
 *
 * PostgreSQL: DATABASE_URL (a database it may fill: it creates and drops
 * `punctual_bench_lists` there), else a throwaway cluster from scripts/pg-cluster.mjs.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { encodeCursor, type CursorScope } from "../src/app/cursor.js";
import { LIST_ERROR_MAX_CHARS } from "../src/contracts/index.js";
import {
  LIST_DELIVERIES_DESC_SQL,
  LIST_DELIVERIES_SQL,
  LIST_SCHEDULES_DESC_SQL,
  LIST_SCHEDULES_SQL,
} from "../src/store/schedules.js";
import { benchDatabase, flag, hasFlag, median, ms } from "./lib/harness.js";

const quick = hasFlag("quick");
const SCHEDULES = Number(flag("schedules") ?? (quick ? 20_000 : 1_000_000));
const DELIVERIES = Number(flag("deliveries") ?? (quick ? 200_000 : 10_000_000));
const REPEAT = Number(flag("repeat") ?? 15);
const LIMIT = 100;
/** Search terms timed (titles are `Schedule <n>`, external ids `ext-<n>`, n = 1..SCHEDULES). */
const SEARCHES = [
  "Schedule 1234",
  `schedule ${Math.round(SCHEDULES * 0.987)}`,
  `EXT-${Math.round(SCHEDULES * 0.4242)}`,
  "777",
  "Schedule 1",
  "schedule",
  "no such title",
  "zz",
];
const PAGE = 1_000;

const { p, db, close } = await benchDatabase("punctual_bench_lists");

// --- seed --------------------------------------------------------------------------------

const perSchedule = Math.max(1, Math.round(DELIVERIES / SCHEDULES));
const t0 = process.hrtime.bigint();
// One second apart; every tenth has source 'team'. Planned out (plan_complete), so no
// scheduler would add to them.
await db.query(
  `insert into punctual_schedules (tenant, source, external_id, title, dtstart, recurring,
                                   plan_complete, created_at)
   select 'default', case when g % 10 = 0 then 'team' else 'ops' end, 'ext-' || g,
          'Schedule ' || g, '2027-01-04T09:00:00', true, true,
          '2026-01-01T00:00:00Z'::timestamptz + g * interval '1 second'
   from generate_series(1, $1::int) g`,
  [SCHEDULES],
);
await db.query(
  `insert into punctual_reminders (schedule_id, key, offset_duration, channel)
   select id, 'r', '-PT15M', case when created_at::text like '%0+00' then 'email' else 'log' end
   from punctual_schedules`,
);
// Each schedule's deliveries: one per day; 2% dead, 8% pending, the rest sent.
await db.query(
  `insert into punctual_deliveries (delivery_key, schedule_id, reminder_key, occurrence_at,
                                    due_at, run_at, state, channel, on_lost_lease, attempt,
                                    sent_at, finished_at, reason)
   select s.id::text || ':r:' || k, s.id, 'r', o, o - interval '15 minutes',
          o - interval '15 minutes', st, 'log', 'retry', case when st = 'pending' then 0 else 1 end,
          case when st = 'sent' then o end, case when st = 'dead' then o end,
          case when st = 'dead' then 'SEND_FAILED' end
   from punctual_schedules s, generate_series(1, $1::int) k,
        lateral (select s.created_at + k * interval '1 day' as o,
                        case when (hashtext(s.id::text) + k) % 50 = 0 then 'dead'
                             when (hashtext(s.id::text) + k) % 50 between 1 and 4 then 'pending'
                             else 'sent' end as st) x`,
  [perSchedule],
);
await db.query("vacuum analyze punctual_schedules");
await db.query("vacuum analyze punctual_reminders");
await db.query("vacuum analyze punctual_deliveries");
const seeded = ms(t0);
const counts = (
  await db.query<{ s: string; d: string; dead: string }>(
    `select (select count(*) from punctual_schedules) s, (select count(*) from punctual_deliveries) d,
            (select count(*) from punctual_deliveries where state = 'dead') dead`,
  )
).rows[0]!;

// --- measure -----------------------------------------------------------------------------

interface Case {
  name: string;
  list: "schedules" | "deliveries";
  query: Record<string, string>;
  /** Build the cursor of this page (0 = the first page). */
  page: number;
}

/** The cursor that starts page `page` (0-based) of a list: the key of the row before it. */
async function cursorOf(c: Case): Promise<string | undefined> {
  if (c.page === 0) return undefined;
  const offset = c.page * LIMIT - 1;
  const order = c.query.order === "desc" ? "desc" : "asc";
  if (c.list === "schedules") {
    // The same rows the list's filter keeps (source; q as a plain substring, any case).
    const where = c.query.source
      ? `where source = $2`
      : c.query.q
        ? `where strpos(lower(title), lower($2)) > 0 or strpos(lower(external_id), lower($2)) > 0`
        : "";
    const filter = c.query.source ?? c.query.q;
    const { rows } = await db.query<{ at: string; id: string }>(
      `select to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at, id
       from punctual_schedules ${where} order by created_at ${order}, id ${order} offset $1 limit 1`,
      filter ? [offset, filter] : [offset],
    );
    if (!rows[0]) return "none";
    const scope: CursorScope = { list: "schedules", order, source: c.query.source, q: c.query.q };
    return encodeCursor([rows[0].at, rows[0].id], scope);
  }
  const where = c.query.state ? `where state = $2` : "";
  const { rows } = await db.query<{ id: string }>(
    `select id from punctual_deliveries ${where} order by id ${order} offset $1 limit 1`,
    c.query.state ? [offset, c.query.state] : [offset],
  );
  if (!rows[0]) return "none";
  const scope: CursorScope = { list: "deliveries", order, state: c.query.state };
  return encodeCursor([Number(rows[0].id)], scope);
}

/** The indexes the page statement's plan reads, from `EXPLAIN` with the page's values. */
async function indexesOf(c: Case, cursor: string | undefined): Promise<string> {
  const key = cursor
    ? (JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as { k: unknown[] }).k
    : null;
  const desc = c.query.order === "desc";
  const { rows } =
    c.list === "schedules"
      ? await db.query(
          `explain (format json) ${desc ? LIST_SCHEDULES_DESC_SQL : LIST_SCHEDULES_SQL}`,
          [
            "default",
            null,
            key?.[0] ?? null,
            key?.[1] ?? null,
            LIMIT,
            c.query.source ?? null,
            c.query.q ?? null,
            2048,
            100,
          ],
        )
      : await db.query(
          `explain (format json) ${desc ? LIST_DELIVERIES_DESC_SQL : LIST_DELIVERIES_SQL}`,
          [
            "default",
            null,
            c.query.state ?? null,
            key?.[0] ?? null,
            LIMIT,
            null,
            null,
            null,
            null,
            LIST_ERROR_MAX_CHARS,
          ],
        );
  const names = new Set<string>();
  const walk = (node: Record<string, unknown>) => {
    const type = String(node["Node Type"]);
    if (node["Index Name"]) names.add(`${type} ${String(node["Index Name"])}`);
    else if (type === "Seq Scan") names.add(`Seq Scan ${String(node["Relation Name"])}`);
    for (const child of (node.Plans as Array<Record<string, unknown>> | undefined) ?? [])
      walk(child);
  };
  walk(
    (rows[0] as { "QUERY PLAN": Array<{ Plan: Record<string, unknown> }> })["QUERY PLAN"][0]!.Plan,
  );
  return [...names].join(", ");
}

const cases: Case[] = [];
for (const order of ["asc", "desc"]) {
  for (const page of [0, PAGE - 1]) {
    cases.push({ name: `schedules ${order}`, list: "schedules", query: { order }, page });
    cases.push({ name: `deliveries ${order}`, list: "deliveries", query: { order }, page });
  }
}
for (const page of [0, PAGE - 1]) {
  cases.push({ name: "schedules source=team", list: "schedules", query: { source: "team" }, page });
  cases.push({
    name: "deliveries state=dead (dead letters), desc",
    list: "deliveries",
    query: { state: "dead", order: "desc" },
    page,
  });
}
// The search (q, a substring of the title or the external id, any case) at several
// selectivities: the trigram indexes of migration 0029 serve the rare terms, the walk of
// (tenant, created_at, id) the common ones; a term under three characters has no trigram.
for (const q of SEARCHES) {
  cases.push({ name: `schedules q=${q} (search)`, list: "schedules", query: { q }, page: 0 });
}
cases.push({
  name: "schedules q=Schedule 1 (search)",
  list: "schedules",
  query: { q: "Schedule 1" },
  page: PAGE - 1,
});

const results: Array<{
  name: string;
  page: string;
  rows: number;
  median: number;
  p90: number;
  plan: string;
}> = [];
for (const c of cases) {
  const cursor = await cursorOf(c);
  if (cursor === "none") {
    results.push({
      name: c.name,
      page: `${c.page + 1} (past the end)`,
      rows: 0,
      median: NaN,
      p90: NaN,
      plan: "",
    });
    continue;
  }
  const query = { ...c.query, limit: LIMIT, ...(cursor ? { cursor } : {}) };
  const run = () => (c.list === "schedules" ? p.listSchedules(query) : p.listDeliveries(query));
  const first = await run();
  // Only a search may find nothing (its terms include ones that match no schedule).
  if (first.items.length === 0 && !c.query.q) throw new Error(`${c.name}: an empty page`);
  const times: number[] = [];
  for (let i = 0; i < REPEAT; i++) {
    const t = process.hrtime.bigint();
    await run();
    times.push(ms(t));
  }
  const sorted = [...times].sort((a, b) => a - b);
  results.push({
    name: c.name,
    page: String(c.page + 1),
    rows: first.items.length,
    median: median(times),
    p90: sorted[Math.floor(sorted.length * 0.9)]!,
    plan: await indexesOf(c, cursor),
  });
}
const totals: Array<{ name: string; median: number; total: string }> = [];
for (const [name, list, query] of [
  ["schedules, every one", "schedules", {}],
  ["schedules source=team", "schedules", { source: "team" }],
  ...SEARCHES.map((q) => [`schedules q=${q}`, "schedules", { q }] as const),
  ["deliveries, every one", "deliveries", {}],
  ["deliveries state=dead", "deliveries", { state: "dead" }],
] as const) {
  const q = { ...query, limit: LIMIT, total: "true" };
  const run = () => (list === "schedules" ? p.listSchedules(q) : p.listDeliveries(q));
  const reply = await run();
  const times: number[] = [];
  for (let i = 0; i < Math.min(REPEAT, 7); i++) {
    const t = process.hrtime.bigint();
    await run();
    times.push(ms(t));
  }
  const total = reply.total!;
  totals.push({
    name,
    median: median(times),
    total: `${total.exact ? "" : "≈ "}${total.value.toLocaleString("en-US")}${total.exact ? " (exact)" : " (estimate)"}`,
  });
}

// --- report ------------------------------------------------------------------------------

const [l1, l5, l15] = loadavg().map((l) => l.toFixed(2));
const version = (await db.query<{ v: string }>("select current_setting('server_version') v"))
  .rows[0]!.v;
console.log(`# List pages benchmark${quick ? " (--quick)" : ""}`);
console.log(
  `date ${new Date().toISOString()}; ${cpus()[0]?.model ?? "cpu?"}, ${cpus().length} cores, ` +
    `${Math.round(totalmem() / 2 ** 30)} GiB; load average ${l1} ${l5} ${l15}; PostgreSQL ${version}`,
);
console.log(
  `seeded ${Number(counts.s).toLocaleString("en-US")} schedules, ${Number(counts.d).toLocaleString("en-US")} deliveries ` +
    `(${Number(counts.dead).toLocaleString("en-US")} dead) in ${(seeded / 1000).toFixed(0)} s; ` +
    `pages of ${LIMIT}, ${REPEAT} runs each\n`,
);
console.log("| list | page | rows | median ms | p90 ms | plan reads |");
console.log("|---|---:|---:|---:|---:|---|");
for (const r of results) {
  console.log(
    `| ${r.name} | ${r.page} | ${r.rows} | ${Number.isNaN(r.median) ? "–" : r.median.toFixed(1)} | ${Number.isNaN(r.p90) ? "–" : r.p90.toFixed(1)} | ${r.plan} |`,
  );
}
console.log("\n| first page with total=true | median ms | total |");
console.log("|---|---:|---|");
for (const r of totals) console.log(`| ${r.name} | ${r.median.toFixed(1)} | ${r.total} |`);

await close();
