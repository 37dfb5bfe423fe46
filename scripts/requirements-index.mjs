#!/usr/bin/env node
/**
 * Refreshes the "Implemented in" and "Proved by" lines of docs/requirements.md from the
 * citations in the tree: a file under `src/` (or a deployment file) that names an id
 * implements it, a file under `test/` that names it proves it. The statements are
 * written by hand and left alone.
 *
 * Usage: `node scripts/requirements-index.mjs` (rewrites the file), `--check` (exits 1
 * when the file is out of date, without writing).
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";

const DOC = "docs/requirements.md";
const IMPLEMENTING = ["src", "migrations", "Dockerfile", "compose.yml", "bin"];
const PROVING = ["test"];

/** Files under the given paths that cite each id, as a map id → sorted file list. */
function citations(paths) {
  let out = "";
  try {
    out = execFileSync(
      "git",
      ["grep", "-ow", "-E", "(REC|DEL|CH|OPS|API)-[0-9]+", "--", ...paths],
      {
        encoding: "utf8",
        maxBuffer: 64 * 1024 * 1024,
      },
    );
  } catch (error) {
    // git grep exits 1 when nothing matches.
    if (error.status !== 1) throw error;
  }
  const byId = new Map();
  for (const line of out.split("\n")) {
    const colon = line.lastIndexOf(":");
    if (colon < 0) continue;
    const file = line.slice(0, colon);
    const id = line.slice(colon + 1);
    if (!byId.has(id)) byId.set(id, new Set());
    byId.get(id).add(file);
  }
  return new Map([...byId].map(([id, files]) => [id, [...files].sort()]));
}

const implemented = citations(IMPLEMENTING);
const proved = citations(PROVING);
const list = (files) => (files?.length ? files.map((f) => `\`${f}\``).join(", ") : "none yet");

const before = readFileSync(DOC, "utf8");
let current = null;
const after = before
  .split("\n")
  .map((line) => {
    const heading = /^### ((?:REC|DEL|CH|OPS|API)-\d+)\b/.exec(line);
    if (heading) current = heading[1];
    else if (/^##? /.test(line)) current = null;
    if (current && line.startsWith("- Implemented in: ")) {
      return `- Implemented in: ${list(implemented.get(current))}`;
    }
    if (current && line.startsWith("- Proved by: ")) {
      return `- Proved by: ${list(proved.get(current))}`;
    }
    return line;
  })
  .join("\n");

if (process.argv.includes("--check")) {
  if (after !== before) {
    console.error(`${DOC} is out of date: run node scripts/requirements-index.mjs`);
    process.exit(1);
  }
} else if (after !== before) {
  writeFileSync(DOC, after);
}
