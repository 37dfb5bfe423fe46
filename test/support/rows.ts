/**
 * Rows for store-level tests: schedules with one reminder, deliveries planned through the
 * planner's own statement (so the admission columns are set as in production).
 */
import { randomUUID } from "node:crypto";
import type { Queryable } from "../../src/store/database.js";
import { INSERT_DELIVERIES_SQL, type SettleInput } from "../../src/store/deliveries/index.js";

/** The pinned "now" of these tests. */
export const NOW = new Date("2027-01-04T08:00:00Z");
export const HOUR = 3_600_000;

/** A schedule with one reminder `r` on channel `log`. */
export async function insertSchedule(
  db: Queryable,
  fields: { recurring?: boolean; expiresAt?: Date | null; misfire?: string } = {},
): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `insert into punctual_schedules
       (dtstart, tzid, recurring, expires_at, misfire, payload, created_at)
     values ('2027-01-04T06:00:00', 'UTC', $1, $2, $3, '{"n":1}', $4) returning id`,
    [
      fields.recurring ?? false,
      fields.expiresAt ?? null,
      fields.misfire ?? "skip",
      new Date(NOW.getTime() - 6 * HOUR),
    ],
  );
  const id = rows[0]!.id;
  await db.query(
    `insert into punctual_reminders (schedule_id, key, offset_duration, channel, target)
     values ($1, 'r', 'PT0S', 'log', '{"to":"x"}')`,
    [id],
  );
  return id;
}

/** Plans `dueAt.length` deliveries of one schedule the way the planner does. */
export async function plan(db: Queryable, scheduleId: string, dueAt: Date[]): Promise<void> {
  for (let i = 0; i < dueAt.length; i += 5_000) {
    const at = dueAt.slice(i, i + 5_000);
    await db.query(INSERT_DELIVERIES_SQL, [
      NOW,
      at.map(() => `dk_${randomUUID()}`),
      at.map(() => scheduleId),
      at.map(() => "r"),
      at,
      at,
      at.map(() => "log"),
      at.map(() => "retry"),
      at.map(() => 5),
      at.map(() => null),
      at.map(() => null),
      at.map(() => null),
    ]);
  }
}

/** `n` instants from `from` (ms), `stepMs` apart. */
export function instants(n: number, from: number, stepMs = 1): Date[] {
  return Array.from({ length: n }, (_, i) => new Date(from + i * stepMs));
}

/**
 * One outcome of a settle (`SettleInput`): by default the send succeeded (`sent`, HTTP 200)
 * and started at `startedAt`; `over` changes any field.
 */
export function sentOutcome(
  id: number,
  attempt: number,
  startedAt: Date,
  over: Partial<SettleInput> = {},
): SettleInput {
  return {
    id,
    attempt,
    state: "sent",
    runAt: null,
    reason: null,
    error: null,
    failure: 0,
    deferral: 0,
    startedAt,
    outcome: "sent",
    status: 200,
    messageId: null,
    ...over,
  };
}
