/**
 * Claimable by the row's own state (DEL-3, DEL-9, DEL-10, REC-6): everything admission
 * depends on is on the delivery row, written by the statement that changes it, in the
 * same transaction. Pause and quarantine hold waiting rows out of the claim index; expiry
 * and grace are the row's own columns; a row coming back from a claim lands where its
 * schedule is now. Both engines.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Queryable } from "../../src/store/database.js";
import {
  APPLY_MISFIRE_SQL,
  CLAIM_SQL,
  RECOVER_SQL,
  SETTLE_SQL,
} from "../../src/store/deliveries/index.js";
import { loadMigrations, migrate } from "../../src/store/migrator.js";
import { QUARANTINE_SQL, SELECT_STALE_SQL, type StaleRow } from "../../src/store/planning.js";
import { SET_SCHEDULE_STATE_SQL } from "../../src/store/schedules.js";
import { engineName, openTestDatabase, useTestDatabase } from "../support/db.js";
import { explain, nodes, outline } from "../support/plans.js";
import { HOUR, instants, insertSchedule, NOW, plan } from "../support/rows.js";
import { deliveries, testPunctual, type TestPunctual } from "../support/punctual.js";
import { forgingStates } from "../support/transitions.js";

const engine = engineName();

interface Row {
  id: number;
  state: string;
  attempt: number;
  due_at: Date;
  expires_at: Date | null;
  stale_at: Date | null;
  claimable_at: Date | null;
}

async function rowsOf(db: Queryable, scheduleId: string): Promise<Row[]> {
  const { rows } = await db.query<Row>(
    `select id, state, attempt, due_at, expires_at, stale_at, claimable_at
     from punctual_delivery_rows where schedule_id = $1 order by due_at, id`,
    [scheduleId],
  );
  return rows;
}

async function claim(db: Queryable, limit = 100, now: Date = NOW) {
  const { rows } = await db.query<{ id: number; schedule_id: string; db_now: Date }>(CLAIM_SQL, [
    now,
    "w#1#x",
    60_000,
    limit,
    ["log"],
    [],
  ]);
  return rows;
}

const setState = (db: Queryable, id: string, from: string, to: string) =>
  db.query(SET_SCHEDULE_STATE_SQL, [NOW, "default", id, from, to]);

class Rollback extends Error {}

describe(`claimable by the row's own state on ${engine}`, () => {
  const t = useTestDatabase();

  it("DEL-10: pause moves waiting rows out of the claimable states in the same statement; resume brings them back (pending if never tried, else retry)", async () => {
    const { db } = t();
    const id = await insertSchedule(db);
    await plan(db, id, instants(3, NOW.getTime() - 60_000, 1_000));
    const [, second] = await rowsOf(db, id);
    // Forged: a row tried once (test/support/transitions.ts).
    await forgingStates(db, (tx) =>
      tx.query("update punctual_deliveries set state = 'retry', attempt = 1 where id = $1", [
        second!.id,
      ]),
    );
    await setState(db, id, "active", "paused");
    const held = await rowsOf(db, id);
    expect(held.map((r) => r.state)).toEqual(["paused", "paused", "paused"]);
    expect(held.map((r) => r.claimable_at)).toEqual([null, null, null]);
    expect(await claim(db)).toEqual([]);
    await setState(db, id, "paused", "active");
    expect((await rowsOf(db, id)).map((r) => r.state)).toEqual(["pending", "retry", "pending"]);
    expect((await claim(db)).map((r) => r.schedule_id)).toEqual([id, id, id]);
  });

  it("DEL-10: a paused schedule's 5k due rows are not read by the claim (EXPLAIN ANALYZE: the index scan returns only what it claims)", async () => {
    const { db } = t();
    // Older than the active rows, so any index over waiting rows would meet them first.
    const paused = await insertSchedule(db);
    await plan(db, paused, instants(4_500, NOW.getTime() - 2 * HOUR, 10));
    await setState(db, paused, "active", "paused");
    // Rows planned while paused (an edit of a paused schedule) are held from the start.
    await plan(db, paused, instants(500, NOW.getTime() - HOUR, 10));
    const active = await insertSchedule(db);
    await plan(db, active, instants(100, NOW.getTime() - 60_000, 10));
    const { rows: counts } = await db.query<{ state: string; n: number }>(
      "select state, count(*) as n from punctual_deliveries where schedule_id = $1 group by state",
      [paused],
    );
    expect(counts).toEqual([{ state: "paused", n: 5_000 }]);
    let scan: ReturnType<typeof nodes>[number] | undefined;
    let shape = "";
    try {
      await db.transaction(async (tx) => {
        const p = await explain(tx, CLAIM_SQL, [NOW, "w#1#x", 60_000, 8, ["log"], []], "analyze");
        shape = outline(p);
        scan = nodes(p).find(
          (n) => n["Relation Name"] === "punctual_queue" && /Scan$/.test(n["Node Type"]),
        );
        throw new Rollback();
      });
    } catch (err) {
      if (!(err instanceof Rollback)) throw err;
    }
    // The held rows have no queue row (migration 0050): whatever the plan, the claim's scan
    // of the queue meets only rows of other schedules.
    const { rows: queued } = await db.query<{ n: number }>(
      `select count(*)::int as n from punctual_queue q
       where exists (select 1 from punctual_deliveries d where d.id = q.id and d.schedule_id = $1)`,
      [paused],
    );
    expect(queued).toEqual([{ n: 0 }]);
    const { rows: all } = await db.query<{ n: number }>(
      "select count(*)::int as n from punctual_queue",
    );
    expect(scan, shape).toBeDefined();
    expect(
      (scan!["Actual Rows"] ?? 0) + (scan!["Rows Removed by Filter"] ?? 0),
      shape,
    ).toBeLessThanOrEqual(all[0]!.n);
    await db.query("delete from punctual_deliveries where schedule_id = any($1)", [
      [paused, active],
    ]);
  });

  it("DEL-3: expired rows are never claimed: the claim reads the row's own expiry, not the schedule's", async () => {
    const { db } = t();
    const id = await insertSchedule(db, { expiresAt: new Date(NOW.getTime() - HOUR) });
    await plan(db, id, instants(2, NOW.getTime() - 2 * HOUR, 60_000));
    expect((await rowsOf(db, id)).map((r) => r.expires_at)).toEqual([
      new Date(NOW.getTime() - HOUR),
      new Date(NOW.getTime() - HOUR),
    ]);
    expect(await claim(db)).toEqual([]);
    // The schedule's column changed behind the statements' back: the claim does not look.
    await db.query("update punctual_schedules set expires_at = null where id = $1", [id]);
    expect(await claim(db)).toEqual([]);
    // The expiry sweep finds them through the row's column and skips them.
    const { rows } = await db.query<StaleRow>(SELECT_STALE_SQL, [NOW, 100]);
    expect(rows.filter((r) => r.schedule_id === id)).toHaveLength(2);
    await db.query("delete from punctual_deliveries where schedule_id = $1", [id]);
  });

  it("DEL-3: the NULL arms admit: no expiry and no grace limit (a one-off) is claimable once due (protects the coalesce(…, true) arms of expires_at and stale_at)", async () => {
    const { db } = t();
    const id = await insertSchedule(db);
    await plan(db, id, [new Date(NOW.getTime() - 3 * HOUR)]);
    const [row] = await rowsOf(db, id);
    expect(row).toMatchObject({ expires_at: null, stale_at: null, state: "pending" });
    expect((await claim(db)).map((r) => r.schedule_id)).toEqual([id]);
  });

  it("REC-6: a recurring row past its grace is not claimed until the misfire sweep judges it; judged late, it is claimable", async () => {
    const { db } = t();
    const id = await insertSchedule(db, { recurring: true, misfire: "all" });
    await plan(db, id, [
      new Date(NOW.getTime() - 2 * HOUR),
      new Date(NOW.getTime() - HOUR),
      new Date(NOW.getTime() - 300_000),
    ]);
    const [old, older, fresh] = await rowsOf(db, id);
    // stale_at = due + 15 min grace.
    expect(fresh!.stale_at).toEqual(new Date(NOW.getTime() - 300_000 + 900_000));
    const first = await claim(db);
    expect(first.map((r) => r.id)).toEqual([fresh!.id]);
    expect(first[0]!.db_now).toEqual(NOW);
    const { rows: stale } = await db.query<StaleRow>(SELECT_STALE_SQL, [NOW, 100]);
    expect(stale.map((r) => r.id)).toEqual([old!.id, older!.id]);
    await db.query(APPLY_MISFIRE_SQL, [NOW, [old!.id], ["stale"], [older!.id], [null]]);
    const judged = await rowsOf(db, id);
    expect(judged.map((r) => [r.state, r.stale_at])).toEqual([
      ["skipped", null],
      ["pending", null],
      ["claimed", null],
    ]);
    expect((await claim(db)).map((r) => r.id)).toEqual([older!.id]);
    expect((await db.query(SELECT_STALE_SQL, [NOW, 100])).rows).toEqual([]);
  });

  it("DEL-10: a claimed row whose schedule is paused meanwhile comes back held when it must retry; resume makes it a retry", async () => {
    const { db } = t();
    const id = await insertSchedule(db);
    await plan(db, id, [new Date(NOW.getTime() - 1_000)]);
    const [claimed] = await claim(db);
    await setState(db, id, "active", "paused");
    const later = new Date(NOW.getTime() + 60_000);
    await db.query(SETTLE_SQL, [
      NOW,
      "w#1#x",
      [claimed!.id],
      [1],
      ["retry"],
      [later.getTime()],
      [null],
      ["boom"],
      [1],
      [NOW.getTime()],
      ["transient"],
      [503],
      [null],
      [0],
    ]);
    expect((await rowsOf(db, id)).map((r) => r.state)).toEqual(["paused"]);
    await setState(db, id, "paused", "active");
    expect((await rowsOf(db, id)).map((r) => [r.state, r.claimable_at])).toEqual([
      ["retry", later],
    ]);
  });

  it("DEL-10: a lease recovered after its schedule was cancelled ends cancelled, never waiting", async () => {
    const { db } = t();
    const id = await insertSchedule(db);
    await plan(db, id, [new Date(NOW.getTime() - 1_000)]);
    await claim(db);
    await db.query(
      `update punctual_schedules set state = 'cancelled', cancelled_at = $2, cancelled_by = 'user'
       where id = $1`,
      [id, NOW],
    );
    await db.query(RECOVER_SQL, [new Date(NOW.getTime() + 120_000), 100, 0]);
    const { rows } = await db.query<{ state: string; reason: string }>(
      "select state, reason from punctual_deliveries where schedule_id = $1",
      [id],
    );
    expect(rows).toEqual([{ state: "cancelled", reason: "schedule_cancelled" }]);
  });

  it("REC-3: quarantine holds the schedule's waiting rows in the same statement", async () => {
    const { db } = t();
    const id = await insertSchedule(db, { recurring: true });
    await plan(db, id, [new Date(NOW.getTime() - 1_000), new Date(NOW.getTime() + HOUR)]);
    await db.query(QUARANTINE_SQL, [NOW, id, "FREQ=FORTNIGHTLY is not a frequency"]);
    expect((await rowsOf(db, id)).map((r) => r.state)).toEqual(["paused", "paused"]);
    expect(await claim(db)).toEqual([]);
  });
});

describe(`edits rewrite the admission columns on ${engine}`, () => {
  let p: TestPunctual | null = null;
  afterEach(async () => {
    await p?.close();
    p = null;
  });

  it("DEL-9: removing a reminder removes its waiting rows in the edit's transaction; an edit of expiry and grace rewrites the rest", async () => {
    p = await testPunctual();
    const { punctual } = p;
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-04T08:10:00Z",
      rrule: "FREQ=MINUTELY;INTERVAL=10;COUNT=3",
      reminders: [
        { key: "a", offset: "PT0S", channel: "test" },
        { key: "b", offset: "-PT5M", channel: "test" },
      ],
    });
    expect(await deliveries(punctual)).toHaveLength(6);
    await punctual.updateSchedule(schedule.id, {
      reminders: [{ key: "a", offset: "PT0S", channel: "test" }],
      expiresAt: "2027-01-04T09:00:00Z",
      graceMs: 60_000,
    });
    const rows = await rowsOf(punctual.db, schedule.id);
    expect(rows).toHaveLength(3);
    for (const row of rows) {
      expect(row.expires_at).toEqual(new Date("2027-01-04T09:00:00Z"));
      expect(row.stale_at).toEqual(new Date(row.due_at.getTime() + 60_000));
    }
  });

  it("DEL-10: an edit of a paused schedule plans its new rows held", async () => {
    p = await testPunctual();
    const { punctual } = p;
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-04T08:10:00Z",
      reminders: [{ key: "a", offset: "PT0S", channel: "test" }],
    });
    await punctual.pauseSchedule(schedule.id);
    await punctual.updateSchedule(schedule.id, { dtstart: "2027-01-04T08:20:00Z" });
    const items = await deliveries(punctual);
    expect(items.map((d) => [d.dueAt, d.state])).toEqual([["2027-01-04T08:20:00.000Z", "paused"]]);
    await punctual.resumeSchedule(schedule.id);
    expect((await deliveries(punctual)).map((d) => d.state)).toEqual(["pending"]);
  });
});

describe(`migration 0002 on ${engine}`, () => {
  it("OPS-5: backfills waiting rows: expiry copied, stale_at for never-tried recurring rows, held rows of paused schedules, rows of removed reminders cancelled", async () => {
    const handle = await openTestDatabase({ migrated: false });
    try {
      const { db } = handle;
      await migrate(
        db,
        loadMigrations().filter((m) => m.version === 1),
      );
      const expiry = new Date(NOW.getTime() + HOUR);
      const series = await insertSchedule(db, { recurring: true, expiresAt: expiry });
      const paused = await insertSchedule(db);
      await db.query("update punctual_schedules set state = 'paused' where id = $1", [paused]);
      const insert = (
        schedule: string,
        key: string,
        reminder: string,
        attempt: number,
        state: string,
      ) =>
        db.query(
          `insert into punctual_deliveries
             (delivery_key, schedule_id, reminder_key, occurrence_at, due_at, run_at, state,
              attempt, channel, on_lost_lease)
           values ($1, $2, $3, $4, $4, $4, $5, $6, 'log', 'retry')`,
          [key, schedule, reminder, NOW, state, attempt],
        );
      await insert(series, "k1", "r", 0, "pending");
      await insert(paused, "k2", "r", 1, "retry");
      await insert(paused, "k3", "gone", 0, "pending");
      await migrate(db);
      const { rows } = await db.query<{
        delivery_key: string;
        state: string;
        expires_at: Date | null;
        stale_at: Date | null;
        reason: string | null;
      }>(
        "select delivery_key, state, expires_at, stale_at, reason from punctual_deliveries order by delivery_key",
      );
      expect(rows).toEqual([
        {
          delivery_key: "k1",
          state: "pending",
          expires_at: expiry,
          stale_at: new Date(NOW.getTime() + 900_000),
          reason: null,
        },
        { delivery_key: "k2", state: "paused", expires_at: null, stale_at: null, reason: null },
        {
          delivery_key: "k3",
          state: "cancelled",
          expires_at: null,
          stale_at: null,
          reason: "reminder_removed",
        },
      ]);
    } finally {
      await handle.close();
    }
  });
});
