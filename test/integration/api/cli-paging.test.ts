/**
 * API-3: the CLI's list commands page against a real server: `--limit` asks for pages of
 * that size and prints where to go on (`more: --cursor …`), `--cursor` goes on, and
 * `--all` follows `nextCursor` to the end (JSON Lines with `--json`), in either order.
 * The commands run in this process (`buildProgram`) against the API served on a loopback
 * port over the engine of this run.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createApi, serveApi, type ServedApi } from "../../../src/api/server.js";
import { buildProgram } from "../../../src/cli/program.js";
import { testPunctual, type TestPunctual } from "../../support/punctual.js";

let t: TestPunctual | null = null;
let served: ServedApi | null = null;
afterEach(async () => {
  await served?.close(0);
  await t?.close();
  served = null;
  t = null;
});

async function cli(url: string, ...args: string[]): Promise<string> {
  let out = "";
  const program = buildProgram({ out: (s) => (out += s), err: () => undefined });
  await program.parseAsync(["node", "punctual", ...args, "--url", url]);
  return out;
}

const jsonLines = (text: string) =>
  text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { id: string | number });

describe("CLI list paging", () => {
  it("API-3: schedules list and deliveries list take --limit and --cursor, and --all walks every page once, in both orders", async () => {
    t = await testPunctual();
    const { punctual } = t;
    for (let i = 0; i < 7; i++) {
      await punctual.createSchedule({
        dtstart: "2027-01-04T08:30:00Z",
        tzid: "UTC",
        title: `Paged ${i}`,
        source: "cli-paging",
        reminders: [{ key: "r", offset: "PT0S", channel: "log" }],
      });
    }
    served = await serveApi(createApi(punctual), { host: "127.0.0.1", port: 0 });
    const url = served.url;
    const ids = (await punctual.listSchedules({ limit: 100 })).items.map((s) => s.id);
    expect(ids).toHaveLength(7);

    // One page of 3, and the cursor to the next.
    const first = await cli(url, "schedules", "list", "--source", "cli-paging", "--limit", "3");
    const more = /more: --cursor (\S+)/.exec(first);
    expect(more).not.toBeNull();
    expect(ids.slice(0, 3).every((id) => first.includes(id))).toBe(true);
    expect(ids.slice(3).some((id) => first.includes(id))).toBe(false);
    const second = await cli(
      url,
      "schedules",
      "list",
      "--source",
      "cli-paging",
      "--limit",
      "3",
      "--cursor",
      more![1]!,
    );
    expect(ids.slice(3, 6).every((id) => second.includes(id))).toBe(true);

    // --all: every page, each schedule once, as JSON Lines; pages of 2 (4 requests).
    const all = await cli(url, "schedules", "list", "--all", "--limit", "2", "--json");
    expect(jsonLines(all).map((s) => s.id)).toEqual(ids);
    const desc = await cli(
      url,
      "schedules",
      "list",
      "--all",
      "--limit",
      "2",
      "--order",
      "desc",
      "--json",
    );
    expect(jsonLines(desc).map((s) => s.id)).toEqual([...ids].reverse());
    // The table form prints its header once over every page.
    const table = await cli(url, "schedules", "list", "--all", "--limit", "2");
    expect(ids.every((id) => table.includes(id))).toBe(true);
    expect(table.split("\n")[0]).toMatch(/^ID\b/);
    expect(table.split("\n").filter((line) => /^ID\b/.test(line))).toHaveLength(1);

    await t.punctual.scheduler.tick();
    const deliveries = (await punctual.listDeliveries({ limit: 100 })).items.map((d) => d.id);
    expect(deliveries).toHaveLength(7);
    const allDeliveries = await cli(url, "deliveries", "list", "--all", "--limit", "3", "--json");
    expect(jsonLines(allDeliveries).map((d) => d.id)).toEqual(deliveries);
  });
});
