/**
 * API-4: every export of the package's entry points (src/index.ts, src/testing/index.ts)
 * carries TSDoc, read the way an editor shows it: the documentation comment of the
 * exported declaration, followed through re-exports.
 */
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const ENTRY_POINTS = ["src/index.ts", "src/testing/index.ts"];

/** Names of the exports of `entry` whose declaration has no documentation comment. */
function undocumented(program: ts.Program, entry: string): string[] {
  const checker = program.getTypeChecker();
  const file = program.getSourceFile(`${root}${entry}`);
  if (!file) throw new Error(`${entry} is not in the program`);
  const module = checker.getSymbolAtLocation(file);
  if (!module) throw new Error(`${entry} has no module symbol`);
  const missing: string[] = [];
  for (const exported of checker.getExportsOfModule(module)) {
    const symbol =
      exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    const documented =
      symbol.getDocumentationComment(checker).some((part) => part.text.trim() !== "") ||
      (symbol.declarations ?? []).some((d) => ts.getJSDocCommentsAndTags(d).length > 0);
    if (!documented) missing.push(exported.getName());
  }
  return missing.sort();
}

describe("TSDoc on the public surface", () => {
  const program = ts.createProgram(
    ENTRY_POINTS.map((e) => `${root}${e}`),
    {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: ["node"],
    },
  );
  for (const entry of ENTRY_POINTS) {
    it(`API-4: every export of ${entry} is documented`, () => {
      expect(undocumented(program, entry)).toEqual([]);
    });
  }
});
