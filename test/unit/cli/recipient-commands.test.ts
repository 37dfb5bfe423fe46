/**
 * API-10 / API-3: the `recipients` commands send the requests the API expects. `fetch` is
 * replaced by a recorder (no network at all), so only what the CLI sends is checked here;
 * the server side has its own tests (test/integration/recipients.test.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { CliError } from "../../../src/cli/errors.js";
import { buildProgram } from "../../../src/cli/program.js";

interface Sent {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
}

function recorder(reply: unknown, status = 200): Sent[] {
  const sent: Sent[] = [];
  vi.stubGlobal("fetch", (url: URL, init: RequestInit) => {
    sent.push({
      method: init.method ?? "GET",
      url: String(url),
      headers: init.headers as Record<string, string>,
      body: init.body === undefined ? undefined : String(init.body),
    });
    return Promise.resolve(
      new Response(JSON.stringify(reply), {
        status,
        headers: { "content-type": "application/json" },
      }),
    );
  });
  return sent;
}

async function run(...args: string[]): Promise<string> {
  let out = "";
  const program = buildProgram({ out: (s) => (out += s), err: () => undefined });
  await program.parseAsync(["node", "punctual", ...args, "--url", "http://127.0.0.1:9"]);
  return out;
}

const view = {
  id: "alice@example.com",
  tzid: "Asia/Tokyo",
  targets: {},
  attributes: {},
  preferences: {},
  version: 1,
  createdAt: "2027-01-04T08:00:00.000Z",
  updatedAt: "2027-01-04T08:00:00.000Z",
};

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("punctual recipients", () => {
  it("API-10: set PUTs the whole recipient built from its flags", async () => {
    const sent = recorder(view, 201);
    const out = await run(
      "recipients",
      "set",
      "alice@example.com",
      "--tzid",
      "Asia/Tokyo",
      "--email",
      "alice@example.com",
      "--attributes",
      '{"plan":"pro"}',
      "--opt-out-category",
      "digest",
      "--opt-out-category",
      "news",
    );
    expect(sent[0]).toMatchObject({
      method: "PUT",
      url: "http://127.0.0.1:9/v1/recipients/alice%40example.com",
    });
    expect(JSON.parse(sent[0]!.body!)).toEqual({
      tzid: "Asia/Tokyo",
      targets: { email: { to: "alice@example.com" } },
      attributes: { plan: "pro" },
      preferences: { optOut: { categories: ["digest", "news"] } },
    });
    expect(out).toMatch(/created \(version 1\)/);
  });

  it("API-10: list, show and remove call their routes", async () => {
    const sent = recorder({ items: [view], nextCursor: "abc" });
    const out = await run("recipients", "list", "--search", "alice", "--order", "desc");
    expect(sent[0]!.url).toBe("http://127.0.0.1:9/v1/recipients?q=alice&order=desc");
    expect(out).toMatch(/alice@example.com\s+Asia\/Tokyo/);
    expect(out).toContain("--cursor abc");
    await run("recipients", "show", "bob");
    expect(sent[1]).toMatchObject({ method: "GET", url: "http://127.0.0.1:9/v1/recipients/bob" });
    await run("recipients", "remove", "bob");
    expect(sent[2]).toMatchObject({ method: "DELETE" });
  });

  it("API-10: import sends NDJSON or a JSON array as is, refuses CSV, and fails when rows were refused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "punctual-recipients-"));
    try {
      const nd = join(dir, "people.ndjson");
      writeFileSync(nd, '{"id":"a","tzid":"UTC"}\n{"id":"b","tzid":"UTC"}\n');
      const sent = recorder({ created: 2, updated: 0, errors: 0, results: [] });
      const out = await run("recipients", "import", nd);
      expect(sent[0]).toMatchObject({
        method: "POST",
        url: "http://127.0.0.1:9/v1/recipients:bulk",
      });
      expect(sent[0]!.headers["content-type"]).toBe("application/x-ndjson");
      expect(sent[0]!.body).toBe('{"id":"a","tzid":"UTC"}\n{"id":"b","tzid":"UTC"}\n');
      expect(out).toMatch(/2 created, 0 updated, 0 refused/);

      const json = join(dir, "people.json");
      writeFileSync(json, '[{"id":"a","tzid":"UTC"}]');
      recorder({
        created: 0,
        updated: 0,
        errors: 1,
        results: [{ index: 0, id: "a", status: "error", error: { code: "X", message: "bad" } }],
      });
      await expect(run("recipients", "import", json)).rejects.toThrow(CliError);

      const csv = join(dir, "people.csv");
      writeFileSync(csv, "id,tzid\na,UTC\n");
      await expect(run("recipients", "import", csv)).rejects.toThrow(/CSV is not read yet/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
