/**
 * The previous release, built from git history (OPS-10): `scripts/releases.json` maps each
 * released version to its commit; {@link previousRelease} extracts that commit's tree with
 * `git archive`, installs its locked dependencies (`npm ci --prefer-offline`, or this
 * checkout's own node_modules when it holds every package the release locks, at the same
 * path, version and integrity), compiles it (emit only), and
 * keeps the result in `.test-tmp/releases/<commit>/` so later runs reuse it.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** A built release: its version, commit, folder and CLI entry point. */
export interface BuiltRelease {
  version: string;
  commit: string;
  dir: string;
  /** `bin/punctual.js` of that release (run it with `node`). */
  bin: string;
}

/** The recorded releases, oldest first (`{ version, commit }`). */
export function recordedReleases(): Array<{ version: string; commit: string }> {
  const text = readFileSync(join(ROOT, "scripts", "releases.json"), "utf8");
  const map = JSON.parse(text) as Record<string, string>;
  return Object.entries(map).map(([version, commit]) => ({ version, commit }));
}

/**
 * The newest recorded release before the code of this checkout: the last entry whose
 * version is not this checkout's own `package.json` version (a release records its own
 * commit once it is cut, and is not its own previous release).
 */
export function latestRecordedRelease(): { version: string; commit: string } {
  const own = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string })
    .version;
  const earlier = recordedReleases().filter((r) => r.version !== own);
  const last = earlier[earlier.length - 1];
  if (!last) throw new Error(`scripts/releases.json records no release before ${own}`);
  return last;
}

/**
 * Why the previous release cannot be built here, or null when it can: the git history
 * must hold its commit (a shallow clone does not).
 */
export function previousReleaseUnavailable(commit: string): string | null {
  const r = spawnSync("git", ["cat-file", "-e", `${commit}^{commit}`], { cwd: ROOT });
  if (r.error) return "needs git";
  if (r.status !== 0)
    return `needs the git history holding commit ${commit.slice(0, 7)} (shallow clone?)`;
  return null;
}

interface Lock {
  packages?: Record<string, { version?: string; integrity?: string; link?: boolean }>;
}

/**
 * Whether every package of lockfile `older` is locked in `newer` at the same path with the
 * same version and integrity (so one install serves both; `newer` may hold more).
 */
function lockedTreeIncluded(older: string, newer: string): boolean {
  const a = (JSON.parse(readFileSync(older, "utf8")) as Lock).packages ?? {};
  const b = (JSON.parse(readFileSync(newer, "utf8")) as Lock).packages ?? {};
  return Object.entries(a).every(([path, entry]) => {
    if (path === "") return true; // the root package itself
    const other = b[path];
    return (
      other !== undefined &&
      other.version === entry.version &&
      other.integrity === entry.integrity &&
      Boolean(other.link) === Boolean(entry.link)
    );
  });
}

function run(cmd: string, args: string[], cwd: string): void {
  const r = spawnSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} failed (${r.status}): ${r.stderr.slice(-2000)}`);
  }
}

/**
 * Builds (or reuses) the release at `commit`.
 * @throws Error naming the step that failed (archive, install, build).
 */
export function previousRelease(version: string, commit: string): BuiltRelease {
  const cache = join(ROOT, ".test-tmp", "releases");
  const dir = join(cache, commit);
  const bin = join(dir, "bin", "punctual.js");
  if (existsSync(join(dir, "dist", "cli", "main.js"))) return { version, commit, dir, bin };
  mkdirSync(cache, { recursive: true });
  const work = join(cache, `${commit}.partial-${process.pid}`);
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work);
  try {
    const tar = execFileSync("git", ["archive", "--format=tar", commit], {
      cwd: ROOT,
      maxBuffer: 256 * 1024 * 1024,
    });
    execFileSync("tar", ["-x", "-C", work], { input: tar });
    if (lockedTreeIncluded(join(work, "package-lock.json"), join(ROOT, "package-lock.json"))) {
      // Every package the release locks is installed here at the same place and version:
      // resolution from its files finds exactly what `npm ci` would have put there.
      symlinkSync(join(ROOT, "node_modules"), join(work, "node_modules"), "dir");
    } else {
      run("npm", ["ci", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"], work);
    }
    // Emit only: that commit passed its own type check when it was released, and
    // checking it again is most of a build's time (`--noCheck` needs TypeScript 5.6+).
    const tsc = join(work, "node_modules", "typescript", "bin", "tsc");
    const emitOnly = ["--noCheck", "--declaration", "false", "--sourceMap", "false"];
    const tsVersion = (
      JSON.parse(
        readFileSync(join(work, "node_modules", "typescript", "package.json"), "utf8"),
      ) as {
        version: string;
      }
    ).version;
    const [major = 0, minor = 0] = tsVersion.split(".").map(Number);
    const canSkipCheck = major > 5 || (major === 5 && minor >= 6);
    run(
      process.execPath,
      [tsc, "-p", "tsconfig.build.json", ...(canSkipCheck ? emitOnly : [])],
      work,
    );
    rmSync(dir, { recursive: true, force: true });
    renameSync(work, dir);
  } catch (err) {
    rmSync(work, { recursive: true, force: true });
    throw err;
  }
  return { version, commit, dir, bin };
}
