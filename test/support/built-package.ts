/**
 * The package built from src/ once per test run, for the end-to-end files that run the
 * `punctual` command or import the package as a user would (test/e2e/*).
 *
 * Running the CLI as `node --import tsx src/cli/main.ts` makes every process transform and
 * load the sources through tsx's loader: several seconds per command on a loaded 2-core
 * machine, three times what the compiled command takes. So the first caller of a run
 * compiles src/ (`tsc --noCheck`: the emitted code is the same; the types are checked by
 * `npm run typecheck`) into a folder laid out as npm installs the package (bin/, dist/
 * with the dashboard's assets, package.json, migrations/), and every file and worker of the
 * run uses that one build. Workers share it through the folder given by the global setup
 * (test/global-setup.ts, `inject("builtPackageRoot")`): the first to create its lock
 * directory builds, the others wait on the `ready` (or `failed`) marker.
 *
 * Usage:
 * ```ts
 * const pkg = await builtPackage();              // e.g. in beforeAll
 * spawn(process.execPath, [punctualBin(pkg), "start", …]);
 * ```
 */
import { spawn } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { inject } from "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    /** Set by test/global-setup.ts: the folder the run's shared build goes into. */
    builtPackageRoot: string;
  }
}

const root = fileURLToPath(new URL("../../", import.meta.url));
const POLL_MS = 200;
/** A build on a loaded machine takes minutes; past this, a waiter reports a hung build. */
const BUILD_WAIT_MS = 600_000;

let own: Promise<string> | null = null;

/** The folder of the run's build: from the global setup, else one for this process. */
function buildRoot(): string {
  let provided: string | undefined;
  try {
    provided = inject("builtPackageRoot");
  } catch {
    // not inside a vitest worker
  }
  if (provided) return provided;
  const dir = mkdtempSync(join(tmpdir(), "punctual-built-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function run(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}

/** Compiles src/ into `pkg` as npm would install the package. */
async function build(pkg: string): Promise<void> {
  mkdirSync(join(pkg, "bin"), { recursive: true });
  const tsc = join(root, "node_modules/typescript/bin/tsc");
  const built = await run([
    tsc,
    "-p",
    join(root, "tsconfig.build.json"),
    "--outDir",
    join(pkg, "dist"),
    "--noCheck",
  ]);
  if (built.code !== 0) throw new Error(`build of src/ failed:\n${built.output}`);
  // The rest of `npm run build`: the dashboard's files beside the compiled code.
  const copied = await run([join(root, "scripts/copy-assets.mjs"), join(pkg, "dist")]);
  if (copied.code !== 0)
    throw new Error(`copying the dashboard's assets failed:\n${copied.output}`);
  copyFileSync(join(root, "package.json"), join(pkg, "package.json"));
  copyFileSync(join(root, "bin/punctual.js"), join(pkg, "bin/punctual.js"));
  symlinkSync(join(root, "migrations"), join(pkg, "migrations"), "dir");
  symlinkSync(join(root, "node_modules"), join(pkg, "node_modules"), "dir");
}

async function sharedBuild(): Promise<string> {
  const base = buildRoot();
  const pkg = join(base, "pkg");
  const ready = join(base, "ready");
  const failed = join(base, "failed");
  let builder = false;
  try {
    mkdirSync(join(base, "lock"));
    builder = true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  if (builder) {
    try {
      await build(pkg);
      writeFileSync(ready, "");
    } catch (err) {
      writeFileSync(failed, err instanceof Error ? err.message : String(err));
      throw err;
    }
    return pkg;
  }
  const deadline = Date.now() + BUILD_WAIT_MS;
  for (;;) {
    if (existsSync(ready)) return pkg;
    if (existsSync(failed)) throw new Error(readFileSync(failed, "utf8"));
    if (Date.now() > deadline) throw new Error(`still waiting for the build in ${pkg}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/**
 * The root of the package built from src/ for this run (built on the first call of the
 * run, by whichever worker comes first). Throws the compiler's output when the build fails.
 */
export function builtPackage(): Promise<string> {
  own ??= sharedBuild();
  return own;
}

/** The `punctual` command of a built package: run it as `node <this> …`. */
export function punctualBin(pkg: string): string {
  return join(pkg, "bin/punctual.js");
}
