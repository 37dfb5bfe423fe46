/**
 * API-6: the dashboard's state filters offer exactly the states the API accepts, so no
 * choice on the page answers 400 and none the API knows is missing: the server writes its
 * own lists into the page, and the page's script keeps no list of its own.
 */
import { readFileSync } from "node:fs";
import type { Context } from "hono";
import { describe, expect, it } from "vitest";
import { registerDashboard } from "../../src/dashboard/index.js";
import { DELIVERY_STATES, SCHEDULE_STATES } from "../../src/domain/index.js";

const app = readFileSync(new URL("../../src/dashboard/assets/app.js", import.meta.url), "utf8");

/** The page `/ui/` as the dashboard serves it. */
async function servedPage(): Promise<string> {
  const routes = new Map<string, (c: Context) => Response | Promise<Response>>();
  registerDashboard({ get: (path, handler) => routes.set(path, handler) });
  const context = { header: () => undefined, html: (body: string) => new Response(body) };
  const res = await routes.get("/ui/")!(context as unknown as Context);
  return res.text();
}

/** The lists of the page's `<meta name="punctual-states">`, as its script reads them. */
function statesOf(page: string): { delivery: string[]; schedule: string[] } {
  const m = /<meta name="punctual-states" content="([^"]*)"/.exec(page);
  if (!m) throw new Error("no punctual-states meta in the page");
  return JSON.parse(m[1]!.replaceAll("&quot;", '"')) as { delivery: string[]; schedule: string[] };
}

describe("dashboard state filters (API-6)", () => {
  it("API-6: the served page lists the API's schedule and delivery states, no more, no fewer", async () => {
    const states = statesOf(await servedPage());
    expect(states.schedule).toEqual([...SCHEDULE_STATES]);
    expect(states.delivery).toEqual([...DELIVERY_STATES]);
  });

  it("API-6: the page's script takes its state filters from the served lists, not a copy", () => {
    expect(app).toContain('meta[name="punctual-states"]');
    expect(app).not.toMatch(/const (DELIVERY|SCHEDULE)_STATES = \[/);
  });
});
