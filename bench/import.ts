/**
 * A large calendar import, alone (OPS-12, API-5): one process imports a generated
 * calendar of `--events` events (default 50,000) into a fresh database, then imports the
 * same file again (every event unchanged), then an edited copy (every summary changed:
 * every event updated). Reports per pass the wall time, the event loop's longest stretch
 * (`monitorEventLoopDelay` p99 and max) and the longest CPU stretch of this thread between
 * two ticks of a 10 ms timer.
 *
 *   node --import tsx bench/import.ts                  50,000 events, PGlite data folder
 *   node --import tsx bench/import.ts --quick          5,000 events
 *   DATABASE_URL=… node --import tsx bench/import.ts   on PostgreSQL (an empty database)
 *
 * Flags: `--events N`, `--seed N`, `--passes create,unchanged,updated`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { importCalendar } from "../src/app/import.js";
import { createPunctual } from "../src/app/punctual.js";
import { largeCalendar, prng } from "../scripts/fuzz/inputs.js";
import { THREAD_CPU_IS_PER_THREAD, threadCpuMs } from "../scripts/fuzz/thread-cpu.js";

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    events: { type: "string" },
    seed: { type: "string", default: "7" },
    passes: { type: "string", default: "create,unchanged,updated" },
  },
  strict: false,
});
const EVENTS = Number(values.events ?? (values.quick === true ? 5_000 : 50_000));
const passes = String(values.passes).split(",");
const url = process.env.DATABASE_URL;

const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
console.log(
  `${new Date().toISOString()}, node ${process.version}, ${cpus().length}× ${cpus()[0]?.model ?? "cpu"}, load average ${load()}`,
);
const calendar = largeCalendar(prng(Number(values.seed)), EVENTS);
const edited = calendar.replace(/^SUMMARY:Event /gm, "SUMMARY:Meeting ");
console.log(
  `import of ${EVENTS} events (${(calendar.length / 1e6).toFixed(1)} MB), ${url ? "PostgreSQL" : "PGlite data folder"}; CPU stretches of ${THREAD_CPU_IS_PER_THREAD ? "this thread" : "the process"}`,
);

const dataDir = url ? null : mkdtempSync(join(tmpdir(), "punctual-import-bench-"));
const punctual = await createPunctual({
  ...(url ? { databaseUrl: url } : { dataDir }),
  logLevel: "silent",
});

const rows: string[] = [];
for (const pass of passes) {
  const text = pass === "updated" ? edited : calendar;
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  let cpuMax = 0;
  let lastCpu = threadCpuMs();
  const ticker = setInterval(() => {
    const now = threadCpuMs();
    cpuMax = Math.max(cpuMax, now - lastCpu);
    lastCpu = now;
  }, 10);
  histogram.enable();
  const started = performance.now();
  const summary = await importCalendar(punctual, text, {
    source: "bench",
    remind: ["-PT15M"],
    channel: "log",
  });
  const seconds = (performance.now() - started) / 1000;
  histogram.disable();
  clearInterval(ticker);
  rows.push(
    `| ${pass} | ${summary.created} / ${summary.updated} / ${summary.unchanged} / ${summary.skipped.length} | ${seconds.toFixed(1)} | ${(histogram.percentile(99) / 1e6).toFixed(1)} / **${(histogram.max / 1e6).toFixed(1)}** | ${cpuMax.toFixed(1)} | ${load()} |`,
  );
  console.log(rows[rows.length - 1]);
}
console.log("");
console.log(
  "| pass | created / updated / unchanged / skipped | s | loop delay p99 / max (ms) | longest CPU stretch (ms) | load average |",
);
console.log("|---|---|---|---|---|---|");
for (const r of rows) console.log(r);
await punctual.close(0);
if (dataDir) rmSync(dataDir, { recursive: true, force: true });
