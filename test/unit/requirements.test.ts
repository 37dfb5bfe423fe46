/**
 * docs/requirements.md defines every requirement id the repository cites: a file that
 * names an id the page does not define fails here with the id and the files citing it,
 * and so does a file the page lists that does not exist.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));
const DOC = "docs/requirements.md";
const ID = /\b(?:REC|DEL|CH|OPS|API)-\d+\b/g;
/**
 * Where ids are cited: every file of the repository (source, tests, scripts, benchmarks,
 * docs, migrations, CI, configuration), so an id cited anywhere new is caught too.
 */
const CITING = ["."];
const SKIP = new Set(["node_modules", "dist", "coverage", ".git", ".vitest-cache"]);

function* files(path: string): Generator<string> {
  const full = join(root, path);
  if (!existsSync(full)) return;
  if (statSync(full).isFile()) {
    yield path;
    return;
  }
  for (const entry of readdirSync(full, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const child = join(path, entry.name);
    if (entry.isDirectory()) yield* files(child);
    else if (entry.isFile()) yield child;
  }
}

const doc = readFileSync(join(root, DOC), "utf8");
const defined = new Set(
  [...doc.matchAll(/^### ((?:REC|DEL|CH|OPS|API)-\d+)\b/gm)].map((m) => m[1] as string),
);

/** Every cited id with the files citing it, the requirements page itself left out. */
function cited(): Map<string, string[]> {
  const byId = new Map<string, string[]>();
  for (const path of CITING) {
    for (const file of files(path)) {
      const rel = relative(root, join(root, file)).split("\\").join("/");
      if (rel === DOC || /\.(png|jpe?g|gif|ico|woff2?|wasm|gz|tgz)$/i.test(rel)) continue;
      const text = readFileSync(join(root, rel), "utf8");
      for (const id of new Set(text.match(ID) ?? [])) {
        byId.set(id, [...(byId.get(id) ?? []), rel]);
      }
    }
  }
  return byId;
}

describe("docs/requirements.md", () => {
  it("defines each id once", () => {
    const headings = [...doc.matchAll(/^### ((?:REC|DEL|CH|OPS|API)-\d+)\b/gm)].map(
      (m) => m[1] as string,
    );
    expect(headings.length).toBeGreaterThan(0);
    expect(new Set(headings).size).toBe(headings.length);
  });

  it("defines every requirement id that code, tests, scripts and docs cite", () => {
    const undefinedIds = [...cited()]
      .filter(([id]) => !defined.has(id))
      .map(([id, where]) => `${id} (cited in ${where.join(", ")})`);
    expect(undefinedIds).toEqual([]);
  });

  it("gives every id a statement, an implementing line and a proving line", () => {
    const sections = doc.split(/^### /m).slice(1);
    const incomplete = sections
      .filter((s) => {
        const body = s.split("\n").slice(1).join("\n");
        const statement = body.split("\n- Implemented in:")[0]?.trim() ?? "";
        return (
          statement.length < 40 ||
          !/^- Implemented in: /m.test(body) ||
          !/^- Proved by: /m.test(body)
        );
      })
      .map((s) => s.split("\n")[0]);
    expect(incomplete).toEqual([]);
  });

  it("lists only files that exist", () => {
    const listed = [...doc.matchAll(/^- (?:Implemented in|Proved by): (.*)$/gm)].flatMap((m) =>
      [...(m[1] ?? "").matchAll(/`([^`]+)`/g)].map((f) => f[1] as string),
    );
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.filter((file) => !existsSync(join(root, file)))).toEqual([]);
  });
});
