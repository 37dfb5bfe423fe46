#!/usr/bin/env node
// `npm test`: every suite, on both engines.
//   1. unit                          — no database
//   2. integration on PGlite         — PUNCTUAL_TEST_ENGINE=pglite, with the packed-package
//      test (the tarball installed into an empty project; engine-independent, run once)
//   3. integration + concurrency on PostgreSQL — PUNCTUAL_TEST_ENGINE=postgres, against
//      DATABASE_URL when set, else a throwaway cluster started here (scripts/pg-cluster.mjs)
//      and stopped at the end (also on failure or Ctrl-C). Without DATABASE_URL and without
//      PostgreSQL binaries the stage is reported as NOT run.
// Extra arguments go to every vitest run (`npm test -- test/unit/x.test.ts` filters).
// PUNCTUAL_TEST_ENGINES=pglite (or postgres) limits the database stages to one engine.
// The end-to-end files that run the product on its embedded engine whatever the stage
// (vitest.config.ts, EMBEDDED_ONLY_E2E) run in the PGlite stage only.
// PUNCTUAL_TEST_LANES=2 (CI sets it) runs the PGlite stage beside the unit and PostgreSQL
// stages instead of after them: much of the suite waits on processes, sockets and fsync,
// so two lanes shorten the run on a 2-core machine. Each stage's output is then kept and
// printed whole when the stage ends, so the two lanes' lines do not interleave.
// Ends with one line `tests: N passed, N failed, N skipped`; exits non-zero if a stage failed.
import { spawn } from "node:child_process";
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { findPgBin, startCluster } from "./pg-cluster.mjs";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const vitestBin = join(root, "node_modules", "vitest", "vitest.mjs");
const extraArgs = process.argv.slice(2);
const engines = (process.env.PUNCTUAL_TEST_ENGINES ?? "pglite,postgres")
  .split(",")
  .map((e) => e.trim())
  .filter(Boolean);
const reportDir = mkdtempSync(join(tmpdir(), "punctual-test-report-"));
const lanes = process.env.PUNCTUAL_TEST_LANES === "2" ? 2 : 1;

/** @type {{ name: string; engine: string; passed: number; failed: number; skipped: number; seconds: number; ok: boolean; note?: string }[]} */
const results = [];
/** Lines printed before the total: stages that did not run, and why. */
const notRun = [];
let cluster = null;
/** The vitest processes running now (one per lane). */
const children = new Set();
let interrupted = false;

function stopClusterOnce() {
  if (!cluster) return;
  const c = cluster;
  cluster = null;
  try {
    c.stop();
    console.log(`PostgreSQL cluster on port ${c.port} stopped.`);
  } catch (err) {
    console.error(`could not stop the PostgreSQL cluster in ${c.dir}: ${err.message}`);
  }
}

function onSignal(signal) {
  interrupted = true;
  // Pass it on (vitest cancels the run); the cluster is stopped once vitest has exited.
  for (const c of children) c.kill(signal);
  if (children.size === 0) {
    stopClusterOnce();
    process.exit(130);
  }
}
process.on("SIGINT", () => onSignal("SIGINT"));
process.on("SIGTERM", () => onSignal("SIGTERM"));
process.on("exit", () => {
  stopClusterOnce();
  rmSync(reportDir, { recursive: true, force: true });
});

function banner(text) {
  const line = "═".repeat(Math.max(20, Math.min(100, text.length + 4)));
  console.log(`\n${line}\n  ${text}\n${line}`);
}

/** Counts from vitest's JSON report; a file that failed to load counts as one failure. */
function readCounts(file) {
  const report = JSON.parse(readFileSync(file, "utf8"));
  let loadFailures = 0;
  for (const suite of report.testResults ?? []) {
    const failedTests = (suite.assertionResults ?? []).filter((a) => a.status === "failed").length;
    if (suite.status === "failed" && failedTests === 0) loadFailures += 1;
  }
  return {
    passed: report.numPassedTests ?? 0,
    failed: (report.numFailedTests ?? 0) + loadFailures,
    skipped: (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0),
  };
}

/**
 * Runs one vitest invocation as a stage and records its counts. With `capture`, the
 * stage's output goes to a file that is printed whole when the stage ends (two lanes).
 */
async function runStage(name, engineLabel, projects, env, filters = [], capture = false) {
  const title = `${name} — ${engineLabel}`;
  const reportFile = join(
    reportDir,
    `${results.length}-${Math.random().toString(36).slice(2)}.json`,
  );
  const args = [
    vitestBin,
    "run",
    ...projects.flatMap((p) => ["--project", p]),
    "--passWithNoTests",
    "--reporter=default",
    "--reporter=json",
    `--outputFile.json=${reportFile}`,
    ...(extraArgs.length > 0 ? extraArgs : filters),
  ];
  const started = Date.now();
  const logFile = capture ? `${reportFile}.log` : null;
  if (capture) console.log(`started: ${title} (its output follows when it ends)`);
  else banner(title);
  const code = await new Promise((resolveCode) => {
    const out = logFile ? createWriteStream(logFile) : null;
    const child = spawn(process.execPath, args, {
      cwd: root,
      // A captured stage keeps its colours when the terminal has them.
      env: capture && process.stdout.isTTY ? { ...env, FORCE_COLOR: "1" } : env,
      stdio: ["ignore", capture ? "pipe" : "inherit", capture ? "pipe" : "inherit"],
    });
    children.add(child);
    child.stdout?.pipe(out, { end: false });
    child.stderr?.pipe(out, { end: false });
    child.on("error", (err) => {
      console.error(`could not run vitest: ${err.message}`);
      children.delete(child);
      resolveCode(1);
    });
    child.on("close", (exitCode, signal) => {
      children.delete(child);
      const done = () => resolveCode(exitCode ?? (signal ? 1 : 0));
      if (out) out.end(done);
      else done();
    });
  });
  if (logFile) {
    banner(title);
    process.stdout.write(readFileSync(logFile, "utf8"));
  }
  const seconds = (Date.now() - started) / 1000;
  let counts = { passed: 0, failed: 0, skipped: 0 };
  let note;
  try {
    counts = readCounts(reportFile);
  } catch {
    note = "no report: vitest did not finish";
  }
  // A non-zero exit with no failing test (crash, unhandled error) still counts as a failure.
  if (code !== 0 && counts.failed === 0) {
    counts.failed = 1;
    note ??= `vitest exited with code ${code} (errors outside tests)`;
  }
  results.push({ name, engine: engineLabel, ...counts, seconds, ok: code === 0, note });
  return code === 0;
}

function baseEnv() {
  const env = { ...process.env };
  delete env.PUNCTUAL_TEST_ENGINE;
  return env;
}

function describeUrl(url) {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    return "(unparseable DATABASE_URL)";
  }
}

/** 1. unit, with the host time zone pinned to UTC; then the time-zone-sensitive suites
 *  (recurrence, iCalendar) again under two other host zones (REC-2: results never
 *  depend on the host's TZ). */
async function unitStages(capture) {
  await runStage("unit", "no database, TZ=UTC", ["unit"], { ...baseEnv(), TZ: "UTC" }, [], capture);
  if (interrupted || extraArgs.length > 0) return;
  for (const tz of ["America/New_York", "Asia/Kolkata"]) {
    await runStage(
      "unit (time zones)",
      `no database, TZ=${tz}`,
      ["unit"],
      { ...baseEnv(), TZ: tz },
      ["test/unit/recurrence", "test/unit/ical"],
      capture,
    );
    if (interrupted) return;
  }
}

/**
 * 2. integration on PGlite; with `withPackage`, also the packed-package test (which is
 * engine-independent; with two lanes it runs in the other, shorter lane).
 */
async function pgliteStage(capture, withPackage = true) {
  if (!engines.includes("pglite")) {
    notRun.push("PGlite suite NOT run: PUNCTUAL_TEST_ENGINES excludes pglite");
    return;
  }
  const env = { ...baseEnv(), PUNCTUAL_TEST_ENGINE: "pglite" };
  delete env.DATABASE_URL;
  await runStage(
    withPackage ? "integration + package" : "integration",
    "engine PGlite (embedded, in memory)",
    withPackage ? ["integration", "package"] : ["integration"],
    env,
    [],
    capture,
  );
}

/** The packed-package test alone (two lanes). */
async function packageStage(capture) {
  const env = { ...baseEnv(), PUNCTUAL_TEST_ENGINE: "pglite" };
  delete env.DATABASE_URL;
  await runStage(
    "package",
    "the packed tarball in an empty project",
    ["package"],
    env,
    [],
    capture,
  );
}

/** 3. integration + concurrency on PostgreSQL. */
async function postgresStage(capture) {
  if (!engines.includes("postgres")) {
    notRun.push("PostgreSQL suite NOT run: PUNCTUAL_TEST_ENGINES excludes postgres");
    return;
  }
  let url = process.env.DATABASE_URL;
  let label;
  if (url) {
    label = `engine PostgreSQL at ${describeUrl(url)} (DATABASE_URL)`;
  } else if (!findPgBin()) {
    const message =
      "PostgreSQL suite NOT run: no DATABASE_URL and no PostgreSQL binaries found " +
      "(install postgresql-15 or set DATABASE_URL)";
    banner(message);
    notRun.push(message);
    return;
  } else {
    const started = Date.now();
    try {
      cluster = await startCluster();
    } catch (err) {
      const message = `PostgreSQL suite FAILED to start a throwaway cluster: ${err.message}`;
      banner(message);
      results.push({
        name: "integration + concurrency",
        engine: "engine PostgreSQL (cluster did not start)",
        passed: 0,
        failed: 1,
        skipped: 0,
        seconds: (Date.now() - started) / 1000,
        ok: false,
        note: "set DATABASE_URL, or PUNCTUAL_TEST_ENGINES=pglite to skip",
      });
      return;
    }
    url = cluster.url;
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    label = `engine PostgreSQL at ${describeUrl(url)} (throwaway cluster from ${cluster.bin}, started in ${seconds} s)`;
  }
  if (interrupted) return;
  const env = { ...baseEnv(), PUNCTUAL_TEST_ENGINE: "postgres", DATABASE_URL: url };
  await runStage(
    "integration + concurrency",
    label,
    ["integration", "concurrency"],
    env,
    [],
    capture,
  );
}

async function main() {
  if (lanes === 1) {
    await unitStages(false);
    if (!interrupted) await pgliteStage(false);
    if (!interrupted) await postgresStage(false);
    return;
  }
  // Two lanes: PGlite (the longest stage) beside unit then PostgreSQL.
  banner(
    "two lanes: PGlite integration beside unit, package, then PostgreSQL (PUNCTUAL_TEST_LANES=2)",
  );
  await Promise.all([
    pgliteStage(true, false),
    (async () => {
      await unitStages(true);
      if (!interrupted && engines.includes("pglite")) await packageStage(true);
      if (!interrupted) await postgresStage(true);
    })(),
  ]);
}

try {
  await main();
} finally {
  stopClusterOnce();
}

const total = results.reduce(
  (acc, r) => ({
    passed: acc.passed + r.passed,
    failed: acc.failed + r.failed,
    skipped: acc.skipped + r.skipped,
  }),
  { passed: 0, failed: 0, skipped: 0 },
);
banner("summary");
for (const r of results) {
  const status = r.ok ? "ok" : "FAILED";
  console.log(
    `  ${status.padEnd(6)} ${r.name} — ${r.engine}: ${r.passed} passed · ${r.failed} failed · ` +
      `${r.skipped} skipped · ${r.seconds.toFixed(1)} s${r.note ? ` (${r.note})` : ""}`,
  );
}
for (const line of notRun) console.log(`  ${line}`);
const ranNothing = total.passed + total.failed === 0;
if (ranNothing && !interrupted) console.log("  no test ran (check the filter arguments)");
if (interrupted) console.log("  interrupted");
console.log(`tests: ${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped`);
const failed = interrupted || ranNothing || results.some((r) => !r.ok);
process.exitCode = interrupted ? 130 : failed ? 1 : 0;
