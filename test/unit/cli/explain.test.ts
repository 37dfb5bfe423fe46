/**
 * OPS-16 / DEL-18: `punctual schedules explain`, `punctual deliveries explain` and
 * `schedules upsert --debounce` send the requests the API expects and print a readable
 * timeline. `fetch` is replaced by a recorder (no network); the server side has its own
 * tests (test/integration/api/explain.test.ts, test/integration/api/debounce.test.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ScheduleExplanation } from "../../../src/contracts/explain.js";
import { buildProgram } from "../../../src/cli/program.js";

interface Sent {
  method: string;
  url: string;
  body: unknown;
}

function recorder(replies: unknown[]): Sent[] {
  const sent: Sent[] = [];
  vi.stubGlobal("fetch", (url: URL, init: RequestInit) => {
    sent.push({
      method: init.method ?? "GET",
      url: String(url),
      body: init.body === undefined ? undefined : JSON.parse(String(init.body)),
    });
    const reply = replies[Math.min(sent.length - 1, replies.length - 1)];
    return Promise.resolve(
      new Response(JSON.stringify(reply), {
        status: 200,
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

afterEach(() => {
  vi.unstubAllGlobals();
});

const ID = "0b9f6c1e-2f4a-4c4e-9d7e-1a2b3c4d5e6f";

function page(entries: ScheduleExplanation["entries"], nextCursor: string | null) {
  return {
    scheduleId: ID,
    state: "active",
    from: "2027-01-01T00:00:00.000Z",
    to: "2027-01-08T00:00:00.000Z",
    entries,
    nextCursor,
    complete: true,
  } satisfies ScheduleExplanation;
}

const failed: ScheduleExplanation["entries"][number] = {
  occurrenceAt: "2027-01-05T08:00:00.000Z",
  reminderKey: "now",
  dueAt: "2027-01-05T08:00:00.000Z",
  verdict: "failed",
  reason: "PERMANENT",
  deliveryId: 12,
  triggered: false,
  events: [
    { type: "planned", at: "2027-01-05T07:00:00.000Z" },
    {
      type: "attempt",
      at: "2027-01-05T08:00:00.000Z",
      by: "worker-1",
      attempt: 1,
      endedAt: "2027-01-05T08:00:01.000Z",
      outcome: "permanent",
      settled: true,
      status: 410,
      error: "410 gone",
    },
    { type: "failed", at: "2027-01-05T08:00:01.000Z", reason: "PERMANENT" },
  ],
};

const notPlanned: ScheduleExplanation["entries"][number] = {
  occurrenceAt: "2027-01-06T08:00:00.000Z",
  reminderKey: "now",
  dueAt: "2027-01-06T08:00:00.000Z",
  verdict: "not_planned",
  reason: "schedule_paused",
  deliveryId: null,
  triggered: false,
  events: [],
};

describe("punctual schedules explain (OPS-16)", () => {
  it("OPS-16: follows nextCursor with the same window and prints each entry with its timeline", async () => {
    const sent = recorder([page([failed], "c1"), page([notPlanned], null)]);
    const out = await run(
      "schedules",
      "explain",
      ID,
      "--from",
      "2027-01-01T00:00:00Z",
      "--to",
      "2027-01-08T00:00:00Z",
    );
    expect(sent.map((s) => s.url)).toEqual([
      `http://127.0.0.1:9/v1/schedules/${ID}/explain?from=2027-01-01T00%3A00%3A00Z&to=2027-01-08T00%3A00%3A00Z`,
      `http://127.0.0.1:9/v1/schedules/${ID}/explain?from=2027-01-01T00%3A00%3A00Z&to=2027-01-08T00%3A00%3A00Z&cursor=c1`,
    ]);
    expect(out).toContain("2 entries");
    expect(out).toContain("2027-01-05T08:00:00.000Z  now  FAILED PERMANENT #12");
    expect(out).toContain(
      "2027-01-05T08:00:00.000Z attempt #1 permanent status 410 by worker-1 : 410 gone",
    );
    expect(out).toContain("2027-01-06T08:00:00.000Z  now  NOT_PLANNED schedule_paused");
  });

  it("OPS-16: --json prints the pages joined as one reply", async () => {
    recorder([page([failed], "c1"), page([notPlanned], null)]);
    const out = await run("schedules", "explain", ID, "--json");
    const body = JSON.parse(out) as ScheduleExplanation;
    expect(body.entries.map((e) => e.verdict)).toEqual(["failed", "not_planned"]);
    expect(body.nextCursor).toBeNull();
  });

  it("OPS-16: deliveries explain reads one delivery's entry", async () => {
    const sent = recorder([{ scheduleId: ID, entry: failed }]);
    const out = await run("deliveries", "explain", "12");
    expect(sent[0]!.url).toBe("http://127.0.0.1:9/v1/deliveries/12/explain");
    expect(out).toContain(`schedule ${ID}  2027-01-05T08:00:00.000Z  now  FAILED PERMANENT #12`);
  });
});

describe("punctual schedules put --debounce-window-ms (DEL-18)", () => {
  it("DEL-18: the flags set the body's debounce; the delay cap defaults to six windows; put is upsert", async () => {
    const dir = mkdtempSync(join(tmpdir(), "punctual-debounce-"));
    try {
      const file = join(dir, "body.json");
      writeFileSync(file, JSON.stringify({ reminders: [{ key: "now", channel: "log" }] }));
      const sent = recorder([{ id: ID, version: 1, state: "active", changed: true }]);
      await run("schedules", "put", "crm", "t-7", "--file", file, "--debounce-window-ms", "10000");
      expect(sent[0]).toMatchObject({
        method: "PUT",
        url: "http://127.0.0.1:9/v1/schedules/by-external-id/crm/t-7",
        body: {
          reminders: [{ key: "now", channel: "log" }],
          debounce: { windowMs: 10_000, maxDelayMs: 60_000 },
        },
      });
      await run(
        "schedules",
        "upsert",
        "crm",
        "t-7",
        "--file",
        file,
        "--debounce-window-ms",
        "10000",
        "--debounce-max-delay-ms",
        "30000",
      );
      expect(sent[1]!.body).toMatchObject({ debounce: { windowMs: 10_000, maxDelayMs: 30_000 } });
      // The cap alone is refused before any request; so is a window out of range.
      await expect(
        run("schedules", "put", "crm", "t-7", "--file", file, "--debounce-max-delay-ms", "30000"),
      ).rejects.toThrow(/--debounce-max-delay-ms needs --debounce-window-ms/);
      await expect(
        run("schedules", "put", "crm", "t-7", "--file", file, "--debounce-window-ms", "5"),
      ).rejects.toThrow(/--debounce-window-ms/);
      expect(sent).toHaveLength(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
