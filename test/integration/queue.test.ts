/**
 * The delivery queue (migration 0050; docs/architecture.md, "The delivery queue"): the
 * claim and the lease renewals write only the queue, the settle writes the ledger row once;
 * a waiting row has exactly one queue row and a final row none; the settle's fence keeps
 * its four clauses; data of the previous schema moves in, a held row with its lease (DEL-6).
 * Both engines.
 */
import pg from "pg";
import { beforeEach, describe, expect, it } from "vitest";
import type { Queryable } from "../../src/store/database.js";
import {
  claimDeliveries,
  recoverExpired,
  releaseClaims,
  renewLeases,
  settleDeliveries,
  type SettleInput,
} from "../../src/store/deliveries/index.js";
import { loadMigrations, migrate } from "../../src/store/migrator.js";
import { SET_SCHEDULE_STATE_SQL } from "../../src/store/schedules.js";
import { engineName, openTestDatabase, useTestDatabase } from "../support/db.js";
import { HOUR, instants, insertSchedule, NOW, plan } from "../support/rows.js";
import { forgingStates } from "../support/transitions.js";

const engine = engineName();
const LEASE = 60_000;
const at = (ms: number) => new Date(NOW.getTime() + ms);

function claim(db: Queryable, owner: string, nowMs = 0, limit = 100) {
  return claimDeliveries(db, {
    now: at(nowMs),
    owner,
    leaseMs: LEASE,
    limit,
    channels: ["log"],
  });
}

function outcome(id: number, attempt: number, state: SettleInput["state"] = "sent"): SettleInput {
  return {
    id,
    attempt,
    state,
    runAt: state === "retry" ? at(10_000) : null,
    reason: state === "dead" ? "PERMANENT" : null,
    error: state === "sent" ? null : "boom",
    failure: state === "sent" ? 0 : 1,
    deferral: 0,
    startedAt: at(0),
    outcome: state === "sent" ? "sent" : state === "dead" ? "permanent" : "transient",
    status: null,
    messageId: null,
  };
}

/**
 * Every way the ledger and the queue can disagree: a claimable ledger row (`pending` /
 * `retry`, not a digest member) without its queue row, a queue row whose ledger row is not
 * claimable (final, held, grouped or gone), and a waiting queue row whose admission columns
 * differ from the ledger's.
 */
async function queueViolations(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ problem: string }>(
    `select 'no queue row for ' || d.id || ' (' || d.state || ')' as problem
       from punctual_deliveries d
      where d.claimable_at is not null
        and not exists (select 1 from punctual_queue q where q.id = d.id)
     union all
     select 'queue row ' || q.id || ' for a ' || coalesce(d.state, 'missing') || ' ledger row'
       from punctual_queue q left join punctual_deliveries d on d.id = q.id
      where d.claimable_at is null
     union all
     select 'queue row ' || q.id || ' differs from its ledger row'
       from punctual_queue q join punctual_deliveries d on d.id = q.id
      where q.lease_owner is null
        and (q.run_at, q.attempt, q.channel, q.limiter, q.expires_at, q.stale_at)
            is distinct from
            (d.claimable_at, d.attempt, d.channel, d.limiter, d.expires_at, d.stale_at)
     union all
     select 'held queue row ' || q.id || ' is not one claim ahead of its ledger row'
       from punctual_queue q join punctual_deliveries d on d.id = q.id
      where q.lease_owner is not null and q.attempt <> d.attempt + 1
     order by 1`,
  );
  return rows.map((r) => r.problem);
}

async function xminOf(db: Queryable, table: string, id: number): Promise<string> {
  const { rows } = await db.query<{ x: string }>(
    `select xmin::text as x from ${table} where id = $1`,
    [id],
  );
  return rows[0]!.x;
}

async function stateOf(db: Queryable, id: number) {
  const { rows } = await db.query<{ state: string; attempt: number; lease_owner: string | null }>(
    "select state, attempt, lease_owner from punctual_delivery_rows where id = $1",
    [id],
  );
  return rows[0];
}

const setState = (db: Queryable, id: string, from: string, to: string) =>
  db.query(SET_SCHEDULE_STATE_SQL, [NOW, "default", id, from, to]);

describe(`delivery queue on ${engine}`, () => {
  const t = useTestDatabase();

  beforeEach(async () => {
    await t().db.query("truncate punctual_queue, punctual_attempts, punctual_deliveries cascade");
  });

  it("DEL-2 settle fence `d.state in ('pending', 'retry')` (state): a held row whose ledger row was finished behind the lease is never settled over", async () => {
    const { db } = t();
    const id = await insertSchedule(db);
    await plan(db, id, [at(-1_000)]);
    const [c] = await claim(db, "A");
    // Forged: the ledger row finished while the queue row still holds the lease.
    // (Triggers off: the queue's guard leaves a held row to its holder, DEL-10.)
    await forgingStates(db, async (tx) => {
      await tx.query("set local session_replication_role = replica");
      await tx.query(
        `update punctual_deliveries set state = 'cancelled', reason = 'schedule_cancelled',
           finished_at = $2 where id = $1`,
        [c!.id, at(1)],
      );
    });
    expect((await settleDeliveries(db, at(2), "A", [outcome(c!.id, c!.attempt)])).size).toBe(0);
    const { rows } = await db.query<{ state: string; sent_at: Date | null }>(
      "select state, sent_at from punctual_deliveries where id = $1",
      [c!.id],
    );
    expect(rows).toEqual([{ state: "cancelled", sent_at: null }]);
  });

  it("DEL-16: the claim and the lease renewals write only the queue (the ledger row's xmin is unchanged), the renewal as a HOT update", async () => {
    const { db } = t();
    const id = await insertSchedule(db);
    await plan(db, id, [at(-1_000)]);
    const { rows } = await db.query<{ id: number }>(
      "select id from punctual_deliveries where schedule_id = $1",
      [id],
    );
    const row = rows[0]!.id;
    const before = await xminOf(db, "punctual_deliveries", row);
    const [c] = await claim(db, "A");
    expect(c).toMatchObject({ id: row, attempt: 1 });
    expect(await xminOf(db, "punctual_deliveries", row)).toBe(before);
    const hot = await db.transaction(async (tx) => {
      const stat = async () =>
        Number(
          (
            await tx.query<{ n: string }>(
              "select n_tup_hot_upd::text as n from pg_stat_xact_user_tables where relname = 'punctual_queue'",
            )
          ).rows[0]?.n ?? 0,
        );
      const start = await stat();
      const renewed = await renewLeases(tx, at(1_000), "A", LEASE, [{ id: row, attempt: 1 }]);
      expect(renewed).toHaveLength(1);
      return (await stat()) - start;
    });
    expect(hot).toBe(1);
    expect(await xminOf(db, "punctual_deliveries", row)).toBe(before);
    expect(await stateOf(db, row)).toMatchObject({
      state: "claimed",
      attempt: 1,
      lease_owner: "A",
    });
    // The settle writes the ledger row once, with the outcome and the sending attempt.
    expect([...(await settleDeliveries(db, at(2_000), "A", [outcome(row, 1)]))]).toEqual([row]);
    expect(await stateOf(db, row)).toMatchObject({ state: "sent", attempt: 1, lease_owner: null });
    expect(await queueViolations(db)).toEqual([]);
  });

  it("DEL-3 / DEL-10: a waiting row has exactly one queue row and a final or held row none, after planning, claims, settles, retries, pause, resume, release, recovery, cancel", async () => {
    const { db } = t();
    const a = await insertSchedule(db);
    const b = await insertSchedule(db, { recurring: true });
    await plan(db, a, instants(6, at(-60_000).getTime(), 1_000));
    await plan(db, b, instants(3, at(-30_000).getTime(), 1_000));
    await plan(db, b, [at(HOUR)]);
    expect(await queueViolations(db)).toEqual([]);
    const claimed = await claim(db, "A", 0, 6);
    expect(claimed).toHaveLength(6);
    expect(await queueViolations(db)).toEqual([]);
    // Outcomes: sent, retry, dead; one released unsent; two left to a lease.
    const [s, r, d, rel, lost1, lost2] = claimed;
    await settleDeliveries(db, at(1_000), "A", [
      outcome(s!.id, s!.attempt),
      outcome(r!.id, r!.attempt, "retry"),
      outcome(d!.id, d!.attempt, "dead"),
    ]);
    expect(await queueViolations(db)).toEqual([]);
    // Pause b while two of its rows may be held: held rows are left to their holder.
    await setState(db, b, "active", "paused");
    expect(await queueViolations(db)).toEqual([]);
    expect(
      await releaseClaims(db, at(2_000), "A", [{ id: rel!.id, attempt: rel!.attempt }]),
    ).toEqual([rel!.id]);
    expect(await queueViolations(db)).toEqual([]);
    await setState(db, b, "paused", "active");
    expect(await queueViolations(db)).toEqual([]);
    const recovered = await recoverExpired(db, at(LEASE + 1), 10, 0);
    expect(recovered.map((x) => x.id).sort()).toEqual([lost1!.id, lost2!.id].sort());
    expect(await queueViolations(db)).toEqual([]);
    await db.query(
      `update punctual_schedules set state = 'cancelled', cancelled_at = $2, cancelled_by = 'user'
       where id = $1`,
      [a, NOW],
    );
    await setState(db, b, "active", "paused");
    expect(await queueViolations(db)).toEqual([]);
    const { rows } = await db.query<{ state: string; n: number }>(
      `select d.state, count(*)::int as n from punctual_deliveries d
        where d.schedule_id = any($1::uuid[]) group by d.state order by d.state`,
      [[a, b]],
    );
    expect(rows.find((x) => x.state === "claimed")).toBeUndefined();
    expect(await queueViolations(db)).toEqual([]);
  });
});

describe(`writes beside a held row on ${engine}`, () => {
  const t = useTestDatabase();

  beforeEach(async () => {
    await t().db.query("truncate punctual_queue, punctual_attempts, punctual_deliveries cascade");
  });

  // Guards the lock in `punctual_deliveries_queue_guard` (migration 0050): without it the
  // pause does not see the claim it races, writes `paused` on the row the claim then holds,
  // and the worker sends a delivery of a paused schedule, then releases and claims it again.
  it.runIf(engine === "postgres")(
    "DEL-10 / DEL-2 (PostgreSQL only: two sessions): a pause racing a claim still in progress waits for it and leaves the row it holds to its holder",
    async () => {
      const { db } = t();
      const id = await insertSchedule(db, { recurring: true });
      await plan(db, id, [at(-1_000)]);
      const { rows } = await db.query<{ id: number }>(
        "select id from punctual_deliveries where schedule_id = $1",
        [id],
      );
      const row = rows[0]!.id;
      const claimer = new pg.Client({ connectionString: t().url! });
      await claimer.connect();
      try {
        // A claim in progress: the queue row leased, not yet committed.
        await claimer.query("begin");
        await claimer.query(
          `update punctual_queue set attempt = attempt + 1, lease_owner = 'A',
             lease_expires_at = $2, claimed_at = $3 where id = $1`,
          [row, at(LEASE), at(0)],
        );
        let done = false;
        const pausing = setState(db, id, "active", "paused").finally(() => {
          done = true;
        });
        // The pause either waits for the claimer's row lock (as it should) or has ended.
        await expect
          .poll(async () => {
            if (done) return true;
            const { rows: waits } = await claimer.query<{ n: number }>(
              `select count(*)::int as n from pg_locks l join punctual_queue q on true
                where not l.granted and l.pid <> pg_backend_pid() and q.id = $1`,
              [row],
            );
            return waits[0]!.n > 0;
          })
          .toBe(true);
        await claimer.query("commit");
        await pausing;
      } finally {
        await claimer.end();
      }
      expect(await stateOf(db, row)).toMatchObject({
        state: "claimed",
        attempt: 1,
        lease_owner: "A",
      });
      expect(await queueViolations(db)).toEqual([]);
      // Its retry lands where the schedule is now: paused, with no queue row.
      await settleDeliveries(db, at(1_000), "A", [outcome(row, 1, "retry")]);
      expect(await stateOf(db, row)).toMatchObject({ state: "paused", lease_owner: null });
      expect(await queueViolations(db)).toEqual([]);
    },
  );

  it("API-5 / DEL-2: a schedule's purge deletes its held rows and their queue rows; the holder's settle then changes nothing", async () => {
    const { db } = t();
    const id = await insertSchedule(db);
    await plan(db, id, instants(3, at(-3_000).getTime(), 1_000));
    const held = await claim(db, "A", 0, 2);
    expect(held).toHaveLength(2);
    await db.query("delete from punctual_schedules where id = $1", [id]);
    const { rows } = await db.query<{ ledger: number; queue: number }>(
      `select (select count(*)::int from punctual_deliveries) as ledger,
              (select count(*)::int from punctual_queue) as queue`,
    );
    expect(rows).toEqual([{ ledger: 0, queue: 0 }]);
    const settled = await settleDeliveries(
      db,
      at(1_000),
      "A",
      held.map((c) => outcome(c.id, c.attempt)),
    );
    expect(settled.size).toBe(0);
    const { rows: attempts } = await db.query<{ n: number }>(
      "select count(*)::int as n from punctual_attempts",
    );
    expect(attempts[0]!.n).toBe(0);
  });

  it("DEL-2 / DEL-6: a held queue row whose ledger row no longer waits (written by a release that knows no queue) is deleted by its settle and by recovery, and recovery judges the rows beside it", async () => {
    const { db } = t();
    const id = await insertSchedule(db);
    await plan(db, id, instants(3, at(-3_000).getTime(), 1_000));
    const [a, b, c] = await claim(db, "A", 0, 3);
    // Forged: two ledger rows finished behind their lease (an older release's settle).
    await forgingStates(db, async (tx) => {
      await tx.query("set local session_replication_role = replica");
      await tx.query(
        `update punctual_deliveries set state = 'sent', attempt = 1, sent_at = $2
          where id = any($1::bigint[])`,
        [[a!.id, b!.id], at(1)],
      );
    });
    // The settle of one: fenced by its queue row, not settled, its queue row gone.
    expect((await settleDeliveries(db, at(2), "A", [outcome(a!.id, a!.attempt)])).size).toBe(0);
    const { rows: left } = await db.query<{ id: number }>(
      "select id from punctual_queue order by id",
    );
    expect(left.map((r) => r.id)).toEqual([b!.id, c!.id].sort((x, y) => x - y));
    // Recovery past the lease: the other orphan goes, the waiting row beside it is judged.
    const recovered = await recoverExpired(db, at(LEASE + 1), 10, 0);
    expect(recovered.map((r) => r.id)).toEqual([c!.id]);
    expect(await queueViolations(db)).toEqual([]);
    expect((await claim(db, "B", LEASE + 2, 10)).map((r) => r.id)).toEqual([c!.id]);
  });
});

describe(`migration 0050 on ${engine}`, () => {
  it("OPS-5 / DEL-6: 0.2.0-shaped data moves into the queue: waiting rows once, a claimed row with its lease and fencing token (its holder may settle it; recovery judges it when the lease ends), finished rows not at all", async () => {
    const handle = await openTestDatabase({ migrated: false });
    try {
      const { db } = handle;
      await migrate(
        db,
        loadMigrations().filter((m) => m.version <= 49),
      );
      const id = await insertSchedule(db);
      await plan(db, id, instants(4, at(-60_000).getTime(), 1_000));
      await plan(db, id, [at(HOUR)]);
      const { rows: ids } = await db.query<{ id: number }>(
        "select id from punctual_deliveries where schedule_id = $1 order by due_at",
        [id],
      );
      const [held, heldToo, sent, waiting, future] = ids.map((r) => r.id);
      // As a 0.2.0 worker left them: two claimed (one attempt each), one sent.
      await db.query(
        `update punctual_deliveries
            set state = 'claimed', attempt = 1, lease_owner = 'old#1#x',
                lease_expires_at = $2, claimed_at = $3, stale_at = null
          where id = any($1::bigint[])`,
        [[held, heldToo], at(30_000), at(0)],
      );
      await db.query(
        `update punctual_deliveries set state = 'sent', attempt = 1, sent_at = $2 where id = $1`,
        [sent, at(0)],
      );
      await migrate(db);
      const { rows: queue } = await db.query<{
        id: number;
        attempt: number;
        lease_owner: string | null;
        lease_expires_at: Date | null;
      }>("select id, attempt, lease_owner, lease_expires_at from punctual_queue order by id");
      expect(queue).toEqual(
        [
          { id: held, attempt: 1, lease_owner: "old#1#x", lease_expires_at: at(30_000) },
          { id: heldToo, attempt: 1, lease_owner: "old#1#x", lease_expires_at: at(30_000) },
          { id: waiting, attempt: 0, lease_owner: null, lease_expires_at: null },
          { id: future, attempt: 0, lease_owner: null, lease_expires_at: null },
        ].sort((x, y) => x.id! - y.id!),
      );
      expect(await stateOf(db, held!)).toMatchObject({ state: "claimed", attempt: 1 });
      const { rows: ledger } = await db.query<{ state: string; attempt: number }>(
        "select state, attempt from punctual_deliveries where id = $1",
        [held],
      );
      expect(ledger).toEqual([{ state: "pending", attempt: 0 }]);
      expect(await queueViolations(db)).toEqual([]);
      // The claim does not take them while their lease runs.
      expect((await claim(db, "new#1#y", 1_000)).map((c) => c.id)).toEqual([waiting]);
      // Its holder's settle still lands (same owner, same fencing token) …
      expect([...(await settleDeliveries(db, at(2_000), "old#1#x", [outcome(held!, 1)]))]).toEqual([
        held,
      ]);
      // … and recovery judges the other when its lease ends (DEL-6).
      const recovered = await recoverExpired(db, at(30_000), 10, 0);
      expect(recovered).toMatchObject([{ id: heldToo, state: "retry" }]);
      expect(await stateOf(db, held!)).toMatchObject({ state: "sent", attempt: 1 });
      expect(await stateOf(db, heldToo!)).toMatchObject({ state: "retry", attempt: 1 });
      expect(await queueViolations(db)).toEqual([
        // `waiting` is held by the new worker's claim: one claim ahead, as it should be.
      ]);
    } finally {
      await handle.close();
    }
  });
});
