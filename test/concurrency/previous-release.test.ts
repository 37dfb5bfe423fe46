/**
 * OPS-10: the previous release and this one on one PostgreSQL database, with a migration
 * by this release while deliveries flow. The previous release is built from the git
 * history at the commit `scripts/releases.json` records for it.
 *
 * What 0.1.0 (the first recorded release) can be held to: it checks the schema version
 * at boot and on every `/readyz`, and wants exactly its own. So once this release's
 * migrations move the schema, a 0.1.0 process that is already running keeps claiming and
 * sending (its statements only touch what it knows; new columns are nullable), but its
 * readiness reports the schema, and a restarted 0.1.0 process refuses to boot. From this
 * release on, readiness and boot accept any newer schema inside the window its
 * migrations declare (`min_reader_version`), so the next release's test can also restart
 * old processes mid-deploy.
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
      `OPS-10: a running ${recorded.version} server and worker keep delivering while this release migrates; with this release's server beside them a receiver counts every delivery exactly once`,
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

      // 3. This release migrates while they flow.
      const migrateNew = spawn(
        process.execPath,
        ["--import", "tsx", "src/cli/main.ts", "migrate", "--database-url", url],
        { env: { ...process.env, ...ENV }, stdio: ["ignore", "pipe", "pipe"] },
      );
      processes.push(migrateNew);
      const migrateNewOut = output(migrateNew, "this release: migrate");
      expect(await exited(migrateNew), migrateNewOut.text()).toBe(0);
      const newVersion = expectedVersion();
      const schemaMoved = newVersion > oldVersion;

      // 4. The old processes, already running, keep taking writes and delivering on the
      //    migrated schema (nothing of this release runs yet): the rest of the first batch
      //    and a second one created now.
      await createBatch(oldApi, receiver, { n: 40, startMs: 200, stepMs: 10, tag: "b" });
      await receiver.waitFor(
        () => received() >= 160,
        "all 160 deliveries of the previous release after the migration",
      );
      expect(oldWorker.exitCode, oldWorkerOut.text()).toBeNull();
      // 0.1.0 wants its exact schema version on /readyz; once the schema moved it says so.
      const oldReady = await fetch(`${oldApi}/readyz`);
      expect(oldReady.status).toBe(schemaMoved ? 503 : 200);
      if (schemaMoved) {
        // ... and a restarted 0.1.0 process refuses the newer schema at boot.
        const restarted = oldCli(release, ["worker", "--database-url", url], processes);
        const restartedOut = output(restarted);
        expect(await exited(restarted)).not.toBe(0);
        expect(restartedOut.text()).toMatch(/newer than this release/);
      }

      // 5. This release starts on the new schema beside them, ready, and writes too: its
      //    schedules may be sent by either release.
      const newApi = await startServer(url, processes, ENV);
      // Ready once its first scheduler pass is done (OPS-4), on the schema it migrated.
      await until(
        async () => (await fetch(`${newApi}/readyz`)).status === 200,
        "this release's server to be ready",
      );
      await createBatch(newApi, receiver, { n: 60, startMs: 200, stepMs: 10, tag: "c" });
      await receiver.waitFor(() => received() >= 220, "all 220 deliveries");

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
      expect(rows).toHaveLength(220);
      // Both releases' schedulers took part after the migration (instances by version).
      const { rows: instances } = await handle.db.query<{ n: number }>(
        "select count(*) as n from punctual_instances",
      );
      expect(instances[0]?.n).toBeGreaterThanOrEqual(3);
    },
  );
});
