/**
 * Deferrals of a claimed row that is not sent now (CH-7, DEL-15): the circuit breaker
 * gives claims back to wait for their host, and a retry that falls inside the reminder's
 * quiet window records the deferral on the row before the settle moves `run_at` there.
 * Both are fenced like the settle. The Retry-After deferral (DEL-13) is an outcome of the
 * settle itself (`claim.ts`). `$1` is "now" (NULL: the database clock).
 */
import type { Queryable } from "../database.js";
import { columnsOf, execute, rows } from "../statement.js";
import { rejudge } from "./claim.js";
import { GIVE_BACK, heldBy, NOW } from "./sql.js";

/**
 * CH-7: gives claimed rows back unsent, to wait for their host's circuit: attempt
 * restored (no attempt spent, no deferral counted; {@link GIVE_BACK}), `run_at` moved to
 * $5 at the earliest (on the queue row here, on the ledger row by the rejudge that follows,
 * `REJUDGE_SQL`). Fenced like the settle. $1 owner, $2 ids, $3 attempts, $4 run at. A row whose schedule changed meanwhile lands where it is now (trigger
 * `punctual_deliveries_rewait`).
 */
export const DEFER_CLAIMS_SQL = `
update punctual_queue q
set ${GIVE_BACK},
    run_at = greatest(q.run_at, $4::timestamptz)
from unnest($2::bigint[], $3::int[]) as u(id, attempt)
where q.id = u.id and q.attempt = u.attempt and ${heldBy("$1")}
returning q.id`;

/** Result columns of {@link DEFER_CLAIMS_SQL}. */
export const DEFER_CLAIMS_COLUMNS = columnsOf<{ id: number }>()(["id"]);

/** CH-7: runs {@link DEFER_CLAIMS_SQL}. Returns the ids given back. */
export async function deferClaims(
  db: Queryable,
  now: Date | null,
  owner: string,
  held: ReadonlyArray<{ id: number; attempt: number }>,
  runAt: Date,
): Promise<number[]> {
  if (held.length === 0) return [];
  const back = await rows<{ id: number }>(db, DEFER_CLAIMS_SQL, [
    owner,
    held.map((h) => h.id),
    held.map((h) => h.attempt),
    runAt,
  ]);
  const ids = back.map((r) => r.id);
  await rejudge(db, now, ids, runAt);
  return ids;
}

/**
 * DEL-15: records a quiet-hours deferral on a claimed row, fenced like the settle: only
 * while it is still `claimed` by this owner at this attempt. $1 now, $2 id, $3 attempt,
 * $4 owner, $5 the window's end. The settle that follows moves `run_at` there; the row
 * then reads like a planned deferral (`deferred_until`, reason `QUIET_HOURS`).
 */
export const RECORD_QUIET_RETRY_SQL = `
update punctual_deliveries d
set deferred_until = $5::timestamptz, deferred_reason = 'QUIET_HOURS', updated_at = ${NOW}
where d.id = $2
  and exists (select 1 from punctual_queue q where q.id = $2 and q.attempt = $3 and ${heldBy("$4")})`;

/** DEL-15: runs {@link RECORD_QUIET_RETRY_SQL}; returns whether the row was still held. */
export async function recordQuietRetry(
  db: Queryable,
  now: Date | null,
  p: { id: number; attempt: number; owner: string; until: Date },
): Promise<boolean> {
  return (await execute(db, RECORD_QUIET_RETRY_SQL, [now, p.id, p.attempt, p.owner, p.until])) > 0;
}
