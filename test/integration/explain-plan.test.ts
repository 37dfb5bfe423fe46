/**
 * OPS-16: the explanation's reads follow the page, not the stored history. The attempts
 * and actions of a page of 1,000 deliveries are read by one index probe per delivery,
 * never by a scan of the attempts table, after ANALYZE and with the page holding every
 * attempt of the table (a plain `delivery_id = any($1)` was planned as a scan of every
 * attempt); the rows of one schedule among 20,000 others by its index. On the engine of
 * this run.
 */
import { beforeAll, describe, expect, it } from "vitest";
import {
  EXPLAIN_HISTORY_SQL,
  EXPLAIN_PAGE_SQL,
  explainDeliveryRow,
  explainHistory,
  explainPage,
  recordDeliveryActions,
} from "../../src/store/explain.js";
import { engineName, useTestDatabase } from "../support/db.js";
import { explain, nodes, outline, tableScans } from "../support/plans.js";
import { instants, insertSchedule, NOW, plan } from "../support/rows.js";

const engine = engineName();
const PAGE = 1_000;

describe(`explain's reads on ${engine} (OPS-16)`, () => {
  const t = useTestDatabase();
  let scheduleId = "";
  let ids: number[] = [];

  beforeAll(async () => {
    const { db } = t();
    scheduleId = await insertSchedule(db, { recurring: true });
    await plan(db, scheduleId, instants(PAGE, NOW.getTime() - PAGE * 60_000, 60_000));
    const other = await insertSchedule(db, { recurring: true });
    await plan(db, other, instants(20_000, NOW.getTime() - 20_000 * 60_000, 60_000));
    // Two attempts for every delivery of the page.
    await db.query(
      `insert into punctual_attempts (delivery_id, attempt, worker, started_at, ended_at, outcome)
       select d.id, k, 'w', d.due_at, d.due_at + interval '1 s', 'transient'
       from punctual_deliveries d, generate_series(1, 2) k
       where d.schedule_id = $1`,
      [scheduleId],
    );
    for (const table of ["punctual_deliveries", "punctual_attempts", "punctual_delivery_actions"]) {
      await db.query(`analyze ${table}`);
    }
    ids = (
      await db.query<{ id: number }>(
        "select id from punctual_deliveries where schedule_id = $1 order by id",
        [scheduleId],
      )
    ).rows.map((r) => Number(r.id));
  });

  it("OPS-16: a page's attempts and actions are one index probe per delivery, in the page's order", async () => {
    const { db } = t();
    const tree = await explain(db, EXPLAIN_HISTORY_SQL, [ids], "analyze");
    expect(tableScans(tree, "punctual_attempts"), outline(tree)).toEqual([]);
    const probes = nodes(tree).filter((n) => n["Index Name"] === "punctual_attempts_delivery");
    expect(probes.length, outline(tree)).toBeGreaterThan(0);
    // Only the page's attempts are read: two per delivery.
    expect(probes.reduce((sum, n) => sum + n["Actual Rows"]! * n["Actual Loops"]!, 0)).toBe(
      2 * PAGE,
    );
    const history = await explainHistory(db, { deliveryIds: [ids[1]!, ids[0]!] });
    expect(history.map((h) => `${h.delivery_id} ${h.attempt}`)).toEqual([
      `${ids[1]} 1`,
      `${ids[1]} 2`,
      `${ids[0]} 1`,
      `${ids[0]} 2`,
    ]);
  });

  it("OPS-16: a schedule's page is read by its index, not by a scan of every delivery, and its history by one index probe per row", async () => {
    const { db } = t();
    const params = [
      "default",
      scheduleId,
      new Date(NOW.getTime() - 2 * PAGE * 60_000),
      NOW,
      null,
      null,
      null,
      10_001,
    ];
    const tree = await explain(db, EXPLAIN_PAGE_SQL, params, "analyze");
    expect(tableScans(tree, "punctual_deliveries"), outline(tree)).toEqual([]);
    expect(tableScans(tree, "punctual_attempts"), outline(tree)).toEqual([]);
    const probes = nodes(tree).filter((n) => n["Index Name"] === "punctual_attempts_delivery");
    expect(probes.length, outline(tree)).toBeGreaterThan(0);
    // Only the page's attempts are read: two per delivery.
    expect(probes.reduce((sum, n) => sum + n["Actual Rows"]! * n["Actual Loops"]!, 0)).toBe(
      2 * PAGE,
    );
    const page = await explainPage(db, {
      tenant: "default",
      scheduleId,
      dueFrom: params[2] as Date,
      dueTo: NOW,
      after: null,
      limit: 2,
    });
    expect(page.rows.map((r) => r.id)).toEqual([ids[0], ids[1]]);
    expect(page.history.map((h) => h.map((a) => `${a.delivery_id} ${a.attempt}`))).toEqual([
      [`${ids[0]} 1`, `${ids[0]} 2`],
      [`${ids[1]} 1`, `${ids[1]} 2`],
    ]);
  });

  it("OPS-16: a page's rows read as a single delivery's read does, the fields only some rows have included", async () => {
    const { db } = t();
    // A claimed row, a deferred one, a limited one and a digest member among plain ones.
    // Held: since migration 0050 the lease is on the queue row.
    await db.query(
      `update punctual_queue q set attempt = 1, lease_owner = 'w',
         lease_expires_at = d.due_at + interval '1 min', claimed_at = d.due_at
       from punctual_deliveries d
       where q.id = $1 and d.id = q.id`,
      [ids[3]],
    );
    await db.query(
      `update punctual_deliveries
       set deferred_until = due_at + interval '1 hour', deferred_reason = 'QUIET_HOURS'
       where id = $1`,
      [ids[4]],
    );
    await db.query("update punctual_deliveries set limiter = 'default/k' where id = $1", [ids[5]]);
    await db.query(
      `insert into punctual_triggers (delivery_id, schedule_id, trigger_id) values ($1, $2, 't')`,
      [ids[7], scheduleId],
    );
    await db.query(
      `update punctual_deliveries set digest_tenant = 'default', digest_key = 'dk',
         digest_window_ms = 60000, digest_max_items = 50
       where id = $1`,
      [ids[6]],
    );
    const page = await explainPage(db, {
      tenant: "default",
      scheduleId,
      dueFrom: new Date(NOW.getTime() - 2 * PAGE * 60_000),
      dueTo: NOW,
      after: null,
      limit: 8,
    });
    const one = await Promise.all(
      ids.slice(0, 8).map((id) => explainDeliveryRow(db, { tenant: "default", id })),
    );
    expect(page.rows).toEqual(one);
    expect(page.rows[3]!.lease_owner).toBe("w");
    expect(page.rows[4]!.deferred_reason).toBe("QUIET_HOURS");
    expect(page.rows[5]!.limiter).toBe("default/k");
    expect(page.rows[6]!.digest_key).toBe("dk");
    expect(page.rows.map((r) => r.triggered)).toEqual([...Array(7).fill(false), true]);
  });

  it("OPS-16: a page's history is each row's attempts in the order recorded, then its actions oldest first", async () => {
    const { db } = t();
    // Recorded out of attempt-number order, an action between them.
    const id = ids[9]!;
    await db.query("delete from punctual_attempts where delivery_id = $1", [id]);
    await db.query(
      `insert into punctual_attempts (delivery_id, attempt, worker, started_at, ended_at, outcome)
       values ($1, 3, 'w3', $2, $2, 'transient')`,
      [id, NOW],
    );
    await recordDeliveryActions(db, {
      now: NOW,
      deliveryIds: [id],
      action: "redrive",
      outcome: null,
      actor: "operator",
    });
    await db.query(
      `insert into punctual_attempts (delivery_id, attempt, worker, started_at, ended_at, outcome)
       values ($1, 1, 'w1', $2, $2, 'lease_expired')`,
      [id, NOW],
    );
    const page = await explainPage(db, {
      tenant: "default",
      scheduleId,
      dueFrom: new Date(NOW.getTime() - 2 * PAGE * 60_000),
      dueTo: NOW,
      after: null,
      limit: 11,
    });
    const single = await explainHistory(db, { deliveryIds: [id] });
    expect(page.history[9]!.map((h) => `${h.kind} ${h.by}`)).toEqual([
      "attempt w3",
      "attempt w1",
      "action operator",
    ]);
    expect(page.history[9]).toEqual(single);
    expect(page.history[10]!.map((h) => h.attempt)).toEqual([1, 2]);
  });
});
