/**
 * Singleton periodic tasks (OPS-7): one lease row per task, moved from occurrence to
 * occurrence. `$1` is "now" (NULL = database clock).
 * Invariant: a row moves only forward (to a later occurrence) and only once the previous
 * holder's lease has ended, so each occurrence of a task runs in at most one process and
 * two runs of one task never overlap across the cluster.
 */
import type { Queryable } from "./database.js";
import { NOW } from "./deliveries/sql.js";
import { columnsOf, execute, rows } from "./statement.js";

/** A row of `punctual_task_leases`. */
export interface TaskLeaseRow {
  name: string;
  occurrence_at: Date;
  owner: string;
  expires_at: Date;
}

/**
 * Takes a task's lease for one occurrence: inserts the row, or moves it to this
 * occurrence when it holds an earlier one whose lease has ended. Returns a row only to
 * the process that now runs the occurrence.
 * $1 now, $2 task name, $3 occurrence instant, $4 owner, $5 lease ms.
 */
export const CLAIM_TASK_OCCURRENCE_SQL = `
insert into punctual_task_leases (name, occurrence_at, owner, expires_at)
values ($2, $3, $4, ${NOW} + make_interval(secs => $5::double precision / 1000))
on conflict (name) do update
  set occurrence_at = excluded.occurrence_at, owner = excluded.owner,
      expires_at = excluded.expires_at
  where punctual_task_leases.occurrence_at < excluded.occurrence_at
    and punctual_task_leases.expires_at <= ${NOW}
returning name, occurrence_at, owner, expires_at`;

/** Result columns of {@link CLAIM_TASK_OCCURRENCE_SQL}. */
export const CLAIM_TASK_OCCURRENCE_COLUMNS = columnsOf<TaskLeaseRow>()([
  "name",
  "occurrence_at",
  "owner",
  "expires_at",
]);

/**
 * Ends a lease when its run is over, fenced by occurrence and owner (a lease taken over
 * is left alone). $1 now, $2 task name, $3 occurrence instant, $4 owner.
 */
export const END_TASK_LEASE_SQL = `
update punctual_task_leases set expires_at = ${NOW}
where name = $2 and occurrence_at = $3 and owner = $4 and expires_at > ${NOW}`;

/** OPS-7: runs {@link CLAIM_TASK_OCCURRENCE_SQL}; true when `owner` runs this occurrence. */
export async function claimTaskOccurrence(
  db: Queryable,
  p: { now: Date | null; name: string; occurrenceAt: Date; owner: string; leaseMs: number },
): Promise<boolean> {
  const got = await rows<TaskLeaseRow>(db, CLAIM_TASK_OCCURRENCE_SQL, [
    p.now,
    p.name,
    p.occurrenceAt,
    p.owner,
    p.leaseMs,
  ]);
  return got.length > 0;
}

/** OPS-7: runs {@link END_TASK_LEASE_SQL}. */
export async function endTaskLease(
  db: Queryable,
  p: { now: Date | null; name: string; occurrenceAt: Date; owner: string },
): Promise<void> {
  await execute(db, END_TASK_LEASE_SQL, [p.now, p.name, p.occurrenceAt, p.owner]);
}
