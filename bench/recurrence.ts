/**
 * Recurrence benchmark (REC-1): punctual's engine beside rrule, rrule-temporal and ical.js
 * in the same process.
 *
 *   node --import tsx bench/recurrence.ts [--rules 10000] [--peer-seconds 10] [--quick]
 *
 * 1. Next occurrence: 10,000 mixed reminder rules (daily, weekdays, weekly, monthly by day
 *    and by weekday, yearly, hourly office hours, every 15 minutes; some with COUNT or UNTIL;
 *    DTSTART between 2024 and 2026 in eight zones), next occurrence after "now"
 *    (2026-11-30T12:00:00Z). Parsing is timed separately from the next-occurrence calls.
 * 2. A year of minutely expansion: FREQ=MINUTELY from 2027-01-01T00:00 Europe/Berlin,
 *    every occurrence in [2027-01-01, 2028-01-01).
 * 3. Worst-case input (REC-3, punctual only): the rules whose work is capped by a step
 *    budget, and 1 KB strings of noise. The tests bound this work in steps; here it is
 *    timed, so a slow step or a parser that stopped being linear shows as time per call.
 *
 * Peers get a time budget per task (`--peer-seconds`); a peer that runs out is reported
 * with the share it finished. ical.js has no IANA zone data of its own (it needs VTIMEZONE
 * components), so it runs on floating times — less work than the others do.
 */
import ICAL from "ical.js";
import rrulePkg from "rrule";
import { RRuleTemporal } from "rrule-temporal";
import { Temporal } from "temporal-polyfill";
import { measureWork } from "../src/recurrence/expand.js";
import {
  parseRule,
  validateRule,
  type Recurrence,
  type RecurrenceInput,
} from "../src/recurrence/index.js";

const { RRule } = rrulePkg;

const args = process.argv.slice(2);
const arg = (name: string, fallback: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
// --quick (npm run bench -- --quick): a smoke run with fewer rules and short peer budgets.
const quick = args.includes("--quick");
const RULES = arg("rules", quick ? 2_000 : 10_000);
const PEER_SECONDS = arg("peer-seconds", quick ? 1 : 10);
const NOW = Date.UTC(2026, 10, 30, 12);

/** Deterministic PRNG (mulberry32) so every run uses the same rules. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const ZONES = [
  "UTC",
  "Europe/Berlin",
  "America/New_York",
  "Asia/Kolkata",
  "Australia/Sydney",
  "Asia/Tokyo",
  "America/Sao_Paulo",
  "Europe/London",
];
const TEMPLATES = [
  "FREQ=DAILY",
  "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR",
  "FREQ=WEEKLY;BYDAY=MO",
  "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH",
  "FREQ=MONTHLY;BYMONTHDAY=1",
  "FREQ=MONTHLY;BYMONTHDAY=-1",
  "FREQ=MONTHLY;BYDAY=2TU",
  "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
  "FREQ=YEARLY",
  "FREQ=HOURLY;BYHOUR=9,10,11,12,13,14,15,16,17;BYDAY=MO,TU,WE,TH,FR",
  "FREQ=MINUTELY;INTERVAL=15",
  "FREQ=DAILY;COUNT=1000",
  "FREQ=WEEKLY;UNTIL=20271231T235959Z",
];

interface RuleCase {
  tzid: string;
  /** Local DTSTART `YYYY-MM-DDTHH:mm:ss`. */
  dtstart: string;
  rrule: string;
}

function makeRules(n: number): RuleCase[] {
  const rnd = prng(20261130);
  const pad = (x: number) => String(x).padStart(2, "0");
  const out: RuleCase[] = [];
  for (let i = 0; i < n; i++) {
    const year = 2024 + Math.floor(rnd() * 3);
    const month = 1 + Math.floor(rnd() * 12);
    const day = 1 + Math.floor(rnd() * 28);
    const hour = 6 + Math.floor(rnd() * 14);
    const minute = [0, 15, 30, 45][Math.floor(rnd() * 4)] as number;
    out.push({
      tzid: ZONES[Math.floor(rnd() * ZONES.length)] as string,
      dtstart: `${year}-${pad(month)}-${pad(day)}T${pad(hour)}:${pad(minute)}:00`,
      rrule: TEMPLATES[Math.floor(rnd() * TEMPLATES.length)] as string,
    });
  }
  return out;
}

const basic = (local: string) => local.replace(/[-:]/g, "");

interface Row {
  /** Units produced per item (occurrences for the year task), for the per-second column. */
  unitsPerItem?: number;
  library: string;
  task: string;
  done: number;
  total: number;
  ms: number;
  errors: number;
  firstError?: string;
}
const rows: Row[] = [];

/** Runs `fn` over `items` until done or the budget is spent. */
function timed<T>(
  library: string,
  task: string,
  items: T[],
  budgetMs: number,
  fn: (item: T) => void,
): void {
  const start = performance.now();
  let done = 0;
  let errors = 0;
  let firstError: string | undefined;
  for (const item of items) {
    try {
      fn(item);
    } catch (err) {
      errors++;
      firstError ??= String(err).split("\n")[0]?.slice(0, 100);
    }
    done++;
    if (budgetMs !== Infinity && performance.now() - start > budgetMs) break;
  }
  rows.push({
    library,
    task,
    done,
    total: items.length,
    ms: performance.now() - start,
    errors,
    firstError,
  });
}

const rules = makeRules(RULES);
const nowDate = new Date(NOW);
const nowZdt = Temporal.Instant.fromEpochMilliseconds(NOW).toZonedDateTimeISO("UTC");

// --- punctual
let recs: Recurrence[] = [];
timed("punctual", "parse (validateRule)", rules, Infinity, (r) => {
  recs.push(validateRule({ dtstart: r.dtstart, tzid: r.tzid, rrule: r.rrule }));
});
recs = rules.map((r) => validateRule({ dtstart: r.dtstart, tzid: r.tzid, rrule: r.rrule }));
let found = 0;
// Warm-up pass (JIT, zone caches), then the measured pass.
for (const rec of recs) rec.next(NOW);
timed("punctual", "next occurrence", recs, Infinity, (rec) => {
  if (rec.next(NOW) !== null) found++;
});
timed("punctual", "parse + next (cold objects)", rules, Infinity, (r) => {
  validateRule({ dtstart: r.dtstart, tzid: r.tzid, rrule: r.rrule }).next(NOW);
});

// --- rrule (results depend on the host TZ; timing only)
const rr = rules.map((r) =>
  RRule.fromString(`DTSTART;TZID=${r.tzid}:${basic(r.dtstart)}\nRRULE:${r.rrule}`),
);
timed("rrule 2.8.1", "next occurrence", rr, PEER_SECONDS * 1000, (rule) => {
  rule.after(nowDate);
});

// --- rrule-temporal
const rt = rules.map(
  (r) =>
    new RRuleTemporal({
      rruleString: `DTSTART;TZID=${r.tzid}:${basic(r.dtstart)}\nRRULE:${r.rrule}`,
    }),
);
timed("rrule-temporal 2.2.8", "next occurrence", rt, PEER_SECONDS * 1000, (rule) => {
  rule.next(nowZdt);
});

// --- ical.js (floating times; iterates from DTSTART)
const nowIcal = ICAL.Time.fromDateTimeString("2026-11-30T12:00:00");
timed("ical.js 2.2.1", "next occurrence", rules, PEER_SECONDS * 1000, (r) => {
  const it = ICAL.Recur.fromString(r.rrule).iterator(ICAL.Time.fromDateTimeString(r.dtstart));
  for (let t = it.next(); t !== null && t !== undefined; t = it.next()) {
    if (t.compare(nowIcal) > 0) break;
  }
});

// --- a year of minutely expansion
const yearFrom = Date.UTC(2026, 11, 31, 23);
const yearTo = Date.UTC(2027, 11, 31, 23);
let minutelyCount = 0;
timed("punctual", "year of MINUTELY (Berlin)", [0], Infinity, () => {
  const rec = validateRule({
    dtstart: "2027-01-01T00:00:00",
    tzid: "Europe/Berlin",
    rrule: "FREQ=MINUTELY",
  });
  minutelyCount = rec.between(yearFrom, yearTo, 1_000_000).length;
});
let peerCount = 0;
// rrule needs minutes for this task and cannot be stopped midway: --quick leaves it out.
timed("rrule 2.8.1", "year of MINUTELY (Berlin)", quick ? [] : [0], Infinity, () => {
  const rule = RRule.fromString("DTSTART;TZID=Europe/Berlin:20270101T000000\nRRULE:FREQ=MINUTELY");
  peerCount = rule.between(new Date(yearFrom), new Date(yearTo - 1), true).length;
});
const rrCount = peerCount;
timed("rrule-temporal 2.2.8", "year of MINUTELY (Berlin)", [0], Infinity, () => {
  const rule = new RRuleTemporal({
    rruleString: "DTSTART;TZID=Europe/Berlin:20270101T000000\nRRULE:FREQ=MINUTELY",
    maxIterations: 10_000_000,
    maxCandidateEvaluations: 10_000_000,
  });
  peerCount = rule.between(new Date(yearFrom), new Date(yearTo - 1), true).length;
});
const rtCount = peerCount;
timed("ical.js 2.2.1", "year of MINUTELY (floating)", [0], Infinity, () => {
  const it = ICAL.Recur.fromString("FREQ=MINUTELY").iterator(
    ICAL.Time.fromDateTimeString("2027-01-01T00:00:00"),
  );
  const end = ICAL.Time.fromDateTimeString("2028-01-01T00:00:00");
  let n = 0;
  for (let t = it.next(); t !== null && t !== undefined && t.compare(end) < 0; t = it.next()) n++;
  peerCount = n;
});

// --- worst-case input (REC-3): steps counted by the engine, time measured here
interface WorstRow {
  input: string;
  calls: number;
  steps: number;
  maxMs: number;
  totalMs: number;
}
const worst: WorstRow[] = [];
function worstCase(input: string, calls: Array<() => unknown>): void {
  let steps = 0;
  let maxMs = 0;
  let totalMs = 0;
  for (const call of calls) {
    const t = performance.now();
    steps += measureWork(call).steps;
    const ms = performance.now() - t;
    maxMs = Math.max(maxMs, ms);
    totalMs += ms;
  }
  worst.push({ input, calls: calls.length, steps, maxMs, totalMs });
}
const parsed = (input: RecurrenceInput): Recurrence => {
  const r = parseRule(input);
  if (!r.ok) throw r.error;
  return r.recurrence;
};
const noSecondHour = { dtstart: "2027-01-01T01:00:00", rrule: "FREQ=HOURLY;INTERVAL=2;BYHOUR=2" };
worstCase("parse: no occurrence within the search budget", [() => parseRule(noSecondHour)]);
const rare = parsed({
  dtstart: "2027-01-01T00:00:00",
  rrule: "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=3;BYMINUTE=7;BYSECOND=9",
});
worstCase("between: rare SECONDLY rule to year 9999 (step cap)", [
  () => rare.between(0, Number.MAX_SAFE_INTEGER, 1_000_000),
]);
const noise = prng(7);
const noiseInputs = Array.from({ length: 2_000 }, () => {
  const chars = "FREQ=DAILYWEEKLYBYDAYMOTUWE;,=-+0123456789TZ:RRULE ";
  let text = "";
  for (let i = 0; i < 1024; i++) text += chars[Math.floor(noise() * chars.length)];
  return text;
});
worstCase(
  "parse: 1 KB of rule-like noise",
  noiseInputs.map((rrule) => () => parseRule({ dtstart: "2027-01-04T09:00:00", rrule })),
);

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
console.log(
  `node ${process.version} ${process.arch}, ${RULES} rules, now = ${nowDate.toISOString()}`,
);
console.log(`punctual found a next occurrence for ${found} of ${recs.length} rules`);
console.log(
  `year of MINUTELY occurrences: punctual ${minutelyCount}, rrule ${rrCount}, rrule-temporal ${rtCount}, ical.js ${peerCount}`,
);
console.log("");
for (const r of rows) {
  if (r.task.startsWith("year of")) {
    const lib = r.library.split(" ")[0];
    r.unitsPerItem =
      lib === "punctual"
        ? minutelyCount
        : lib === "rrule"
          ? rrCount
          : lib === "rrule-temporal"
            ? rtCount
            : peerCount;
  }
}
console.log("| library | task | done | time (ms) | per second (rules or occurrences) | errors |");
console.log("|---|---|---:|---:|---:|---|");
for (const r of rows) {
  const share = r.done === r.total ? fmt(r.done) : `${fmt(r.done)} of ${fmt(r.total)} (budget)`;
  const errors = r.errors === 0 ? "0" : `${r.errors}: ${r.firstError ?? ""}`;
  const units = r.done * (r.unitsPerItem ?? 1);
  console.log(
    `| ${r.library} | ${r.task} | ${share} | ${fmt(r.ms)} | ${fmt((units / r.ms) * 1000)} | ${errors} |`,
  );
}

console.log("");
console.log("| worst-case input (punctual) | calls | steps | max per call (ms) | steps per ms |");
console.log("|---|---:|---:|---:|---:|");
for (const w of worst) {
  console.log(
    `| ${w.input} | ${fmt(w.calls)} | ${fmt(w.steps)} | ${w.maxMs.toFixed(1)} | ${fmt(w.steps / w.totalMs)} |`,
  );
}
