/**
 * API-10 / API-3: the `recipients` commands send the requests the API expects. `fetch` is
 * replaced by a recorder (no network at all), so only what the CLI sends is checked here;
 * the server side has its own tests (test/integration/recipients.test.ts).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
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

  it("API-10: import sends NDJSON in chunks, a JSON array, and names a refused row by its file line", async () => {
    const dir = mkdtempSync(join(tmpdir(), "punctual-recipients-"));
    try {
      const nd = join(dir, "people.ndjson");
      writeFileSync(nd, '{"id":"a","tzid":"UTC"}\n\n{"id":"b","tzid":"Mars/Base"}\n');
      const sent = recorder({
        created: 1,
        updated: 0,
        errors: 1,
        results: [
          { index: 0, id: "a", status: "created" },
          {
            index: 1,
            id: "b",
            status: "error",
            error: {
              code: "VALIDATION_FAILED",
              message: "bad",
              issues: [{ field: "tzid", message: "is not a known IANA time zone" }],
            },
          },
        ],
      });
      let out = "";
      const program = buildProgram({ out: (s) => (out += s), err: () => undefined });
      await expect(
        program.parseAsync([
          "node",
          "punctual",
          "recipients",
          "import",
          nd,
          "--url",
          "http://127.0.0.1:9",
        ]),
      ).rejects.toThrow(CliError);
      expect(sent[0]).toMatchObject({
        method: "POST",
        url: "http://127.0.0.1:9/v1/recipients:bulk",
      });
      expect(sent[0]!.headers["content-type"]).toBe("application/x-ndjson");
      expect(sent[0]!.body).toBe('{"id":"a","tzid":"UTC"}\n{"id":"b","tzid":"Mars/Base"}\n');
      // The blank line 2 is skipped by the route too: row 1 of the body is line 3 of the file.
      expect(out).toMatch(/1 created, 0 updated, 1 refused/);
      expect(out).toContain("line 3 (b), column tzid: is not a known IANA time zone");

      const json = join(dir, "people.json");
      writeFileSync(json, '[{"id":"a","tzid":"UTC"}]');
      const sentJson = recorder({ created: 1, updated: 0, errors: 0, results: [] });
      await run("recipients", "import", json);
      expect(sentJson[0]!.headers["content-type"]).toBe("application/json");
      expect(JSON.parse(sentJson[0]!.body!)).toEqual([{ id: "a", tzid: "UTC" }]);

      const txt = join(dir, "people.txt");
      writeFileSync(txt, "id\n");
      await expect(run("recipients", "import", txt)).rejects.toThrow(/give a CSV/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("API-10: import reads CSV: documented columns become the body; a bad row is refused alone with its line and column; the rest is sent", async () => {
    const dir = mkdtempSync(join(tmpdir(), "punctual-recipients-"));
    try {
      const csv = join(dir, "people.csv");
      writeFileSync(
        csv,
        "\uFEFFid,tzid,targets.email.to,targets.webhook.url,attributes.plan,preferences,preferences.optOut.categories\n" +
          'alice@example.com,Asia/Tokyo,alice@example.com,,pro,"{""quietHours"":{""start"":""22:00"",""end"":""07:00""}}",digest;news\n' +
          "\n" +
          "bob,UTC,,https://example.com/hook,,,\n" +
          "carol,UTC,,,,{not json},\n" +
          '"dave\nsmith",UTC,,,,,\n' +
          "erin,UTC,,,\n",
      );
      const sent = recorder({
        created: 3,
        updated: 0,
        errors: 0,
        results: [0, 1, 2].map((index) => ({ index, id: "x", status: "created" })),
      });
      let out = "";
      const program = buildProgram({ out: (s) => (out += s), err: () => undefined });
      await expect(
        program.parseAsync([
          "node",
          "punctual",
          "recipients",
          "import",
          csv,
          "--url",
          "http://127.0.0.1:9",
        ]),
      ).rejects.toThrow(/2 row\(s\) of .* were refused/);
      expect(sent).toHaveLength(1);
      expect(sent[0]!.headers["content-type"]).toBe("application/x-ndjson");
      const rows = sent[0]!
        .body!.trim()
        .split("\n")
        .map((l) => JSON.parse(l) as unknown);
      expect(rows).toEqual([
        {
          id: "alice@example.com",
          tzid: "Asia/Tokyo",
          targets: { email: { to: "alice@example.com" } },
          attributes: { plan: "pro" },
          preferences: {
            quietHours: { start: "22:00", end: "07:00" },
            optOut: { categories: ["digest", "news"] },
          },
        },
        { id: "bob", tzid: "UTC", targets: { webhook: { url: "https://example.com/hook" } } },
        { id: "dave\nsmith", tzid: "UTC" },
      ]);
      expect(out).toMatch(/3 created, 0 updated, 2 refused/);
      expect(out).toContain("line 5 (carol), column preferences: is not JSON");
      expect(out).toContain("line 8 (erin): has 5 fields; the header has 7");

      const bad = join(dir, "bad.csv");
      writeFileSync(bad, "id,tzid,phone\na,UTC,123\n");
      const none = recorder({ created: 0, updated: 0, errors: 0, results: [] });
      await expect(run("recipients", "import", bad)).rejects.toThrow(
        /line 1, column 3 "phone": not a recipient column/,
      );
      expect(none).toHaveLength(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("API-10: a large import is sent in chunks of the bulk route's size, each row numbered by its file line", async () => {
    const { importItems } = await import("../../../src/cli/recipient-import.js");
    const dir = mkdtempSync(join(tmpdir(), "punctual-recipients-"));
    try {
      const csv = join(dir, "many.csv");
      const body = Array.from({ length: 25 }, (_, i) => `u-${i},UTC`).join("\n");
      writeFileSync(csv, `id,tzid\n${body}\n`);
      const chunks = [];
      for await (const item of importItems(csv, 10)) if ("chunk" in item) chunks.push(item.chunk);
      expect(chunks.map((c) => c.lines.length)).toEqual([10, 10, 5]);
      expect(chunks[0]!.lines[0]).toBe(2);
      expect(chunks[2]!.lines.at(-1)).toBe(26);
      expect(JSON.parse(chunks[2]!.text.trim().split("\n").at(-1)!)).toEqual({
        id: "u-24",
        tzid: "UTC",
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("API-10: a file that cannot be read is one line naming it and why, not a crash", async () => {
    recorder({});
    const dir = mkdtempSync(join(tmpdir(), "punctual-recipients-"));
    try {
      for (const name of ["missing.csv", "missing.ndjson", "missing.json"]) {
        const refused = await run("recipients", "import", join(dir, name)).then(
          () => null,
          (err: unknown) => err,
        );
        expect(refused).toBeInstanceOf(CliError);
        expect((refused as Error).message).toBe(`cannot read ${join(dir, name)}: no such file`);
      }
      const folder = join(dir, "folder.csv");
      mkdirSync(folder);
      const refused = await run("recipients", "import", folder).catch((err: unknown) => err);
      expect((refused as Error).message).toBe(`cannot read ${folder}: it is a folder`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("API-10: a refused row's message shows the refused value, and a row it names as the file's line", async () => {
    const { issueText } = await import("../../../src/cli/recipients.js");
    const lines = [2, 5, 9];
    expect(
      issueText(
        { message: "must be an IANA time zone such as Asia/Tokyo", value: "Europe/Berln" },
        (row) => lines[row]!,
      ),
    ).toBe('must be an IANA time zone such as Asia/Tokyo (got "Europe/Berln")');
    expect(
      issueText(
        { message: "given twice in this body (first at row 1); that row was written", value: "h" },
        (row) => lines[row]!,
      ),
    ).toBe('given twice in this body (first at line 5); that row was written (got "h")');
    expect(issueText({ message: "not a valid URL" }, (row) => row)).toBe("not a valid URL");
  });
});
