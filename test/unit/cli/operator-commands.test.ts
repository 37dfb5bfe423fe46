/**
 * API-3 / API-9: the operator commands send the requests the API expects. `fetch` is
 * replaced by a recorder (no network at all), so only what the CLI sends is checked here;
 * the server side has its own tests (test/integration/api/operator.test.ts).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { CliError } from "../../../src/cli/errors.js";
import { buildProgram } from "../../../src/cli/program.js";

interface Sent {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
}

function recorder(reply: unknown, status = 200): Sent[] {
  const sent: Sent[] = [];
  vi.stubGlobal("fetch", (url: URL, init: RequestInit) => {
    sent.push({
      method: init.method ?? "GET",
      url: String(url),
      headers: init.headers as Record<string, string>,
      body: init.body === undefined ? undefined : JSON.parse(String(init.body)),
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

const bulkReply = { dryRun: true, count: 3, remaining: 0, sample: [] };

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("deliveries redrive / resolve with filters", () => {
  it("API-9: without an id and without --yes, redrive is a dry run carrying the filters", async () => {
    const sent = recorder(bulkReply);
    const out = await run("deliveries", "redrive", "--state", "dead", "--reason", "SEND_FAILED");
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({
      method: "POST",
      url: "http://127.0.0.1:9/v1/deliveries/redrive",
      body: { state: "dead", reason: "SEND_FAILED", dryRun: true },
    });
    expect(out).toMatch(/Dry run: 3 deliveries would be redriven.*--yes/);
  });

  it("API-9: --yes acts; an id redrives that one delivery as before", async () => {
    const sent = recorder({ ...bulkReply, dryRun: false });
    await run("deliveries", "redrive", "--channel", "webhook", "--yes");
    expect(sent[0]!.body).toEqual({ channel: "webhook", dryRun: false });
    await run("deliveries", "redrive", "42");
    expect(sent[1]).toMatchObject({ url: "http://127.0.0.1:9/v1/deliveries/42/redrive" });
  });

  it("API-9: resolve without an id sends the outcome with the filters", async () => {
    const sent = recorder(bulkReply);
    await run("deliveries", "resolve", "--state", "in_doubt", "--outcome", "sent");
    expect(sent[0]).toMatchObject({
      url: "http://127.0.0.1:9/v1/deliveries/resolve",
      body: { outcome: "sent", state: "in_doubt", dryRun: true },
    });
  });
});

describe("schedules trigger / backfill / purge", () => {
  const id = "0b9f2c3e-0000-4000-8000-000000000000";

  it("API-9: trigger sends the Idempotency-Key; backfill sends the range and --dry-run", async () => {
    const sent = recorder({ triggerId: "k", created: true, deliveries: [] });
    await run("schedules", "trigger", id, "--idempotency-key", "ticket-42");
    expect(sent[0]).toMatchObject({
      method: "POST",
      url: `http://127.0.0.1:9/v1/schedules/${id}/trigger`,
      headers: expect.objectContaining({ "idempotency-key": "ticket-42" }),
    });
    const next = recorder({
      dryRun: true,
      created: 0,
      existing: 0,
      existingByState: {},
      items: [],
    });
    await run(
      "schedules",
      "backfill",
      id,
      "--from",
      "2027-01-01T00:00:00Z",
      "--to",
      "2027-01-04T00:00:00Z",
      "--dry-run",
    );
    expect(next[0]!.body).toEqual({
      from: "2027-01-01T00:00:00Z",
      to: "2027-01-04T00:00:00Z",
      dryRun: true,
    });
  });

  it("API-9: purge without --yes sends nothing; with --yes it is DELETE ?purge=true", async () => {
    const sent = recorder({ id, purged: { schedules: 1, deliveries: 2, attempts: 3 } });
    await expect(run("schedules", "purge", id)).rejects.toThrow(CliError);
    expect(sent).toHaveLength(0);
    const out = await run("schedules", "purge", id, "--yes");
    expect(sent[0]).toMatchObject({
      method: "DELETE",
      url: `http://127.0.0.1:9/v1/schedules/${id}?purge=true`,
    });
    expect(out).toContain("2 deliveries and 3 attempts deleted");
  });
});
