/**
 * OPS-10: the previous release and this one on one PostgreSQL database. The previous
 * release is built from the git history at the commit `scripts/releases.json` records for
 * it.
 *
 * This release's migration 0050 (the delivery queue) is a contract that raises
 * `min_reader_version` to 50: a previous-release worker would claim from the ledger rows
 * the new workers hold in the queue. So the roll is the one docs/production.md (upgrades) gives: stop
 * every process of the previous release (gracefully: unstarted claims are given back, sends
 * in flight settle), migrate, start this release. The test rolls that way with deliveries
 * in flight and checks that nothing is lost or sent twice, and that a previous-release
 * process started again refuses the newer schema.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it, onTestFailed } from "vitest";
import { expectedVersion } from "../../src/store/migrator.js";
import { openTestDatabase, postgresSkipReason } from "../support/db.js";
import {
  latestRecordedRelease,
  previousRelease,
  previousReleaseUnavailable,
  type BuiltRelease,
} from "../support/previous-release.js";
import {
  SECRET,
  exited,
  startReceiver,
  startServer,
  until,
  type Receiver,
} from "../support/processes.js";

const recorded = latestRecordedRelease();
const unavailable = postgresSkipReason() ?? previousReleaseUnavailable(recorded.commit);
const title = (t: string) => (unavailable ? `${t} (skipped: ${unavailable})` : t);

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const ENV = {
  PUNCTUAL_ALLOW_PRIVATE_TARGETS: "true",
  PUNCTUAL_WEBHOOK_SECRET: SECRET,
  PUNCTUAL_LOG_LEVEL: "warn",
  PUNCTUAL_POLL_MS: "250",
};

/** Runs the old release's CLI; `onOut` sees its stderr (where it says it listens). */
function oldCli(release: BuiltRelease, args: string[], processes: ChildProcess[]): ChildProcess {
  const child = spawn(process.execPath, [release.bin, ...args], {
    cwd: release.dir,
    env: { ...process.env, ...ENV },
    stdio: ["ignore", "pipe", "pipe"],
  });
  processes.push(child);
  return child;
}

/** Every process's recent output, for a failure's message. */
const outputs: Array<{ name: string; text: () => string }> = [];

function output(
  child: ChildProcess,
  name = child.spawnargs.slice(1, 4).join(" "),
): { text: () => string } {
  let text = "";
  outputs.push({ name, text: () => text });
  const add = (d: Buffer) => (text = (text + d.toString()).slice(-8000));
  child.stdout?.on("data", add);
  child.stderr?.on("data", add);
  return { text: () => text };
}

async function oldServer(
  release: BuiltRelease,
  url: string,
  processes: ChildProcess[],
): Promise<string> {
  const child = oldCli(
    release,
    ["start", "--database-url", url, "--host", "127.0.0.1", "--port", "0"],
    processes,
  );
  const out = output(child);
  await until(
    () => /listening on (http:\/\/\S+)/.test(out.text()) || child.exitCode !== null,
    "the previous release's server to listen",
  );
  const m = /listening on (http:\/\/\S+)/.exec(out.text());
  if (!m?.[1]) throw new Error(`previous release's start exited: ${out.text()}`);
  return m[1];
}

/** Creates `n` one-off schedules through `server`, due `startMs` from now, `stepMs` apart. */
async function createBatch(
  server: string,
  receiver: Receiver,
  p: { n: number; startMs: number; stepMs: number; tag: string },
): Promise<void> {
  const t0 = Date.now() + p.startMs;
  for (let i = 0; i < p.n; i++) {
    const res = await fetch(`${server}/v1/schedules`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        dtstart: new Date(t0 + i * p.stepMs).toISOString(),
        tzid: "UTC",
        payload: { tag: p.tag, i },
        reminders: [
          { key: "r", offset: "PT0S", channel: "webhook", target: { url: receiver.url } },
        ],
      }),
    });
    if (res.status !== 201)
      throw new Error(`create ${p.tag} ${i}: ${res.status} ${await res.text()}`);
  }
}

describe("OPS-10 previous release beside this one", () => {
  it.skipIf(Boolean(unavailable))(
    title(
      `OPS-10: rolling from ${recorded.version} with deliveries in flight (stop the previous release, migrate, start this one): a receiver counts every delivery exactly once, and the previous release refuses the new schema`,
    ),
    async () => {
      onTestFailed(() => {
        for (const o of outputs) console.error(`--- ${o.name}\n${o.text()}`);
      });
      const release = previousRelease(recorded.version, recorded.commit);
      const handle = await openTestDatabase({ migrated: false });
      cleanups.push(() => handle.close());
      const url = handle.url as string;
      const receiver = await startReceiver();
      cleanups.push(
        () =>
          new Promise<void>((resolve) => {
            receiver.server.closeAllConnections();
            receiver.server.close(() => resolve());
          }),
      );
      const processes: ChildProcess[] = [];
      cleanups.push(async () => {
        for (const p of processes)
          if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
        await Promise.all(processes.map(exited));
      });
      const received = () => receiver.counts.size;

      // 1. The previous release migrates the database to its own schema and runs on it.
      const migrateOld = oldCli(release, ["migrate", "--database-url", url], processes);
      const migrateOldOut = output(migrateOld);
      expect(await exited(migrateOld), migrateOldOut.text()).toBe(0);
      const { rows: oldSchema } = await handle.db.query<{ v: number }>(
        "select max(version) as v from punctual_migrations",
      );
      const oldVersion = oldSchema[0]?.v ?? 0;
      const oldApi = await oldServer(release, url, processes);
      const oldWorker = oldCli(release, ["worker", "--database-url", url], processes);
      const oldWorkerOut = output(oldWorker);

      // 2. Deliveries flow: 120 one-offs due over ~8 s, created through the old API.
      await createBatch(oldApi, receiver, { n: 120, startMs: 1_000, stepMs: 65, tag: "a" });
      await receiver.waitFor(() => received() >= 30, "30 deliveries by the previous release");

      // 3. The roll of a contract migration that raises `min_reader_version` (0050, the
      //    delivery queue; docs/production.md (upgrades)). This release's migrate refuses while the
      //    previous release's processes run (they would go on claiming the old way beside
      //    the queue and send twice), naming them ...
      const early = spawn(
        process.execPath,
        ["--import", "tsx", "src/cli/main.ts", "migrate", "--database-url", url],
        { env: { ...process.env, ...ENV }, stdio: ["ignore", "pipe", "pipe"] },
      );
      const earlyOut = output(early, "this release: migrate, early");
      expect(await exited(early), earlyOut.text()).not.toBe(0);
      expect(earlyOut.text()).toMatch(/Live scheduler instances/);
      //    ... so stop every process of the previous release while deliveries are in flight
      //    (a graceful stop gives back unstarted claims and settles the sends it started),
      //    then migrate.
      for (const p of [oldWorker, ...processes.filter((x) => x !== oldWorker)]) {
        if (p.exitCode === null && p.signalCode === null) p.kill("SIGTERM");
      }
      expect(await exited(oldWorker), oldWorkerOut.text()).toBe(0);
      await Promise.all(processes.map(exited));
      const migrateNew = spawn(
        process.execPath,
        ["--import", "tsx", "src/cli/main.ts", "migrate", "--database-url", url],
        { env: { ...process.env, ...ENV }, stdio: ["ignore", "pipe", "pipe"] },
      );
      processes.push(migrateNew);
      const migrateNewOut = output(migrateNew, "this release: migrate");
      expect(await exited(migrateNew), migrateNewOut.text()).toBe(0);
      expect(expectedVersion()).toBeGreaterThan(oldVersion);

      // 4. A process of the previous release started again refuses the new schema at boot.
      const restarted = oldCli(release, ["worker", "--database-url", url], processes);
      const restartedOut = output(restarted);
      expect(await exited(restarted)).not.toBe(0);
      expect(restartedOut.text()).toMatch(/newer than this release/);

      // 5. This release starts on the new schema and sends the rest of the first batch
      //    (moved into the queue by the migration) and a batch of its own.
      const newApi = await startServer(url, processes, ENV);
      // Ready once its first scheduler pass is done (OPS-4), on the schema it migrated.
      await until(
        async () => (await fetch(`${newApi}/readyz`)).status === 200,
        "this release's server to be ready",
      );
      await createBatch(newApi, receiver, { n: 60, startMs: 200, stepMs: 10, tag: "c" });
      await receiver.waitFor(() => received() >= 180, "all 180 deliveries");

      // 6. Stop everything cleanly; no straggler may arrive as a duplicate.
      const running = processes.filter((p) => p.exitCode === null && p.signalCode === null);
      for (const p of running) p.kill("SIGTERM");
      expect(await Promise.all(running.map(exited))).toEqual(running.map(() => 0));
      const duplicates = [...receiver.counts.entries()].filter(([, n]) => n !== 1);
      expect(duplicates).toEqual([]);
      const { rows } = await handle.db.query<{ delivery_key: string; state: string }>(
        "select delivery_key, state from punctual_deliveries",
      );
      expect(rows.filter((r) => r.state !== "sent")).toEqual([]);
      expect(new Set(rows.map((r) => r.delivery_key))).toEqual(new Set(receiver.counts.keys()));
      expect(rows).toHaveLength(180);
      // Both releases' schedulers took part (instances by version).
      const { rows: instances } = await handle.db.query<{ n: number }>(
        "select count(*) as n from punctual_instances",
      );
      expect(instances[0]?.n).toBeGreaterThanOrEqual(3);
    },
  );
});
