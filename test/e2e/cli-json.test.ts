/**
 * API-3: `--json` on every command that prints something. The test walks the program's
 * command tree: every command must have a sample invocation below (so a new command cannot
 * be left out), accept `--json`, and print exactly one parseable JSON document on stdout.
 * Commands through the server run in process against a recorder that replaces `fetch`
 * (no network at all) and answers each request with a JSON body; `migrate` runs on an
 * embedded data folder; `preview`, `validate` and `import --dry-run` compute locally.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { allNodes, commandTree } from "../../src/cli/completion.js";
import { buildProgram } from "../../src/cli/program.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const ID = "0b9f6a43-5d0e-4a57-9d5a-8f1c2b3d4e5f";

/**
 * Commands that print no result: `start` and `worker` run until stopped, and what they
 * write on stdout is already JSON lines (structured logs); their startup line is for people
 * and goes to stderr.
 */
const LONG_RUNNING = new Set(["start", "worker"]);

let dir: string;
const samples: Record<string, () => string[]> = {
  migrate: () => ["--data-dir", join(dir, "data")],
  healthcheck: () => [],
  status: () => [],
  instances: () => ["--state", "running"],
  imports: () => ["--source", "team"],
  "webhook-secret": () => [],
  preview: () => ["--dtstart", "2027-01-04T09:00:00", "--rrule", "FREQ=DAILY", "--count", "2"],
  validate: () => ["--rrule", "FREQ=DAILY"],
  import: () => [
    join(root, "test/fixtures/ics/team-v1.ics"),
    "--remind",
    "-PT15M",
    "--channel",
    "log",
    "--dry-run",
    "--from",
    "2027-01-01T00:00:00Z",
    "--to",
    "2027-01-08T00:00:00Z",
  ],
  "schedules add": () => ["--dtstart", "2027-01-04T09:00:00Z", "--channel", "log", "--title", "T"],
  "schedules list": () => ["--source", "team", "--state", "active"],
  "schedules show": () => [ID],
  "schedules edit": () => [ID, "--add-offset", "-PT5M", "--title", "New"],
  "schedules cancel": () => [ID],
  "schedules pause": () => [ID],
  "schedules resume": () => [ID],
  "schedules trigger": () => [ID],
  "schedules backfill": () => [
    ID,
    "--from",
    "2027-01-01T00:00:00Z",
    "--to",
    "2027-01-02T00:00:00Z",
    "--dry-run",
  ],
  "schedules purge": () => [ID, "--yes"],
  "schedules upsert": () => [
    "crm",
    "m-1",
    "--file",
    join(dir, "schedule.json"),
    "--debounce-window-ms",
    "10000",
    "--debounce-max-delay-ms",
    "60000",
  ],
  "kinds set": () => ["quarter", "--channel", "log", "--offset", "-PT15M"],
  "kinds apply": () => [join(root, "examples/reminder-kinds.json")],
  "kinds list": () => [],
  "kinds show": () => ["quarter"],
  "kinds remove": () => ["quarter"],
  "deliveries list": () => [],
  "deliveries show": () => ["1"],
  "deliveries redrive": () => ["1"],
  "deliveries resolve": () => ["--state", "in_doubt", "--outcome", "sent"],
  "rate-limits set": () => ["email", "--rate", "5"],
  "rate-limits list": () => [],
  "rate-limits remove": () => ["email"],
  circuits: () => [],
  metrics: () => [],
  completion: () => [],
  "api-keys create": () => ["--scopes", "read", "--name", "ci"],
  "api-keys list": () => [],
  "api-keys revoke": () => ["3f1c"],
  "recipients set": () => ["u-1", "--tzid", "Asia/Tokyo", "--email", "u1@example.com"],
  "recipients show": () => ["u-1"],
  "recipients list": () => [],
  "recipients remove": () => ["u-1"],
  "recipients import": () => [join(dir, "recipients.ndjson")],
  "recipients of": () => [ID],
  "recipients assign": () => [ID, "--add", "u-1"],
  "recipients unsubscribe": () => ["dG9rZW4"],
  "schedules explain": () => [ID, "--from", "2027-01-01T00:00:00Z", "--to", "2027-01-08T00:00:00Z"],
  "schedules zones": () => [ID],
  "deliveries explain": () => ["1"],
  "tenant-secret show": () => [],
  "tenant-secret rotate": () => [],
  "tenant-secret remove": () => [],
};

const schedule = {
  id: ID,
  version: 3,
  state: "active",
  title: "Weekly sync",
  reminders: [{ key: "r1", offset: "-PT15M", channel: "log", target: {}, quietHours: null }],
  catchUp: null,
  tzid: "UTC",
};

/** Answers every request with JSON (`/metrics` with Prometheus text); records what was asked. */
function recorder(): string[] {
  const seen: string[] = [];
  vi.stubGlobal("fetch", (url: URL, init: RequestInit) => {
    const path = new URL(String(url)).pathname;
    seen.push(`${init.method ?? "GET"} ${path}`);
    if (path === "/metrics") {
      return Promise.resolve(
        new Response('# HELP x y\n# TYPE x counter\npunctual_x_total{channel="log"} 3\n', {
          status: 200,
          headers: { "content-type": "text/plain; version=0.0.4" },
        }),
      );
    }
    const body =
      path === `/v1/schedules/${ID}`
        ? { ...schedule, realigned: { deleted: 0, moved: 0, created: 1 } }
        : {
            ok: true,
            items: [],
            entries: [],
            results: [],
            nextCursor: null,
            status: "ready",
            secret: "whsec_x",
            source: "env",
            count: 0,
          };
    return Promise.resolve(
      new Response(JSON.stringify(body), {
        status: 200,
        headers: { "content-type": "application/json" },
      }),
    );
  });
  return seen;
}

async function run(args: string[]): Promise<{ out: string; err: string }> {
  let out = "";
  let err = "";
  const program: Command = buildProgram({ out: (s) => (out += s), err: (s) => (err += s) });
  await program.parseAsync(["node", "punctual", ...args]);
  return { out, err };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "punctual-cli-json-"));
  writeFileSync(
    join(dir, "schedule.json"),
    JSON.stringify({ dtstart: "2030-01-07T09:00:00Z", reminders: [{ key: "r", channel: "log" }] }),
  );
  writeFileSync(join(dir, "recipients.ndjson"), '{"id":"u-1","tzid":"Asia/Tokyo"}\n');
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

afterEach(() => {
  vi.unstubAllGlobals();
  vi.unstubAllEnvs();
});

const leaves = allNodes(commandTree(buildProgram({ out: () => undefined, err: () => undefined })))
  .filter((n) => n.path.length > 0 && n.commands.length === 0)
  .map((n) => ({ path: n.path.join(" "), flags: n.flags.map((f) => f.long) }));

describe("API-3 --json on every command", () => {
  it("API-3: every command that prints a result has a sample here and a --json flag", () => {
    const printing = leaves.filter((l) => !LONG_RUNNING.has(l.path));
    expect(printing.map((l) => l.path).sort()).toEqual(Object.keys(samples).sort());
    for (const l of printing) expect(l.flags, l.path).toContain("--json");
  });

  it.each(leaves.filter((l) => !LONG_RUNNING.has(l.path)).map((l) => l.path))(
    "API-3: %s --json prints one JSON document on stdout",
    async (path) => {
      const seen = recorder();
      vi.stubEnv("PUNCTUAL_API_KEY", "test-key-of-sixteen-or-more");
      vi.stubEnv("PUNCTUAL_TENANT", "");
      const { out } = await run([
        ...path.split(" "),
        ...samples[path]!(),
        "--json",
        ...(path === "migrate" || path === "preview" || path === "validate"
          ? []
          : path === "completion" || path === "import"
            ? []
            : ["--url", "http://127.0.0.1:9"]),
      ]);
      expect(() => JSON.parse(out), `${path} printed:\n${out}`).not.toThrow();
      if (path === "schedules edit") {
        // Read first, then PATCH (If-Match of the version read).
        expect(seen).toEqual([`GET /v1/schedules/${ID}`, `PATCH /v1/schedules/${ID}`]);
      }
    },
  );
});
