/**
 * API-11: `punctual schedules zones <id>` asks `GET /v1/schedules/{id}/recipient-zones`
 * and prints the zones, most recipients first; `--json` prints the reply unchanged. `fetch`
 * is replaced by a recorder (no network); the server side is
 * test/integration/api/recipient-zones.test.ts.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RecipientZones } from "../../../src/app/recipient-zones.js";
import { buildProgram } from "../../../src/cli/program.js";

const ID = "0b9f6c1e-2f4a-4c4e-9d7e-1a2b3c4d5e6f";

function recorder(reply: RecipientZones): string[] {
  const urls: string[] = [];
  vi.stubGlobal("fetch", (url: URL) => {
    urls.push(String(url));
    return Promise.resolve(
      new Response(JSON.stringify(reply), {
        status: 200,
        headers: { "content-type": "application/json" },
      }),
    );
  });
  return urls;
}

async function run(...args: string[]): Promise<string> {
  let out = "";
  const program = buildProgram({ out: (s) => (out += s), err: () => undefined });
  await program.parseAsync(["node", "punctual", ...args, "--url", "http://127.0.0.1:9"]);
  return out;
}

afterEach(() => {
  vi.unstubAllGlobals();
});

const reply: RecipientZones = {
  scheduleId: ID,
  floating: true,
  recipients: 12,
  zones: [
    { tzid: "Asia/Tokyo", recipients: 10 },
    { tzid: "Europe/Berlin", recipients: 2 },
  ],
};

describe("API-11 schedules zones", () => {
  it("API-11: schedules zones prints each zone with its count, most first", async () => {
    const urls = recorder(reply);
    const out = await run("schedules", "zones", ID);
    expect(urls).toEqual([`http://127.0.0.1:9/v1/schedules/${ID}/recipient-zones`]);
    expect(out).toBe(
      `Schedule ${ID}: 12 recipients in 2 zones (floating: read in each recipient's zone)\n` +
        "10  Asia/Tokyo\n" +
        " 2  Europe/Berlin\n",
    );
  });

  it("API-11: schedules zones --json prints the reply; a schedule without recipients says so", async () => {
    recorder(reply);
    expect(JSON.parse(await run("schedules", "zones", ID, "--json"))).toEqual(reply);
    recorder({ scheduleId: ID, floating: false, recipients: 0, zones: [] });
    expect(await run("schedules", "zones", ID)).toBe(`Schedule ${ID} has no recipients.\n`);
  });
});
