/**
 * OPS-3 / OPS-13 / API-6: `GET /v1/status` (what `punctual status` prints), `/metrics`
 * (the stored cluster gauges) and `GET /v1/overview` (the dashboard's first page) read one
 * count (`DELIVERY_COUNTS_SQL`, src/store/deliveries/counts.ts), so over the same rows at
 * the same instant they show the same figures. The rows below include the cases on which
 * the earlier separate queries disagreed: a row past its grace (waiting for the misfire
 * sweep, not claimable), a row of an expired schedule, and a row due long ago whose
 * quiet-hours deferral has not ended (not overdue: it is not late yet).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { TestClock } from "../../../src/clock/index.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { setGauges } from "../../../src/scheduler/services/gauges.js";
import { countDeliveries } from "../../../src/store/deliveries/index.js";
import { storeGauges } from "../../../src/store/observe.js";
import { openTestDatabase, type TestDatabase } from "../../support/db.js";
import { insertSchedule, NOW } from "../../support/rows.js";
import { forgingStates } from "../../support/transitions.js";

const MIN = 60_000;
const OVERDUE_MS = 15 * MIN;
const HOUR_MS = 60 * MIN;
let t: TestDatabase;
let punctual: Punctual;
let app: PunctualApi;

/** Inserts one delivery of `schedule` with the given columns (a forged history). */
async function row(schedule: string, key: string, cols: Record<string, unknown>): Promise<void> {
  const all = {
    delivery_key: key,
    schedule_id: schedule,
    reminder_key: "r",
    occurrence_at: cols.due_at,
    run_at: cols.due_at,
    channel: "log",
    on_lost_lease: "retry",
    ...cols,
  };
  const names = Object.keys(all);
  await forgingStates(t.db, (tx) =>
    tx.query(
      `insert into punctual_deliveries (${names.join(", ")})
       values (${names.map((_, i) => `$${i + 1}`).join(", ")})`,
      Object.values(all),
    ),
  );
}

const ago = (ms: number) => new Date(NOW.getTime() - ms);

beforeAll(async () => {
  t = await openTestDatabase();
  const clock = new TestClock(NOW.toISOString());
  punctual = await createPunctual({ database: t.db, clock, logger: silentLogger() });
  app = createApi(punctual);
  const s = await insertSchedule(t.db, { recurring: true });
  const expired = await insertSchedule(t.db, { expiresAt: ago(MIN) });
  await row(s, "due-now", { due_at: ago(MIN) });
  await row(s, "overdue", { due_at: ago(20 * MIN) });
  await row(s, "stale", { due_at: ago(2 * MIN), stale_at: ago(MIN) });
  await row(expired, "expired", { due_at: ago(2 * MIN), expires_at: ago(MIN) });
  await row(s, "quiet", {
    due_at: ago(30 * MIN),
    run_at: new Date(NOW.getTime() + 60 * MIN),
    deferred_until: new Date(NOW.getTime() + 60 * MIN),
    deferred_reason: "QUIET_HOURS",
  });
  await row(s, "retry-overdue", { due_at: ago(40 * MIN), state: "retry", attempt: 1 });
  // Held by a worker: since migration 0050 the lease is on the queue row, the ledger row
  // waits as it did before the claim.
  await row(s, "claimed", { due_at: ago(16 * MIN) });
  await t.db.query(
    `update punctual_queue set attempt = 1, lease_owner = 'w', lease_expires_at = $1,
       claimed_at = $2
     where id = (select id from punctual_deliveries where delivery_key = 'claimed')`,
    [new Date(NOW.getTime() + MIN), NOW],
  );
  for (const [key, state, reason] of [
    ["doubt", "in_doubt", "LEASE_EXPIRED"],
    ["dead", "dead", "SEND_FAILED"],
    ["resolved", "dead", "resolved"],
  ] as const) {
    await row(s, key, { due_at: ago(HOUR_MS), state, reason, attempt: 1, finished_at: NOW });
  }
  await row(s, "held", { due_at: ago(50 * MIN), state: "paused" });
});

afterAll(async () => {
  await punctual?.close(0);
  await t?.close();
});

/** The value of one series of the Prometheus text. */
function series(text: string, name: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  if (!line) throw new Error(`no series ${name} in /metrics`);
  return Number(line.slice(name.length + 1));
}

describe("one count of deliveries by state", () => {
  it("OPS-3 / OPS-13 / API-6: status, metrics and the overview show the same counts", async () => {
    const expected = {
      dueBacklog: 3, // due-now, overdue, retry-overdue (not stale, expired, quiet or held)
      overdue: 3, // overdue, retry-overdue, claimed
      inDoubt: 1,
      dead: 1,
    };
    const counts = await countDeliveries(t.db, { now: NOW, overdueMs: OVERDUE_MS });
    expect(counts).toMatchObject({
      due_backlog: 3,
      // Pending due 20 min ago, the retry and the claim due 40 and 16 min ago; not the
      // stale or expired rows (6 and 2 min), not the deferred row whose run_at is ahead,
      // not the held row of a paused state.
      overdue: 3,
      retry_waiting: 1,
      in_doubt: 1,
      dead: 1,
      claimed: 1,
    });

    const status = (await (await app.request("/v1/status")).json()) as {
      deliveries: Record<string, unknown>;
    };
    expect(status.deliveries).toMatchObject({ ...expected, claimed: 1 });

    const overview = (await (await app.request("/v1/overview")).json()) as {
      deliveries: Record<string, unknown>;
    };
    expect(overview.deliveries).toEqual(expected);

    const stored = await storeGauges(t.db, { now: NOW, instance: "test", overdueMs: OVERDUE_MS });
    expect(stored).toMatchObject(counts);
    setGauges(punctual.metrics, stored!);
    const text = (await punctual.metricsText()).body;
    expect(series(text, "punctual_due_backlog")).toBe(expected.dueBacklog);
    expect(series(text, "punctual_overdue_deliveries")).toBe(expected.overdue);
    expect(series(text, "punctual_retry_waiting_deliveries")).toBe(1);
    expect(series(text, "punctual_in_doubt_deliveries")).toBe(expected.inDoubt);
    expect(series(text, "punctual_dead_deliveries")).toBe(expected.dead);
  });

  it("API-6: the overview counts the caller's tenant only", async () => {
    const other = await countDeliveries(t.db, {
      now: NOW,
      overdueMs: OVERDUE_MS,
      tenant: "someone-else",
    });
    expect(other).toMatchObject({ due_backlog: 0, overdue: 0, in_doubt: 0, dead: 0, claimed: 0 });
  });
});
