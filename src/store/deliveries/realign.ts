/**
 * Realign on edit (DEL-9, DEL-3) for one schedule or many at once: an edit realigns one,
 * an import's chunk hundreds in one transaction (API-5, OPS-12) with one statement each
 * whatever their count. The moves are `REALIGN_MOVE_SQL` of `planning.ts`. The schedules are
 * reached through their ids by primary key, one lateral lookup each, whatever the
 * statistics of the engine say. `$1` is always "now" (NULL = database clock).
 */
import type { Queryable } from "../database.js";
import { columnsOf, firstRow, rows } from "../statement.js";
import { NOW } from "./sql.js";
import { syncWaitingSql } from "./waiting.js";

/**
 * DEL-9: removes the waiting rows (`pending`, `retry`, `paused`) of the schedules $2 whose
 * delivery key is not among $3 (the new sets of all of them together: a delivery key
 * names its schedule, so one list serves every schedule). Never-tried rows are deleted,
 * rows with attempts cancelled with reason `realigned`; triggered rows (API-9) stay. The
 * rows are locked first, so a claim that commits before is seen and its row left alone.
 * Parameters: $1 now, $2 schedule ids, $3 delivery keys. Returns `removed`.
 */
export const REALIGN_DELETE_MANY_SQL = `
with gone as (
  select x.id, x.attempt
  from (select distinct unnest($2::uuid[]) as id) ids
  cross join lateral (
    select d.id, d.attempt from punctual_deliveries d
    where d.schedule_id = ids.id and d.state in ('pending', 'retry', 'paused')
      and not (d.delivery_key = any($3::text[]))
      and not exists (select 1 from punctual_triggers t where t.delivery_id = d.id)
    for update
  ) x
),
deleted as (
  delete from punctual_deliveries d using gone g
  where d.id = g.id and g.attempt = 0 and d.state in ('pending', 'retry', 'paused')
  returning d.id
),
cancelled as (
  update punctual_deliveries d
  set state = 'cancelled', reason = 'realigned', finished_at = ${NOW}, updated_at = ${NOW}
  from gone g
  where d.id = g.id and g.attempt > 0 and d.state in ('pending', 'retry', 'paused')
  returning d.id
)
select (select count(*) from deleted) + (select count(*) from cancelled) as removed`;

/** What {@link REALIGN_DELETE_MANY_SQL} removed. */
export interface RemovedManyRow {
  removed: number;
}

/** Result columns of {@link REALIGN_DELETE_MANY_SQL}. */
export const REALIGN_DELETE_MANY_COLUMNS = columnsOf<RemovedManyRow>()(["removed"]);

/**
 * DEL-9 / REC-6: the waiting rows (`pending`, `retry`, `paused`, never-tried or tried) of
 * the schedules $1 whose delivery key is not among $2 (the deliveries the realign planned
 * in its window), untriggered: the rows {@link REALIGN_DELETE_MANY_SQL} would remove, read
 * first so that each one whose occurrence and reminder the edited schedule still has is
 * placed there instead (moved in place, same key, even to an instant already past or past
 * the planning window) and only the others are removed. Ordered by schedule, occurrence.
 * Parameters: $1 schedule ids, $2 delivery keys.
 */
export const WAITING_NOT_IN_MANY_SQL = `
select x.id, x.schedule_id, x.reminder_key, x.delivery_key, x.occurrence_at
from (select distinct unnest($1::uuid[]) as id) ids
cross join lateral (
  select d.id, d.schedule_id, d.reminder_key, d.delivery_key, d.occurrence_at
  from punctual_deliveries d
  where d.schedule_id = ids.id and d.state in ('pending', 'retry', 'paused')
    and not (d.delivery_key = any($2::text[]))
    and not exists (select 1 from punctual_triggers t where t.delivery_id = d.id)
) x
order by x.schedule_id, x.occurrence_at, x.id`;

/** One row of {@link WAITING_NOT_IN_MANY_SQL}. */
export interface WaitingNotInRow {
  id: number;
  schedule_id: string;
  reminder_key: string;
  delivery_key: string;
  occurrence_at: Date;
}

/** Result columns of {@link WAITING_NOT_IN_MANY_SQL}. */
export const WAITING_NOT_IN_MANY_COLUMNS = columnsOf<WaitingNotInRow>()([
  "id",
  "schedule_id",
  "reminder_key",
  "delivery_key",
  "occurrence_at",
]);

/**
 * DEL-3 / DEL-9 / DEL-10: rewrites the admission columns of the waiting rows of the
 * schedules $2 from each schedule as it is now (held or not, expiry, `stale_at` for its
 * grace and recurrence). Run after the schedule rows and the rows moved, in the same
 * transaction. Parameters: $1 now, $2 schedule ids. Returns `synced`.
 */
export const SYNC_WAITING_MANY_SQL = `
with synced as (
  ${syncWaitingSql(
    "s",
    `(select distinct unnest($2::uuid[]) as id) ids
     cross join lateral (select * from punctual_schedules x where x.id = ids.id offset 0) s`,
  )}
  returning d.id
)
select count(*) as synced from synced`;

/** What {@link SYNC_WAITING_MANY_SQL} rewrote. */
export interface SyncedManyRow {
  synced: number;
}

/** Result columns of {@link SYNC_WAITING_MANY_SQL}. */
export const SYNC_WAITING_MANY_COLUMNS = columnsOf<SyncedManyRow>()(["synced"]);

/** Parameters of {@link removeWaitingNotInMany}. */
export interface RemoveWaitingManyParams {
  now: Date | null;
  scheduleIds: readonly string[];
  /** Delivery keys of the new sets of all `scheduleIds`: waiting rows with any other key go. */
  keys: readonly string[];
}

/** DEL-9: runs {@link REALIGN_DELETE_MANY_SQL}. @returns how many rows were deleted or cancelled. */
export async function removeWaitingNotInMany(
  tx: Queryable,
  p: RemoveWaitingManyParams,
): Promise<number> {
  const row = await firstRow<RemovedManyRow>(tx, REALIGN_DELETE_MANY_SQL, [
    p.now,
    p.scheduleIds,
    p.keys,
  ]);
  return Number(row?.removed ?? 0);
}

/** DEL-9 / REC-6: runs {@link WAITING_NOT_IN_MANY_SQL}. */
export function waitingNotInMany(
  tx: Queryable,
  p: { scheduleIds: readonly string[]; keys: readonly string[] },
): Promise<WaitingNotInRow[]> {
  return rows<WaitingNotInRow>(tx, WAITING_NOT_IN_MANY_SQL, [p.scheduleIds, p.keys]);
}

/** DEL-3 / DEL-9 / DEL-10: runs {@link SYNC_WAITING_MANY_SQL}. @returns how many rows were rewritten. */
export async function syncWaitingMany(
  tx: Queryable,
  p: { now: Date | null; scheduleIds: readonly string[] },
): Promise<number> {
  const row = await firstRow<SyncedManyRow>(tx, SYNC_WAITING_MANY_SQL, [p.now, p.scheduleIds]);
  return Number(row?.synced ?? 0);
}
