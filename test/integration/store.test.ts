/**
 * The database port behaves the same on both engines: result types, time zones, and the
 * CHECK constraints that make impossible delivery rows unstorable.
 */
import { describe, expect, it } from "vitest";
import type { Database, Queryable } from "../../src/store/database.js";
import { engineName, useTestDatabase } from "../support/db.js";
import { forgingStates } from "../support/transitions.js";

const engine = engineName();

/** Inserts a minimal one-off schedule and returns its id. */
async function insertSchedule(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `insert into punctual_schedules (dtstart, tzid, recurring, payload)
     values ($1, $2, false, $3) returning id`,
    ["2027-01-04T09:00:00", "Europe/Paris", JSON.stringify({ hello: "world" })],
  );
  const id = rows[0]?.id;
  if (!id) throw new Error("no schedule id");
  return id;
}

/** Column values of a delivery row; `overrides` replace or add columns. */
function deliveryRow(scheduleId: string, key: string, overrides: Record<string, unknown> = {}) {
  return {
    delivery_key: key,
    schedule_id: scheduleId,
    reminder_key: "r1",
    occurrence_at: new Date(Date.UTC(2027, 0, 4, 8)),
    due_at: new Date(Date.UTC(2027, 0, 4, 7, 45)),
    run_at: new Date(Date.UTC(2027, 0, 4, 7, 45)),
    channel: "log",
    on_lost_lease: "in_doubt",
    ...overrides,
  };
}

/**
 * Inserts a delivery row as given, in any state: a forged history
 * (test/support/transitions.ts), so only the CHECK constraints judge it.
 */
async function insertDelivery(db: Database, row: Record<string, unknown>) {
  const columns = Object.keys(row);
  const placeholders = columns.map((_, i) => `$${i + 1}`);
  return forgingStates(db, (tx) =>
    tx.query<{ id: number }>(
      `insert into punctual_deliveries (${columns.join(", ")}) values (${placeholders.join(", ")}) returning id`,
      Object.values(row),
    ),
  );
}

/** The SQLSTATE and constraint name of a rejected statement (same shape on both engines). */
async function rejection(
  promise: Promise<unknown>,
): Promise<{ code?: string; constraint?: string }> {
  try {
    await promise;
  } catch (err) {
    const e = err as { code?: string; constraint?: string };
    return { code: e.code, constraint: e.constraint };
  }
  throw new Error("the statement was accepted");
}

describe(`store on ${engine}: result types are identical on both engines`, () => {
  const t = useTestDatabase();

  it("int8 (count(*), bigint identity) is a JS number", async () => {
    const { db } = t();
    const scheduleId = await insertSchedule(db);
    const inserted = await insertDelivery(db, deliveryRow(scheduleId, "types-1"));
    expect(typeof inserted.rows[0]?.id).toBe("number");
    const { rows } = await db.query<{ n: unknown; big: unknown }>(
      "select count(*) as n, 9007199254740991::int8 as big from punctual_deliveries",
    );
    expect(rows[0]?.n).toBe(1);
    expect(rows[0]?.big).toBe(Number.MAX_SAFE_INTEGER);
  });

  it("timestamptz is a Date, and parameters round-trip as instants", async () => {
    const { db } = t();
    const instant = new Date(Date.UTC(2027, 0, 4, 8, 0, 0, 123));
    const { rows } = await db.query<{ t: unknown; same: boolean }>(
      "select $1::timestamptz as t, $1::timestamptz = '2027-01-04T08:00:00.123Z'::timestamptz as same",
      [instant],
    );
    expect(rows[0]?.t).toBeInstanceOf(Date);
    expect((rows[0]?.t as Date).getTime()).toBe(instant.getTime());
    expect(rows[0]?.same).toBe(true);
  });

  it("jsonb is parsed", async () => {
    const { db } = t();
    const { rows } = await db.query<{ j: unknown; n: unknown }>(
      `select '{"a":1,"b":[true,null,"x"]}'::jsonb as j, 'null'::jsonb as n`,
    );
    expect(rows[0]?.j).toEqual({ a: 1, b: [true, null, "x"] });
    expect(rows[0]?.n).toBeNull();
    const scheduleId = await insertSchedule(db);
    const stored = await db.query<{ payload: unknown }>(
      "select payload from punctual_schedules where id = $1",
      [scheduleId],
    );
    expect(stored.rows[0]?.payload).toEqual({ hello: "world" });
  });

  it("instants do not depend on the host or session time zone", async () => {
    const { db } = t();
    const expected = Date.UTC(2027, 0, 4, 8);
    const plain = await db.query<{ t: Date }>(
      "select '2027-01-04T09:00:00+01:00'::timestamptz as t",
    );
    expect(plain.rows[0]?.t).toBeInstanceOf(Date);
    expect(plain.rows[0]?.t.getTime()).toBe(expected);
    // A session zone far from UTC changes nothing either.
    for (const zone of ["Pacific/Kiritimati", "America/St_Johns", "UTC"]) {
      const inZone = await db.transaction(async (tx) => {
        await tx.query(`set local time zone '${zone}'`);
        return tx.query<{ t: Date; z: string }>(
          "select '2027-01-04T09:00:00+01:00'::timestamptz as t, current_setting('TimeZone') as z",
        );
      });
      expect(inZone.rows[0]?.z).toBe(zone);
      expect(inZone.rows[0]?.t.getTime()).toBe(expected);
    }
  });

  it("rowCount reports the rows an update touched", async () => {
    const { db } = t();
    const scheduleId = await insertSchedule(db);
    await insertDelivery(db, deliveryRow(scheduleId, "count-1"));
    await insertDelivery(db, deliveryRow(scheduleId, "count-2", { reminder_key: "r2" }));
    const touched = await db.query(
      "update punctual_deliveries set late = true where schedule_id = $1",
      [scheduleId],
    );
    expect(touched.rowCount).toBe(2);
    const none = await db.query("update punctual_deliveries set late = true where false");
    expect(none.rowCount).toBe(0);
  });
});

describe(`store on ${engine}: CHECK constraints refuse impossible delivery rows`, () => {
  const t = useTestDatabase();

  it("DEL-2: a claimed delivery without a lease owner is rejected", async () => {
    const { db } = t();
    const scheduleId = await insertSchedule(db);
    const row = deliveryRow(scheduleId, "claimed-no-owner", {
      state: "claimed",
      attempt: 1,
      lease_expires_at: new Date(Date.UTC(2027, 0, 4, 8, 1)),
      claimed_at: new Date(Date.UTC(2027, 0, 4, 8)),
    });
    expect(await rejection(insertDelivery(db, row))).toEqual({
      code: "23514",
      constraint: "punctual_deliveries_lease",
    });
    // The same row with its owner is fine.
    await insertDelivery(db, { ...row, lease_owner: "host#1#abc" });
  });

  it("DEL-2: a pending delivery that still carries a lease is rejected", async () => {
    const { db } = t();
    const scheduleId = await insertSchedule(db);
    const row = deliveryRow(scheduleId, "pending-with-lease", {
      lease_owner: "host#1#abc",
      lease_expires_at: new Date(Date.UTC(2027, 0, 4, 8, 1)),
      claimed_at: new Date(Date.UTC(2027, 0, 4, 8)),
    });
    expect(await rejection(insertDelivery(db, row))).toMatchObject({ code: "23514" });
  });

  it("DEL-1: a sent delivery without sent_at is rejected, and sent_at without sent too", async () => {
    const { db } = t();
    const scheduleId = await insertSchedule(db);
    const sent = deliveryRow(scheduleId, "sent-no-time", { state: "sent", attempt: 1 });
    expect(await rejection(insertDelivery(db, sent))).toEqual({
      code: "23514",
      constraint: "punctual_deliveries_sent_at",
    });
    const pending = deliveryRow(scheduleId, "pending-with-time", { sent_at: new Date() });
    expect(await rejection(insertDelivery(db, pending))).toEqual({
      code: "23514",
      constraint: "punctual_deliveries_sent_at",
    });
    await insertDelivery(db, { ...sent, sent_at: new Date(Date.UTC(2027, 0, 4, 8)) });
  });

  it("DEL-5: a dead delivery needs finished_at and a reason", async () => {
    const { db } = t();
    const scheduleId = await insertSchedule(db);
    const dead = deliveryRow(scheduleId, "dead", { state: "dead", attempt: 5, failures: 5 });
    const finishedAt = new Date(Date.UTC(2027, 0, 4, 9));
    const noReason = { ...dead, finished_at: finishedAt };
    expect(await rejection(insertDelivery(db, noReason))).toEqual({
      code: "23514",
      constraint: "punctual_deliveries_reason",
    });
    const unfinished = { ...dead, reason: "SEND_FAILED" };
    expect(await rejection(insertDelivery(db, unfinished))).toEqual({
      code: "23514",
      constraint: "punctual_deliveries_finished",
    });
    await insertDelivery(db, { ...dead, finished_at: finishedAt, reason: "SEND_FAILED" });
  });

  it("DEL-4: failures can never exceed attempts", async () => {
    const { db } = t();
    const scheduleId = await insertSchedule(db);
    const row = deliveryRow(scheduleId, "too-many-failures", {
      state: "retry",
      attempt: 1,
      failures: 2,
    });
    expect(await rejection(insertDelivery(db, row))).toMatchObject({ code: "23514" });
  });

  it("DEL-1: one delivery key, one row (unique delivery key)", async () => {
    const { db } = t();
    const scheduleId = await insertSchedule(db);
    await insertDelivery(db, deliveryRow(scheduleId, "dup"));
    const again = deliveryRow(scheduleId, "dup", { reminder_key: "other" });
    expect(await rejection(insertDelivery(db, again))).toMatchObject({ code: "23505" });
  });
});
