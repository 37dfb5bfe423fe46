/**
 * OPS-6: `npm start` runs the server as the process npm signals. npm runs a script through
 * `sh -c`, and a shell does not pass SIGTERM on to its child: with a plain `node …`
 * script, stopping npm (a process manager, a terminal closing) left the server running on
 * its port and its data folder, orphaned. The start script `exec`s node in place of the
 * shell. Checked with the project's own start script over a stand-in server.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { until } from "../../support/processes.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const startScript = (
  JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    scripts: Record<string, string>;
  }
).scripts.start!;

/** A stand-in for dist/cli/main.js: prints its pid, lives until a signal ends it. */
const STAND_IN = `
process.stdout.write("pid " + process.pid + "\\n");
setInterval(() => {}, 1 << 30);
process.on("SIGTERM", () => process.exit(0));
`;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const dirs: string[] = [];
const pids: number[] = [];
afterEach(() => {
  for (const pid of pids.splice(0)) if (alive(pid)) process.kill(pid, "SIGKILL");
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("npm start", () => {
  it("OPS-6: SIGTERM to npm reaches the server, which stops", async () => {
    const dir = mkdtempSync(join(tmpdir(), "punctual-npm-start-"));
    dirs.push(dir);
    mkdirSync(join(dir, "dist", "cli"), { recursive: true });
    writeFileSync(join(dir, "dist", "cli", "main.js"), STAND_IN);
    writeFileSync(
      join(dir, "package.json"),
      JSON.stringify({ name: "start-check", private: true, scripts: { start: startScript } }),
    );
    const env = { ...process.env };
    for (const key of Object.keys(env)) if (key.startsWith("npm_")) delete env[key];
    const npm = spawn("npm", ["start", "--silent"], {
      cwd: dir,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    npm.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    const npmExited = new Promise<void>((resolve) => npm.on("exit", () => resolve()));
    await until(() => /pid (\d+)/.test(out), "the stand-in server's pid", 60_000);
    const server = Number(/pid (\d+)/.exec(out)![1]);
    pids.push(server);
    expect(server).not.toBe(npm.pid);
    npm.kill("SIGTERM");
    await npmExited;
    await until(() => !alive(server), "the server to stop after npm's SIGTERM", 30_000);
    expect(alive(server)).toBe(false);
  }, 120_000);
});
