/**
 * Shared rate-limit benchmark (DEL-13): many reminders due at once to one receiver behind
 * a 10/s limit, sent by 4 worker processes on one PostgreSQL. What it reports:
 * - the sent rate over every complete 10 s window, and its largest deviation from the
 *   limit (the target: within 2 %);
 * - the receiver's own 429s: it enforces 10/s itself (a bucket of 10), so every send the
 *   shared bucket let through too early shows as a 429;
 * - lost (never sent) and duplicated deliveries.
 *
 *   node --import tsx bench/ratelimit.ts [--quick] [--reminders 10000] [--workers 4] [--rate 10]
 *     [--burst 2]
 *
 * `--quick`: 600 reminders (about 60 s). PostgreSQL: DATABASE_URL, else a throwaway
 * cluster. Only loopback traffic.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createPunctual } from "../src/index.js";
// @ts-expect-error -- a plain .mjs helper without types
import { startCluster } from "../scripts/pg-cluster.mjs";

const { values: flags } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    reminders: { type: "string" },
    workers: { type: "string" },
    rate: { type: "string" },
    burst: { type: "string" },
  },
  strict: false,
});
const N = Number(flags.reminders ?? (flags.quick ? 600 : 10_000));
const WORKERS = Number(flags.workers ?? 4);
const RATE = Number(flags.rate ?? 10);
/** The shared bucket's size: 2 tokens lets a claim that wakes up to 200 ms late keep the rate. */
const BURST = Number(flags.burst ?? 2);
const WINDOW_MS = 10_000;
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SECRET = "whsec_cmF0ZS1saW1pdC1iZW5jaG1hcmstc2VjcmV0";

// The receiver: its own token bucket of RATE/s holding RATE tokens; over it, 429 + Retry-After.
const sentAt: number[] = [];
const seen = new Map<string, number>();
let rejected = 0;
let tokens = RATE;
let refilled = performance.now();
const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const now = performance.now();
    tokens = Math.min(RATE, tokens + ((now - refilled) / 1000) * RATE);
    refilled = now;
    if (tokens < 1) {
      rejected++;
      res.writeHead(429, { "retry-after": "1" }).end();
      return;
    }
    tokens -= 1;
    const id = String(req.headers["webhook-id"] ?? "");
    seen.set(id, (seen.get(id) ?? 0) + 1);
    sentAt.push(now);
    res.writeHead(200).end();
  });
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const target = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;

let cluster: { url: string; stop(): void } | null = null;
let url = process.env.DATABASE_URL;
if (!url) {
  cluster = (await startCluster()) as { url: string; stop(): void };
  url = cluster.url;
}
const workers: ChildProcess[] = [];
try {
  const lib = await createPunctual({
    databaseUrl: url,
    migrate: true,
    logLevel: "warn",
    allowPrivateTargets: true,
    webhookSecret: SECRET,
  });
  await lib.setRateLimit("webhook", { ratePerSecond: RATE, burst: BURST });
  const due = new Date(Date.now() + 5_000).toISOString();
  for (let made = 0; made < N; made += 50) {
    const n = Math.min(50, N - made);
    await lib.createSchedule({
      dtstart: due,
      tzid: "UTC",
      reminders: Array.from({ length: n }, (_, i) => ({
        key: `r${i}`,
        offset: "PT0S",
        channel: "webhook",
        target: { url: target },
      })),
    });
  }
  for (let i = 0; i < WORKERS; i++) {
    workers.push(
      spawn(
        process.execPath,
        ["--import", "tsx", "src/cli/main.ts", "worker", "--database-url", url],
        {
          cwd: ROOT,
          env: {
            ...process.env,
            PUNCTUAL_ALLOW_PRIVATE_TARGETS: "true",
            PUNCTUAL_WEBHOOK_SECRET: SECRET,
            PUNCTUAL_LOG_LEVEL: "warn",
          },
          stdio: ["ignore", "ignore", "inherit"],
        },
      ),
    );
  }
  // Bounded wait: the time the limit needs, plus a minute.
  const capMs = (N / RATE) * 1000 + 65_000;
  const started = performance.now();
  while (seen.size < N && performance.now() - started < capMs) {
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  for (const w of workers) w.kill("SIGTERM");
  await Promise.all(workers.map((w) => new Promise((resolve) => w.once("exit", resolve))));
  const items = await lib.listRateLimits();
  await lib.close(0);

  const first = sentAt[0] ?? 0;
  const last = sentAt[sentAt.length - 1] ?? 0;
  const windows: number[] = [];
  for (let start = first; start + WINDOW_MS <= last; start += WINDOW_MS) {
    windows.push(sentAt.filter((t) => t >= start && t < start + WINDOW_MS).length);
  }
  const expected = (RATE * WINDOW_MS) / 1000;
  const deviations = windows.map((n) => ((n - expected) / expected) * 100);
  const worst = deviations.reduce((m, d) => (Math.abs(d) > Math.abs(m) ? d : m), 0);
  const duplicates = [...seen.values()].filter((n) => n > 1).length;
  const lost = N - seen.size;
  const overall = sentAt.length > 1 ? ((sentAt.length - 1) / (last - first)) * 1000 : 0;
  console.log(
    `reminders ${N}, worker processes ${WORKERS}, limit ${RATE}/s (burst ${BURST}), PostgreSQL`,
  );
  console.log(
    `cpus ${cpus().length}, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`,
  );
  console.log(
    `sent ${seen.size} in ${((last - first) / 1000).toFixed(1)} s: ${overall.toFixed(3)}/s`,
  );
  console.log(
    `complete ${WINDOW_MS / 1000} s windows: ${windows.length}; sends per window min ${Math.min(...windows)} max ${Math.max(...windows)} (expected ${expected}); worst deviation ${worst.toFixed(1)} %`,
  );
  console.log(`sends per window: ${windows.join(" ")}`);
  // How evenly the sends landed: the gaps between consecutive arrivals (the limit's
  // interval is 1000 / RATE ms; a burst shows as gaps near 0 at the start).
  const gaps = sentAt
    .slice(1)
    .map((t, i) => t - (sentAt[i] as number))
    .sort((a, b) => a - b);
  const pct = (p: number) =>
    (gaps[Math.min(gaps.length - 1, Math.floor(p * gaps.length))] ?? 0).toFixed(1);
  console.log(
    `gaps between arrivals (ms): p1 ${pct(0.01)}, p10 ${pct(0.1)}, median ${pct(0.5)}, p90 ${pct(0.9)}, p99 ${pct(0.99)}, max ${pct(1)}`,
  );
  console.log(`receiver 429s: ${rejected}; lost: ${lost}; duplicates: ${duplicates}`);
  console.log(`bucket after: ${JSON.stringify(items)}`);
  const ok = Math.abs(worst) <= 2 && rejected <= 1 && lost === 0 && duplicates === 0;
  console.log(ok ? "within target (2 %, ≤ 1 receiver 429, none lost)" : "OUTSIDE target");
} finally {
  for (const w of workers) if (w.exitCode === null) w.kill("SIGKILL");
  server.close();
  cluster?.stop();
}
