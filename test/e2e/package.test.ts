/**
 * API-4, API-8: the package as npm ships it. `npm pack` builds it (through `prepare`) and
 * makes the tarball; npm installs the tarball into an empty project; there the README's
 * library examples (the `ts runnable` blocks of "Use it as a library") are type-checked
 * against the installed types, compiled to JavaScript and run with node. An example
 * followed by "It prints `…`" must print that line.
 *
 * Runs in its own vitest project (vitest.config.ts: `package`), in the PGlite stage of
 * `npm test`: packing and installing take minutes on a loaded machine, so its timeouts are
 * set there, once. Every process but npm runs with test/support/loopback-only.mjs
 * preloaded. The temporary folder (tarball, project) is removed at the end.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));
const guard = pathToFileURL(join(root, "test/support/loopback-only.mjs")).href;
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(
  command: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

const show = (what: string, r: Result) =>
  `${what} exited ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;

/** The environment without what would change punctual's defaults or npm's view of the project. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (
      key.startsWith("PUNCTUAL_") ||
      key === "DATABASE_URL" ||
      key === "NODE_OPTIONS" ||
      key.startsWith("npm_package_") ||
      key.startsWith("npm_lifecycle_")
    ) {
      delete env[key];
    }
  }
  return env;
}

/** The `ts runnable` blocks of the README section "Use it as a library", with what each prints. */
function libraryExamples(): Array<{ line: number; code: string; prints: string | null }> {
  const lines = readFileSync(join(root, "README.md"), "utf8").split("\n");
  const start = lines.findIndex((l) => l === "## Use it as a library");
  if (start < 0) throw new Error('README.md has no "## Use it as a library" section');
  const end = lines.findIndex((l, i) => i > start && l.startsWith("## "));
  const examples: Array<{ line: number; code: string; prints: string | null }> = [];
  for (let i = start; i < (end < 0 ? lines.length : end); i++) {
    if (lines[i] !== "```ts runnable") continue;
    const close = lines.findIndex((l, j) => j > i && l === "```");
    const after = lines.slice(close + 1, close + 4).join(" ");
    examples.push({
      line: i + 1,
      code: lines.slice(i + 1, close).join("\n") + "\n",
      prints: /^\s*It prints `([^`]+)`/.exec(after)?.[1] ?? null,
    });
    i = close;
  }
  return examples;
}

const examples = libraryExamples();

describe("the packed package installs into an empty project and runs the README's examples", () => {
  // Made in the first hook, not when the file is collected: a run that filters these tests
  // out (or only lists them) leaves nothing behind.
  let tmp = "";
  let project = "";
  let tarball = "";
  let packed: string[] = [];
  const env = cleanEnv();

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), "punctual-package-"));
    project = join(tmp, "project");
    // The tarball, exactly as `npm publish` would upload it (`prepare` builds dist/ first).
    const r = await run("npm", ["pack", "--json", "--pack-destination", tmp], root, env);
    if (r.code !== 0) throw new Error(show("npm pack", r));
    const [info] = JSON.parse(r.stdout.slice(r.stdout.indexOf("["))) as Array<{
      filename: string;
      files: Array<{ path: string }>;
    }>;
    if (!info) throw new Error(`npm pack printed no package:\n${r.stdout}`);
    tarball = join(tmp, info.filename);
    packed = info.files.map((f) => f.path);
  });

  beforeAll(async () => {
    mkdirSync(project);
    writeFileSync(
      join(project, "package.json"),
      '{ "name": "punctual-package-check", "private": true, "type": "module" }\n',
    );
    const r = await run(
      "npm",
      ["install", tarball, "--prefer-offline", "--no-audit", "--no-fund"],
      project,
      env,
    );
    if (r.code !== 0) throw new Error(show("npm install", r));
    // The examples' type-check needs Node's types, as the user's project would have.
    mkdirSync(join(project, "node_modules/@types"), { recursive: true });
    if (!existsSync(join(project, "node_modules/@types/node"))) {
      symlinkSync(
        join(root, "node_modules/@types/node"),
        join(project, "node_modules/@types/node"),
      );
    }
  });

  afterAll(() => {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it("API-4: the tarball holds the built library with its types, the testing kit, the CLI and every migration; no sources or tests", () => {
    for (const file of [
      "package.json",
      "README.md",
      "LICENSE",
      "bin/punctual.js",
      "dist/index.js",
      "dist/index.d.ts",
      "dist/testing/index.js",
      "dist/testing/index.d.ts",
      "dist/cli/main.js",
      // API-6: the dashboard's files, served as they are (no build step on the user's side).
      "dist/dashboard/assets/index.html",
      "dist/dashboard/assets/app.js",
      "dist/dashboard/assets/app.css",
    ]) {
      expect(packed, file).toContain(file);
    }
    const migrations = readdirSync(join(root, "migrations")).filter((f) => f.endsWith(".sql"));
    expect(migrations.length).toBeGreaterThan(0);
    for (const m of migrations) expect(packed).toContain(`migrations/${m}`);
    expect(packed.filter((p) => /^(src|test|bench|scripts|docs)\//.test(p))).toEqual([]);
    // A build leaves nothing behind from files that no longer exist in src/.
    const sources = new Set(
      (readdirSync(join(root, "src"), { recursive: true }) as string[])
        .map((f) => f.replaceAll("\\", "/"))
        .filter((f) => f.endsWith(".ts") || f.startsWith("dashboard/assets/"))
        .map((f) => `dist/${f.replace(/\.ts$/, ".js")}`),
    );
    expect(
      packed.filter((p) => p.endsWith(".js") && p.startsWith("dist/") && !sources.has(p)),
    ).toEqual([]);
  });

  it("API-4: the installed package runs without a build step: `punctual --version`, and no TypeScript installed", async () => {
    const installed = join(project, "node_modules/punctual");
    expect(existsSync(join(installed, "dist/index.js"))).toBe(true);
    // `prepare` (the build) runs when packing, not on install: the user needs no compiler.
    expect(existsSync(join(project, "node_modules/typescript"))).toBe(false);
    const r = await run(
      process.execPath,
      [join(project, "node_modules/.bin/punctual"), "--version"],
      project,
      { ...env, NODE_OPTIONS: `--import=${guard}` },
    );
    expect(r.code, show("punctual --version", r)).toBe(0);
    expect(r.stdout.trim()).toBe(pkg.version);
  });

  it('API-4, API-8: the README section "Use it as a library" has the library and the testing-kit examples', () => {
    expect(examples.some((e) => e.code.includes('from "punctual"'))).toBe(true);
    expect(examples.some((e) => e.code.includes('from "punctual/testing"'))).toBe(true);
    expect(examples.some((e) => e.prints !== null)).toBe(true);
  });

  for (const example of examples) {
    it(`API-4, API-8: README.md:${example.line} type-checks against the installed types and runs with node`, async () => {
      const dir = join(project, `example-${example.line}`);
      mkdirSync(dir);
      writeFileSync(join(dir, "example.ts"), example.code);
      writeFileSync(
        join(dir, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            target: "ES2022",
            lib: ["ES2023"],
            module: "NodeNext",
            moduleResolution: "NodeNext",
            strict: true,
            noEmit: true,
            skipLibCheck: true,
            verbatimModuleSyntax: true,
            types: ["node"],
          },
          files: ["example.ts"],
        }),
      );
      const tsc = join(root, "node_modules/typescript/bin/tsc");
      const checked = await run(process.execPath, [tsc, "-p", "tsconfig.json"], dir, env);
      expect(checked.code, show(`tsc (README.md:${example.line})`, checked)).toBe(0);
      const js = ts.transpileModule(example.code, {
        compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext },
      }).outputText;
      writeFileSync(join(dir, "example.mjs"), js);
      const r = await run(process.execPath, ["example.mjs"], dir, {
        ...env,
        NODE_OPTIONS: `--import=${guard}`,
      });
      expect(r.code, show(`node example.mjs (README.md:${example.line})`, r)).toBe(0);
      if (example.prints) expect(r.stdout.split("\n")).toContain(example.prints);
    });
  }
});
