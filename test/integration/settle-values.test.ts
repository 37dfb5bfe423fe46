/**
 * What the hot path's statements carry arrives as it was: the settle's parallel arrays
 * (written as array literals by element type, instants as epoch ms) record every
 * attempt's values exactly, whatever characters an error or message id holds; the claim
 * returns the schedule's and reminder's values (read as one JSON array per table) as they
 * were stored. Both engines (DEL-2, DEL-14).
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  claimDeliveries,
  settleDeliveries,
  type SettleInput,
} from "../../src/store/deliveries/index.js";
import { testPunctual, type TestPunctual } from "../support/punctual.js";
import { sentOutcome } from "../support/rows.js";

const T0 = Date.parse("2027-01-04T08:00:00Z");
const at = (ms: number) => new Date(T0 + ms);
let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

/** Text that an array literal must quote and escape to keep as one element. */
const AWKWARD = [
  'he said "no", then {left} \\ right',
  "NULL",
  "",
  "  spaced  ",
  "a,b",
  "\\",
  '"',
  "zürich ✓ 東京",
];

describe("settle and claim values", () => {
  it("DEL-14: a settle records each attempt's error, status, message id and instants as given, on the attempt row and on the delivery row", async () => {
    t = await testPunctual();
    const n = AWKWARD.length + 1;
    for (let i = 0; i < n; i++) {
      await t.punctual.createSchedule({
        dtstart: new Date(T0).toISOString(),
        reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
        payload: { i },
      });
    }
    const db = t.punctual.db;
    const claimed = await claimDeliveries(db, {
      now: at(0),
      owner: "A",
      leaseMs: 60_000,
      limit: n,
      channels: ["test"],
    });
    expect(claimed).toHaveLength(n);
    const failed: SettleInput[] = AWKWARD.map((text, i) => ({
      id: claimed[i]!.id,
      attempt: claimed[i]!.attempt,
      state: i % 2 === 0 ? "retry" : "dead",
      runAt: i % 2 === 0 ? at(12_345 + i) : null,
      reason: i % 2 === 0 ? null : "SEND_FAILED",
      error: text,
      failure: 1,
      deferral: 0,
      startedAt: at(1 + i),
      outcome: i % 2 === 0 ? "transient" : "permanent",
      status: i % 2 === 0 ? 503 : null,
      messageId: text,
    }));
    const last = claimed[n - 1]!;
    const sent = sentOutcome(last.id, last.attempt, at(987), {
      status: 202,
      messageId: 'msg,{1} "x" \\ NULL',
    });
    const settled = await settleDeliveries(db, at(2_000), "A", [...failed, sent]);
    expect(settled.size).toBe(n);

    const attempts = await db.query<{
      delivery_id: number;
      started_at: Date;
      error: string | null;
      message_id: string | null;
      status: number | null;
      outcome: string;
    }>(
      `select delivery_id, started_at, error, message_id, status, outcome
       from punctual_attempts order by delivery_id`,
    );
    const byId = new Map(attempts.rows.map((r) => [r.delivery_id, r]));
    for (const f of failed) {
      expect(byId.get(f.id), String(f.id)).toEqual({
        delivery_id: f.id,
        started_at: f.startedAt,
        error: f.error,
        message_id: f.messageId,
        status: f.status,
        outcome: f.outcome,
      });
    }
    const rows = await db.query<{
      id: number;
      state: string;
      run_at: Date;
      reason: string | null;
      last_error: string | null;
      send_started_at: Date | null;
      send_status: number | null;
      send_message_id: string | null;
    }>(
      `select id, state, run_at, reason, last_error, send_started_at, send_status, send_message_id
       from punctual_deliveries order by id`,
    );
    const rowOf = new Map(rows.rows.map((r) => [r.id, r]));
    for (const f of failed) {
      const r = rowOf.get(f.id)!;
      expect(r.state).toBe(f.state);
      expect(r.last_error).toBe(f.error);
      expect(r.reason).toBe(f.reason);
      if (f.runAt) expect(r.run_at).toEqual(f.runAt);
    }
    expect(rowOf.get(sent.id)).toMatchObject({
      state: "sent",
      send_started_at: sent.startedAt,
      send_status: 202,
      send_message_id: sent.messageId,
    });
  });

  it("DEL-2: a claimed row carries its schedule's payload, zone, trace parent and tenant and its reminder's target and template as stored", async () => {
    t = await testPunctual();
    const payload = {
      text: 'quote " and \\ and {braces}',
      n: [1, 2.5, null],
      nested: { ok: true },
    };
    const target = { url: "https://hooks.example.com/r?x=1" };
    const template = { subject: "Hi {{payload.text}}", text: "due {{dueAt}}" };
    const { schedule } = await t.punctual.createSchedule({
      dtstart: "2027-01-04T09:00:00",
      tzid: "Europe/Zurich",
      reminders: [{ key: "r", offset: "PT0S", channel: "test", target, template }],
      payload,
    });
    const [row] = await claimDeliveries(t.punctual.db, {
      now: at(3_600_000),
      owner: "A",
      leaseMs: 60_000,
      limit: 1,
      channels: ["test"],
    });
    expect(row).toMatchObject({
      schedule_id: schedule.id,
      reminder_key: "r",
      payload,
      target,
      template,
      tzid: "Europe/Zurich",
      trace_parent: null,
      tenant: "default",
    });
    expect(row!.db_now).toEqual(at(3_600_000));
    expect(row!.lease_expires_at).toEqual(at(3_660_000));
  });
});
