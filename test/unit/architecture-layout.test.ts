/**
 * docs/architecture.md's layout table is the map a new contributor reads first: it must
 * list every folder of `src/`, each with the rank that `eslint.config.js` enforces for
 * imports, and no folder that is gone.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ranks } from "../../eslint.config.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const doc = readFileSync(join(root, "docs/architecture.md"), "utf8");

/** Rows `| rank | \`src/x/\` | what |` of the layout table, as folder → rank. */
function tableRanks(): Map<string, number> {
  const rows = new Map<string, number>();
  for (const m of doc.matchAll(/^\| (\d+) \| `src\/([^`/]+)\/` \|/gm)) {
    rows.set(m[2] as string, Number(m[1]));
  }
  return rows;
}

const folders = readdirSync(join(root, "src"), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort();

describe("docs/architecture.md layout table", () => {
  it("lists every folder of src/ and no other", () => {
    expect([...tableRanks().keys()].sort()).toEqual(folders);
  });

  it("gives each folder the rank the import-direction lint enforces", () => {
    expect(Object.fromEntries([...tableRanks()].sort())).toEqual(
      Object.fromEntries(Object.entries(ranks).sort()),
    );
  });
});
