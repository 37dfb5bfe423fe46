/**
 * The claim, the wake-up query and every sweep read an index, with a plan that does not
 * depend on statistics: checked with EXPLAIN (FORMAT JSON) on a table filled faster than
 * ANALYZE runs (20k due rows, 50k finished rows, never analyzed), then again after
 * ANALYZE; and on a table of nothing but due rows (a first burst, no history yet), where
 * the planner's estimates make a full scan and a sort of every due row the cheaper plan
 * unless the claim path runs pinned (Database.pinned). On both engines (PGlite has no
 * autovacuum; on PostgreSQL it is turned off for these tables so "before ANALYZE" holds).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { pinnedOf, type Queryable } from "../../src/store/database.js";
import { openPostgres } from "../../src/store/postgres.js";
import {
  APPLY_MISFIRE_SQL,
  claimDeliveries,
  CLAIM_SQL,
  DELIVERY_COUNTS_SQL,
  NEXT_WAKE_SQL,
  RECOVER_SQL,
  RETENTION_SQL,
  SETTLE_AND_CLAIM_SQL,
  SETTLE_SQL,
  settleParams,
} from "../../src/store/deliveries/index.js";
import { ALL_RATE_LIMITS_SQL } from "../../src/store/rate-limits.js";
import { SELECT_STALE_SQL } from "../../src/store/planning.js";
import { engineName, useTestDatabase } from "../support/db.js";
import { HOUR, instants, insertSchedule, NOW, plan, sentOutcome } from "../support/rows.js";
import {
  cte,
  explain,
  JOIN_NODES,
  nodes,
  outline,
  tableScans,
  type PlanNode,
} from "../support/plans.js";
import { forgingStates } from "../support/transitions.js";

const engine = engineName();
const DUE = 20_000;
const FINISHED = 50_000;

/** Asserts the claim's admission (the `due` CTE) reads only the queue's index, in order. */
function expectIndexOrderedClaim(plan: PlanNode): void {
  const due = cte(plan, "due");
  const shape = outline(due);
  const inDue = nodes(due);
  expect(
    inDue.some((n) => n["Node Type"] === "Index Scan" && n["Index Name"] === "punctual_queue_run"),
    shape,
  ).toBe(true);
  expect(
    inDue.filter((n) => n["Node Type"] === "Sort" || n["Node Type"] === "Incremental Sort"),
    shape,
  ).toEqual([]);
  expect(
    inDue.filter((n) => JOIN_NODES.includes(n["Node Type"])),
    shape,
  ).toEqual([]);
  expect(
    inDue.filter((n) => n["Node Type"].startsWith("Bitmap")),
    shape,
  ).toEqual([]);
  expect([...new Set(inDue.map((n) => n["Relation Name"]).filter(Boolean))], shape).toEqual([
    "punctual_queue",
  ]);
}

/**
 * Rows of punctual_deliveries an EXPLAIN ANALYZE plan read: what its scans of the table
 * returned or filtered out, over every loop.
 */
function deliveryRowsRead(plan: PlanNode): number {
  return nodes(plan)
    .filter((n) => n["Relation Name"] === "punctual_deliveries")
    .reduce(
      (sum, n) =>
        sum +
        ((n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0)) * (n["Actual Loops"] ?? 1),
      0,
    );
}

const claimParams = (limit: number) => [NOW, "w#1#x", 60_000, limit, ["log"], []];

describe(`claim and sweep plans on ${engine}, before and after ANALYZE`, () => {
  const t = useTestDatabase();

  beforeAll(async () => {
    const { db } = t();
    for (const table of ["punctual_deliveries", "punctual_schedules", "punctual_reminders"]) {
      await db.query(`alter table ${table} set (autovacuum_enabled = false)`);
    }
    // The morning burst: 20k one-offs due in the last ten minutes.
    const burst = await insertSchedule(db);
    await plan(db, burst, instants(DUE, NOW.getTime() - 600_000, 20));
    // A series with rows past their grace (stale) and rows to come.
    const series = await insertSchedule(db, { recurring: true });
    await plan(db, series, instants(6, NOW.getTime() - 2 * HOUR, 600_000));
    await plan(db, series, instants(6, NOW.getTime() + 600_000, 600_000));
    // A schedule that expired with rows still waiting.
    const expired = await insertSchedule(db, { expiresAt: new Date(NOW.getTime() - HOUR) });
    await plan(db, expired, instants(3, NOW.getTime() - 2 * HOUR, 60_000));
    // The history: many finished rows.
    const old = await insertSchedule(db);
    // Forged: finished rows inserted as they end up (test/support/transitions.ts).
    await forgingStates(db, (tx) =>
      tx.query(
        `insert into punctual_deliveries
         (delivery_key, schedule_id, reminder_key, occurrence_at, due_at, run_at, state, attempt,
          channel, on_lost_lease, sent_at, created_at, updated_at)
       select 'dk_old_' || g, $1, 'r', x.t, x.t, x.t, 'sent', 1, 'log', 'retry', x.t, x.t, x.t
       from generate_series(1, $2::int) g,
            lateral (select $3::timestamptz - g * interval '1 minute' as t) x`,
        [old, FINISHED, NOW],
      ),
    );
  });

  for (const phase of ["before ANALYZE", "after ANALYZE"] as const) {
    describe(phase, () => {
      beforeAll(async () => {
        if (phase === "after ANALYZE") await t().db.query("analyze");
      });

      for (const limit of [8, 100]) {
        it(`DEL-2/DEL-3: a claim of ${limit} over ${DUE} due rows walks the claim index in order: no Sort, no join in the admission`, async () => {
          expectIndexOrderedClaim(await explain(pinnedOf(t().db), CLAIM_SQL, claimParams(limit)));
        });
      }

      it("DEL-3: the wake-up query walks the claim index in order and stops at the first row", async () => {
        const plan = await explain(pinnedOf(t().db), NEXT_WAKE_SQL, [NOW, ["log"]]);
        const shape = outline(plan);
        expect(
          nodes(plan).some(
            (n) => n["Node Type"] === "Index Scan" && n["Index Name"] === "punctual_queue_run",
          ),
          shape,
        ).toBe(true);
        expect(
          nodes(plan).filter((n) => n["Node Type"] === "Sort"),
          shape,
        ).toEqual([]);
        expect(tableScans(plan, "punctual_deliveries"), shape).toEqual([]);
      });

      // OPS-12: every scheduler tick runs these on the loop thread of the embedded engine;
      // what they cost must not grow with the settled history beside the waiting rows.
      it(`OPS-12: the tick's rate-limit read reads no delivery row, the wake-up query only the waiting rows up to the next one, none of ${FINISHED} settled ones`, async () => {
        const wake = await explain(pinnedOf(t().db), NEXT_WAKE_SQL, [NOW, ["log"]], "analyze");
        // The 9 stale or expired rows ahead of the first admissible one, and that one.
        expect(deliveryRowsRead(wake), outline(wake)).toBeLessThanOrEqual(10);
        const limits = await explain(t().db, ALL_RATE_LIMITS_SQL, [NOW], "analyze");
        expect(
          nodes(limits).filter((n) => n["Relation Name"] === "punctual_deliveries"),
          outline(limits),
        ).toEqual([]);
      });

      const sweeps: Array<[string, string, unknown[]]> = [
        ["REC-6 misfire (stale and expired rows)", SELECT_STALE_SQL, [NOW, 5_000]],
        [
          "REC-6 apply misfire decisions",
          APPLY_MISFIRE_SQL,
          [NOW, [1, 2], ["stale", "stale"], [3], [null]],
        ],
        ["DEL-6 recover expired leases", RECOVER_SQL, [NOW, 100, 0]],
        ["retention", RETENTION_SQL, [NOW, 7 * 86_400_000, 1_000]],
        ["OPS-3 delivery counts", DELIVERY_COUNTS_SQL, [NOW, 15 * 60_000, null]],
        ["API-6 delivery counts of a tenant", DELIVERY_COUNTS_SQL, [NOW, 15 * 60_000, "default"]],
      ];
      for (const [name, sql, params] of sweeps) {
        it(`${name}: reads indexes, never the table of ${FINISHED} finished rows`, async () => {
          const plan = await explain(t().db, sql, params);
          expect(tableScans(plan, "punctual_deliveries"), outline(plan)).toEqual([]);
        });
      }
    });
  }
});

/** Parameters of {@link SETTLE_AND_CLAIM_SQL} with nothing to settle and a claim of `limit`. */
const settleAndClaimParams = (limit: number) => [
  NOW,
  "w#1#x",
  ...Array.from({ length: 12 }, () => []),
  60_000,
  limit,
  ["log"],
  [],
];

describe(`claim plans on ${engine} over a table of nothing but due rows (a first burst)`, () => {
  const t = useTestDatabase();

  beforeAll(async () => {
    const { db } = t();
    for (const table of ["punctual_deliveries", "punctual_schedules", "punctual_reminders"]) {
      await db.query(`alter table ${table} set (autovacuum_enabled = false)`);
    }
    await plan(db, await insertSchedule(db), instants(DUE, NOW.getTime() - 60_000, 1));
  });

  it("DEL-3: the pinned path runs with sequential and bitmap scans off, every other statement with them on", async () => {
    const setting = async (q: Queryable, name: string) =>
      (await q.query<Record<string, string>>(`show ${name}`)).rows[0]![name];
    for (const name of ["enable_seqscan", "enable_bitmapscan"]) {
      // More reads than the pinned pool has connections: each new one carries the settings.
      for (let i = 0; i < 6; i++) expect(await setting(pinnedOf(t().db), name)).toBe("off");
      expect(await setting(t().db, name)).toBe("on");
    }
  });

  it.runIf(engine === "postgres")(
    "DEL-3 (PostgreSQL only: PGlite has no connections): pinned connections keep the settings the URL gives every connection (here statement_timeout, as a durability setting would be)",
    async () => {
      const url = new URL(t().url!);
      url.searchParams.set("options", "-c statement_timeout=12345");
      const db = openPostgres({ url: url.toString() });
      try {
        for (const q of [db, pinnedOf(db)]) {
          const { rows } = await q.query<{ statement_timeout: string }>("show statement_timeout");
          expect(rows[0]!.statement_timeout).toBe("12345ms");
        }
        const { rows } = await pinnedOf(db).query<{ enable_seqscan: string }>(
          "show enable_seqscan",
        );
        expect(rows[0]!.enable_seqscan).toBe("off");
      } finally {
        await db.close();
      }
    },
  );

  for (const phase of ["before ANALYZE", "after ANALYZE"] as const) {
    describe(phase, () => {
      beforeAll(async () => {
        if (phase === "after ANALYZE") await t().db.query("analyze");
      });

      // Guards Database.pinned: run as written (t().db instead of pinnedOf(t().db)), the
      // planner expects a few hundred admissible rows of 20k and takes a sequential (or
      // bitmap) scan of the table and a sort of every due row before the limit.
      for (const limit of [8, 100, 500]) {
        it(`DEL-3: the claim of ${limit} through the pinned path walks the claim index in order`, async () => {
          expectIndexOrderedClaim(await explain(pinnedOf(t().db), CLAIM_SQL, claimParams(limit)));
        });
        it(`DEL-3: the settle-and-claim of ${limit} through the pinned path walks the claim index in order`, async () => {
          expectIndexOrderedClaim(
            await explain(pinnedOf(t().db), SETTLE_AND_CLAIM_SQL, settleAndClaimParams(limit)),
          );
        });
      }
    });
  }
});

describe(`the settle's plan on ${engine}: linear in the batch`, () => {
  const t = useTestDatabase();
  const BATCH = 300;

  beforeAll(async () => {
    await plan(
      t().db,
      await insertSchedule(t().db),
      instants(4 * BATCH, NOW.getTime() - 60_000, 1),
    );
  });

  // Guards the settle's fence shape (one queue probe per input row, a lateral subquery):
  // written as a join of the queue and the `input` CTE, the planner took the queue as the
  // outer side (its `id = any($3)` estimated at one row) and scanned the whole batch once
  // per queue row, BATCH² row comparisons in the hot path.
  for (const phase of ["before ANALYZE", "after ANALYZE"] as const) {
    it(`DEL-2: the settle of ${BATCH} claimed rows reads each of its CTEs once and each queue row by primary key (${phase})`, async () => {
      const { db } = t();
      if (phase === "after ANALYZE") await db.query("analyze");
      const owner = `w#${phase.length}#x`;
      const claimed = await claimDeliveries(db, {
        now: NOW,
        owner,
        leaseMs: 60_000,
        limit: BATCH,
        channels: ["log"],
      });
      expect(claimed).toHaveLength(BATCH);
      const batch = claimed.map((c) => sentOutcome(c.id, c.attempt, NOW));
      const analyzed = await explain(
        pinnedOf(db),
        SETTLE_SQL,
        settleParams(NOW, owner, batch),
        "analyze",
      );
      const shape = outline(analyzed);
      const rescanned = nodes(analyzed).filter(
        (n) => n["Node Type"] === "CTE Scan" && (n["Actual Loops"] ?? 1) > 1,
      );
      expect(rescanned, shape).toEqual([]);
      expect(tableScans(analyzed, "punctual_queue"), shape).toEqual([]);
      expect(tableScans(analyzed, "punctual_deliveries"), shape).toEqual([]);
      const { rows } = await db.query<{ n: number }>(
        "select count(*)::int as n from punctual_deliveries where state = 'sent'",
      );
      expect(rows[0]!.n).toBe(phase === "before ANALYZE" ? BATCH : 2 * BATCH);
    });
  }
});
