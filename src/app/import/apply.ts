/**
 * Writing an import's changes (API-5, DEL-9, DEL-10, OPS-12): in chunks of a few hundred
 * changes, each chunk one transaction — its creates as bulk inserts planned together, its
 * updates locked, rewritten and realigned together, its cancels in one statement with their
 * waiting deliveries (a fixed number of statements per chunk). Between statements and
 * chunks the event loop gets its turns (the embedded engine runs on this thread).
 */
import { planLocked } from "../../scheduler/plan.js";
import { realignSchedules } from "../../scheduler/realign.js";
import type { Queryable } from "../../store/database.js";
import { lockSchedulesForEdit } from "../../store/planning.js";
import {
  cancelSchedulesMany,
  deleteRemindersMany,
  insertRemindersBulk,
  insertSchedulesBulk,
  reviveSchedule,
  updateSchedulesBulk,
} from "../../store/schedules.js";
import { planDeps, type AppContext } from "../context.js";
import { definitionColumns, definitionHash, reminderColumns } from "../../definition/index.js";
import type { ImportChange } from "./plan.js";
import type { ImportProgress, ImportSummary } from "./types.js";

/**
 * Schedules per bulk insert statement inside a chunk: one statement is one call into the
 * database, which (embedded) runs on this thread, so its size bounds how long the event
 * loop waits (OPS-12).
 */
export const IMPORT_BATCH = 25;

/** What happened to a change once its chunk committed. */
type Outcome =
  | { kind: "created"; id: string }
  | { kind: "updated" }
  | { kind: "cancelled"; byChannel: Record<string, number> }
  | { kind: "skipped"; reason: string };

/**
 * Writes `changes` in chunks of `chunkSize`, each one transaction, and fills `summary`
 * (counts, each change's line) as each chunk commits; `onChunk` hears of each. Takes the
 * changes out of `changes` as it goes (the list ends empty): a written change's definition
 * is let go at once, so the heap of a large import shrinks while it is written and a major
 * garbage collection, whose pause on this thread grows with what is live, stays short
 * (OPS-12).
 * @throws whatever the database throws; the chunks committed before it stay written.
 */
export async function applyChanges(
  app: AppContext,
  changes: ImportChange[],
  summary: ImportSummary,
  options: {
    tenant: string;
    chunkSize: number;
    yieldNow: () => Promise<void>;
    onChunk?: (progress: ImportProgress) => void | Promise<void>;
  },
): Promise<void> {
  const { tenant, chunkSize } = options;
  const total = changes.length;
  const chunks = Math.ceil(total / chunkSize);
  for (let c = 0; c < chunks; c++) {
    const chunk = changes.splice(0, chunkSize);
    const outcomes = await app.db.transaction((tx) => writeChunk(app, tx, tenant, chunk));
    chunk.forEach((change, i) => {
      const outcome = outcomes[i] as Outcome;
      const { result } = change;
      switch (outcome.kind) {
        case "created":
          result.scheduleId = outcome.id;
          result.action = "created";
          summary.created++;
          break;
        case "updated":
          result.action = "updated";
          summary.updated++;
          break;
        case "cancelled":
          result.action = "cancelled";
          summary.cancelled++;
          summary.schedules.push(result);
          // OPS-13: a cancelled delivery counts once, by the process whose statement cancelled it.
          for (const [channel, n] of Object.entries(outcome.byChannel)) {
            app.metrics.outcomes.inc({ channel, outcome: "cancelled" }, Number(n));
          }
          break;
        case "skipped":
          summary.skipped.push({ uid: result.uid, line: null, reason: outcome.reason });
          break;
      }
    });
    app.wake();
    await options.onChunk?.({
      chunk: c + 1,
      chunks,
      done: Math.min(total, (c + 1) * chunkSize),
      total,
      created: summary.created,
      updated: summary.updated,
      cancelled: summary.cancelled,
    });
    await options.yieldNow();
  }
}

/** One chunk's writes in `tx`: the outcome of each change, in order. */
async function writeChunk(
  app: AppContext,
  tx: Queryable,
  tenant: string,
  chunk: readonly ImportChange[],
): Promise<Outcome[]> {
  const outcomes: Outcome[] = new Array<Outcome>(chunk.length);
  const maxAttempts = app.config.scheduler.maxAttempts;
  const deps = planDeps(app);
  // Creates: bulk statements of IMPORT_BATCH schedules, their reminders, their plans.
  const creates = chunk.flatMap((change, i) => (change.kind === "create" ? [{ change, i }] : []));
  for (let b = 0; b < creates.length; b += IMPORT_BATCH) {
    const batch = creates.slice(b, b + IMPORT_BATCH);
    const rows = await insertSchedulesBulk(tx, {
      now: app.now(),
      tenant,
      schedules: batch.map(({ change }) => ({
        requestHash: definitionHash(change.value, maxAttempts),
        definition: definitionColumns(change.value),
        source: change.value.source ?? null,
        externalId: change.value.externalId ?? null,
      })),
    });
    // Every imported schedule carries an external id, unique in its source.
    const ids = new Map(rows.map((row) => [row.external_id as string, row.id]));
    await insertRemindersBulk(tx, {
      reminders: batch.flatMap(({ change }) =>
        reminderColumns(change.value.reminders, maxAttempts).map((r) => ({
          ...r,
          scheduleId: ids.get(change.value.externalId ?? "")!,
        })),
      ),
    });
    await planLocked(tx, rows, deps);
    for (const { change, i } of batch) {
      outcomes[i] = { kind: "created", id: ids.get(change.value.externalId ?? "")! };
    }
  }
  const updates = chunk.flatMap((change, i) => (change.kind === "update" ? [{ change, i }] : []));
  if (updates.length > 0) await writeUpdates(app, tx, tenant, updates, outcomes);
  const cancels = chunk.flatMap((change, i) => (change.kind === "cancel" ? [{ change, i }] : []));
  if (cancels.length > 0) await writeCancels(app, tx, tenant, cancels, outcomes);
  return outcomes;
}

/**
 * DEL-10: the chunk's cancels (events gone from a complete file) in one statement, each
 * schedule with its waiting deliveries; one purged meanwhile is skipped. Fills `outcomes`
 * at each cancel's index.
 */
async function writeCancels(
  app: AppContext,
  tx: Queryable,
  tenant: string,
  cancels: ReadonlyArray<{ change: Extract<ImportChange, { kind: "cancel" }>; i: number }>,
  outcomes: Outcome[],
): Promise<void> {
  const rows = await cancelSchedulesMany(tx, {
    now: app.now(),
    tenant,
    ids: cancels.map(({ change }) => change.id),
    by: "import",
  });
  const byId = new Map(rows.map((row) => [row.id, row]));
  for (const { change, i } of cancels) {
    const row = byId.get(change.id);
    outcomes[i] =
      row === undefined
        ? { kind: "skipped", reason: `schedule ${change.id} is gone (purged while importing)` }
        : { kind: "cancelled", byChannel: row.cancelled_by_channel };
  }
}

/**
 * DEL-9: the chunk's updated schedules rewritten from their events and their waiting
 * deliveries realigned, as an edit does it, with a fixed number of statements whatever
 * their count: lock them all (id order), rewrite their definitions, replace their
 * reminders, realign them together. A schedule changed by someone after the comparison is
 * left alone (the next import compares again); one purged meanwhile is skipped.
 * Fills `outcomes` at each update's index.
 */
async function writeUpdates(
  app: AppContext,
  tx: Queryable,
  tenant: string,
  updates: ReadonlyArray<{ change: Extract<ImportChange, { kind: "update" }>; i: number }>,
  outcomes: Outcome[],
): Promise<void> {
  const maxAttempts = app.config.scheduler.maxAttempts;
  const locked = new Map(
    (
      await lockSchedulesForEdit(tx, {
        now: app.now(),
        tenant,
        ids: updates.map(({ change }) => change.id),
      })
    ).map((row) => [row.id, row]),
  );
  const writable: Array<(typeof updates)[number]> = [];
  for (const update of updates) {
    const { change, i } = update;
    const row = locked.get(change.id);
    if (row === undefined) {
      outcomes[i] = {
        kind: "skipped",
        reason: `schedule ${change.id} is gone (purged while importing)`,
      };
    } else if (row.version !== change.version) {
      outcomes[i] = {
        kind: "skipped",
        reason: `schedule ${change.id} was changed while importing (version ${row.version}, compared at ${change.version}); import again to apply the calendar`,
      };
    } else writable.push(update);
  }
  if (writable.length === 0) return;
  // Reviving is rare (an event back in the calendar after it left): one statement each.
  for (const { change } of writable) {
    if (change.revive) await reviveSchedule(tx, { now: app.now(), id: change.id });
  }
  const updated = await updateSchedulesBulk(tx, {
    now: app.now(),
    schedules: writable.map(({ change }) => ({
      id: change.id,
      definition: definitionColumns(change.value),
      requestHash: change.hash,
    })),
  });
  const scheduleIds = writable.map(({ change }) => change.id);
  await deleteRemindersMany(tx, { scheduleIds });
  await insertRemindersBulk(tx, {
    reminders: writable.flatMap(({ change }) =>
      reminderColumns(change.value.reminders, maxAttempts).map((r) => ({
        ...r,
        scheduleId: change.id,
      })),
    ),
  });
  await realignSchedules(tx, updated, planDeps(app));
  for (const { i } of writable) outcomes[i] = { kind: "updated" };
}
