/**
 * `npm run bench:eventloop` (OPS-12): how long the API process's event loop is ever held
 * while it serves a fuzz of random rules and a large calendar import, with its scheduler
 * running. This process runs punctual (embedded PGlite in a fresh data folder under the
 * system's temporary directory, as a default install runs it; removed at the end) behind
 * its HTTP API on 127.0.0.1 and measures `perf_hooks.monitorEventLoopDelay`; a child process
 * (bench/lib/eventloop-client.ts) sends the load and samples `GET /healthz` every 25 ms
 * throughout. Target: event-loop delay p100 ≤ 100 ms and every /healthz answered within
 * 100 ms.
 *
 *   npm run bench:eventloop                       100,000 rules, a 50,000-event import
 *   npm run bench:eventloop -- --quick            10,000 rules, a 5,000-event import
 *   npm run bench:eventloop -- --rules N --events N --seed N
 *   npm run bench:eventloop -- --warm             zones' offset caches filled first
 *   npm run bench:eventloop -- --trace 50         print what ran in each CPU stretch over 50 ms
 *   npm run bench:eventloop -- --memory           the database in memory instead (as tests run it)
 */
import { fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, type IntervalHistogram } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createApi, serveApi } from "../src/api/server.js";
import { createPunctual } from "../src/app/punctual.js";
import { getZone } from "../src/recurrence/zone.js";
import { ZONES } from "../scripts/fuzz/inputs.js";
import { THREAD_CPU_IS_PER_THREAD, threadCpuMs } from "../scripts/fuzz/thread-cpu.js";
import { LoopTrace } from "./lib/loop-trace.js";

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    rules: { type: "string" },
    events: { type: "string" },
    seed: { type: "string", default: "12" },
    warm: { type: "boolean", default: false },
    trace: { type: "string" },
    memory: { type: "boolean", default: false },
  },
  strict: false,
});
const RULES = Number(values.rules ?? (values.quick ? 10_000 : 100_000));
const EVENTS = Number(values.events ?? (values.quick ? 5_000 : 50_000));
const SEED = Number(values.seed);

console.log(
  `${new Date().toISOString()}, node ${process.version}, ${cpus().length}× ${cpus()[0]?.model ?? "cpu"}, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}`,
);
console.log(
  `${RULES} rules, a ${EVENTS}-event import, seed ${SEED}; CPU stretches of ${THREAD_CPU_IS_PER_THREAD ? "the event loop's thread" : "the whole process (no per-thread clock here)"}`,
);

// A data folder by default: in memory, the engine's files are JavaScript byte arrays that
// grow by copying (an eighth at a time past 1 MB), so a large import's tables and each new
// WAL segment cost copies of whole files on the event loop's thread (OPS-12 figures in
// docs/benchmarks.md); a data folder writes through the file system, as punctual runs.
const dataDir = values.memory === true ? null : mkdtempSync(join(tmpdir(), "punctual-eventloop-"));
console.log(
  `database: ${dataDir === null ? "PGlite in memory" : "PGlite data folder (temporary)"}`,
);
const punctual = await createPunctual({
  dataDir,
  logLevel: "silent",
  webhookSecret: "whsec_ZXZlbnQtbG9vcC1iZW5jaC1zZWNyZXQ",
});
const trace = values.trace === undefined ? null : new LoopTrace(Number(values.trace));
if (trace !== null) {
  trace.wrapDatabase(punctual.db);
  trace.wrapZones();
}
await punctual.start();
if (values.warm === true) {
  // --warm: fill the zones' offset caches first (a one-time cost per zone and process).
  for (const id of ZONES) {
    const zone = getZone(id);
    for (let ms = Date.UTC(1900, 0, 1); ms < Date.UTC(2500, 0, 1); ms += 20 * 86_400_000)
      zone.offsetAt(ms);
  }
}
const api = createApi(punctual);
if (trace !== null) api.fetch = trace.wrapFetch(api.fetch);
const served = await serveApi(api, { host: "127.0.0.1", port: 0 });

interface PhaseResult {
  phase: string;
  requests: number;
  statuses: Record<string, number>;
  seconds: number;
  healthz: { samples: number; p50: number; p99: number; max: number; over100: number };
}
const loop: Array<{ phase: string; p50: number; p99: number; max: number; cpuMax: number }> = [];
let histogram: IntervalHistogram | null = null;
// The same loop in CPU terms: the CPU time the event loop's thread spent between two
// ticks of a 10 ms timer (not the API's worker threads, which run beside it). On a shared machine the wall-clock delay also counts time the process
// waited for a core; this does not, so it shows the longest stretch of our own work.
let cpuMax = 0;
let lastCpu = threadCpuMs();
let lastTick = performance.now();
const ticker = setInterval(() => {
  const now = threadCpuMs();
  const stretch = now - lastCpu;
  lastCpu = now;
  cpuMax = Math.max(cpuMax, stretch);
  trace?.tick(stretch, lastTick);
  lastTick = performance.now();
}, 10);
const startPhase = (): void => {
  histogram?.disable();
  histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  cpuMax = 0;
  lastCpu = threadCpuMs();
};
const endPhase = (phase: string): void => {
  const h = histogram as IntervalHistogram;
  h.disable();
  loop.push({
    phase,
    p50: h.percentile(50) / 1e6,
    p99: h.percentile(99) / 1e6,
    max: h.max / 1e6,
    cpuMax,
  });
};

const client = fork(
  fileURLToPath(new URL("./lib/eventloop-client.ts", import.meta.url)),
  [JSON.stringify({ url: served.url, rules: RULES, events: EVENTS, seed: SEED })],
  { execArgv: ["--import", "tsx"], stdio: "inherit" },
);
const results: PhaseResult[] = [];
await new Promise<void>((resolve, reject) => {
  client.on("message", (m: { type: string; phase?: string; result?: PhaseResult }) => {
    if (m.type === "start") startPhase();
    else if (m.type === "end") {
      endPhase(m.phase as string);
      results.push(m.result as PhaseResult);
      // Each phase's figures at once, so a later failure does not lose them.
      const l = loop.at(-1)!;
      console.log(
        `phase done: ${m.phase}: loop p50/p99/p100 ${l.p50.toFixed(1)}/${l.p99.toFixed(1)}/${l.max.toFixed(1)} ms, longest CPU stretch ${l.cpuMax.toFixed(1)} ms, ${JSON.stringify(m.result)}`,
      );
    } else if (m.type === "done") resolve();
  });
  client.on("exit", (code) =>
    code === 0 ? resolve() : reject(new Error(`client exited ${code}`)),
  );
});
clearInterval(ticker);
await served.close(1_000);
await punctual.close(1_000);
if (dataDir !== null) rmSync(dataDir, { recursive: true, force: true });

const fmt = (n: number) => n.toFixed(1);
console.log("");
console.log(
  "| phase | requests | answers | seconds | loop delay p50 / p99 / **p100** (ms) | longest CPU stretch (ms) | /healthz samples | /healthz p50 / p99 / **max** (ms) | /healthz over 100 ms |",
);
console.log("|---|---:|---|---:|---:|---:|---:|---:|---:|");
let worstLoop = 0;
let worstHealth = 0;
for (const r of results) {
  const l = loop.find((x) => x.phase === r.phase)!;
  worstLoop = Math.max(worstLoop, l.max);
  worstHealth = Math.max(worstHealth, r.healthz.max);
  const answers = Object.entries(r.statuses)
    .map(([k, v]) => `${k}: ${v}`)
    .join(", ");
  console.log(
    `| ${r.phase} | ${r.requests} | ${answers} | ${fmt(r.seconds)} | ${fmt(l.p50)} / ${fmt(l.p99)} / **${fmt(l.max)}** | ${fmt(l.cpuMax)} | ${r.healthz.samples} | ${fmt(r.healthz.p50)} / ${fmt(r.healthz.p99)} / **${fmt(r.healthz.max)}** | ${r.healthz.over100} |`,
  );
}
const met = worstLoop <= 100 && worstHealth <= 100;
console.log(
  `\ntarget (p100 ≤ 100 ms, /healthz ≤ 100 ms): ${met ? "met" : "NOT met"} — loop p100 ${fmt(worstLoop)} ms, /healthz max ${fmt(worstHealth)} ms; load average after ${loadavg()
    .map((x) => x.toFixed(2))
    .join(" ")}`,
);
