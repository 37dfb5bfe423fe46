/**
 * Calendar import as a service (API-5, DEL-9, DEL-10, OPS-12), on the engine of
 * `PUNCTUAL_TEST_ENGINE`: the changes are written in chunks, each chunk one transaction
 * committed on its own, with progress per chunk; a failed chunk rolls back alone and the
 * next import finishes the work; a schedule edited between the comparison and its chunk
 * is left alone.
 */
import { afterEach, describe, expect, it } from "vitest";
import { importCalendar, type ImportProgress } from "../../src/app/import.js";
import { IMPORT_CHUNK, IMPORT_CHUNK_EMBEDDED } from "../../src/app/import/index.js";
import { storedOfSource } from "../../src/app/import/service.js";
import type { Database } from "../../src/store/database.js";
import { testPunctual, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;
afterEach(async () => {
  await t?.close();
  t = null;
});

/** A calendar of `n` weekly events (`uid-0` … `uid-{n-1}`), summaries prefixed `label`. */
function calendar(n: number, label = "Event"): string {
  const events = Array.from({ length: n }, (_, i) =>
    [
      "BEGIN:VEVENT",
      `UID:uid-${i}`,
      `DTSTART:20270111T${String(8 + (i % 10)).padStart(2, "0")}0000Z`,
      "DURATION:PT30M",
      "RRULE:FREQ=WEEKLY",
      `SUMMARY:${label} ${i}`,
      "END:VEVENT",
    ].join("\r\n"),
  );
  return [
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "PRODID:-//t//t//EN",
    ...events,
    "END:VCALENDAR",
    "",
  ].join("\r\n");
}

const options = { source: "svc", remind: ["-PT15M"], channel: "test" };

async function storedCount(p: TestPunctual): Promise<number> {
  const rows = await p.punctual.db.query<{ n: number }>(
    "select count(*)::int as n from punctual_schedules where source = 'svc' and state = 'active'",
  );
  return rows.rows[0]!.n;
}

/** The database with its next transaction (once `arm` is called) failing after its work. */
function failingTransaction(): { wrap: (db: Database) => Database; arm: () => void } {
  let armed = false;
  return {
    arm: () => {
      armed = true;
    },
    wrap: (db) =>
      new Proxy(db, {
        get(target, prop, receiver) {
          if (prop === "transaction") {
            const transaction: Database["transaction"] = (fn) =>
              target.transaction(async (tx) => {
                const out = await fn(tx);
                if (armed) {
                  armed = false;
                  throw new Error("injected failure at commit");
                }
                return out;
              });
            return transaction;
          }
          const value: unknown = Reflect.get(target, prop, receiver);
          return typeof value === "function" ? value.bind(target) : value;
        },
      }),
  };
}

describe("API-5: import as a chunked service", () => {
  it("API-5, OPS-12: the changes are written in chunks, each committed before the next, with progress per chunk", async () => {
    t = await testPunctual();
    const seen: ImportProgress[] = [];
    const progress: Array<[number, number]> = [];
    const summary = await importCalendar(t.punctual, calendar(5), {
      ...options,
      chunkSize: 2,
      onChunk: (p) => {
        seen.push(p);
      },
      onProgress: (done, total) => progress.push([done, total]),
    });
    expect(summary).toMatchObject({ created: 5, updated: 0, unchanged: 0, cancelled: 0 });
    expect(seen).toEqual([
      { chunk: 1, chunks: 3, done: 2, total: 5, created: 2, updated: 0, cancelled: 0 },
      { chunk: 2, chunks: 3, done: 4, total: 5, created: 4, updated: 0, cancelled: 0 },
      { chunk: 3, chunks: 3, done: 5, total: 5, created: 5, updated: 0, cancelled: 0 },
    ]);
    // The reading reports its events first, then the writing its changes per chunk.
    expect(progress.slice(-3)).toEqual([
      [2, 5],
      [4, 5],
      [5, 5],
    ]);
    expect(await storedCount(t)).toBe(5);
    expect(summary.schedules.every((s) => s.action === "created" && s.scheduleId)).toBe(true);
  });

  it("DEL-3, OPS-12: the default chunk is small on the embedded engine, whose one connection a chunk holds", async () => {
    t = await testPunctual();
    const seen: ImportProgress[] = [];
    await importCalendar(t.punctual, calendar(30), {
      ...options,
      onChunk: (p) => {
        seen.push(p);
      },
    });
    const expected = t.punctual.db.engine === "pglite" ? IMPORT_CHUNK_EMBEDDED : IMPORT_CHUNK;
    expect(seen[0]).toMatchObject({ chunk: 1, done: Math.min(30, expected), total: 30 });
    expect(seen).toHaveLength(Math.ceil(30 / expected));
  });

  it("DEL-9: each chunk is visible to other connections once its progress is reported", async () => {
    t = await testPunctual();
    const current = t;
    const stored: Promise<number>[] = [];
    await importCalendar(t.punctual, calendar(5), {
      ...options,
      chunkSize: 2,
      onChunk: () => {
        stored.push(storedCount(current));
      },
    });
    expect(await Promise.all(stored)).toEqual([2, 4, 5]);
  });

  it("DEL-9: a failed chunk rolls back alone: the chunks before it stay, and importing again finishes the work", async () => {
    const fault = failingTransaction();
    t = await testPunctual({ wrapDb: fault.wrap });
    await expect(
      importCalendar(t.punctual, calendar(5), {
        ...options,
        chunkSize: 2,
        // Armed after chunk 1: chunk 2 writes its rows, then fails and rolls back.
        onChunk: (p) => {
          if (p.chunk === 1) fault.arm();
        },
      }),
    ).rejects.toThrow(/injected failure/);
    expect(await storedCount(t)).toBe(2);
    const again = await importCalendar(t.punctual, calendar(5), { ...options, chunkSize: 2 });
    expect(again).toMatchObject({ created: 3, unchanged: 2, updated: 0, cancelled: 0 });
    expect(await storedCount(t)).toBe(5);
  });

  it("DEL-9, DEL-10: updates and cancels are written in chunks too, and a re-import is a no-op", async () => {
    t = await testPunctual();
    await importCalendar(t.punctual, calendar(6), options);
    const chunks: ImportProgress[] = [];
    const edited = await importCalendar(t.punctual, calendar(4, "Meeting"), {
      ...options,
      chunkSize: 3,
      onChunk: (p) => {
        chunks.push(p);
      },
    });
    expect(edited).toMatchObject({ created: 0, updated: 4, unchanged: 0, cancelled: 2 });
    expect(chunks.map((p) => [p.done, p.updated, p.cancelled])).toEqual([
      [3, 3, 0],
      [6, 4, 2],
    ]);
    const list = await t.punctual.listSchedules({ source: "svc", limit: 10 });
    const titles = list.items.filter((s) => s.state === "active").map((s) => s.title);
    expect(titles.sort()).toEqual(["Meeting 0", "Meeting 1", "Meeting 2", "Meeting 3"]);
    expect(await importCalendar(t.punctual, calendar(4, "Meeting"), options)).toMatchObject({
      created: 0,
      updated: 0,
      unchanged: 4,
      cancelled: 0,
    });
  });

  it("DEL-9: a schedule edited after the comparison is left alone, named in skipped, and the next import applies the calendar", async () => {
    t = await testPunctual();
    const first = await importCalendar(t.punctual, calendar(4), options);
    const last = first.schedules.find((s) => s.externalId === "uid-3")!.scheduleId!;
    const current = t;
    const summary = await importCalendar(t.punctual, calendar(4, "Meeting"), {
      ...options,
      chunkSize: 2,
      onChunk: async (p) => {
        // Between chunk 1 and chunk 2, a person edits a schedule chunk 2 updates.
        if (p.chunk === 1) await current.punctual.updateSchedule(last, { title: "mine" });
      },
    });
    expect(summary.updated).toBe(3);
    expect(summary.skipped).toEqual([
      expect.objectContaining({
        uid: "uid-3",
        reason: expect.stringMatching(/was changed while importing/),
      }),
    ]);
    expect((await t.punctual.getSchedule(last)).title).toBe("mine");
    const again = await importCalendar(t.punctual, calendar(4, "Meeting"), options);
    expect(again).toMatchObject({ updated: 1, unchanged: 3 });
    expect((await t.punctual.getSchedule(last)).title).toBe("Meeting 3");
  });

  it("DEL-9: the updates of one chunk are realigned together, each schedule to its own new set, as a fresh import plans it", async () => {
    t = await testPunctual({
      start: "2027-01-10T00:00:00Z",
      scheduler: { planAheadMs: 14 * 86_400_000 },
    });
    await importCalendar(t.punctual, calendar(5), options);
    // Every event moves: to another hour (i % 10 shifts) and, for odd ones, to daily.
    const moved = calendar(5)
      .replace(/T(\d\d)0000Z/g, (_, h: string) => `T${String(Number(h) + 3).padStart(2, "0")}0000Z`)
      .replace(/(UID:uid-[13]\r\n(?:.*\r\n){2})RRULE:FREQ=WEEKLY/g, "$1RRULE:FREQ=DAILY;COUNT=4");
    const summary = await importCalendar(t.punctual, moved, { ...options, chunkSize: 5 });
    expect(summary).toMatchObject({ updated: 5, created: 0 });
    await importCalendar(t.punctual, moved, { ...options, source: "fresh" });
    const waitingBySource = async (source: string) =>
      (
        await t!.punctual.db.query<{ external_id: string; due_at: Date }>(
          `select s.external_id, d.due_at from punctual_deliveries d
           join punctual_schedules s on s.id = d.schedule_id
           where s.source = $1 and d.state in ('pending', 'retry', 'paused')
           order by s.external_id, d.due_at`,
          [source],
        )
      ).rows.map((r) => `${r.external_id} ${new Date(r.due_at).toISOString()}`);
    const realigned = await waitingBySource("svc");
    expect(realigned.some((r) => r.startsWith("uid-1 "))).toBe(true);
    expect(realigned.some((r) => r.startsWith("uid-4 "))).toBe(true);
    expect(realigned).toEqual(await waitingBySource("fresh"));
  });

  it("DEL-10, OPS-13: a chunk's cancels are written together, each schedule with its waiting deliveries, counted once per channel; one purged meanwhile is skipped", async () => {
    t = await testPunctual({
      start: "2027-01-10T00:00:00Z",
      scheduler: { planAheadMs: 14 * 86_400_000 },
    });
    const first = await importCalendar(t.punctual, calendar(6), options);
    const idOf = (uid: string) => first.schedules.find((s) => s.externalId === uid)!.scheduleId!;
    const waiting = async (id: string) =>
      (
        await t!.punctual.db.query<{ state: string; reason: string | null; n: number }>(
          `select state, reason, count(*)::int as n from punctual_deliveries
           where schedule_id = $1 group by state, reason order by state`,
          [id],
        )
      ).rows.map((r) => `${r.state} ${r.reason ?? ""} ${r.n}`);
    expect(await waiting(idOf("uid-2"))).toEqual(["pending  2"]);
    const current = t;
    // uid-1 … uid-5 leave the file: one chunk of two cancels, then one of three, in which
    // uid-5 is purged before its chunk is written.
    const summary = await importCalendar(t.punctual, calendar(1), {
      ...options,
      chunkSize: 2,
      onChunk: async (p) => {
        if (p.chunk === 1) await current.punctual.purgeSchedule(idOf("uid-5"));
      },
    });
    expect(summary).toMatchObject({ cancelled: 4, unchanged: 1 });
    expect(summary.skipped).toEqual([
      expect.objectContaining({
        reason: `schedule ${idOf("uid-5")} is gone (purged while importing)`,
      }),
    ]);
    for (const uid of ["uid-1", "uid-2", "uid-3", "uid-4"]) {
      expect((await t.punctual.getSchedule(idOf(uid))).state).toBe("cancelled");
      expect(await waiting(idOf(uid))).toEqual(["cancelled schedule_cancelled 2"]);
    }
    expect(await waiting(idOf("uid-0"))).toEqual(["pending  2"]);
    const { body } = await t.punctual.metricsText();
    expect(body).toContain('punctual_deliveries_total{channel="test",outcome="cancelled"} 8\n');
    // Back in the file: revived by the next import, as an import cancelled them; the purged
    // one is created again.
    expect(await importCalendar(t.punctual, calendar(6), options)).toMatchObject({
      updated: 4,
      created: 1,
    });
  });

  it("API-5: the source's stored schedules are read a page at a time, those without an external id last, and each is compared", async () => {
    t = await testPunctual();
    await importCalendar(t.punctual, calendar(5), options);
    const { schedule } = await t.punctual.createSchedule({
      dtstart: "2027-02-01T09:00:00Z",
      source: "svc",
      reminders: [{ offset: "-PT15M", channel: "test", target: {} }],
    });
    const stored = await storedOfSource(t.punctual, "default", "svc", async () => {}, 2);
    expect(stored.map((r) => r.external_id)).toEqual([
      "uid-0",
      "uid-1",
      "uid-2",
      "uid-3",
      "uid-4",
      null,
    ]);
    expect(stored[0]).toMatchObject({ state: "active", version: 1, uid: "uid-0" });
    // Not in the file: a complete file's import cancels it like any other schedule gone.
    const summary = await importCalendar(t.punctual, calendar(5), options);
    expect(summary).toMatchObject({ unchanged: 5, cancelled: 1 });
    expect((await t.punctual.getSchedule(schedule.id)).state).toBe("cancelled");
  });

  it("API-5: a chunk size that is not a positive integer is refused before anything is written", async () => {
    t = await testPunctual();
    await expect(
      importCalendar(t.punctual, calendar(2), { ...options, chunkSize: 0 }),
    ).rejects.toMatchObject({ issues: [expect.objectContaining({ field: "chunkSize" })] });
    expect(await storedCount(t)).toBe(0);
  });
});
