/**
 * OPS-6 with piped output: `punctual start 2>&1 | tee log` and Ctrl-C. The terminal
 * signals the whole foreground group, so tee can be gone before punctual writes its
 * shutdown lines, which then meet a pipe with no reader (EPIPE). The stop must still run
 * to the end: claims released, the instance marked stopped, exit 0.
 *
 * The pipe is a real one (a FIFO: pipe semantics, unlike the socket pairs child_process
 * gives a child), shared by stdout and stderr as `2>&1` does; its reader is closed before
 * SIGINT, the order that made the stop skip (tee gone first).
 */
import { spawn, spawnSync } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, rmSync } from "node:fs";
import { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { afterAll, describe, expect, it } from "vitest";
import { builtPackage, punctualBin } from "../support/built-package.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "punctual-pipe-"));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Environment without the variables that would change the CLI's defaults. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (key.startsWith("PUNCTUAL_") || key === "DATABASE_URL") delete env[key];
  }
  return env;
}

describe("OPS-6: shutdown with stdout and stderr on a pipe", () => {
  it("OPS-6: SIGINT after the pipe's reader is gone (tee killed first) still stops cleanly: exit 0, the instance marked stopped", async () => {
    const bin = punctualBin(await builtPackage());
    const fifo = join(dir, "out.fifo");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    // The reader first (non-blocking open needs no writer), then the child's write end.
    const readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const writeFd = openSync(fifo, constants.O_WRONLY);
    const dataDir = join(dir, "data");
    const child = spawn(process.execPath, [bin, "start", "--port", "0", "--data-dir", dataDir], {
      cwd: root,
      env: cleanEnv(),
      stdio: ["ignore", writeFd, writeFd],
    });
    closeSync(writeFd);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on("exit", (code, signal) => resolve({ code, signal })),
    );
    const reader = new Socket({ fd: readFd, readable: true, writable: false });
    let output = "";
    await new Promise<void>((resolve, reject) => {
      reader.on("data", (d: Buffer) => {
        output += d.toString();
        // The JSON "punctual started" line comes after the listening line: both written.
        if (output.includes('"msg":"punctual started"')) resolve();
      });
      void exited.then(({ code }) => reject(new Error(`start exited ${code}: ${output}`)));
    });
    expect(output).toContain("listening on http://127.0.0.1:");

    // tee is gone: nobody reads the pipe any more. Then Ctrl-C's SIGINT.
    reader.destroy();
    await new Promise<void>((resolve) => reader.once("close", () => resolve()));
    child.kill("SIGINT");
    expect(await exited).toEqual({ code: 0, signal: null });

    const db = new PGlite(dataDir);
    try {
      const { rows } = await db.query<{ stopped_at: Date | null }>(
        "select stopped_at from punctual_instances",
      );
      expect(rows).toHaveLength(1);
      expect(rows[0]!.stopped_at).toBeInstanceOf(Date);
    } finally {
      await db.close();
    }
  });
});
