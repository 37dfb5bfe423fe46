/**
 * OPS-14 (start fast): `npm start` builds only when dist/ is missing or older than its
 * sources. Times are set on the files, not waited for.
 */
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
// @ts-expect-error -- a plain .mjs script without types
import { isStale } from "../../../scripts/build-if-stale.mjs";

const check = isStale as (dir: string) => { stale: boolean; reason: string };

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function write(dir: string, path: string, atSeconds: number): void {
  const full = join(dir, path);
  mkdirSync(join(full, ".."), { recursive: true });
  writeFileSync(full, "");
  utimesSync(full, atSeconds, atSeconds);
}

function project(): string {
  const dir = mkdtempSync(join(tmpdir(), "punctual-stale-"));
  dirs.push(dir);
  write(dir, "package.json", 1_000);
  write(dir, "tsconfig.json", 1_000);
  write(dir, "src/cli/main.ts", 1_000);
  write(dir, "src/store/db.ts", 1_000);
  return dir;
}

describe("build-if-stale", () => {
  it("OPS-14: a missing dist/ is built", () => {
    expect(check(project())).toEqual({ stale: true, reason: "dist/ has not been built yet" });
  });

  it("OPS-14: dist/ newer than every source is not rebuilt; a source edited since is, and named", () => {
    const dir = project();
    write(dir, "dist/cli/main.js", 2_000);
    write(dir, "dist/store/db.js", 2_000);
    expect(check(dir).stale).toBe(false);
    write(dir, "src/store/db.ts", 3_000);
    expect(check(dir)).toEqual({
      stale: true,
      reason: "src/store/db.ts changed since the last build",
    });
  });

  it("OPS-14: package.json or tsconfig changed since the build makes it stale; an output of a deleted source does not", () => {
    const dir = project();
    write(dir, "dist/cli/main.js", 2_000);
    write(dir, "dist/store/db.js", 2_000);
    write(dir, "dist/gone.js", 500); // its source was deleted
    expect(check(dir).stale).toBe(false);
    write(dir, "tsconfig.json", 2_500);
    expect(check(dir)).toEqual({
      stale: true,
      reason: "tsconfig.json changed since the last build",
    });
  });
});
