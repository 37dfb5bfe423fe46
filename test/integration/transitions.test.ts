/**
 * The delivery state machine is enforced in the test suite, not only declared: the
 * trigger of test/support/transitions.ts, generated from `DELIVERY_STORED_TRANSITIONS` (the
 * ledger's moves, derived from `DELIVERY_TRANSITIONS`) and
 * `DELIVERY_INITIAL_STATES` (src/domain) and installed on every migrated test database,
 * refuses every change of state the table does not list and accepts every one it lists
 * (on the engine of this run; npm test runs both).
 */
import { describe, expect, it } from "vitest";
import {
  DELIVERY_INITIAL_STATES,
  DELIVERY_STATES,
  canStoreTransition,
  type DeliveryState,
} from "../../src/domain/index.js";
import type { Queryable } from "../../src/store/database.js";
import { engineName, useTestDatabase } from "../support/db.js";
import { insertSchedule, NOW } from "../support/rows.js";
import { forgingStates, ILLEGAL_TRANSITION_CODE } from "../support/transitions.js";

/** The columns the CHECK constraints tie to `state`, set so a row in `state` is valid. */
function columnsFor(state: DeliveryState): string {
  const claimed = state === "claimed";
  const finished = ["dead", "in_doubt", "skipped", "cancelled"].includes(state);
  return [
    `state = '${state}'`,
    claimed
      ? "lease_owner = 'test', lease_expires_at = now() + interval '1 hour', claimed_at = now()"
      : "lease_owner = null, lease_expires_at = null, claimed_at = null",
    `sent_at = ${state === "sent" ? "now()" : "null"}`,
    finished ? "finished_at = now(), reason = 'resolved'" : "finished_at = null, reason = null",
    "sent_by = null, send_started_at = null",
    // DEL-19: a grouped row names its digest (the digest id stays on the row afterwards).
    state === "grouped" ? "digest_id = 'dg_test'" : "digest_id = digest_id",
  ].join(", ");
}

/** The SQLSTATE and message of a refused statement, or null when it succeeded. */
async function refusal(p: Promise<unknown>): Promise<{ code?: string; message: string } | null> {
  try {
    await p;
    return null;
  } catch (err) {
    const e = err as { code?: string; message: string };
    return { code: e.code, message: e.message };
  }
}

async function insertIn(db: Queryable, scheduleId: string, key: string, state: DeliveryState) {
  return db
    .query(
      `insert into punctual_deliveries
       (delivery_key, schedule_id, reminder_key, occurrence_at, due_at, run_at, channel,
        on_lost_lease, attempt)
     values ($1, $2, 'r', $3, $3, $3, 'log', 'retry', 1)
     returning id`,
      [key, scheduleId, NOW],
    )
    .then(async (r) => {
      const id = (r.rows[0] as { id: number }).id;
      if (state !== "pending")
        await db.query(`update punctual_deliveries set ${columnsFor(state)} where id = $1`, [id]);
      return id;
    });
}

describe(`the delivery state machine on ${engineName()}`, () => {
  const t = useTestDatabase();

  it("DEL-2: every change of state the stored table lists (DELIVERY_STORED_TRANSITIONS) is accepted, every other one refused", async () => {
    const { db } = t();
    const schedule = await insertSchedule(db);
    const seen: string[] = [];
    let n = 0;
    for (const from of DELIVERY_STATES) {
      for (const to of DELIVERY_STATES) {
        if (from === to) continue;
        n += 1;
        const id = await forgingStates(db, (tx) => insertIn(tx, schedule, `k${n}`, from));
        const result = await refusal(
          db.query(`update punctual_deliveries set ${columnsFor(to)} where id = $1`, [id]),
        );
        if (canStoreTransition(from, to)) {
          expect(result, `${from} -> ${to}`).toBeNull();
        } else {
          expect(result?.code, `${from} -> ${to}`).toBe(ILLEGAL_TRANSITION_CODE);
          expect(result?.message).toContain(`illegal delivery transition ${from} -> ${to}`);
        }
        seen.push(`${from}>${to}:${result === null ? "ok" : "refused"}`);
      }
    }
    expect(seen).toHaveLength(DELIVERY_STATES.length * (DELIVERY_STATES.length - 1));
    expect(seen.filter((s) => s.endsWith("refused")).length).toBeGreaterThan(0);
  });

  it("DEL-1: a row is inserted only in an initial state", async () => {
    const { db } = t();
    const schedule = await insertSchedule(db);
    for (const state of DELIVERY_STATES) {
      const result = await refusal(
        db.query(
          `insert into punctual_deliveries
             (delivery_key, schedule_id, reminder_key, occurrence_at, due_at, run_at, channel,
              on_lost_lease, attempt, state, lease_owner, lease_expires_at, claimed_at, sent_at,
              finished_at, reason, digest_id)
           values ($1, $2, 'r', $3, $3, $3, 'log', 'retry', 1, $4,
                   case when $4 = 'claimed' then 'test' end,
                   case when $4 = 'claimed' then now() end,
                   case when $4 = 'claimed' then now() end,
                   case when $4 = 'sent' then now() end,
                   case when $4 in ('dead', 'in_doubt', 'skipped', 'cancelled') then now() end,
                   case when $4 in ('dead', 'in_doubt', 'skipped', 'cancelled') then 'resolved' end,
                   case when $4 = 'grouped' then 'dg_test' end)`,
          [`insert-${state}`, schedule, NOW, state],
        ),
      );
      if (DELIVERY_INITIAL_STATES.includes(state)) expect(result, state).toBeNull();
      else {
        expect(result?.code, state).toBe(ILLEGAL_TRANSITION_CODE);
        expect(result?.message).toContain(`inserted in state ${state}`);
      }
    }
  });

  it("DEL-2: a forged history is accepted only inside forgingStates, and only for that transaction", async () => {
    const { db } = t();
    const schedule = await insertSchedule(db);
    const id = await forgingStates(db, (tx) => insertIn(tx, schedule, "forged", "sent"));
    const back = await refusal(
      db.query(`update punctual_deliveries set ${columnsFor("pending")} where id = $1`, [id]),
    );
    expect(back?.code).toBe(ILLEGAL_TRANSITION_CODE);
  });
});
