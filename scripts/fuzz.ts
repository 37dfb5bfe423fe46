/**
 * `npm run fuzz`: random RRULEs (every part, valid and invalid) and mutated calendars
 * through validation, preview, expansion, import and the dry run — in this process, and
 * for a sample through the HTTP API (`app.request` on an in-memory database). Fails on a
 * crash (anything but a ValidationError), a 5xx, an occurrence count above the rule's
 * upper bound, or any single call over the limit (default 100 ms), and prints the worst
 * cases with their input so each can be replayed.
 *
 *   npm run fuzz                        200,000 rules and 20,000 calendars, random seed
 *   npm run fuzz -- --seed 42           the same cases again
 *   npm run fuzz -- --short             a few thousand cases (CI), well under a minute
 *   npm run fuzz -- --rules N --calendars N --limit-ms N
 *
 * A call is timed in CPU time of the event loop's thread (scripts/fuzz/thread-cpu.ts; the
 * API's worker threads run beside it and are not counted), so other programs on a
 * shared machine do not count against it; wall time is reported beside it. The first
 * cases (and the first 3 requests of each route) warm the JIT and the database's
 * statements and are checked but not timed, and the zones' offset caches are
 * filled first (a one-time cost per zone and process, see docs/recurrence.md). An async
 * call (the dry run, as the API runs it) is timed per slice between its turns of the
 * event loop, and an HTTP request by the longest CPU stretch between ticks of a 5 ms
 * timer while it runs: that is how long each holds the loop at once.
 */
import { parseArgs } from "node:util";
import { createApi } from "../src/api/server.js";
import { createPunctual } from "../src/app/punctual.js";
import { LIST_PAGE_MAX_BYTES } from "../src/contracts/index.js";
import { ValidationError } from "../src/errors/index.js";
import { dryRunDeliveriesAsync, parseCalendar } from "../src/ical/index.js";
import { parseRule, preview, validateRule } from "../src/recurrence/index.js";
import { getZone } from "../src/recurrence/zone.js";
import {
  mutateCalendar,
  oddText,
  prng,
  randomDtstart,
  randomRecurrence,
  randomTemplate,
  ZONES,
  type FuzzRecurrence,
  type Rand,
} from "./fuzz/inputs.js";
import { threadCpuMs } from "./fuzz/thread-cpu.js";

const { values } = parseArgs({
  options: {
    seed: { type: "string" },
    short: { type: "boolean", default: false },
    rules: { type: "string" },
    calendars: { type: "string" },
    "limit-ms": { type: "string", default: "100" },
    "http-every": { type: "string" },
  },
});
const seed = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
if (!Number.isInteger(seed) || seed < 0) throw new Error(`--seed must be a whole number`);
const RULES = Number(values.rules ?? (values.short ? 4_000 : 200_000));
const CALENDARS = Number(values.calendars ?? (values.short ? 400 : 20_000));
const LIMIT_MS = Number(values["limit-ms"]);
const HTTP_EVERY = Number(values["http-every"] ?? (values.short ? 20 : 200));
const WARMUP = Math.min(300, Math.floor(RULES / 10));
console.log(
  `fuzz: seed ${seed} (replay: npm run fuzz -- --seed ${seed}${values.short ? " --short" : ""}), ${RULES} rules, ${CALENDARS} calendars, limit ${LIMIT_MS} ms per call`,
);

interface Case {
  what: string;
  input: string;
  cpuMs: number;
  wallMs: number;
}
const worst: Case[] = [];
const failures: string[] = [];
let calls = 0;
let timing = false;

function note(c: Case): void {
  if (!timing) return;
  worst.push(c);
  if (worst.length > 40) {
    worst.sort((a, b) => b.cpuMs - a.cpuMs);
    worst.length = 20;
  }
  if (c.cpuMs > LIMIT_MS)
    failures.push(`over ${LIMIT_MS} ms: ${c.what} ${c.cpuMs.toFixed(1)} ms cpu — ${c.input}`);
}

/** Runs one call, timed; a ValidationError is an answer, anything else a crash. */
function call<T>(what: string, input: () => string, fn: () => T): T | undefined {
  calls++;
  const cpu0 = threadCpuMs();
  const wall0 = performance.now();
  let result: T | undefined;
  try {
    result = fn();
  } catch (err) {
    if (!(err instanceof ValidationError)) {
      failures.push(
        `crash: ${what} ${String((err as Error)?.stack ?? err).slice(0, 400)} — ${input()}`,
      );
    }
  }
  note({
    what,
    input: input(),
    cpuMs: threadCpuMs() - cpu0,
    wallMs: performance.now() - wall0,
  });
  return result;
}

const show = (v: unknown): string => JSON.stringify(v).slice(0, 300);
const NOW = Date.parse("2027-01-04T08:00:00Z");
const DAY = 86_400_000;

function fuzzRule(r: Rand, input: FuzzRecurrence): void {
  const text = () => show(input);
  call("validateRule", text, () => validateRule(input));
  const parsed = call("parseRule", text, () => parseRule(input));
  if (parsed === undefined) {
    failures.push(`crash: parseRule threw — ${text()}`);
    return;
  }
  if (!parsed.ok) return;
  const rec = parsed.recurrence;
  call("between(first, ∞, 10)", text, () => rec.between(rec.first.instant, Infinity, 10));
  const from = NOW + Math.floor((r() - 0.5) * 400 * DAY);
  const to = from + Math.floor(r() * r() * 60 * DAY) + 1;
  const scanned = call("scan(30 days)", text, () => rec.scan(from, to, 10_000));
  if (scanned !== undefined && !scanned.truncated && scanned.occurrences.length < 10_000) {
    const bound = rec.maxOccurrences(from, to);
    if (scanned.occurrences.length > bound) {
      failures.push(
        `bound: ${scanned.occurrences.length} occurrences > maxOccurrences ${bound} in [${new Date(from).toISOString()}, ${new Date(to).toISOString()}) — ${text()}`,
      );
    }
  }
  call("next(now)", text, () => rec.next(NOW));
  const count = r() < 0.1 ? 10_000 : 1 + Math.floor(r() * 50);
  const after = r() < 0.5 ? null : randomDtstart(r);
  call(
    `preview(count ${count})`,
    () => show({ ...input, count, after }),
    () => preview({ ...input, count, after }),
  );
}

/** Runs an async call and times its longest synchronous slice (between event-loop turns). */
async function callSliced(
  what: string,
  input: () => string,
  fn: (yieldNow: () => Promise<void>) => Promise<unknown>,
): Promise<void> {
  calls++;
  let cpu0 = threadCpuMs();
  let wall0 = performance.now();
  let cpuMax = 0;
  let wallMax = 0;
  const cut = (): void => {
    cpuMax = Math.max(cpuMax, threadCpuMs() - cpu0);
    wallMax = Math.max(wallMax, performance.now() - wall0);
  };
  const yieldNow = async (): Promise<void> => {
    cut();
    await new Promise<void>((resolve) => setImmediate(resolve));
    cpu0 = threadCpuMs();
    wall0 = performance.now();
  };
  try {
    await fn(yieldNow);
  } catch (err) {
    if (!(err instanceof ValidationError)) {
      failures.push(
        `crash: ${what} ${String((err as Error)?.stack ?? err).slice(0, 400)} — ${input()}`,
      );
    }
  }
  cut();
  note({ what: `${what} (longest slice)`, input: input(), cpuMs: cpuMax, wallMs: wallMax });
}

async function fuzzCalendar(r: Rand, text: string): Promise<void> {
  const options = {
    source: "fuzz",
    remind: r() < 0.8 ? ["-PT15M"] : [],
    useAlarms: r() < 0.5,
  };
  const where = () => show(text.slice(0, 1500));
  const parsed = call("parseCalendar", where, () => parseCalendar(text, options));
  if (parsed === undefined) return;
  const from = NOW + Math.floor((r() - 0.5) * 60 * DAY);
  const span = r() < 0.1 ? 3650 * DAY : 30 * DAY;
  await callSliced(`dryRun(${span / DAY} days)`, where, (yieldNow) =>
    dryRunDeliveriesAsync(parsed, { fromMs: from, toMs: from + span }, yieldNow),
  );
}

/** A line on stderr at each tenth of a phase, so a long run shows where it is. */
function progress(phase: string, done: number, total: number): void {
  const step = Math.max(1, Math.floor(total / 10));
  if (done % step !== 0 && done !== total) return;
  const s = ((performance.now() - started) / 1000).toFixed(0);
  process.stderr.write(`fuzz: ${phase} ${done}/${total} (${s} s, ${failures.length} problem(s))\n`);
}

// --- in-process ---------------------------------------------------------------------
for (const id of [...ZONES, "Australia/Sydney"]) {
  const zone = getZone(id);
  for (let ms = Date.UTC(1900, 0, 1); ms < Date.UTC(2500, 0, 1); ms += 20 * DAY) zone.offsetAt(ms);
}
const rand = prng(seed);
const ruleInputs: FuzzRecurrence[] = [];
const started = performance.now();
for (let i = 0; i < RULES; i++) {
  timing = i >= WARMUP;
  const input = randomRecurrence(rand);
  fuzzRule(rand, input);
  if (i % HTTP_EVERY === 0) ruleInputs.push(input);
  progress("rules", i + 1, RULES);
}
const calendarTexts: string[] = [];
for (let i = 0; i < CALENDARS; i++) {
  const text = mutateCalendar(rand);
  await fuzzCalendar(rand, text);
  if (i % HTTP_EVERY === 0) calendarTexts.push(text);
  progress("calendars", i + 1, CALENDARS);
}
const inProcessS = (performance.now() - started) / 1000;

// --- through the HTTP API -----------------------------------------------------------
const punctual = await createPunctual({
  dataDir: null,
  logLevel: "silent",
  webhookSecret: "whsec_ZnV6ei1zZWNyZXQtZm9yLXB1bmN0dWFs",
});
const app = createApi(punctual);
let requests = 0;
let status5xx = 0;
// An HTTP request is async: it is timed as the longest stretch of CPU time between two
// ticks of a 5 ms timer while it runs (how long it held the event loop at once), not as
// the sum of its slices.
let stretch = 0;
let stretchWall = 0;
const perRoute = new Map<string, number>();
let tickCpu = threadCpuMs();
let tickWall = performance.now();
const ticker = setInterval(() => {
  const now = threadCpuMs();
  stretch = Math.max(stretch, now - tickCpu);
  stretchWall = Math.max(stretchWall, performance.now() - tickWall);
  tickCpu = now;
  tickWall = performance.now();
}, 5);
/** Sends one request, timed; answers the created or edited schedule's id, if any. */
async function request(
  what: string,
  input: string,
  path: string,
  init: RequestInit,
): Promise<string | undefined> {
  requests++;
  await new Promise<void>((resolve) => setTimeout(resolve, 6));
  stretch = 0;
  stretchWall = 0;
  tickCpu = threadCpuMs();
  tickWall = performance.now();
  let status = 0;
  let id: string | undefined;
  try {
    const res = await app.request(path, init);
    status = res.status;
    const body: unknown = JSON.parse((await res.text()) || "null");
    if (status < 300 && body !== null && typeof body === "object" && "id" in body)
      id = String(body.id);
  } catch (err) {
    failures.push(`crash: ${what} ${String(err).slice(0, 300)} — ${input}`);
  }
  await new Promise<void>((resolve) => setTimeout(resolve, 6));
  // The first requests of each route warm its code and the database's statements.
  const seen = (perRoute.get(what) ?? 0) + 1;
  perRoute.set(what, seen);
  if (seen > 3)
    note({ what: `${what} (longest stretch)`, input, cpuMs: stretch, wallMs: stretchWall });
  if (status >= 500) {
    status5xx++;
    failures.push(`${status}: ${what} — ${input}`);
  }
  return id;
}
const json = (body: unknown): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});
const httpStarted = performance.now();
for (const [i, input] of ruleInputs.entries()) {
  await request("POST /v1/preview", show(input), "/v1/preview", json({ ...input, count: 10 }));
  if (i % 5 === 0) {
    const id = await request(
      "POST /v1/schedules",
      show(input),
      "/v1/schedules",
      json({ ...input, payload: { i }, reminders: [{ offset: "-PT15M", channel: "log" }] }),
    );
    // An edit to the next rule's recurrence (validated, realigned and planned again).
    const next = ruleInputs[i + 1];
    if (typeof id === "string" && next !== undefined) {
      await request("PATCH /v1/schedules/{id}", show(next), `/v1/schedules/${id}`, {
        method: "PATCH",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(next),
      });
    }
  }
  progress("HTTP rules", i + 1, ruleInputs.length);
}
for (const [i, text] of calendarTexts.entries()) {
  const init: RequestInit = {
    method: "POST",
    headers: { "content-type": "text/calendar" },
    body: text,
  };
  await request(
    "POST /v1/imports?dryRun=true",
    show(text.slice(0, 600)),
    `/v1/imports?source=fuzz-${i}&remind=-PT15M&channel=log&dryRun=true`,
    init,
  );
  await request(
    "POST /v1/imports",
    show(text.slice(0, 600)),
    `/v1/imports?source=fuzz-${i}&remind=-PT15M&channel=log`,
    init,
  );
}
// Templates and large or odd text fields: each answer is a 2xx or a 4xx, never a 5xx.
for (let i = 0; i < (values.short ? 20 : 100); i++) {
  const template = { subject: oddText(rand).slice(0, 600), text: randomTemplate(rand) };
  const body = {
    dtstart: "2027-02-01T09:00:00",
    title: oddText(rand),
    payload: { s: oddText(rand), list: Array.from({ length: 50 }, (_, k) => `v${k}`) },
    reminders: [{ offset: "PT0S", channel: "log", template }],
  };
  const created = await request(
    "POST /v1/schedules (text fields)",
    show(JSON.stringify(body).slice(0, 300)),
    "/v1/schedules",
    json(body),
  );
  // Send it now too: the template renders as at send time (off the loop when heavy, under
  // its deadline), and a render error becomes the delivery's lastError.
  if (created !== undefined) {
    await request(
      "POST /v1/schedules/{id}/trigger (text fields)",
      created,
      `/v1/schedules/${created}/trigger`,
      json({}),
    );
  }
  const summary = oddText(rand);
  const ics =
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//fuzz//EN\r\nBEGIN:VEVENT\r\n" +
    `UID:odd-${i}\r\nDTSTART:20270201T090000Z\r\nSUMMARY:${summary}\r\nLOCATION:${oddText(rand)}\r\n` +
    "END:VEVENT\r\nEND:VCALENDAR\r\n";
  await request(
    "POST /v1/imports (text fields)",
    show(summary.slice(0, 100)),
    `/v1/imports?source=fuzz-odd&remind=PT0S&channel=log`,
    {
      method: "POST",
      headers: { "content-type": "text/calendar" },
      body: ics,
    },
  );
}
await request("GET /v1/schedules (after text fields)", "limit=1000", "/v1/schedules?limit=1000", {
  method: "GET",
});
// The triggered sends: a pass claims and renders them; each ends sent or failed, never
// the process. The pass is timed like a request (the longest stretch it held the loop).
for (let pass = 0; pass < 3; pass++) {
  await new Promise<void>((resolve) => setTimeout(resolve, 6));
  stretch = 0;
  stretchWall = 0;
  tickCpu = threadCpuMs();
  tickWall = performance.now();
  try {
    await punctual.scheduler.tick();
    await punctual.scheduler.drain();
  } catch (err) {
    failures.push(`crash: send pass ${pass} ${String(err).slice(0, 300)}`);
  }
  await new Promise<void>((resolve) => setTimeout(resolve, 6));
  if (pass > 0)
    note({
      what: "send pass (longest stretch)",
      input: `pass ${pass}`,
      cpuMs: stretch,
      wallMs: stretchWall,
    });
}
const sendStates = await punctual.db.query<{ state: string; n: number }>(
  `select state, count(*)::int as n from punctual_deliveries where reminder_key is not null
   and schedule_id in (select id from punctual_schedules where title is not null) group by state order by state`,
);
console.log(
  `sends of the text-field schedules: ${sendStates.rows.map((r) => `${r.n} ${r.state}`).join(", ") || "none"}`,
);
// Lists stay bounded in bytes whatever the sends reported (API-3).
for (const path of ["/v1/deliveries?limit=1000", "/v1/schedules?limit=1000"]) {
  const res = await app.request(path);
  const size = Buffer.byteLength(await res.text());
  if (res.status !== 200 || size > LIST_PAGE_MAX_BYTES) {
    failures.push(`list ${path}: ${res.status}, ${size} bytes (bound ${LIST_PAGE_MAX_BYTES})`);
  }
}
const httpS = (performance.now() - httpStarted) / 1000;
clearInterval(ticker);
await punctual.close(0);

// --- report -------------------------------------------------------------------------
worst.sort((a, b) => b.cpuMs - a.cpuMs);
console.log(
  `${calls} calls in process (${inProcessS.toFixed(1)} s), ${requests} HTTP requests (${httpS.toFixed(1)} s), ${status5xx} answered 5xx`,
);
console.log("worst calls (cpu ms / wall ms):");
for (const w of worst.slice(0, 10)) {
  console.log(`  ${w.cpuMs.toFixed(1)} / ${w.wallMs.toFixed(1)}  ${w.what}  ${w.input}`);
}
if (failures.length > 0) {
  console.log(`\nFAILED: ${failures.length} problem(s); the first ones:`);
  for (const f of failures.slice(0, 20)) console.log(`  ${f}`);
  console.log(`replay: npm run fuzz -- --seed ${seed}${values.short ? " --short" : ""}`);
  process.exit(1);
}
console.log(`ok: no crash, no 5xx, nothing over ${LIMIT_MS} ms (seed ${seed})`);
