#!/usr/bin/env node
// A throwaway PostgreSQL cluster for tests and CI: initdb in a temp folder, trust auth,
// fsync off (unless `durable: true`, for benchmarks), a free port on 127.0.0.1 (never 5432),
// its socket in the same folder.
// PostgreSQL refuses to run as root, so as root every server command runs through
// `runuser -u postgres --` and the folder is handed to that user.
//
// Module:  const cluster = await startCluster(); … cluster.url …; await cluster.stop();
// CLI:     node scripts/pg-cluster.mjs start [--state FILE]   prints the URL on stdout
//          node scripts/pg-cluster.mjs stop  [--state FILE]
//          node scripts/pg-cluster.mjs bin                    prints the bin folder, or exits 1
// The CLI keeps what `stop` needs in a state file (default .test-tmp/pg-cluster.json).
import { execFileSync, spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const isRoot = typeof process.getuid === "function" && process.getuid() === 0;

/**
 * The folder holding `initdb` and `pg_ctl`: PATH first, then /usr/lib/postgresql/<v>/bin,
 * highest version first. PUNCTUAL_PG_BIN, when set, is the only place looked at. Null when
 * none is found.
 */
export function findPgBin() {
  const hasTools = (dir) => existsSync(join(dir, "initdb")) && existsSync(join(dir, "pg_ctl"));
  const override = process.env.PUNCTUAL_PG_BIN;
  if (override) return hasTools(override) ? override : null;
  const candidates = [];
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const initdb = join(dir, "initdb");
    if (existsSync(initdb)) candidates.push(dirname(realpathSync(initdb)));
  }
  const root = "/usr/lib/postgresql";
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => /^\d+(\.\d+)?$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const v of versions) candidates.push(join(root, v, "bin"));
  }
  return candidates.find(hasTools) ?? null;
}

/** A TCP port on 127.0.0.1 that is free right now (never 5432). */
async function freePort() {
  for (;;) {
    const port = await new Promise((resolvePort, reject) => {
      const server = createServer();
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        server.close(() => resolvePort(typeof address === "object" && address ? address.port : 0));
      });
    });
    if (port && port !== 5432) return port;
  }
}

/** Runs a server binary, as `postgres` when we are root. Throws with its output on failure. */
function runPg(bin, tool, args, cwd) {
  const exe = join(bin, tool);
  const [cmd, argv] = isRoot ? ["runuser", ["-u", "postgres", "--", exe, ...args]] : [exe, args];
  const result = spawnSync(cmd, argv, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  if (result.error) throw result.error;
  if (result.status !== 0) {
    const output = `${result.stdout ?? ""}${result.stderr ?? ""}`.trim();
    throw new Error(`${tool} ${args.join(" ")} failed (exit ${result.status}):\n${output}`);
  }
  return result.stdout;
}

function postgresCanWrite(dir) {
  return (
    spawnSync("runuser", ["-u", "postgres", "--", "test", "-w", dir], { stdio: "ignore" })
      .status === 0
  );
}

function postgresIds() {
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { uid, gid };
}

/**
 * Starts a cluster. Resolves to `{ url, port, dir, bin, stop() }`; `url` is
 * `postgres://postgres@127.0.0.1:PORT/postgres`. Tests get `fsync=off`,
 * `synchronous_commit=off` and `full_page_writes=off`; `options.durable: true` keeps
 * PostgreSQL's durable defaults (fsync on), as benchmarks need.
 * @throws when no PostgreSQL binaries are found (install postgresql-15) or start fails.
 */
export async function startCluster(options = {}) {
  const bin = options.bin ?? findPgBin();
  if (!bin) {
    throw new Error(
      "no PostgreSQL server binaries (initdb, pg_ctl) found on PATH or in /usr/lib/postgresql/*/bin",
    );
  }
  let dir = mkdtempSync(join(options.tmpRoot ?? tmpdir(), "punctual-pg-"));
  try {
    // The postgres user must traverse and own the folder: data dir, socket and log live here.
    chmodSync(dir, 0o755);
    if (isRoot) {
      const { uid, gid } = postgresIds();
      chownSync(dir, uid, gid);
      // A TMPDIR under a private folder (e.g. /root) is out of the postgres user's reach.
      if (!options.tmpRoot && !postgresCanWrite(dir)) {
        rmSync(dir, { recursive: true, force: true });
        dir = mkdtempSync("/tmp/punctual-pg-");
        chmodSync(dir, 0o755);
        chownSync(dir, uid, gid);
      }
    }
    const data = join(dir, "data");
    runPg(
      bin,
      "initdb",
      ["-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"],
      dir,
    );
    const log = join(dir, "postgres.log");
    let lastError;
    for (let attempt = 0; attempt < 3; attempt++) {
      const port = await freePort();
      // pg_ctl hands -o to a shell: quote the folder (mkdtemp names have no quotes).
      const serverOptions = [
        `-p ${port}`,
        "-h 127.0.0.1",
        `-k '${dir}'`,
        ...(options.durable
          ? ["-c fsync=on", "-c synchronous_commit=on", "-c full_page_writes=on"]
          : ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]),
        "-c max_connections=200",
      ].join(" ");
      try {
        runPg(
          bin,
          "pg_ctl",
          ["start", "-D", data, "-l", log, "-w", "-t", "60", "-o", serverOptions],
          dir,
        );
      } catch (err) {
        // Most likely the port was taken between the probe and the bind: try another one.
        lastError = new Error(`${err.message}\n${readLog(log)}`);
        continue;
      }
      const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
      return {
        url,
        port,
        dir,
        bin,
        stop: () => stopCluster({ dir, bin }),
      };
    }
    throw lastError ?? new Error("pg_ctl start failed");
  } catch (err) {
    try {
      stopCluster({ dir, bin });
    } catch {
      // nothing running, or it cannot be stopped: the original error matters more
    }
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

function readLog(path) {
  try {
    return readFileSync(path, "utf8").split("\n").slice(-20).join("\n");
  } catch {
    return "";
  }
}

/** Stops a cluster started by {@link startCluster} (fast shutdown) and removes its folder. */
export function stopCluster({ dir, bin }) {
  const data = join(dir, "data");
  try {
    if (existsSync(join(data, "postmaster.pid"))) {
      runPg(
        bin ?? findPgBin(),
        "pg_ctl",
        ["stop", "-D", data, "-m", "immediate", "-w", "-t", "30"],
        dir,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------
// CLI

const DEFAULT_STATE = resolve(".test-tmp", "pg-cluster.json");

function stateFile(args) {
  const i = args.indexOf("--state");
  return i >= 0 && args[i + 1] ? resolve(args[i + 1]) : DEFAULT_STATE;
}

async function main(argv) {
  const [command, ...args] = argv;
  if (command === "bin") {
    const bin = findPgBin();
    if (!bin) {
      console.error("no PostgreSQL server binaries found");
      return 1;
    }
    console.log(bin);
    return 0;
  }
  if (command === "start") {
    const file = stateFile(args);
    const cluster = await startCluster();
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(
      file,
      JSON.stringify({ url: cluster.url, dir: cluster.dir, bin: cluster.bin }) + "\n",
    );
    console.error(
      `PostgreSQL cluster started in ${cluster.dir} (${cluster.bin}); state in ${file}`,
    );
    console.log(cluster.url);
    return 0;
  }
  if (command === "stop") {
    const file = stateFile(args);
    if (!existsSync(file)) {
      console.error(`no cluster to stop (${file} not found)`);
      return 0;
    }
    const state = JSON.parse(readFileSync(file, "utf8"));
    stopCluster(state);
    rmSync(file, { force: true });
    console.error(`PostgreSQL cluster in ${state.dir} stopped`);
    return 0;
  }
  console.error("usage: node scripts/pg-cluster.mjs start|stop [--state FILE] | bin");
  return 2;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      console.error(err instanceof Error ? err.message : err);
      process.exit(1);
    },
  );
}
