/**
 * The per-recipient planner's lock (API-11, OPS-12) reads about one batch of the
 * membership index whatever the audience's size, with a plan that does not depend on
 * statistics: checked with EXPLAIN (FORMAT JSON) over 20,000 memberships of one schedule,
 * never analyzed and then analyzed, on the engine of this run; and the watermarks it
 * writes: now + plan-ahead for a series that goes on, the end for one planned whole.
 */
import { afterEach, describe, expect, it } from "vitest";
import { LOCK_MEMBERS_TO_PLAN_SQL, pinMemberPlan } from "../../src/store/deliveries/index.js";
import { explain, nodes, outline, tableScans, type PlanNode } from "../support/plans.js";
import { testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

const MEMBERS = 20_000;
const BATCH = 2_000;
const DAY = 86_400_000;

/** Asserts the lock walks the watermark index in order and reads no table whole. */
function expectIndexWalk(plan: PlanNode): void {
  const shape = outline(plan);
  expect(
    nodes(plan).some(
      (n) =>
        n["Node Type"] === "Index Scan" && n["Index Name"] === "punctual_schedule_recipients_plan",
    ),
    shape,
  ).toBe(true);
  expect(
    nodes(plan).filter((n) => n["Node Type"] === "Sort" || n["Node Type"] === "Incremental Sort"),
    shape,
  ).toEqual([]);
  for (const table of ["punctual_schedule_recipients", "punctual_recipients"]) {
    expect(tableScans(plan, table), shape).toEqual([]);
  }
}

describe("API-11, OPS-12: the planner's membership lock", () => {
  it(`OPS-12: the lock of ${BATCH} of ${MEMBERS} memberships walks the watermark index in order and stops there, before and after ANALYZE`, async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const { punctual } = t;
    const db = punctual.db;
    await db.query(
      `insert into punctual_recipients (tenant, id, tzid, targets)
       select 'default', 'u-' || g, 'Europe/Berlin', '{}'::jsonb
       from generate_series(1, $1::int) g`,
      [MEMBERS],
    );
    const { schedule } = await punctual.createSchedule({
      dtstart: "2027-01-05T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY",
      perpetual: true,
      recipients: [],
      reminders: [{ key: "r", channel: "test" }],
    });
    await db.query(
      `insert into punctual_schedule_recipients (schedule_id, tenant, recipient_id, planned_until)
       select $1, 'default', 'u-' || g, null from generate_series(1, $2::int) g`,
      [schedule.id, MEMBERS],
    );
    const params = [null, DAY / 2, BATCH, DAY];
    // As the planner runs it: in its transaction, after the pass's planner settings.
    const planOf = (options = "") =>
      db
        .transaction(async (tx) => {
          await pinMemberPlan(tx);
          const plan = await explain(tx, LOCK_MEMBERS_TO_PLAN_SQL, params, options);
          throw Object.assign(new Error("rolled back"), { plan });
        })
        .catch((err: { plan?: PlanNode }) => {
          if (!err.plan) throw err;
          return err.plan;
        });
    expectIndexWalk(await planOf());
    await db.query("analyze punctual_schedule_recipients");
    await db.query("analyze punctual_recipients");
    const analyzed = await planOf("analyze");
    expectIndexWalk(analyzed);
    const walk = nodes(analyzed).find(
      (n) => n["Index Name"] === "punctual_schedule_recipients_plan",
    )!;
    // The walk stops after the batch: about BATCH entries, not the 20,000.
    expect(walk["Actual Rows"]).toBe(BATCH);
  });

  it("API-11: the lock moves each watermark to now + plan-ahead; a series planned to its end is marked so", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z", scheduler: { planAheadMs: 2 * DAY } });
    const { punctual } = t;
    await punctual.putRecipient("ann", { tzid: "Asia/Tokyo", targets: { test: {} } });
    const open = await punctual.createSchedule({
      dtstart: "2027-01-05T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY",
      perpetual: true,
      recipients: ["ann"],
      reminders: [{ key: "r", channel: "test" }],
    });
    const finite = await punctual.createSchedule({
      dtstart: "2027-01-05T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=1",
      recipients: ["ann"],
      reminders: [{ key: "r", channel: "test" }],
    });
    await tickAndDrain(punctual);
    const { rows } = await punctual.db.query<{ schedule_id: string; planned_until: Date }>(
      `select schedule_id, planned_until from punctual_schedule_recipients`,
    );
    const until = new Map(rows.map((r) => [r.schedule_id, r.planned_until.toISOString()]));
    expect(until.get(open.schedule.id)).toBe("2027-01-06T08:00:00.000Z");
    expect(until.get(finite.schedule.id)).toBe("9999-12-31T00:00:00.000Z");
  });
});
