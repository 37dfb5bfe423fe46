/**
 * DEL-10 across processes: two processes importing the same calendar under the same source
 * at once (two API processes, the API and the periodic calendar task) take turns on the
 * source's import lock, so each event becomes one schedule, created by one of them and
 * found unchanged by the other.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { hasPostgres, openTestDatabase } from "../support/db.js";
import { exited } from "../support/processes.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const needs = hasPostgres()
  ? ""
  : " (skipped: needs PostgreSQL — DATABASE_URL or PostgreSQL binaries)";
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A calendar of `n` weekly events, each with one alarm. */
function calendar(n: number): string {
  const events = Array.from({ length: n }, (_, i) =>
    [
      "BEGIN:VEVENT",
      `UID:lock-${i}@example.com`,
      `DTSTART:20300107T${String(8 + (i % 10)).padStart(2, "0")}0000Z`,
      "DURATION:PT30M",
      "RRULE:FREQ=WEEKLY",
      `SUMMARY:Event ${i}`,
      "BEGIN:VALARM",
      "ACTION:DISPLAY",
      "TRIGGER:-PT15M",
      "END:VALARM",
      "END:VEVENT",
    ].join("\r\n"),
  );
  return [
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "PRODID:-//test//lock//EN",
    ...events,
    "END:VCALENDAR",
    "",
  ].join("\r\n");
}

/** What import-child.ts prints. */
interface ImportCounts {
  created: number;
  updated: number;
  unchanged: number;
  cancelled: number;
  skipped: number;
  firstSkip: string | null;
}

interface Child {
  process: ChildProcess;
  ready: Promise<void>;
  result: Promise<ImportCounts>;
}

function startImporter(url: string, file: string, source: string): Child {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "test/support/import-child.ts", url, file, source],
    {
      cwd: ROOT,
      env: { ...process.env, PUNCTUAL_LOG_LEVEL: "warn" },
      stdio: ["pipe", "pipe", "pipe"],
    },
  );
  cleanups.push(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });
  let out = "";
  let err = "";
  let onReady = (): void => {};
  const ready = new Promise<void>((resolve) => (onReady = resolve));
  child.stdout!.on("data", (d: Buffer) => {
    out += d.toString();
    if (out.includes("ready\n")) onReady();
  });
  child.stderr!.on("data", (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
  const result = exited(child).then((code) => {
    if (code !== 0) throw new Error(`importer exited ${code}: ${err}`);
    const line = out.split("\n").find((l) => l.startsWith("{"));
    if (line === undefined) throw new Error(`importer printed no summary: ${out} ${err}`);
    return JSON.parse(line) as ImportCounts;
  });
  return { process: child, ready, result };
}

describe("imports racing imports", () => {
  it.skipIf(!hasPostgres())(
    `DEL-10: two processes importing one calendar at once create each schedule once${needs}`,
    async () => {
      const handle = await openTestDatabase();
      cleanups.push(() => handle.close());
      if (!handle.url) throw new Error("needs a PostgreSQL URL");
      const dir = mkdtempSync(join(tmpdir(), "punctual-import-lock-"));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const events = 300;
      const file = join(dir, "team.ics");
      writeFileSync(file, calendar(events));
      const children = [0, 1].map(() => startImporter(handle.url!, file, "team"));
      await Promise.all(children.map((c) => c.ready));
      // Both start at once: each has read the file and opened its pool.
      for (const c of children) c.process.stdin!.end("go\n");
      const [a, b] = await Promise.all(children.map((c) => c.result));
      expect([a, b].map((s) => [s!.skipped, s!.firstSkip])).toEqual([
        [0, null],
        [0, null],
      ]);
      // One created every event, the other found each unchanged (which one is the race).
      expect([a!.created, b!.created].sort((x, y) => x - y)).toEqual([0, events]);
      expect(a!.created + a!.unchanged).toBe(events);
      expect(b!.created + b!.unchanged).toBe(events);
      const { rows } = await handle.db.query<{ external_id: string; n: number }>(
        `select external_id, count(*)::int as n from punctual_schedules
          where source = 'team' group by external_id having count(*) > 1`,
      );
      expect(rows).toEqual([]);
      const total = await handle.db.query<{ n: number }>(
        `select count(*)::int as n from punctual_schedules where source = 'team'`,
      );
      expect(total.rows[0]!.n).toBe(events);
    },
  );
});
