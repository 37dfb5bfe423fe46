/**
 * Periodic tasks (OPS-7): cadence on the test clock, the budget aborting through
 * `ctx.signal`, failures counted and logged, no overlapping runs, singleton leases across
 * two processes on one database, dispatch unchanged while a task hangs, and the calendar
 * re-import task. Every wait is on an outcome (a count, a promise), never on real time.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createApi, serveApi } from "../../src/api/server.js";
import { calendarImportTask } from "../../src/app/calendar-task.js";
import { runImportEvery } from "../../src/cli/import-every.js";
import {
  createPunctual,
  type Punctual,
  type PunctualTaskDefinition,
} from "../../src/app/punctual.js";
import { TestClock } from "../../src/clock/index.js";
import { memoryLogger } from "../../src/observability/logger.js";
import { ScriptedChannel, deferred } from "../support/channels.js";
import { openTestDatabase, type TestDatabase } from "../support/db.js";
import { tickAndDrain } from "../support/punctual.js";

let handle: TestDatabase;
const opened: Punctual[] = [];

beforeEach(async () => {
  handle = await openTestDatabase();
});

afterEach(async () => {
  for (const p of opened.splice(0)) await p.close(0);
  await handle.close();
});

async function open(
  tasks: PunctualTaskDefinition[],
  clock = new TestClock("2027-01-04T08:00:00Z"),
) {
  const channel = new ScriptedChannel("test", true);
  const { logger, lines } = memoryLogger("debug");
  const punctual = await createPunctual({
    database: handle.db,
    clock,
    logger,
    channels: [channel],
    tasks,
    allowPrivateTargets: true,
    webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
  });
  opened.push(punctual);
  return { punctual, clock, channel, lines };
}

/**
 * Polls `check` until it passes: the outcome of work that runs on its own (a task's
 * database round trips). The timeout only turns a hang into a failure.
 */
function until(check: () => unknown): Promise<unknown> {
  return vi.waitFor(check, { timeout: 120_000, interval: 20 });
}

/** `punctual_task_runs_total` by `task/outcome`. */
async function runs(p: Punctual): Promise<Record<string, number>> {
  const metric = p.metrics.registry.getSingleMetric("punctual_task_runs_total");
  const out: Record<string, number> = {};
  for (const v of (await metric!.get()).values) {
    out[`${v.labels.task}/${v.labels.outcome}`] = v.value;
  }
  return out;
}

describe("OPS-7 the task lane", () => {
  it("OPS-7: a task runs at each aligned occurrence and counts ok", async () => {
    const seen: string[] = [];
    const { punctual, clock } = await open([
      {
        name: "tick",
        every: "1m",
        budgetMs: 5_000,
        run: (ctx) => {
          seen.push(ctx.occurrenceAt.toISOString());
        },
      },
    ]);
    punctual.tasks.start();
    clock.advance(30_000);
    expect(seen).toEqual([]);
    clock.advance(30_000);
    // One occurrence at a time: each run settles (a microtask) before the clock moves on.
    for (let i = 1; i <= 3; i++) {
      await until(async () => expect((await runs(punctual))["tick/ok"]).toBe(i));
      await until(() => expect(punctual.tasks.isRunning("tick")).toBe(false));
      if (i < 3) clock.advance(60_000);
    }
    expect(seen).toEqual([
      "2027-01-04T08:01:00.000Z",
      "2027-01-04T08:02:00.000Z",
      "2027-01-04T08:03:00.000Z",
    ]);
  });

  it("OPS-7: past its budget a run is aborted through ctx.signal and counted; it never overlaps itself", async () => {
    let started = 0;
    const signals: AbortSignal[] = [];
    const { punctual, clock, lines } = await open([
      {
        name: "slow",
        every: "1m",
        budgetMs: 10_000,
        // Hangs and ignores its signal: the worst a task can do.
        run: (ctx) => {
          started++;
          signals.push(ctx.signal);
          return new Promise<void>(() => {});
        },
      },
    ]);
    punctual.tasks.start();
    clock.advance(60_000);
    expect(started).toBe(1);
    expect(signals[0]!.aborted).toBe(false);
    clock.advance(10_000);
    expect(signals[0]!.aborted).toBe(true);
    clock.advance(120_000);
    expect(started).toBe(1);
    expect(punctual.tasks.isRunning("slow")).toBe(true);
    const counts = await runs(punctual);
    expect(counts["slow/timeout"]).toBe(1);
    expect(counts["slow/overlap"]).toBe(2);
    expect(lines.some((l) => l.msg === "task passed its budget: aborted")).toBe(true);
  });

  it("OPS-7: a failing task is logged and counted, and runs again at its next occurrence", async () => {
    let calls = 0;
    const { punctual, clock, lines } = await open([
      {
        name: "flaky",
        every: "1m",
        budgetMs: 5_000,
        run: () => {
          calls++;
          if (calls === 1) throw new Error("subscription endpoint said no");
        },
      },
    ]);
    punctual.tasks.start();
    clock.advance(60_000);
    await until(async () => expect((await runs(punctual))["flaky/error"]).toBe(1));
    clock.advance(60_000);
    await until(async () => expect((await runs(punctual))["flaky/ok"]).toBe(1));
    expect(lines.some((l) => l.msg === "task failed" && l.task === "flaky")).toBe(true);
  });

  it("OPS-7: a singleton task runs each occurrence in one process of two on one database", async () => {
    const ran: string[] = [];
    const gate = deferred();
    const task = (who: string): PunctualTaskDefinition => ({
      name: "renew",
      every: "1m",
      budgetMs: 5_000,
      singleton: true,
      run: async (ctx) => {
        ran.push(`${who}@${ctx.occurrenceAt.toISOString()}`);
        await gate.promise;
      },
    });
    const a = await open([task("a")]);
    const b = await open([task("b")], new TestClock("2027-01-04T08:00:00Z"));
    a.punctual.tasks.start();
    b.punctual.tasks.start();
    a.clock.advance(60_000);
    b.clock.advance(60_000);
    await until(async () => {
      const held =
        ((await runs(a.punctual))["renew/lease_held"] ?? 0) +
        ((await runs(b.punctual))["renew/lease_held"] ?? 0);
      expect(held).toBe(1);
    });
    expect(ran).toHaveLength(1);
    gate.resolve();
    await until(async () => {
      const sum =
        ((await runs(a.punctual))["renew/ok"] ?? 0) + ((await runs(b.punctual))["renew/ok"] ?? 0);
      expect(sum).toBe(1);
    });
    // The lane is free once the lease is ended (a database round trip after the count).
    await until(() =>
      expect(a.punctual.tasks.isRunning("renew") || b.punctual.tasks.isRunning("renew")).toBe(
        false,
      ),
    );
    // The next occurrence is taken again by one of them: the lease moved on.
    a.clock.advance(60_000);
    b.clock.advance(60_000);
    await until(() => expect(ran).toHaveLength(2));
    await until(async () => {
      const held =
        ((await runs(a.punctual))["renew/lease_held"] ?? 0) +
        ((await runs(b.punctual))["renew/lease_held"] ?? 0);
      expect(held).toBe(2);
    });
    expect(ran.map((r) => r.split("@")[1])).toEqual([
      "2027-01-04T08:01:00.000Z",
      "2027-01-04T08:02:00.000Z",
    ]);
  });

  it("OPS-7: dispatch is unchanged while a task hangs: same claims and sends at each step, none late", async () => {
    /** Five minutely reminders; one tick per minute; what was sent after each tick. */
    async function scenario(tasks: PunctualTaskDefinition[]) {
      const { punctual, clock, channel } = await open(tasks);
      punctual.tasks.start();
      await punctual.createSchedule({
        dtstart: "2027-01-04T08:01:00Z",
        rrule: "FREQ=MINUTELY;COUNT=5",
        reminders: [{ key: "r", channel: "test" }],
      });
      const sentPerStep: number[] = [];
      for (let i = 0; i < 5; i++) {
        clock.advance(60_000);
        await tickAndDrain(punctual);
        sentPerStep.push(channel.sends.length);
      }
      const late = channel.sends.filter((s) => s.delivery.late).length;
      const counts = await runs(punctual);
      await punctual.close(0);
      opened.splice(opened.indexOf(punctual), 1);
      return { sentPerStep, late, counts };
    }
    const baseline = await scenario([]);
    await handle.close();
    handle = await openTestDatabase();
    let hung = 0;
    const withTask = await scenario([
      {
        name: "hang",
        every: "30s",
        budgetMs: 3_600_000,
        run: () => {
          hung++;
          return new Promise<void>(() => {});
        },
      },
    ]);
    expect(hung).toBe(1);
    expect(withTask.sentPerStep).toEqual([1, 2, 3, 4, 5]);
    expect(withTask.sentPerStep).toEqual(baseline.sentPerStep);
    expect(withTask.late).toBe(0);
    expect(baseline.late).toBe(0);
    // The task's lane stayed busy the whole time: every later occurrence found it running.
    expect(withTask.counts["hang/overlap"]).toBe(9);
  });
});

describe("OPS-7 calendar re-import task", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "punctual-ics-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const event = (uid: string, start: string) =>
    [
      "BEGIN:VEVENT",
      `UID:${uid}`,
      "DTSTAMP:20270101T000000Z",
      `DTSTART:${start}`,
      "DURATION:PT1H",
      "SUMMARY:Standup",
      "END:VEVENT",
    ].join("\r\n");
  const calendar = (...events: string[]) =>
    ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//test//EN", ...events, "END:VCALENDAR", ""].join(
      "\r\n",
    );

  it("OPS-7: calendarImportTask re-imports a file on its cadence and logs each summary", async () => {
    const file = join(dir, "team.ics");
    writeFileSync(file, calendar(event("a@test", "20270110T090000Z")));
    const { punctual, clock, lines } = await open([
      calendarImportTask({
        from: file,
        source: "team",
        every: "15m",
        import: { remind: ["-PT15M"], channel: "log" },
      }),
    ]);
    punctual.tasks.start();
    clock.advance(15 * 60_000);
    await until(async () => expect((await runs(punctual))["calendar-import:team/ok"]).toBe(1));
    // The lane is free once the lease is ended (a database round trip after the count).
    await until(() => expect(punctual.tasks.isRunning("calendar-import:team")).toBe(false));
    writeFileSync(
      file,
      calendar(event("a@test", "20270110T090000Z"), event("b@test", "20270111T090000Z")),
    );
    clock.advance(15 * 60_000);
    await until(async () => expect((await runs(punctual))["calendar-import:team/ok"]).toBe(2));
    const summaries = lines.filter((l) => l.msg === "calendar imported");
    expect(summaries.map((l) => [l.created, l.unchanged])).toEqual([
      [1, 0],
      [1, 1],
    ]);
    expect((await punctual.listSchedules({})).items.map((s) => s.externalId).sort()).toEqual([
      "a@test",
      "b@test",
    ]);
  });

  it("OPS-7: punctual import --every re-imports a calendar URL until stopped, printing each summary", async () => {
    let body = calendar(event("a@test", "20270110T090000Z"));
    const http = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/calendar" });
      res.end(body);
    });
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    const calendarUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}/team.ics`;
    const { punctual } = await open([]);
    const served = await serveApi(createApi(punctual), { host: "127.0.0.1", port: 0 });
    let out = "";
    let err = "";
    let waits = 0;
    try {
      const failed = await runImportEvery(
        calendarUrl,
        {
          every: "15m",
          remind: ["-PT15M"],
          useAlarms: false,
          channel: "log",
          dryRun: false,
          json: true,
          url: served.url,
        },
        { out: (t) => void (out += t), err: (t) => void (err += t) },
        {
          errIsTTY: false,
          now: () => Date.parse("2027-01-04T08:00:00Z"),
          wait: async (ms) => {
            expect(ms).toBe(900_000);
            waits++;
            body = calendar(
              event("a@test", "20270110T090000Z"),
              event("b@test", "20270111T090000Z"),
            );
            return waits < 2;
          },
        },
      );
      expect(failed).toBe(0);
    } finally {
      await served.close(0);
      await new Promise((resolve) => http.close(resolve));
    }
    const summaries = out
      .trim()
      .split(/\n(?=\{)/)
      .map((t) => JSON.parse(t) as { source: string; created: number; unchanged: number });
    expect(summaries.map((s) => [s.source, s.created, s.unchanged])).toEqual([
      ["team", 1, 0],
      ["team", 1, 1],
    ]);
    expect(err.match(/importing http/g)).toHaveLength(2);
  });
});
