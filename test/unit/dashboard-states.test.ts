/**
 * API-6: the dashboard's state filters offer exactly the states the API accepts, so no
 * choice on the page answers 400 and none the API knows is missing.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DELIVERY_STATES, SCHEDULE_STATES } from "../../src/domain/index.js";

const app = readFileSync(new URL("../../src/dashboard/assets/app.js", import.meta.url), "utf8");

/** The string items of `const NAME = [ … ];` in the page's script. */
function listOf(name: string): string[] {
  const m = new RegExp(`const ${name} = \\[([^\\]]*)\\]`).exec(app);
  if (!m) throw new Error(`${name} not found in app.js`);
  return [...m[1]!.matchAll(/"([^"]+)"/g)].map((x) => x[1]!);
}

describe("dashboard state filters (API-6)", () => {
  it("API-6: the schedule and delivery state filters list the API's states, no more, no fewer", () => {
    expect([...listOf("SCHEDULE_STATES")].sort()).toEqual([...SCHEDULE_STATES].sort());
    expect([...listOf("DELIVERY_STATES")].sort()).toEqual([...DELIVERY_STATES].sort());
  });
});
