/**
 * `punctual import` as a subprocess (API-5): the command of the package built from src/
 * once per run (test/support/built-package.ts), as `node bin/punctual.js import …`.
 * The dry run needs no server and touches nothing; its `--json` output is a contract.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builtPackage, punctualBin } from "../support/built-package.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
let main = "";
beforeAll(async () => {
  main = punctualBin(await builtPackage());
});
const fixture = (name: string) => join("test/fixtures/ics", name);

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Starts the CLI without the variables that would change its defaults. */
function spawnCli(args: string[]): ChildProcess & {
  stdout: NodeJS.ReadableStream;
  stderr: NodeJS.ReadableStream;
} {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (key.startsWith("PUNCTUAL_") || key === "DATABASE_URL") delete env[key];
  }
  return spawn(process.execPath, [main, ...args], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** Runs the CLI to completion. */
function cli(args: string[]): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

const tmp = mkdtempSync(join(tmpdir(), "punctual-import-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const dryRunArgs = [
  "--remind",
  "-PT15M",
  "--channel",
  "log",
  "--tzid",
  "Europe/Berlin",
  "--dry-run",
  "--from",
  "2027-02-20T00:00:00Z",
  "--to",
  "2027-03-20T00:00:00Z",
];

describe("API-5 punctual import --dry-run (no server)", () => {
  it("API-5: --dry-run --json prints exactly the contract array, sorted by dueAt then uid", async () => {
    // No --url server runs here: the dry run must not need one.
    const r = await cli(["import", fixture("dry-run-contract.ics"), ...dryRunArgs, "--json"]);
    expect(r.code).toBe(0);
    const r15 = "remind--PT15M";
    expect(JSON.parse(r.stdout)).toEqual([
      // All-day occurrences are dates; read at midnight in --tzid (CET).
      {
        uid: "market-day@punctual.test",
        recurrenceId: null,
        occurrenceAt: "2027-03-01",
        dueAt: "2027-02-28T22:45:00Z",
        reminderKey: r15,
      },
      // Same dueAt: ordered by uid.
      {
        uid: "alpha@punctual.test",
        recurrenceId: null,
        occurrenceAt: "2027-03-02T15:00:00Z",
        dueAt: "2027-03-02T14:45:00Z",
        reminderKey: r15,
      },
      {
        uid: "sync@punctual.test",
        recurrenceId: null,
        occurrenceAt: "2027-03-02T15:00:00Z",
        dueAt: "2027-03-02T14:45:00Z",
        reminderKey: r15,
      },
      {
        uid: "market-day@punctual.test",
        recurrenceId: null,
        occurrenceAt: "2027-03-08",
        dueAt: "2027-03-07T22:45:00Z",
        reminderKey: r15,
      },
      // The moved instance carries its RECURRENCE-ID.
      {
        uid: "sync@punctual.test",
        recurrenceId: "20270309T100000",
        occurrenceAt: "2027-03-10T20:00:00Z",
        dueAt: "2027-03-10T19:45:00Z",
        reminderKey: r15,
      },
      {
        uid: "market-day@punctual.test",
        recurrenceId: null,
        occurrenceAt: "2027-03-15",
        dueAt: "2027-03-14T22:45:00Z",
        reminderKey: r15,
      },
      // New York moved to daylight time on 14 March: 10:00 local is 14:00Z.
      {
        uid: "sync@punctual.test",
        recurrenceId: null,
        occurrenceAt: "2027-03-16T14:00:00Z",
        dueAt: "2027-03-16T13:45:00Z",
        reminderKey: r15,
      },
    ]);
    // The summary and the skipped event go to stderr, with its UID, line and reason.
    expect(r.stderr).toMatch(/7 deliveries from 3 schedules/);
    expect(r.stderr).toMatch(/broken@punctual\.test\s+36\s+rrule\.UNTL/);
    expect(r.stderr).toMatch(/read in Europe\/Berlin \(--tzid\)/);
  });

  it("API-5: --dry-run without --json prints a table and the summary", async () => {
    const r = await cli(["import", fixture("dry-run-contract.ics"), ...dryRunArgs]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^DUE \(UTC\)\s+OCCURRENCE\s+REMINDER\s+UID\s+RECURRENCE-ID/);
    expect(r.stdout).toMatch(
      /2027-03-10T19:45:00Z\s+2027-03-10T20:00:00Z\s+remind--PT15M\s+sync@punctual\.test\s+20270309T100000/,
    );
    expect(r.stdout).toMatch(/nothing stored/);
  });

  it("API-5: a file that is not iCalendar exits 1 naming the file", async () => {
    const file = fixture("not-a-calendar.txt");
    const r = await cli(["import", file, "--remind", "-PT15M", "--dry-run", "--json"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(`${file} is not an iCalendar file`);
  });

  it("API-5: an unreadable file exits 1 naming the file", async () => {
    const file = join(tmp, "missing.ics");
    const r = await cli(["import", file, "--remind", "-PT15M", "--dry-run"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot read ${file}: no such file`);
  });

  it("API-5: a bad --remind offset exits 1 naming the flag", async () => {
    const r = await cli([
      "import",
      fixture("team-v1.ics"),
      "--remind",
      "-PT15M",
      "--remind",
      "soon",
      "--dry-run",
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/--remind #2: must be an ISO 8601 duration/);
  });

  it("API-5: a large file reports its progress on stderr, never on stdout", async () => {
    const events = Array.from(
      { length: 1_200 },
      (_, i) =>
        `BEGIN:VEVENT\r\nUID:bulk-${i}@punctual.test\r\nDTSTART:20270301T090000Z\r\nDURATION:PT1H\r\nEND:VEVENT\r\n`,
    ).join("");
    const file = join(tmp, "bulk.ics");
    writeFileSync(file, `BEGIN:VCALENDAR\r\nVERSION:2.0\r\n${events}END:VCALENDAR\r\n`);
    const r = await cli([
      "import",
      file,
      "--remind",
      "PT0S",
      "--dry-run",
      "--from",
      "2027-03-01",
      "--to",
      "2027-03-02",
      "--json",
    ]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toHaveLength(1_200);
    expect(r.stderr).toMatch(/^parsed 1200\/1200 events$/m);
  });

  it("API-5: without --dry-run and without a server the command says so and exits 1", async () => {
    const r = await cli([
      "import",
      fixture("team-v1.ics"),
      "--remind",
      "-PT15M",
      "--channel",
      "log",
      "--url",
      "http://127.0.0.1:9",
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/Cannot reach punctual at http:\/\/127\.0\.0\.1:9/);
  });
});

/** A calendar far in the future, so the test does not age: a weekly series and a one-off. */
function futureCalendar(withReview: boolean, weekday: "MO" | "TU"): string {
  const day = weekday === "MO" ? "20900102" : "20900103";
  return [
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "PRODID:-//punctual tests//future team//EN",
    "BEGIN:VEVENT",
    "UID:standup@punctual.test",
    `DTSTART;TZID=Europe/Berlin:${day}T090000`,
    "DURATION:PT15M",
    `RRULE:FREQ=WEEKLY;BYDAY=${weekday};COUNT=4`,
    "SUMMARY:Stand-up",
    "END:VEVENT",
    ...(withReview
      ? [
          "BEGIN:VEVENT",
          "UID:review@punctual.test",
          "DTSTART;TZID=Europe/Berlin:20900110T140000",
          "DURATION:PT1H",
          "SUMMARY:Review",
          "END:VEVENT",
        ]
      : []),
    "END:VCALENDAR",
    "",
  ].join("\r\n");
}

/** A calendar of `n` one-off events a year ahead, UIDs `big-N@punctual.test`. */
function manyEvents(n: number): string {
  const year = new Date().getUTCFullYear() + 1;
  const lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//punctual//big//EN"];
  for (let i = 0; i < n; i++) {
    lines.push(
      "BEGIN:VEVENT",
      `UID:big-${i}@punctual.test`,
      "DTSTAMP:20270101T000000Z",
      `DTSTART:${year}03${String((i % 28) + 1).padStart(2, "0")}T${String(8 + (i % 10)).padStart(2, "0")}0000Z`,
      `SUMMARY:Event ${i}`,
      "END:VEVENT",
    );
  }
  lines.push("END:VCALENDAR", "");
  return lines.join("\r\n");
}

describe("API-5 punctual import through the running server", () => {
  let server: ReturnType<typeof spawnCli> | null = null;
  let exited: Promise<number | null> = Promise.resolve(null);
  let url = "";
  const file = () => join(tmp, "team.ics");
  const options = () => ["--remind", "-PT15M", "--channel", "log", "--url", url];

  // One server for the steps below (each a test of its own, so a slow machine gives each
  // its own timeout); they run in order and build on each other.
  beforeAll(async () => {
    server = spawnCli([
      "start",
      "--port",
      "0",
      "--data-dir",
      join(tmp, "data"),
      "--log-level",
      "warn",
    ]);
    let stderr = "";
    exited = new Promise<number | null>((resolve) => server?.on("exit", (code) => resolve(code)));
    url = await new Promise<string>((resolve, reject) => {
      server?.stderr.on("data", (d: Buffer) => {
        stderr += d.toString();
        const m = /listening on (http:\/\/[^\s]+)/.exec(stderr);
        if (m?.[1]) resolve(m[1]);
      });
      void exited.then((code) => reject(new Error(`start exited ${code}: ${stderr}`)));
    });
  });

  afterAll(() => {
    if (server && server.exitCode === null) server.kill("SIGKILL");
  });

  it("API-5: import (progress per chunk), then re-import (no-op)", async () => {
    writeFileSync(file(), futureCalendar(true, "MO"));
    const first = await cli(["import", file(), ...options()]);
    expect(first.code).toBe(0);
    // --source defaults to the file name without its extension.
    expect(first.stdout).toMatch(
      /as source "team": 2 created, 0 updated, 0 unchanged, 0 cancelled, 0 skipped/,
    );
    expect(first.stdout).toMatch(/read in UTC \(default; choose another with --tzid\)/);

    // Not a terminal: the writing is followed per chunk, one plain line each.
    expect(first.stderr).toContain(
      "chunk 1/1: 2/2 changes written (2 created, 0 updated, 0 cancelled)",
    );

    const again = await cli(["import", file(), ...options()]);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/0 created, 0 updated, 2 unchanged, 0 cancelled/);
    // Nothing to write: no chunk.
    expect(again.stderr).not.toContain("chunk");
  });

  it("API-5 OPS-12: a larger calendar is written in chunks, each seen once, and its record shows them", async () => {
    // Chunks of 25 on the embedded engine, the last line its total.
    const big = join(tmp, "big.ics");
    writeFileSync(big, manyEvents(60));
    const bigRun = await cli(["import", big, ...options()]);
    expect(bigRun.code, bigRun.stderr).toBe(0);
    expect(bigRun.stdout).toMatch(/as source "big": 60 created, 0 updated/);
    const lines = bigRun.stderr.split("\n").filter((l) => l.startsWith("chunk "));
    expect(lines.at(-1)).toBe(
      "chunk 3/3: 60/60 changes written (60 created, 0 updated, 0 cancelled)",
    );
    // Each line a chunk seen once, in order.
    const done = lines.map((l) => Number(/^chunk (\d+)\//.exec(l)?.[1]));
    expect([...done].sort((a, b) => a - b)).toEqual(done);
    expect(new Set(done).size).toBe(done.length);

    // The import's record: `imports ID`.
    const list = await cli(["imports", "--source", "big", "--json", "--url", url]);
    const [record] = (JSON.parse(list.stdout) as { items: Array<{ id: number }> }).items;
    const shown = await cli(["imports", String(record!.id), "--json", "--url", url]);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      status: "succeeded",
      events: 60,
      created: 60,
      progress: { chunksDone: 3, chunksTotal: 3, changesDone: 60, changesTotal: 60 },
    });
    const text = await cli(["imports", String(record!.id), "--url", url]);
    expect(text.stdout).toContain(`import ${record!.id} of source "big": succeeded`);
  });

  it("API-5 DEL-9 DEL-10: an edited file updates and cancels; bad files and options are refused; SIGTERM stops the server", async () => {
    writeFileSync(file(), futureCalendar(false, "TU"));
    const edited = await cli(["import", file(), ...options(), "--json"]);
    expect(edited.code).toBe(0);
    expect(JSON.parse(edited.stdout)).toMatchObject({
      source: "team",
      created: 0,
      updated: 1,
      unchanged: 0,
      cancelled: 1,
    });

    const refused = await cli(["import", fixture("not-a-calendar.txt"), ...options()]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("not-a-calendar.txt is not an iCalendar file");

    const noTarget = await cli(["import", file(), "--remind", "-PT15M", "--url", url]);
    expect(noTarget.code).toBe(1);
    expect(noTarget.stderr).toMatch(/--target: is required with channel=webhook/);

    server?.kill("SIGTERM");
    expect(await exited).toBe(0);
  });
});
