/**
 * OPS-13: a real `punctual worker` process serves /metrics, /healthz and /readyz on its
 * metrics port, and its counters count what it settled. The worker runs on the engine of
 * this run: a PostgreSQL test database, or an embedded data folder (one process at a time,
 * so the schedule is created before the worker starts). A loopback receiver takes the
 * webhook; every wait polls an outcome (the startup line, a sample in /metrics).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { createPunctual } from "../../src/app/punctual.js";
import { silentLogger } from "../../src/observability/logger.js";
import { openTestDatabase } from "../support/db.js";
import { exited, SECRET, startReceiver, until, type Receiver } from "../support/processes.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Environment without the variables that would change the CLI's defaults. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (key.startsWith("PUNCTUAL_") || key === "DATABASE_URL") delete env[key];
  }
  return { ...env, ...extra };
}

/** Where the worker's database is, with a schedule due now that posts to `receiver`. */
async function databaseWithDueSchedule(receiver: Receiver): Promise<string[]> {
  const reminder = { channel: "webhook", target: { url: receiver.url } };
  const schedule = { dtstart: new Date().toISOString(), reminders: [reminder] };
  const common = {
    logger: silentLogger(),
    allowPrivateTargets: true,
    webhookSecret: SECRET,
  } as const;
  if (process.env.PUNCTUAL_TEST_ENGINE === "postgres" && process.env.DATABASE_URL) {
    const handle = await openTestDatabase();
    cleanups.push(() => handle.close());
    const p = await createPunctual({ ...common, database: handle.db });
    await p.createSchedule(schedule);
    await p.close(0);
    return ["--database-url", handle.url!];
  }
  const dir = mkdtempSync(join(tmpdir(), "punctual-worker-metrics-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const p = await createPunctual({ ...common, dataDir: dir });
  await p.createSchedule(schedule);
  await p.close(0);
  return ["--data-dir", dir];
}

function spawnWorker(args: string[]): { child: ChildProcess; stderr: () => string } {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "worker", ...args], {
    cwd: root,
    env: cleanEnv({
      PUNCTUAL_ALLOW_PRIVATE_TARGETS: "true",
      PUNCTUAL_WEBHOOK_SECRET: SECRET,
      PUNCTUAL_LOG_LEVEL: "warn",
    }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  child.stderr?.on("data", (d: Buffer) => (err += d.toString()));
  child.stdout?.resume();
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  return { child, stderr: () => err };
}

describe("OPS-13 punctual worker is observable", () => {
  it("OPS-13: a worker serves /healthz, /readyz and /metrics on its metrics port, with process metrics and the delivery it sent counted once by outcome and once as an attempt", async () => {
    const receiver = await startReceiver();
    cleanups.push(() => new Promise<void>((resolve) => receiver.server.close(() => resolve())));
    const database = await databaseWithDueSchedule(receiver);
    const worker = spawnWorker([...database, "--metrics-port", "0"]);
    let base = "";
    await until(() => {
      const m = /metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(worker.stderr());
      if (m) base = m[1]!;
      return base !== "" || worker.child.exitCode !== null;
    }, "the worker's startup line");
    expect(base, worker.stderr()).not.toBe("");

    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    await receiver.waitFor(() => receiver.counts.size === 1, "the webhook");
    const sentSample = 'punctual_deliveries_total{channel="webhook",outcome="sent"} 1';
    let text = "";
    await until(async () => {
      text = await (await fetch(`${base}/metrics`)).text();
      return text.includes(sentSample);
    }, "the sent delivery in /metrics");
    expect(text).toContain('punctual_attempts_total{channel="webhook",outcome="sent"} 1');
    expect(text).toContain('punctual_delivery_lateness_seconds_count{channel="webhook"} 1');
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
    expect(text).toMatch(/^punctual_scheduler_last_pass_timestamp_seconds\{/m);
    expect(text).toMatch(/^punctual_due_backlog /m);
    await until(
      async () => (await fetch(`${base}/readyz`)).status === 200,
      "the worker to be ready",
    );

    worker.child.kill("SIGTERM");
    expect(await exited(worker.child)).toBe(0);
  });

  it("OPS-13: a second worker on one host finds the default metrics port taken and serves on a free one, saying so; a chosen busy port stops the start", async () => {
    // Hold the default port (or find it held already by someone else: the same case).
    const blocker = createServer();
    await new Promise<void>((resolve) => {
      blocker.once("error", () => resolve());
      blocker.listen(9464, "127.0.0.1", () => resolve());
    });
    cleanups.push(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
    const dir = mkdtempSync(join(tmpdir(), "punctual-worker-busyport-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const worker = spawnWorker(["--data-dir", dir]);
    await until(
      () =>
        /metrics on http:\/\/127\.0\.0\.1:\d+\/metrics/.test(worker.stderr()) ||
        worker.child.exitCode !== null,
      "the worker's startup line",
    );
    expect(worker.child.exitCode).toBeNull();
    const port = Number(
      /metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/.exec(worker.stderr())?.[1],
    );
    expect(port).not.toBe(9464);
    expect(worker.stderr()).toMatch(/metrics port 9464 is taken/);
    worker.child.kill("SIGTERM");
    expect(await exited(worker.child)).toBe(0);

    const chosen = spawnWorker(["--data-dir", dir, "--metrics-port", "9464"]);
    expect(await exited(chosen.child)).toBe(2);
    expect(chosen.stderr()).toMatch(/Cannot serve metrics on 127\.0\.0\.1:9464 \(EADDRINUSE\)/);
  });

  it("OPS-13: --metrics-port off serves no port and says so", async () => {
    const dir = mkdtempSync(join(tmpdir(), "punctual-worker-nometrics-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const worker = spawnWorker(["--data-dir", dir, "--metrics-port", "off"]);
    await until(
      () => worker.stderr().includes("no metrics port") || worker.child.exitCode !== null,
      "the worker's startup line",
    );
    expect(worker.stderr()).toMatch(/worker running .* no metrics port/);
  });
});
