/**
 * The examples of README.md and docs/*.md run (docs must not drift from the code): every
 * fenced block whose info string carries the word `runnable` is run, and the test is
 * named by the file and line of its opening fence.
 *
 * - `sh runnable`: a bash script (`set -euo pipefail`) in a fresh temporary folder,
 *   against one `punctual start` of a package freshly built from src/ (embedded PGlite,
 *   a free port). `http://127.0.0.1:8080` in the block is replaced with that server's URL
 *   (and PUNCTUAL_URL points at it); `punctual` and `npx punctual` run the built CLI; curl
 *   fails on an HTTP error status. The block must exit 0.
 * - `console runnable`: lines starting with `$ ` are commands (run as above); the lines
 *   after each are its expected output (stdout then stderr, trailing spaces ignored), where
 *   `…` stands for any text. The exit code is not checked: the output shows a failure.
 * - `ts runnable`: an ES module in a fresh folder where `punctual` resolves to the built
 *   package; type-checked with the project's TypeScript (strict), then run with tsx. It must
 *   exit 0.
 *
 * Every process runs with test/support/loopback-only.mjs preloaded and curl with a dead
 * loopback proxy, so no example reaches beyond this machine. Timeouts are the project's
 * (vitest.config.ts); nothing here measures time.
 */
import { spawn, type ChildProcess } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builtPackage } from "../support/built-package.js";
import { until } from "../support/processes.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const guard = pathToFileURL(join(root, "test/support/loopback-only.mjs")).href;
const DOC_URL = "http://127.0.0.1:8080";
const LANGS = ["sh", "console", "ts"] as const;
type Lang = (typeof LANGS)[number];

/** One marked block: where it is and what it holds. */
interface Block {
  /** Path relative to the repository root, e.g. `docs/api.md`. */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  code: string;
}

/** The fenced blocks of a Markdown file marked `runnable` in their info string. */
function runnableBlocks(file: string, text: string): Block[] {
  const lines = text.split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*(.*)$/.exec(lines[i] ?? "");
    if (!open) continue;
    const [, indent = "", fence = "", info = ""] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const close = /^\s*(`{3,}|~{3,})\s*$/.exec(lines[j] ?? "");
      if (close?.[1] && close[1][0] === fence[0] && close[1].length >= fence.length) break;
      body.push(
        (lines[j] ?? "").startsWith(indent)
          ? (lines[j] ?? "").slice(indent.length)
          : (lines[j] ?? ""),
      );
    }
    const words = info.trim().split(/\s+/);
    if (words.includes("runnable")) {
      blocks.push({ file, line: i + 1, lang: words[0] ?? "", code: body.join("\n") + "\n" });
    }
    i = j;
  }
  return blocks;
}

const docFiles = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`),
];
const blocks = docFiles.flatMap((file) =>
  runnableBlocks(file, readFileSync(join(root, file), "utf8")),
);

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; input?: string },
): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

/** The environment without the variables that would change the CLI's defaults. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (key.startsWith("PUNCTUAL_") || key === "DATABASE_URL" || key === "NODE_OPTIONS") {
      delete env[key];
    }
  }
  return env;
}

const where = (b: Block, offset = 0): string => `${b.file}:${b.line + offset}`;

/** Lines of the shell preamble put before a block (see `preamble` below). */
const PREAMBLE_LINES = 4;

function report(b: Block, r: Result): string {
  // bash names the script line: turn it into the line of the Markdown file.
  const stderr = r.stderr.replace(
    /^bash: line (\d+):/gm,
    (_, n: string) => `${where(b, Number(n) - PREAMBLE_LINES)}:`,
  );
  return `${where(b)} (${b.lang} block) exited ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${stderr}`;
}

/** `…` in an expected line stands for any text; the rest is literal. */
function lineMatches(expected: string, actual: string): boolean {
  const pattern = expected
    .split("…")
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${pattern}$`).test(actual);
}

/** The commands of a console block with their expected output and the line of each prompt. */
function consoleSteps(
  code: string,
): Array<{ offset: number; command: string; expected: string[] }> {
  const steps: Array<{ offset: number; command: string; expected: string[] }> = [];
  const lines = code.replace(/\n$/, "").split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    if (line.startsWith("$ ")) {
      let command = line.slice(2);
      const offset = i + 1;
      while (command.endsWith("\\") && i + 1 < lines.length) command += `\n${lines[++i] ?? ""}`;
      steps.push({ offset, command, expected: [] });
    } else if (steps.length > 0) {
      steps[steps.length - 1]?.expected.push(line.trimEnd());
    }
  }
  return steps;
}

const engine = process.env.PUNCTUAL_TEST_ENGINE ?? "pglite";

describe("the documentation's marked blocks", () => {
  it("every block marked runnable is in a language the runner knows (sh, console, ts)", () => {
    const unknown = blocks.filter((b) => !LANGS.includes(b.lang as Lang)).map((b) => where(b));
    expect(unknown).toEqual([]);
  });

  it("the README tour and the embedding example are among them", () => {
    expect(blocks.filter((b) => b.file === "README.md").length).toBeGreaterThanOrEqual(4);
    expect(blocks.some((b) => b.file === "docs/api.md" && b.lang === "ts")).toBe(true);
  });
});

// The examples use the embedded engine: they run once, in the PGlite stage of `npm test`.
describe.skipIf(engine !== "pglite")(
  "documentation examples run against the built package (skipped on the PostgreSQL stage: the examples use the embedded engine, run in the PGlite stage)",
  () => {
    const tmp = mkdtempSync(join(tmpdir(), "punctual-docs-"));
    let pkg = "";
    let server: ChildProcess | null = null;
    let serverLog = "";
    let url = "";
    let env: NodeJS.ProcessEnv = {};
    const preamble = () =>
      [
        "set -euo pipefail",
        `punctual() { node ${JSON.stringify(join(pkg, "bin/punctual.js"))} "$@"; }`,
        'npx() { if [ "${1:-}" = punctual ]; then shift; punctual "$@"; else echo "npx $1: only npx punctual runs in documentation examples" >&2; return 127; fi; }',
        'curl() { command curl --fail-with-body "$@"; }',
        "",
      ].join("\n");

    const blockDirs = new Map<Block, string>();
    /** A fresh folder for one block, where `punctual` resolves to the built package. */
    function blockDir(b: Block): string {
      const known = blockDirs.get(b);
      if (known) return known;
      const dir = join(tmp, "blocks", `${b.file.replace(/\W/g, "_")}-${b.line}`);
      blockDirs.set(b, dir);
      mkdirSync(join(dir, "node_modules", "@types"), { recursive: true });
      symlinkSync(pkg, join(dir, "node_modules", "punctual"), "dir");
      symlinkSync(join(root, "node_modules/@types/node"), join(dir, "node_modules/@types/node"));
      writeFileSync(join(dir, "package.json"), '{ "private": true, "type": "module" }\n');
      return dir;
    }

    beforeAll(async () => {
      // The package as npm would install it, built from src/ now (dist/ may be stale),
      // once per run for every end-to-end file (test/support/built-package.ts).
      pkg = await builtPackage();
      env = {
        ...cleanEnv(),
        NODE_OPTIONS: `--import=${guard}`,
        // curl: anything but loopback goes to a proxy that is not there.
        http_proxy: "http://127.0.0.1:9",
        https_proxy: "http://127.0.0.1:9",
        ALL_PROXY: "http://127.0.0.1:9",
        NO_PROXY: "127.0.0.1,localhost",
        no_proxy: "127.0.0.1,localhost",
      };
      server = spawn(
        process.execPath,
        [join(pkg, "bin/punctual.js"), "start", "--port", "0", "--data-dir", join(tmp, "data")],
        { cwd: tmp, env, stdio: ["ignore", "pipe", "pipe"] },
      );
      server.stdout?.on("data", (d: Buffer) => (serverLog += d.toString()));
      url = await new Promise<string>((resolve, reject) => {
        let stderr = "";
        server?.stderr?.on("data", (d: Buffer) => {
          stderr += d.toString();
          const m = /listening on (http:\/\/\S+)/.exec(stderr);
          if (m?.[1]) resolve(m[1]);
        });
        server?.on("exit", (code) => reject(new Error(`punctual start exited ${code}: ${stderr}`)));
      });
      // Examples may read /readyz: wait for the first scheduler pass (an outcome, not a time).
      await until(
        async () => {
          const res = await fetch(`${url}/readyz`).catch(() => null);
          return res?.status === 200;
        },
        "the documentation server's first scheduler pass (/readyz 200)",
        120_000,
      );
      // The server ignores a bearer token when it requires none; examples may name one.
      env = { ...env, PUNCTUAL_URL: url, PUNCTUAL_API_KEY: "docs-example-key-not-required" };
    });

    afterAll(async () => {
      if (server && server.exitCode === null) {
        const exited = new Promise((resolve) => server?.on("exit", resolve));
        server.kill("SIGTERM");
        await exited;
      }
      rmSync(tmp, { recursive: true, force: true });
    });

    const shell = (code: string, cwd: string): Promise<Result> =>
      run("bash", ["-c", preamble() + code.replaceAll(DOC_URL, url)], { cwd, env });

    for (const b of blocks.filter((x) => x.lang === "sh")) {
      it(`${where(b)} (sh) runs and exits 0`, async () => {
        const r = await shell(b.code, blockDir(b));
        if (r.code !== 0) {
          throw new Error(
            `${report(b, r)}\n--- server log (last lines)\n${serverLog.slice(-2000)}`,
          );
        }
      });
    }

    for (const b of blocks.filter((x) => x.lang === "console")) {
      it(`${where(b)} (console) prints what the block shows`, async () => {
        const dir = blockDir(b);
        for (const step of consoleSteps(b.code)) {
          const r = await shell(step.command, dir);
          const actual = `${r.stdout}${r.stderr}`.split("\n").map((l) => l.trimEnd());
          while (actual.length > 0 && actual[actual.length - 1] === "") actual.pop();
          const expected = [...step.expected];
          while (expected.length > 0 && expected[expected.length - 1] === "") expected.pop();
          const same =
            actual.length === expected.length &&
            expected.every((e, k) => lineMatches(e, actual[k] ?? ""));
          if (!same) {
            throw new Error(
              `${where(b, step.offset)}: \`${step.command}\` printed\n${actual.join("\n")}\n--- the block shows\n${expected.join("\n")}`,
            );
          }
        }
      });
    }

    const tsBlocks = blocks.filter((x) => x.lang === "ts");
    let typeChecked: Promise<Map<Block, string>> | null = null;
    /**
     * Type-checks every `ts` block in one compiler run (one program, each block a module in
     * its own folder, so each resolves `punctual` to the built package), and gives each
     * block its own errors, with example.ts positions turned into Markdown lines. One run
     * instead of one per block: loading the declarations is most of a run's cost.
     */
    function typeCheckAll(): Promise<Map<Block, string>> {
      typeChecked ??= (async () => {
        const files = tsBlocks.map((b) => {
          const file = join(blockDir(b), "example.ts");
          writeFileSync(file, b.code);
          return file;
        });
        const config = join(tmp, "blocks", "tsconfig.json");
        writeFileSync(
          config,
          JSON.stringify({
            compilerOptions: {
              target: "ES2022",
              lib: ["ES2023"],
              module: "NodeNext",
              moduleResolution: "NodeNext",
              strict: true,
              noEmit: true,
              skipLibCheck: true,
              isolatedModules: true,
              verbatimModuleSyntax: true,
              types: ["node"],
              typeRoots: [join(root, "node_modules/@types")],
            },
            files,
          }),
        );
        const tsc = join(root, "node_modules/typescript/bin/tsc");
        const checked = await run(process.execPath, [tsc, "-p", config, "--pretty", "false"], {
          cwd: join(tmp, "blocks"),
          env: cleanEnv(),
        });
        const output = `${checked.stdout}${checked.stderr}`;
        const errors = new Map<Block, string>();
        for (const b of tsBlocks) {
          const folder = blockDir(b).slice(join(tmp, "blocks").length + 1);
          const own = output
            .split("\n")
            .filter((line) => line.startsWith(`${folder}/example.ts(`))
            .map((line) =>
              line
                .slice(folder.length + 1)
                // example.ts(3,5): error … → the line in the Markdown file.
                .replace(
                  /^example\.ts\((\d+),(\d+)\)/,
                  (_, l: string, c: string) => `${where(b, Number(l))}:${c}`,
                ),
            );
          if (own.length > 0) errors.set(b, own.join("\n"));
        }
        // A failure that names no block (a bad option, a crash) fails every block.
        if (checked.code !== 0 && errors.size === 0) {
          for (const b of tsBlocks) errors.set(b, output || `tsc exited ${checked.code}`);
        }
        return errors;
      })();
      return typeChecked;
    }

    for (const b of tsBlocks) {
      it(`${where(b)} (ts) type-checks and runs`, async () => {
        const dir = blockDir(b);
        const errors = (await typeCheckAll()).get(b);
        if (errors !== undefined) {
          throw new Error(`${where(b)} (ts block) does not type-check:\n${errors}`);
        }
        const tsx = join(root, "node_modules/tsx/dist/cli.mjs");
        const r = await run(process.execPath, [tsx, "example.ts"], { cwd: dir, env });
        if (r.code !== 0) throw new Error(report(b, r));
      });
    }
  },
);
