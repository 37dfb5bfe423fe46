import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPunctual } from "../../src/app/punctual.js";
import { importCalendar } from "../../src/app/import.js";
import { TestClock } from "../../src/clock/index.js";
import { silentLogger } from "../../src/observability/logger.js";
import type { Database, Queryable } from "../../src/store/database.js";
import { openPglite } from "../../src/store/pglite.js";
import { engineName } from "../support/db.js";

/**
 * Counts turns of the event loop (a `setImmediate` that queues itself again) and records
 * in which turn each statement of `db` ended.
 */
function turnsOf(db: Database) {
  let turn = 0;
  let running = true;
  const spin = (): void => {
    turn++;
    if (running) setImmediate(spin);
  };
  setImmediate(spin);
  const ended: number[] = [];
  const record =
    (q: Queryable["query"]): Queryable["query"] =>
    async (sql, params) => {
      try {
        return await q(sql, params);
      } finally {
        ended.push(turn);
      }
    };
  const query = db.query.bind(db);
  const transaction = db.transaction.bind(db);
  db.query = record(query) as Database["query"];
  db.transaction = ((fn: (tx: Queryable) => Promise<unknown>) =>
    transaction((tx) =>
      fn({ ...tx, query: record(tx.query.bind(tx)) as Queryable["query"] }),
    )) as Database["transaction"];
  return {
    /** Most statements that ended within one turn of the loop. */
    mostInOneTurn(): number {
      const per = new Map<number, number>();
      for (const t of ended) per.set(t, (per.get(t) ?? 0) + 1);
      return Math.max(0, ...per.values());
    },
    statements: () => ended.length,
    stop(): void {
      running = false;
      ended.length = 0;
    },
  };
}

// The embedded engine runs every statement on this thread; these tests need no schema.
describe.skipIf(engineName() !== "pglite")(
  "embedded statements take turns with the event loop (OPS-12; skipped in the PostgreSQL stage: it tests the embedded engine, run in the PGlite stage)",
  () => {
    let db: Database;
    beforeAll(async () => {
      db = await openPglite({ dataDir: null });
    });
    afterAll(async () => {
      await db.close();
    });

    it("OPS-12: a callback queued before a transaction of 3,000 statements runs before it ends", async () => {
      let ranAt = -1;
      let done = 0;
      setImmediate(() => {
        ranAt = done;
      });
      await db.transaction(async (tx) => {
        // Each statement is at least tens of µs of CPU: 3,000 of them outlast any slice.
        for (let i = 0; i < 3_000; i++) {
          await tx.query("select $1::int as i", [i]);
          done++;
        }
      });
      expect(ranAt).toBeGreaterThanOrEqual(0);
      expect(ranAt).toBeLessThan(3_000);
    });

    it("OPS-12: statements outside a transaction take turns too", async () => {
      let ranAt = -1;
      let done = 0;
      setImmediate(() => {
        ranAt = done;
      });
      for (let i = 0; i < 3_000; i++) {
        await db.query("select $1::int as i", [i]);
        done++;
      }
      expect(ranAt).toBeGreaterThanOrEqual(0);
      expect(ranAt).toBeLessThan(3_000);
    });

    it("OPS-12: an import of one event under 30 UIDs runs its bulk create in turns, not in one piece (fuzz seed 420761373)", async () => {
      // The shape the fuzz found: one weekly series repeated under 30 UIDs. Its bulk create
      // (schedules, reminders, planning, watermarks: five statements and the planning
      // between them) held the loop 103–124 ms of CPU in one piece on a shared machine.
      // With a slice of 0 every statement is followed by a turn, so no turn holds more than
      // one; without the turns three or more end in the same turn.
      const embedded = await openPglite({ dataDir: null, sliceMs: 0 });
      const punctual = await createPunctual({
        database: embedded,
        clock: new TestClock("2027-01-04T08:00:00Z"),
        logger: silentLogger(),
      });
      const event = (uid: string) => [
        "BEGIN:VEVENT",
        `UID:${uid}`,
        "DTSTAMP:20270101T000000Z",
        "DTSTART:20270104T160000Z",
        "DURATION:PT45M",
        "RRULE:FREQ=WEEKLY;BYDAY=MO,WE;COUNT=20",
        "SUMMARY:Class",
        "END:VEVENT",
      ];
      const calendar = [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//punctual//test//EN",
        ...Array.from({ length: 30 }, (_, i) => event(i === 0 ? "class" : `class-${i - 1}`)).flat(),
        "END:VCALENDAR",
      ].join("\r\n");
      const turns = turnsOf(embedded);
      try {
        const summary = await importCalendar(punctual, calendar, {
          source: "classes",
          remind: ["-PT15M"],
          channel: "log",
        });
        expect(summary.created).toBe(30);
        expect(turns.statements()).toBeGreaterThanOrEqual(5);
        expect(turns.mostInOneTurn()).toBe(1);
      } finally {
        turns.stop();
        await punctual.close(0);
        await embedded.close();
      }
    });
  },
);
