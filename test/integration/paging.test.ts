/**
 * API-3: list endpoints page with an opaque keyset cursor in both orders, with filters and
 * search on the server; a cursor of another listing or an altered one is refused, and
 * `limit` takes digits only. Runs on the engine of this run (PGlite or PostgreSQL).
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Punctual } from "../../src/app/punctual.js";
import { testPunctual, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;
afterEach(async () => {
  await t?.close();
  t = null;
});

type Page<T> = { items: T[]; nextCursor: string | null };

/** Every page of a listing, following nextCursor; the ids in the order they came. */
async function walk<T extends { id: string | number }>(
  list: (query: Record<string, unknown>) => Promise<Page<T>>,
  query: Record<string, unknown>,
): Promise<Array<T["id"]>> {
  const seen: Array<T["id"]> = [];
  let cursor: string | null = null;
  for (let page = 0; page < 100; page++) {
    const reply: Page<T> = await list({ ...query, ...(cursor ? { cursor } : {}) });
    seen.push(...reply.items.map((i) => i.id));
    cursor = reply.nextCursor;
    if (!cursor) return seen;
  }
  throw new Error("did not end");
}

/** 12 schedules: 7 share one creation instant (ties on the sort key), 5 come later. */
async function seedSchedules(punctual: Punctual): Promise<void> {
  const values = Array.from(
    { length: 12 },
    (_, i) =>
      punctual.validateSchedule({
        dtstart: "2027-01-04T08:30:00Z",
        rrule: "FREQ=MINUTELY;COUNT=2",
        title: i % 3 === 0 ? `Team Standup ${i}` : `Invoice run ${i}`,
        reminders: [{ key: "r", offset: "PT0S", channel: i % 2 ? "test" : "log" }],
        source: "bulk",
        externalId: `ext-${String(i).padStart(2, "0")}`,
      }).value,
  );
  await punctual.createSchedulesBulk(values);
  await punctual.db.query(
    `update punctual_schedules
        set created_at = case when external_id < 'ext-07' then '2027-01-04T07:00:00.123456Z'::timestamptz
                              else '2027-01-04T07:00:01Z'::timestamptz
                                   + (substr(external_id, 5)::int * interval '1 second') end
      where source = 'bulk'`,
  );
}

/** The schedules' ids in (created_at, id) order, read from the table. */
async function scheduleIdsByKey(punctual: Punctual, dir: "asc" | "desc"): Promise<string[]> {
  const { rows } = await punctual.db.query<{ id: string }>(
    `select id from punctual_schedules order by created_at ${dir}, id ${dir}`,
  );
  return rows.map((r) => r.id);
}

describe("schedules pages", () => {
  it("API-3: keyset pages in both orders return every schedule once, ties on created_at included", async () => {
    t = await testPunctual();
    const { punctual } = t;
    await seedSchedules(punctual);
    const list = (q: Record<string, unknown>) => punctual.listSchedules(q);
    for (const limit of [1, 3, 5, 7]) {
      expect(await walk(list, { limit })).toEqual(await scheduleIdsByKey(punctual, "asc"));
      expect(await walk(list, { limit, order: "desc" })).toEqual(
        await scheduleIdsByKey(punctual, "desc"),
      );
    }
  });

  it("API-3: q searches title and external id, case-insensitive, on the server and pages", async () => {
    t = await testPunctual();
    const { punctual } = t;
    await seedSchedules(punctual);
    const list = (q: Record<string, unknown>) => punctual.listSchedules(q);
    const all = (await punctual.listSchedules({ limit: 100 })).items;
    const standups = all.filter((s) => /standup/i.test(s.title ?? "")).map((s) => s.id);
    expect(standups).toHaveLength(4);
    expect(await walk(list, { q: "sTaNdUp", limit: 1 })).toEqual(standups);
    expect(await walk(list, { q: "STANDUP", limit: 3, order: "desc" })).toEqual(
      [...standups].reverse(),
    );
    const ext = await punctual.listSchedules({ q: "EXT-1" });
    expect(ext.items.map((s) => s.externalId).sort()).toEqual(["ext-10", "ext-11"]);
    expect((await punctual.listSchedules({ q: "no such thing" })).items).toEqual([]);
    // Only the text is matched: LIKE wildcards are plain characters.
    expect((await punctual.listSchedules({ q: "%" })).items).toEqual([]);
  });

  it("API-3: a cursor of another order or filter set, an altered or a made-up one is a 400 naming cursor", async () => {
    t = await testPunctual();
    const { punctual } = t;
    await seedSchedules(punctual);
    const { nextCursor } = await punctual.listSchedules({ limit: 2 });
    expect(nextCursor).toEqual(expect.any(String));
    const cursor = nextCursor!;
    const refused = { issues: [expect.objectContaining({ field: "cursor" })] };
    await expect(punctual.listSchedules({ limit: 2, cursor, order: "desc" })).rejects.toMatchObject(
      refused,
    );
    await expect(punctual.listSchedules({ limit: 2, cursor, q: "x" })).rejects.toMatchObject(
      refused,
    );
    await expect(
      punctual.listSchedules({ limit: 2, cursor, state: "active" }),
    ).rejects.toMatchObject(refused);
    const decoded = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as {
      k: string[];
    };
    decoded.k[1] = "00000000-0000-4000-8000-000000000000";
    const altered = Buffer.from(JSON.stringify(decoded)).toString("base64url");
    await expect(punctual.listSchedules({ cursor: altered })).rejects.toMatchObject(refused);
    for (const bad of ["nope", "!!!", Buffer.from("2027-01-01|x").toString("base64url")]) {
      await expect(punctual.listSchedules({ cursor: bad })).rejects.toMatchObject(refused);
    }
    // The same cursor in its own listing still works (limit may change).
    expect((await punctual.listSchedules({ limit: 5, cursor })).items).toHaveLength(5);
  });

  it("API-3: limit takes 1..1000 as a number or digits only, else a 400 naming limit", async () => {
    t = await testPunctual();
    const { punctual } = t;
    await seedSchedules(punctual);
    expect((await punctual.listSchedules({ limit: "5" })).items).toHaveLength(5);
    expect((await punctual.listSchedules({ limit: 5 })).items).toHaveLength(5);
    expect((await punctual.listDeliveries({ limit: "1000" })).items.length).toBeGreaterThan(0);
    for (const bad of ["1e2", "0x10", " 5", "5 ", "5.0", "+5", "-1", "0", "1001", "", 2.5, 0]) {
      await expect(punctual.listSchedules({ limit: bad })).rejects.toMatchObject({
        issues: [expect.objectContaining({ field: "limit" })],
      });
      await expect(punctual.listDeliveries({ limit: bad })).rejects.toMatchObject({
        issues: [expect.objectContaining({ field: "limit" })],
      });
    }
  });
});

describe("deliveries pages", () => {
  it("API-3 DEL-1: keyset pages by id in both orders, filtered by state, channel, schedule and due time", async () => {
    t = await testPunctual();
    const { punctual } = t;
    await seedSchedules(punctual);
    await punctual.scheduler.tick();
    const { rows: all } = await punctual.db.query<{
      id: string;
      schedule_id: string;
      channel: string;
      due_at: Date;
    }>(`select id, schedule_id, channel, due_at from punctual_deliveries order by id`);
    expect(all.length).toBeGreaterThanOrEqual(24);
    const ids = all.map((r) => Number(r.id));
    // Dead letters: a few rows made dead, not in id order of anything else.
    const deadIds = [ids[1]!, ids[4]!, ids[5]!, ids[20]!];
    // (Since migration 0050 a held row's ledger row moves from waiting straight to its
    // outcome, as a settle writes it.)
    await punctual.db.query(
      `update punctual_deliveries set state = 'dead', reason = 'exhausted', attempt = 1,
              finished_at = '2027-01-04T08:00:00Z'
        where id = any($1::bigint[])`,
      [deadIds],
    );
    const list = (q: Record<string, unknown>) => punctual.listDeliveries(q);
    for (const limit of [1, 4, 7]) {
      expect(await walk(list, { limit })).toEqual(ids);
      expect(await walk(list, { limit, order: "desc" })).toEqual([...ids].reverse());
      expect(await walk(list, { limit, state: "dead" })).toEqual(deadIds);
      expect(await walk(list, { limit, state: "dead", order: "desc" })).toEqual(
        [...deadIds].reverse(),
      );
    }
    const ofTest = all.filter((r) => r.channel === "test").map((r) => Number(r.id));
    expect(ofTest.length).toBeGreaterThan(0);
    expect(await walk(list, { limit: 5, channel: "test", order: "desc" })).toEqual(
      [...ofTest].reverse(),
    );
    const one = all[0]!.schedule_id;
    expect(await walk(list, { limit: 1, scheduleId: one })).toEqual(
      all.filter((r) => r.schedule_id === one).map((r) => Number(r.id)),
    );
    // Due time: [dueFrom, dueTo); the second occurrence of each schedule is 08:31.
    const second = all
      .filter((r) => r.due_at.toISOString() === "2027-01-04T08:31:00.000Z")
      .map((r) => Number(r.id));
    expect(second).toHaveLength(12);
    expect(
      await walk(list, {
        limit: 5,
        dueFrom: "2027-01-04T08:31:00Z",
        dueTo: "2027-01-04T08:32:00Z",
      }),
    ).toEqual(second);
    expect(
      await walk(list, { limit: 5, dueFrom: "2027-01-04T09:31:00+01:00", order: "desc" }),
    ).toEqual([...second].reverse());
    expect(await walk(list, { limit: 5, dueTo: "2027-01-04T08:31:00Z" })).toEqual(
      ids.filter((id) => !second.includes(id)),
    );
  });

  it("API-3: a bad due bound, a cursor of other filters or an altered cursor is a 400 naming the field", async () => {
    t = await testPunctual();
    const { punctual } = t;
    await seedSchedules(punctual);
    await punctual.scheduler.tick();
    for (const [field, query] of [
      ["dueFrom", { dueFrom: "yesterday" }],
      ["dueTo", { dueTo: "2027-01-04" }],
      ["dueTo", { dueFrom: "2027-01-05T00:00:00Z", dueTo: "2027-01-04T00:00:00Z" }],
      ["order", { order: "sideways" }],
    ] as const) {
      await expect(punctual.listDeliveries(query)).rejects.toMatchObject({
        issues: [expect.objectContaining({ field })],
      });
    }
    const { nextCursor } = await punctual.listDeliveries({ limit: 2, channel: "test" });
    const cursor = nextCursor!;
    const refused = { issues: [expect.objectContaining({ field: "cursor" })] };
    await expect(punctual.listDeliveries({ cursor })).rejects.toMatchObject(refused);
    await expect(
      punctual.listDeliveries({ cursor, channel: "test", order: "desc" }),
    ).rejects.toMatchObject(refused);
    await expect(punctual.listSchedules({ cursor })).rejects.toMatchObject(refused);
    const decoded = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as {
      k: number[];
    };
    decoded.k[0] = 1;
    const altered = Buffer.from(JSON.stringify(decoded)).toString("base64url");
    await expect(
      punctual.listDeliveries({ cursor: altered, channel: "test" }),
    ).rejects.toMatchObject(refused);
    expect(
      (await punctual.listDeliveries({ cursor, channel: "test", limit: 1 })).items,
    ).toHaveLength(1);
  });
});

describe("list totals", () => {
  it("API-3: total=true counts what the filters match exactly while that is cheap, else estimates, labelled", async () => {
    t = await testPunctual();
    const { punctual } = t;
    await seedSchedules(punctual);
    await punctual.scheduler.tick();
    expect((await punctual.listSchedules({ limit: 2 })).total).toBeUndefined();
    expect((await punctual.listSchedules({ limit: 2, total: "true" })).total).toEqual({
      value: 12,
      exact: true,
    });
    expect((await punctual.listSchedules({ q: "standup", total: true })).total).toEqual({
      value: 4,
      exact: true,
    });
    const { rows } = await punctual.db.query<{ n: number }>(
      `select count(*)::int as n from punctual_deliveries where channel = 'test'`,
    );
    expect(
      (await punctual.listDeliveries({ limit: 1, channel: "test", total: "true" })).total,
    ).toEqual({ value: rows[0]!.n, exact: true });
    // A cursor does not depend on asking for the total.
    const { nextCursor } = await punctual.listSchedules({ limit: 2, total: "true" });
    expect((await punctual.listSchedules({ limit: 2, cursor: nextCursor })).items).toHaveLength(2);
    // Past 10,000 rows the count stops and the planner's estimate answers, marked inexact.
    await punctual.db.query(
      `insert into punctual_schedules (tenant, dtstart, recurring, title, plan_complete)
       select 'default', '2027-01-04T09:00:00', false, 'filler ' || g, true
       from generate_series(1, 10100) g`,
    );
    await punctual.db.query(`analyze punctual_schedules`);
    const big = (await punctual.listSchedules({ limit: 1, total: "true" })).total!;
    expect(big.exact).toBe(false);
    expect(big.value).toBeGreaterThan(10_000);
    // A selective filter still counts exactly.
    expect((await punctual.listSchedules({ q: "standup", total: "true" })).total).toEqual({
      value: 4,
      exact: true,
    });
  });
});
