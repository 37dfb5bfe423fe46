#!/usr/bin/env node
// `npm start`'s prestart: builds dist/ with `npm run build` only when it is missing or
// older than what it is built from (src/, tsconfig*.json, package.json), and says so.
// Otherwise it prints nothing and costs a directory walk.
//
// Module: isStale(root) → { stale: boolean, reason: string }
// CLI:    node scripts/build-if-stale.mjs [--check]   (--check: print the verdict, build nothing;
//                                                      exit 1 when stale)
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));

/** Every file under `dir` (recursively) with its modification time in ms. */
function* files(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* files(path);
    else if (entry.isFile()) yield { path, mtimeMs: statSync(path).mtimeMs };
  }
}

/**
 * Whether dist/ needs a build: missing, or some input is newer than the oldest compiled
 * file of a source that still exists (a build rewrites every output, so the oldest one
 * dates the last full build; outputs of deleted sources are left out).
 * @param {string} dir the package root
 * @returns {{ stale: boolean, reason: string }}
 */
export function isStale(dir = root) {
  const dist = join(dir, "dist");
  const entry = join(dist, "cli", "main.js");
  if (!existsSync(entry)) return { stale: true, reason: "dist/ has not been built yet" };
  let built = Infinity;
  for (const f of files(dist)) {
    if (!f.path.endsWith(".js")) continue;
    const source = join(dir, "src", relative(dist, f.path)).replace(/\.js$/, ".ts");
    if (existsSync(source)) built = Math.min(built, f.mtimeMs);
  }
  const inputs = [
    ...files(join(dir, "src")),
    ...["tsconfig.json", "tsconfig.build.json", "package.json"]
      .map((name) => join(dir, name))
      .filter((path) => existsSync(path))
      .map((path) => ({ path, mtimeMs: statSync(path).mtimeMs })),
  ];
  const newer = inputs.filter((f) => f.mtimeMs > built);
  if (newer.length === 0) return { stale: false, reason: "dist/ is up to date" };
  const first = relative(dir, newer[0].path);
  return {
    stale: true,
    reason: `${first}${newer.length > 1 ? ` and ${newer.length - 1} more` : ""} changed since the last build`,
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const verdict = isStale(root);
  if (process.argv.includes("--check")) {
    console.log(verdict.reason);
    process.exit(verdict.stale ? 1 : 0);
  }
  if (verdict.stale) {
    console.error(`punctual: ${verdict.reason}; building (npm run build)…`);
    const r = spawnSync("npm", ["run", "build", "--silent"], { cwd: root, stdio: "inherit" });
    if (r.status !== 0) process.exit(r.status ?? 1);
    console.error("punctual: built.");
  }
}
