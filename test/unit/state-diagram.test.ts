/**
 * docs/architecture.md's delivery state diagram is the state machine the code obeys:
 * generated from `DELIVERY_TRANSITIONS` (scripts/state-diagram.ts), and this test fails
 * when the document and the table differ.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DELIVERY_TRANSITIONS } from "../../src/domain/index.js";
import { ARCHITECTURE_DOC, stateDiagram, withDiagram } from "../../scripts/state-diagram.js";

describe("the delivery state diagram of docs/architecture.md", () => {
  it("DEL-2: the document holds the diagram generated from DELIVERY_TRANSITIONS (npm run docs:states)", () => {
    const doc = readFileSync(ARCHITECTURE_DOC, "utf8");
    expect(withDiagram(doc)).toBe(doc);
  });

  it("DEL-2: the diagram has one edge per legal transition, and a changed table changes it", () => {
    const edges = stateDiagram()
      .split("\n")
      .filter((l) => / --> /.test(l) && !l.includes("[*]"));
    const legal = Object.values(DELIVERY_TRANSITIONS).reduce((n, to) => n + to.length, 0);
    expect(edges).toHaveLength(legal);
    const table = DELIVERY_TRANSITIONS as unknown as Record<string, readonly string[]>;
    const saved = table.skipped!;
    table.skipped = ["pending"];
    try {
      expect(() => stateDiagram()).toThrow(/without events \["skipped>pending"\]/);
    } finally {
      table.skipped = saved;
    }
  });
});
