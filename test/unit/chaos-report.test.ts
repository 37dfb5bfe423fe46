// The verdict of `npm run chaos` (scripts/chaos-report.mjs): made-up runs, one fault each.
import { describe, expect, it } from "vitest";
import {
  analyse,
  type Arrival,
  type CreatedReminder,
  type DeliveryRow,
} from "../../scripts/chaos-report.mjs";

const DUE = Date.parse("2027-01-04T09:00:00Z");

function reminder(n: number): CreatedReminder {
  return { n, scheduleId: `s${n}`, dueAtMs: DUE + n * 1_000 };
}

function row(n: number, state = "sent", attempt = 1): DeliveryRow {
  return { delivery_key: `k${n}`, schedule_id: `s${n}`, state, attempt, reason: null };
}

function arrival(n: number, overrides: Partial<Arrival> = {}): Arrival {
  const recvMs = DUE + n * 1_000 + 20;
  return {
    id: `k${n}`,
    ts: Math.floor(recvMs / 1_000),
    recvMs,
    ok: true,
    dueAt: new Date(DUE + n * 1_000).toISOString(),
    scheduleId: `s${n}`,
    n,
    attempt: 1,
    ...overrides,
  };
}

/** A clean run of three reminders, each sent once, on time. */
function cleanRun() {
  const ns = [0, 1, 2];
  return {
    reminders: ns.map(reminder),
    rows: ns.map((n) => row(n)),
    arrivals: ns.map((n) => arrival(n)),
    earlyToleranceMs: 100,
  };
}

describe("chaos verdict (scripts/chaos-report.mjs)", () => {
  it("DEL-1: a run where every reminder arrived once under its key passes", () => {
    const f = analyse(cleanRun());
    expect(f.ok).toBe(true);
    expect(f.failures).toEqual([]);
    expect(f.received).toMatchObject({ requests: 3, uniqueIds: 3, resends: 0, unknownIds: 0 });
    expect(f.lost).toBe(0);
    expect(f.latenessMs).toEqual({ p50: 20, p99: 20, max: 20 });
  });

  it("DEL-16: a send of a stalled claim's row under that claim's attempt fails the run", () => {
    const run = cleanRun();
    // Row 1 was in the stalled claim as attempt 1, recovered and sent again as attempt 2.
    run.rows[1] = row(1, "sent", 2);
    run.arrivals[1] = arrival(1, { attempt: 2 });
    const stalledClaim = [{ delivery_key: "k1", attempt: 1 }];
    const clean = analyse({ ...run, stalledClaim });
    expect(clean.ok).toBe(true);
    expect(clean.stalledSends).toBe(0);
    run.arrivals.push(arrival(1, { attempt: 1, recvMs: DUE + 9_000 }));
    const f = analyse({ ...run, stalledClaim });
    expect(f.ok).toBe(false);
    expect(f.stalledSends).toBe(1);
    expect(f.failures).toEqual(["1 sends by the stalled worker on leases that had ended"]);
    // Without a stall in the run, the same arrivals are a re-send, not a failure.
    expect(analyse(run).ok).toBe(true);
  });

  it("DEL-6: re-sends of the same key are counted, not failures", () => {
    const run = cleanRun();
    run.rows[1] = row(1, "sent", 2);
    run.arrivals.push(arrival(1, { attempt: 2, recvMs: DUE + 7_000 }));
    run.arrivals.push(arrival(1, { attempt: 2, recvMs: DUE + 7_100 }));
    const f = analyse(run);
    expect(f.ok).toBe(true);
    expect(f.received).toMatchObject({
      requests: 5,
      uniqueIds: 3,
      resends: 2,
      keysResent: 1,
      resendsSameAttempt: 1,
    });
  });

  it("DEL-1: a row recorded sent that never reached the receiver is lost", () => {
    const run = cleanRun();
    run.arrivals = run.arrivals.filter((a) => a.n !== 2);
    const f = analyse(run);
    expect(f.ok).toBe(false);
    expect(f.lost).toBe(1);
    expect(f.lostDetail).toMatchObject({ sentNotReceived: 1, noRow: 0, unsettled: 0 });
    expect(f.lostDetail.samples[0]).toMatchObject({ n: 2, deliveryKey: "k2", state: "sent" });
  });

  it("DEL-1: a reminder without a delivery row, or still waiting at the end, is lost", () => {
    const run = cleanRun();
    run.rows = [row(0), row(1, "retry", 3)];
    run.arrivals = [arrival(0)];
    const f = analyse(run);
    expect(f.lost).toBe(2);
    expect(f.lostDetail).toMatchObject({ noRow: 1, unsettled: 1 });
    expect(f.failures).toEqual(["2 lost"]);
  });

  it("DEL-5: dead and in_doubt rows explain a missing receipt: not lost, not a failure", () => {
    const run = cleanRun();
    run.rows[1] = row(1, "dead", 5);
    run.rows[2] = row(2, "in_doubt", 1);
    run.arrivals = [arrival(0)];
    const f = analyse(run);
    expect(f.ok).toBe(true);
    expect(f.lost).toBe(0);
    expect(f.notReceivedExplained).toMatchObject({ dead: 1, in_doubt: 1 });
    expect([f.dead, f.in_doubt]).toEqual([1, 1]);
  });

  it("OPS-9: a receipt before its due time beyond the tolerance is early; within it is not", () => {
    const run = cleanRun();
    run.arrivals[1] = arrival(1, { recvMs: DUE + 1_000 - 99 });
    expect(analyse(run).early.count).toBe(0);
    run.arrivals[2] = arrival(2, { recvMs: DUE + 2_000 - 30_000 });
    const f = analyse(run);
    expect(f.ok).toBe(false);
    expect(f.early).toMatchObject({ count: 1, maxMs: 30_000 });
    expect(f.failures).toEqual(["1 early"]);
  });

  it("DEL-1: a reminder arriving under a second webhook-id fails the run", () => {
    const run = cleanRun();
    run.arrivals.push(arrival(1, { id: "k1-other" }));
    const f = analyse(run);
    expect(f.ok).toBe(false);
    expect(f.secondKey.atReceiver).toBe(1);
    expect(f.secondKey.samples[0]).toEqual({ n: 1, keys: ["k1", "k1-other"] });
    expect(f.received.unknownIds).toBe(1);
  });

  it("DEL-1: two delivery rows for one one-off reminder fail the run", () => {
    const run = cleanRun();
    run.rows.push({ ...row(0, "pending"), delivery_key: "k0-second" });
    const f = analyse(run);
    expect(f.ok).toBe(false);
    expect(f.secondKey.inDatabase).toBe(1);
  });

  it("CH-1: a request whose signature does not verify fails the run", () => {
    const run = cleanRun();
    run.arrivals.push(arrival(0, { ok: false }));
    const f = analyse(run);
    expect(f.ok).toBe(false);
    expect(f.received.badSignature).toBe(1);
    expect(f.received.uniqueIds).toBe(3);
  });

  it("CH-1: webhook-timestamp skew is the largest |timestamp − receipt|", () => {
    const run = cleanRun();
    run.arrivals[0] = arrival(0, { ts: Math.floor((DUE + 20) / 1_000) + 30 });
    const f = analyse(run);
    expect(f.ok).toBe(true);
    expect(f.timestampSkewS.maxAbs).toBeCloseTo(29.98, 2);
    expect(f.timestampSkewS.requestsOver5s).toBe(1);
  });
});
