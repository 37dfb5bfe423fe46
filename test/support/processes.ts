/**
 * Real processes for concurrency tests: a local webhook receiver that counts
 * `webhook-id`s (and can hold requests open), and `punctual worker` child processes.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { createPunctual, type Punctual } from "../../src/app/punctual.js";
import { silentLogger } from "../../src/observability/logger.js";
import { openTestDatabase } from "./db.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** Signing secret the workers use. */
export const SECRET = "whsec_Y29uY3VycmVuY3ktdGVzdC1zZWNyZXQ=";

export interface Receiver {
  url: string;
  counts: Map<string, number>;
  /** Called per request; return false to hold the request open (never answer). */
  onRequest: (id: string, req: IncomingMessage, res: ServerResponse) => boolean;
  held: ServerResponse[];
  server: Server;
  /**
   * Resolves once `predicate` holds, re-checked on every request and at least every
   * 100 ms; rejects naming `what` after `timeoutMs` (default {@link OUTCOME_WAIT_MS}).
   */
  waitFor(predicate: () => boolean, what: string, timeoutMs?: number): Promise<void>;
}

/**
 * Deadline of a wait on an outcome (a request arriving, a row settling). Generous on
 * purpose: it only turns a hang into a failure that names what was awaited, and stays
 * below the concurrency project's test timeout (vitest.config.ts) so that message wins.
 * Waits poll the outcome; none of them measures how long it took.
 */
export const OUTCOME_WAIT_MS = 240_000;

/** Re-check cadence of {@link until}: a poll interval, not a budget. */
const POLL_MS = 100;

/**
 * Polls `check` (e.g. a query) until it returns true.
 * @throws Error naming `what` when it is still false after `timeoutMs`.
 */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = OUTCOME_WAIT_MS,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`still waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

export async function startReceiver(): Promise<Receiver> {
  const waiters: Array<() => void> = [];
  const r: Receiver = {
    url: "",
    counts: new Map(),
    onRequest: () => true,
    held: [],
    server: createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const id = String(req.headers["webhook-id"] ?? "");
        r.counts.set(id, (r.counts.get(id) ?? 0) + 1);
        if (r.onRequest(id, req, res)) {
          res.writeHead(200, { "content-type": "application/json" }).end("{}");
        } else {
          r.held.push(res);
        }
        for (const w of waiters.splice(0)) w();
      });
    }),
    async waitFor(predicate, what, timeoutMs = OUTCOME_WAIT_MS) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate()) {
        if (Date.now() > deadline) throw new Error(`receiver still waiting for ${what}`);
        // Wake on the next request, or re-check every POLL_MS (state may change in the DB).
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, POLL_MS);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
  };
  await new Promise<void>((resolve) => r.server.listen(0, "127.0.0.1", resolve));
  r.url = `http://127.0.0.1:${(r.server.address() as AddressInfo).port}/hook`;
  return r;
}

export function startWorker(url: string, env: Record<string, string> = {}): ChildProcess {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "src/cli/main.ts", "worker", "--database-url", url],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        PUNCTUAL_ALLOW_PRIVATE_TARGETS: "true",
        PUNCTUAL_WEBHOOK_SECRET: SECRET,
        PUNCTUAL_LOG_LEVEL: "warn",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let err = "";
  child.stderr?.on("data", (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
  child.on("exit", (code, signal) => {
    if (code && code !== 0 && signal !== "SIGKILL") console.error(`worker exited ${code}: ${err}`);
  });
  return child;
}

/**
 * `punctual start` (API and scheduler) on a free loopback port against `url`; resolves
 * with its base URL once it listens.
 */
export async function startServer(
  url: string,
  workers: ChildProcess[],
  env: Record<string, string> = {},
): Promise<string> {
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      "src/cli/main.ts",
      "start",
      "--database-url",
      url,
      "--host",
      "127.0.0.1",
      "--port",
      "0",
    ],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        PUNCTUAL_ALLOW_PRIVATE_TARGETS: "true",
        PUNCTUAL_WEBHOOK_SECRET: SECRET,
        PUNCTUAL_LOG_LEVEL: "warn",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  workers.push(child);
  let err = "";
  return new Promise<string>((resolve, reject) => {
    child.stderr?.on("data", (d: Buffer) => {
      err = (err + d.toString()).slice(-4000);
      const m = /listening on (http:\/\/[^\s]+)/.exec(err);
      if (m?.[1]) resolve(m[1]);
    });
    child.on("exit", (code) => reject(new Error(`start exited ${code}: ${err}`)));
  });
}

export function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

/**
 * A PostgreSQL test database, a receiver, a library facade on that database, and an
 * (initially empty) list of worker processes; everything is torn down by `cleanups`.
 */
export async function raceSetup(cleanups: Array<() => Promise<void> | void>): Promise<{
  lib: Punctual;
  url: string;
  receiver: Receiver;
  workers: ChildProcess[];
}> {
  const handle = await openTestDatabase();
  cleanups.push(() => handle.close());
  if (!handle.url) throw new Error("needs a PostgreSQL URL");
  const receiver = await startReceiver();
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const res of receiver.held) res.destroy();
        receiver.server.closeAllConnections();
        receiver.server.close(() => resolve());
      }),
  );
  const lib = await createPunctual({
    database: handle.db,
    logger: silentLogger(),
    allowPrivateTargets: true,
    webhookSecret: SECRET,
  });
  cleanups.push(() => lib.close(0));
  const workers: ChildProcess[] = [];
  cleanups.push(async () => {
    for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill("SIGKILL");
    await Promise.all(workers.map(exited));
  });
  return { lib, url: handle.url, receiver, workers };
}
