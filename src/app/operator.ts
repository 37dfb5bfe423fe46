/**
 * Operator actions (API-9): trigger a schedule now with its own delivery key, backfill
 * the occurrences of a past range, redrive or resolve many deliveries by filter, create or
 * update a schedule by its external id, and purge a schedule with its history. Each
 * operation takes the {@link AppContext} of a running punctual and a {@link CallContext}
 * whose tenant scopes every statement (API-2).
 */
import { createHash, randomUUID } from "node:crypto";
import { z } from "zod";
import type { DeliveryView, ScheduleView } from "../contracts/index.js";
import {
  BULK_SAMPLE_SIZE,
  MAX_BACKFILL_DELIVERIES,
  backfillInputSchema,
  bulkRedriveInputSchema,
  bulkResolveInputSchema,
  triggerInputSchema,
  upsertScheduleSchema,
  type BackfillInput,
  type BulkRedriveInput,
  type BulkResolveInput,
  type TriggerInput,
  type DebounceInput,
  type UpsertScheduleInput,
} from "../contracts/operator.js";
import { deliveryKey } from "../domain/index.js";
import { ConflictError, NotFoundError, ValidationError } from "../errors/index.js";
import { applyOffset } from "../recurrence/index.js";
import { parseStoredRow, parseStoredRule } from "./stored-rule.js";
import {
  backfillRowsForRecipients,
  insertBackfillForRecipients,
  triggerForRecipients,
} from "./recipient-operator.js";
import type { RealignReport } from "../scheduler/realign.js";
import { lostLeasePolicy, planLocked } from "../scheduler/plan.js";
import {
  deliveriesByKeys,
  insertScheduleByExternalId,
  matchBulk,
  scheduleByExternalId,
} from "../store/operator.js";
import {
  audienceOf,
  bulkRedrive,
  bulkResolve,
  insertBackfill,
  insertTriggered,
  purgeScheduleRow,
  type BackfillDelivery,
  type BulkFilter,
} from "../store/deliveries/index.js";
import { debounceState, startDebounceBurst } from "../store/explain.js";
import type { Queryable } from "../store/database.js";
import {
  insertReminders,
  remindersOfSchedules,
  toDeliveryView,
  toScheduleView,
  type DeliveryRow,
} from "../store/schedules.js";
import { planDeps, tenantOf, type AppContext, type CallContext } from "./context.js";
import { activeTraceParent } from "../observability/tracing.js";
import { parseInput } from "./input.js";
import { definitionColumns, definitionHash, reminderColumns } from "../definition/index.js";
import { getSchedule, updateSchedule, validateSchedule } from "./schedules.js";
import { recordedAction } from "./deliveries.js";

const DAY_MS = 86_400_000;
/** Deliveries per backfill insert statement (OPS-12: short statements). */
const BACKFILL_CHUNK = 500;
/** Longest trigger id (an Idempotency-Key header value). */
const MAX_TRIGGER_ID = 200;

/**
 * The delivery key of a triggered delivery: `dk_` + 32 hex characters of SHA-256 over
 * `trigger`, the schedule, the reminder and the trigger id. It never equals the key of an
 * occurrence ({@link deliveryKey} hashes a different input), and the same trigger id
 * gives the same key, so a retried trigger sends nothing more.
 */
export function triggerDeliveryKey(
  scheduleId: string,
  reminderKey: string,
  triggerId: string,
): string {
  const hash = createHash("sha256")
    .update(`trigger\u0000${scheduleId}\u0000${reminderKey}\u0000${triggerId}`)
    .digest("hex");
  return `dk_${hash.slice(0, 32)}`;
}

/** Result of {@link triggerSchedule}. */
export interface TriggerResult {
  /** The trigger id: the caller's Idempotency-Key, or a new UUID. */
  triggerId: string;
  /** False when this trigger id had already been used (a replay): nothing new was created. */
  created: boolean;
  /**
   * One delivery per reminder triggered, due now; for a schedule for recipients one per
   * (reminder, recipient), the first 100 by id (`TRIGGER_REPLY_LIMIT`).
   */
  deliveries: DeliveryView[];
  /** API-11: a schedule for recipients: how many deliveries the trigger made in all. */
  total?: number;
}

function checkId(id: string): void {
  if (!z.uuid().safeParse(id).success) throw new NotFoundError("schedule", id);
}

/**
 * API-9: sends the schedule once more now: one delivery per reminder (or only
 * `reminderKey`), due now, each with its own key derived from the trigger id
 * ({@link triggerDeliveryKey}). The scheduled deliveries are left as they are. With a
 * trigger id that was used before on this schedule, returns the deliveries it created
 * (`created: false`) and creates nothing.
 * @throws NotFoundError (no such schedule for the tenant), ConflictError (the schedule is
 * not active), ValidationError (`reminderKey` not a reminder of it; `triggerId` too long)
 */
export async function triggerSchedule(
  app: AppContext,
  id: string,
  input: TriggerInput | unknown = {},
  options: CallContext & { triggerId?: string } = {},
): Promise<TriggerResult> {
  const tenant = tenantOf(options);
  const q = parseInput(triggerInputSchema, input ?? {});
  checkId(id);
  const triggerId = options.triggerId ?? randomUUID();
  if (triggerId.length === 0 || triggerId.length > MAX_TRIGGER_ID) {
    throw new ValidationError({
      field: "Idempotency-Key",
      message: `must be 1 to ${MAX_TRIGGER_ID} characters`,
    });
  }
  const schedule = await getSchedule(app, id, { tenant });
  const reminders = (await remindersOfSchedules(app.db, { scheduleIds: [id] })).filter(
    (r) => q.reminderKey === undefined || r.key === q.reminderKey,
  );
  if (reminders.length === 0) {
    throw new ValidationError({
      field: "reminderKey",
      message: `not a reminder of schedule ${id}; its reminders: ${schedule.reminders.map((r) => r.key).join(", ")}`,
      value: q.reminderKey,
    });
  }
  // API-11: a schedule for recipients is triggered per recipient.
  if (await audienceOf(app.db, { scheduleId: id })) {
    const made = await triggerForRecipients(app, {
      tenant,
      scheduleId: id,
      state: schedule.state,
      triggerId,
      reminders,
    });
    if (made.created) app.wake();
    return {
      triggerId,
      created: made.created,
      deliveries: made.rows.map(toDeliveryView),
      total: made.total,
    };
  }
  const planned = reminders.map((r) => ({
    key: triggerDeliveryKey(id, r.key, triggerId),
    reminderKey: r.key,
    onLostLease: lostLeasePolicy(
      r,
      app.channels.has(r.channel) ? app.channels.get(r.channel) : undefined,
    ),
  }));
  const keys = planned.map((p) => p.key);
  const before = await deliveriesByKeys(app.db, { tenant, keys });
  if (before.length > 0) {
    return { triggerId, created: false, deliveries: before.map(toDeliveryView) };
  }
  // `finished` is shown for an active schedule with nothing left to send; a trigger is an
  // extra send now, so it may run there too.
  if (schedule.state !== "active" && schedule.state !== "finished") {
    throw new ConflictError(
      `schedule ${id} is in state "${schedule.state}"; only an active schedule can be triggered`,
    );
  }
  const inserted = await app.db.transaction((tx) =>
    insertTriggered(tx, { now: app.now(), tenant, scheduleId: id, triggerId, deliveries: planned }),
  );
  if (inserted.length === 0) {
    // A concurrent trigger with the same id won, or the schedule changed state meanwhile.
    const existing = await deliveriesByKeys(app.db, { tenant, keys });
    if (existing.length > 0) {
      return { triggerId, created: false, deliveries: existing.map(toDeliveryView) };
    }
    const now = await getSchedule(app, id, { tenant });
    throw new ConflictError(
      `schedule ${id} is in state "${now.state}"; only an active schedule can be triggered`,
    );
  }
  app.wake();
  return { triggerId, created: true, deliveries: inserted.map(toDeliveryView) };
}

/** One occurrence-and-reminder of a backfill. */
export interface BackfillItem {
  deliveryKey: string;
  reminderKey: string;
  occurrenceAt: string;
  dueAt: string;
  /** API-11: the recipient of the delivery (a schedule for recipients only). */
  recipientId?: string;
  /** The state of the delivery that already exists for it, or null: none (created, or would be). */
  existing: DeliveryView["state"] | null;
}

/** Result of {@link backfillSchedule}. */
export interface BackfillResult {
  dryRun: boolean;
  /** Deliveries created (dry run: that would be created). */
  created: number;
  /** Occurrences that already have a delivery, which is kept (never a second one). */
  existing: number;
  /** Existing deliveries by state (`sent`, `skipped`, …). */
  existingByState: Record<string, number>;
  /** Every occurrence-and-reminder of the range, by due time. */
  items: BackfillItem[];
}

/**
 * API-9: plans the occurrences of a past range [from, to) that have no delivery yet, due
 * now (late). An occurrence with a delivery in any state keeps it — the key is
 * deterministic ({@link deliveryKey}) and the insert does nothing on a conflict — so a sent
 * occurrence is never sent twice. With `dryRun`, nothing is written and the reply lists
 * what would be. Refused (ValidationError naming the field):
 * - `to`: not after `from`, in the future, a range longer than `maxExpansionDays`, or more
 *   than {@link MAX_BACKFILL_DELIVERIES} deliveries (or the expansion's work cap);
 * - `from`: before the retention of finished deliveries (`retentionDays`), or making a
 *   delivery due before it (a reminder ahead of its occurrence): a sent row may have been
 *   deleted there, and its occurrence would be sent again.
 * @throws NotFoundError, ConflictError (a cancelled or invalid schedule), ValidationError
 */
export async function backfillSchedule(
  app: AppContext,
  id: string,
  input: BackfillInput | unknown,
  ctx: CallContext = {},
): Promise<BackfillResult> {
  const tenant = tenantOf(ctx);
  const q = parseInput(backfillInputSchema, input);
  checkId(id);
  const schedule = await getSchedule(app, id, { tenant });
  if (schedule.state === "cancelled" || schedule.state === "invalid") {
    throw new ConflictError(
      `schedule ${id} is in state "${schedule.state}"; it cannot be backfilled`,
    );
  }
  const fromMs = Date.parse(q.from);
  const toMs = Date.parse(q.to);
  const nowMs = app.clock.now();
  const { maxExpansionDays, retentionDays } = app.config.scheduler;
  if (toMs <= fromMs) {
    throw new ValidationError({ field: "to", message: "must be after from", value: q.to });
  }
  if (toMs > nowMs) {
    throw new ValidationError({
      field: "to",
      message: `is in the future (now is ${new Date(nowMs).toISOString()}): backfill plans past occurrences only`,
      value: q.to,
    });
  }
  if (toMs - fromMs > maxExpansionDays * DAY_MS) {
    throw new ValidationError({
      field: "to",
      message: `makes a range longer than ${maxExpansionDays} days (maxExpansionDays): backfill it in parts`,
      value: q.to,
    });
  }
  if (fromMs < nowMs - retentionDays * DAY_MS) {
    throw new ValidationError({
      field: "from",
      message: `is older than the retention of finished deliveries (${retentionDays} days): a sent delivery may have been deleted there, and its occurrence would be sent again`,
      value: q.from,
    });
  }
  const audience = await audienceOf(app.db, { scheduleId: id });
  const parsed = parseStoredRule(schedule);
  if (!parsed.ok) throw new ConflictError(`schedule ${id}: its rule does not parse`);
  const recurrence = parsed.recurrence;
  const reminders = (await remindersOfSchedules(app.db, { scheduleIds: [id] })).filter(
    (r) => q.reminderKey === undefined || r.key === q.reminderKey,
  );
  if (reminders.length === 0) {
    throw new ValidationError({
      field: "reminderKey",
      message: `not a reminder of schedule ${id}`,
      value: q.reminderKey,
    });
  }
  const tooMany = () =>
    new ValidationError({
      field: "to",
      message: `makes a range of more than ${MAX_BACKFILL_DELIVERIES.toLocaleString("en-US")} deliveries: backfill it in parts`,
      value: q.to,
    });
  const perReminder = Math.floor(MAX_BACKFILL_DELIVERIES / reminders.length);
  // API-11: a schedule for recipients is backfilled per recipient (each in its own zone
  // when floating), keyed as planning keys them; the limit counts every recipient's rows.
  const forRecipients = audience
    ? await backfillRowsForRecipients(app.db, {
        scheduleId: id,
        schedule,
        floating: audience.floating,
        reminders,
        fromMs,
        toMs,
        max: MAX_BACKFILL_DELIVERIES,
      })
    : undefined;
  if (forRecipients === null) throw tooMany();
  const scanned = forRecipients
    ? { occurrences: [], truncated: false }
    : recurrence.scan(fromMs, toMs, perReminder + 1);
  if (scanned.occurrences.length > perReminder || scanned.truncated) throw tooMany();
  const planned: Array<BackfillDelivery & { recipientId?: string }> = (forRecipients ?? []).map(
    (r) => ({ ...r, onLostLease: "" }),
  );
  for (const occurrence of scanned.occurrences) {
    const occurrenceAt = new Date(occurrence.instant);
    for (const r of reminders) {
      const due = applyOffset(occurrence, r.offset_duration, recurrence.tzid, recurrence.dst);
      planned.push({
        key: deliveryKey(id, r.key, occurrenceAt),
        reminderKey: r.key,
        occurrenceAt,
        dueAt: new Date(due),
        onLostLease: lostLeasePolicy(
          r,
          app.channels.has(r.channel) ? app.channels.get(r.channel) : undefined,
        ),
      });
    }
  }
  planned.sort((a, b) => a.dueAt.getTime() - b.dueAt.getTime() || a.key.localeCompare(b.key));
  // A reminder before its occurrence (-P1D) is due before `from`: retention is judged on due times.
  const earliest = planned[0];
  if (earliest && earliest.dueAt.getTime() < nowMs - retentionDays * DAY_MS) {
    throw new ValidationError({
      field: "from",
      message: `makes a delivery due at ${earliest.dueAt.toISOString()}, before the retention of finished deliveries (${retentionDays} days): a sent delivery may have been deleted there, and its occurrence would be sent again`,
      value: q.from,
    });
  }
  const existingRows = new Map<string, DeliveryRow>();
  for (let i = 0; i < planned.length; i += BACKFILL_CHUNK) {
    const keys = planned.slice(i, i + BACKFILL_CHUNK).map((p) => p.key);
    for (const row of await deliveriesByKeys(app.db, { tenant, keys })) {
      existingRows.set(row.delivery_key, row);
    }
  }
  const missing = planned.filter((p) => !existingRows.has(p.key));
  let created = missing.length;
  if (!q.dryRun && missing.length > 0) {
    created = await app.db.transaction(async (tx) => {
      let n = 0;
      for (let i = 0; i < missing.length; i += BACKFILL_CHUNK) {
        if (forRecipients) break;
        const rows = await insertBackfill(tx, {
          now: app.now(),
          tenant,
          scheduleId: id,
          deliveries: missing.slice(i, i + BACKFILL_CHUNK),
        });
        n += rows.length;
      }
      if (forRecipients) {
        const keys = new Set(missing.map((m) => m.key));
        n += await insertBackfillForRecipients(app, tx, {
          tenant,
          scheduleId: id,
          reminders,
          rows: forRecipients.filter((r) => keys.has(r.key)),
        });
      }
      return n;
    });
    if (created > 0) app.wake();
  }
  const existingByState: Record<string, number> = {};
  for (const row of existingRows.values()) {
    existingByState[row.state] = (existingByState[row.state] ?? 0) + 1;
  }
  return {
    dryRun: q.dryRun,
    created,
    existing: existingRows.size,
    existingByState,
    items: planned.map((p) => ({
      deliveryKey: p.key,
      reminderKey: p.reminderKey,
      occurrenceAt: p.occurrenceAt.toISOString(),
      dueAt: p.dueAt.toISOString(),
      ...(p.recipientId !== undefined ? { recipientId: p.recipientId } : {}),
      existing: existingRows.get(p.key)?.state ?? null,
    })),
  };
}

/** Result of a bulk redrive or resolve. */
export interface BulkResult {
  dryRun: boolean;
  /** Deliveries changed (dry run: that match and would change, over every page). */
  count: number;
  /** Matching deliveries left after this call (more than `limit` matched); 0 on a dry run. */
  remaining: number;
  /** The first deliveries changed (dry run: that would be), by id. */
  sample: DeliveryView[];
}

function filterOf(
  q: z.output<typeof bulkRedriveInputSchema> | z.output<typeof bulkResolveInputSchema>,
): BulkFilter {
  return {
    states: q.state ? [q.state] : ["dead", "in_doubt"],
    reason: q.reason ?? null,
    channel: q.channel ?? null,
    scheduleId: q.scheduleId ?? null,
    source: q.source ?? null,
    from: q.from ? new Date(q.from) : null,
    to: q.to ? new Date(q.to) : null,
  };
}

async function dryRun(
  app: AppContext,
  action: "redrive" | "resolve",
  tenant: string,
  filter: BulkFilter,
): Promise<BulkResult> {
  const rows = await matchBulk(app.db, { action, tenant, filter, sample: BULK_SAMPLE_SIZE });
  return {
    dryRun: true,
    count: Number(rows[0]?.total ?? 0),
    remaining: 0,
    sample: rows.map(toDeliveryView),
  };
}

async function remainingOf(
  app: AppContext,
  action: "redrive" | "resolve",
  tenant: string,
  filter: BulkFilter,
): Promise<number> {
  const rows = await matchBulk(app.db, { action, tenant, filter, sample: 1 });
  return Number(rows[0]?.total ?? 0);
}

/**
 * API-9 / DEL-12: one bulk action of the tenant on the deliveries its parsed input `q`
 * matches: with `dryRun`, nothing changes (the count and a sample); else `change` runs as a
 * recorded operator action (OPS-16) and the result counts the rows changed, the matching
 * rows left past `limit`, and a sample. A redrive wakes the scheduler: its rows are due.
 */
async function bulkAction(
  app: AppContext,
  ctx: CallContext,
  action: "redrive" | "resolve",
  q: z.output<typeof bulkRedriveInputSchema> | z.output<typeof bulkResolveInputSchema>,
  outcome: "sent" | "dead" | null,
  change: (tx: Queryable, tenant: string, filter: BulkFilter) => Promise<DeliveryRow[]>,
): Promise<BulkResult> {
  const tenant = tenantOf(ctx);
  const filter = filterOf(q);
  if (q.dryRun) return dryRun(app, action, tenant, filter);
  const rows = await recordedAction(app, ctx, action, outcome, (tx) => change(tx, tenant, filter));
  if (action === "redrive" && rows.length > 0) app.wake();
  return {
    dryRun: false,
    count: rows.length,
    remaining: await remainingOf(app, action, tenant, filter),
    sample: rows.slice(0, BULK_SAMPLE_SIZE).map(toDeliveryView),
  };
}

/**
 * API-9 / DEL-12: redrives every dead or in-doubt delivery of the tenant that matches the
 * filter (state, reason, channel, schedule, source, due time in [from, to)), at most
 * `limit` (default 1,000) per call, each with its delivery key kept, as
 * `redriveDelivery` does one. Deliveries of cancelled schedules or removed reminders
 * are not matched. With `dryRun`, nothing changes: the count and a sample.
 * @throws ValidationError naming a bad filter field
 */
export async function redriveDeliveries(
  app: AppContext,
  input: BulkRedriveInput | unknown,
  ctx: CallContext = {},
): Promise<BulkResult> {
  const q = parseInput(bulkRedriveInputSchema, input ?? {});
  return bulkAction(app, ctx, "redrive", q, null, (tx, tenant, filter) =>
    bulkRedrive(tx, { now: app.now(), tenant, filter, limit: q.limit }),
  );
}

/**
 * API-9 / DEL-12: settles every in-doubt delivery and open dead letter of the tenant that
 * matches the filter as `outcome` (`sent`: it arrived; `dead`: acknowledged, reason
 * `resolved`), at most `limit` per call, as `resolveDelivery` does one. With `dryRun`,
 * nothing changes: the count and a sample.
 * @throws ValidationError naming a bad field
 */
export async function resolveDeliveries(
  app: AppContext,
  input: BulkResolveInput | unknown,
  ctx: CallContext = {},
): Promise<BulkResult> {
  const q = parseInput(bulkResolveInputSchema, input ?? {});
  return bulkAction(app, ctx, "resolve", q, q.outcome, (tx, tenant, filter) =>
    bulkResolve(tx, { now: app.now(), tenant, filter, outcome: q.outcome, limit: q.limit }),
  );
}

/** Result of {@link upsertScheduleByExternalId}. */
export interface UpsertResult {
  schedule: ScheduleView;
  /** True when this call created the schedule (HTTP 201); false: it existed (200). */
  created: boolean;
  /** False when the schedule existed with this very definition: nothing was written. */
  changed: boolean;
  /** What the edit's realign did (DEL-9), when it existed and changed. */
  realigned: RealignReport | null;
  warnings: string[];
}

/** Attempts of an upsert whose schedule another request deletes between two steps. */
const UPSERT_TRIES = 3;

/**
 * API-9: creates the schedule `(source, externalId)` of the tenant, or, when it exists,
 * replaces its definition with this one (an edit: fields left out take their defaults,
 * `reminders` replaces the list, waiting deliveries are realigned, DEL-9). Unchanged
 * definitions write nothing. Race-safe: of concurrent upserts of one external id, one
 * creates (unique index on tenant, source, external id) and the others update it.
 * @throws ValidationError (the body, or `source` / `externalId`), ConflictError (the
 * schedule is cancelled: purge it first, or use another external id)
 */
export async function upsertScheduleByExternalId(
  app: AppContext,
  source: string,
  externalId: string,
  input: UpsertScheduleInput | unknown,
  ctx: CallContext = {},
): Promise<UpsertResult> {
  const tenant = tenantOf(ctx);
  const { debounce, ...body } = parseInput(upsertScheduleSchema, input);
  let burstStart: number | null = null;
  if (debounce) {
    // DEL-18: the due time of a debounced one-off is the server's to set.
    const planned = await debouncedStart(app, { tenant, source, externalId, body, debounce });
    body.dtstart = new Date(planned.dueMs).toISOString();
    burstStart = planned.newBurst ? planned.startMs : null;
  }
  const { value, warnings } = validateSchedule(app, { ...body, source, externalId }, { tenant });
  const hash = definitionHash(value, app.config.scheduler.maxAttempts);
  for (let attempt = 0; attempt < UPSERT_TRIES; attempt++) {
    const made = await app.db.transaction(async (tx) => {
      const row = await insertScheduleByExternalId(tx, {
        now: app.now(),
        tenant,
        requestHash: hash,
        definition: definitionColumns(value),
        source,
        externalId,
        traceParent: activeTraceParent(),
      });
      if (!row) return null;
      await insertReminders(tx, {
        scheduleId: row.id,
        reminders: reminderColumns(value.reminders, app.config.scheduler.maxAttempts),
      });
      await planLocked(tx, [row], planDeps(app));
      const reminders = await remindersOfSchedules(tx, { scheduleIds: [row.id] });
      return toScheduleView(row, reminders);
    });
    if (made) {
      if (burstStart !== null) {
        await startDebounceBurst(app.db, { scheduleId: made.id, startedAt: new Date(burstStart) });
      }
      app.wake();
      return { schedule: made, created: true, changed: true, realigned: null, warnings };
    }
    const existing = await scheduleByExternalId(app.db, { tenant, source, externalId });
    if (!existing) continue;
    if (existing.state === "cancelled") {
      throw new ConflictError(
        `schedule ${existing.id} (${source}/${externalId}) is cancelled; purge it (DELETE /v1/schedules/${existing.id}?purge=true) or use another external id`,
      );
    }
    if (existing.request_hash === hash) {
      return {
        schedule: await getSchedule(app, existing.id, { tenant }),
        created: false,
        changed: false,
        realigned: null,
        warnings,
      };
    }
    if (burstStart !== null) {
      // DEL-18: the burst's start is written before the due time moves: a crash between
      // the two leaves a due time in the past, so the next upsert starts a burst again.
      await startDebounceBurst(app.db, {
        scheduleId: existing.id,
        startedAt: new Date(burstStart),
      });
    }
    try {
      const edited = await updateSchedule(app, existing.id, fullPatch(value), { tenant });
      return {
        schedule: edited.schedule,
        created: false,
        changed: true,
        realigned: edited.realigned,
        warnings: edited.warnings,
      };
    } catch (err) {
      // Purged between the read and the edit: create it again.
      if (err instanceof NotFoundError) continue;
      throw err;
    }
  }
  throw new ConflictError(
    `schedule ${source}/${externalId} changed under this request ${UPSERT_TRIES} times; retry`,
  );
}

/**
 * DEL-18: the due time of a debounced upsert. A burst is open while the schedule's one
 * occurrence is still ahead (not yet due, so not yet sent) and a burst start is
 * recorded: the due time moves to now + `windowMs`, never past that start +
 * `maxDelayMs`. Otherwise this upsert starts a burst (`newBurst`): due at now +
 * `windowMs`. Only a one-off can be debounced.
 * @throws ValidationError (field `debounce`) when the body is recurring (`rrule`, `rdate`).
 */
async function debouncedStart(
  app: AppContext,
  p: {
    tenant: string;
    source: string;
    externalId: string;
    body: { rrule?: string | null | undefined; rdate?: readonly string[] | undefined };
    debounce: DebounceInput;
  },
): Promise<{ dueMs: number; startMs: number; newBurst: boolean }> {
  if (p.body.rrule || (p.body.rdate?.length ?? 0) > 0) {
    throw new ValidationError({
      field: "debounce",
      message: `applies to a one-off schedule only; this one is recurring (${p.body.rrule ? `rrule ${p.body.rrule}` : "rdate"}): remove debounce or the recurrence`,
      value: JSON.stringify(p.debounce),
    });
  }
  const nowMs = app.clock.now();
  const existing = await scheduleByExternalId(app.db, p);
  let startMs = nowMs;
  let newBurst = true;
  if (existing && existing.state !== "cancelled") {
    const parsed = parseStoredRow(existing);
    const burst = await debounceState(app.db, { scheduleId: existing.id });
    if (parsed.ok && burst && parsed.recurrence.first.instant > nowMs) {
      startMs = burst.burst_started_at.getTime();
      newBurst = false;
    }
  }
  const dueMs = Math.min(nowMs + p.debounce.windowMs, startMs + p.debounce.maxDelayMs);
  return { dueMs, startMs, newBurst };
}

/** Every definition field of a validated schedule, as an edit that replaces them all. */
function fullPatch(value: ReturnType<typeof validateSchedule>["value"]): Record<string, unknown> {
  const { source: _source, externalId: _externalId, ...definition } = value;
  return {
    ...definition,
    rrule: definition.rrule ?? null,
    endsAt: definition.endsAt ?? null,
    expiresAt: definition.expiresAt ?? null,
    dst: definition.dst ?? { gap: "shift", overlap: "earlier" },
    payload: definition.payload ?? null,
    title: definition.title ?? null,
  };
}

/** Result of {@link purgeSchedule}: what was deleted. */
export interface PurgeResult {
  id: string;
  purged: { schedules: number; deliveries: number; attempts: number };
}

/**
 * API-9: deletes a schedule of the tenant for good, with its reminders, deliveries and
 * attempts (a data-protection request). A send in flight finishes; nothing records it.
 * Without purge, a schedule is cancelled and kept (DEL-10).
 * @throws NotFoundError
 */
export async function purgeSchedule(
  app: AppContext,
  id: string,
  ctx: CallContext = {},
): Promise<PurgeResult> {
  checkId(id);
  const purged = await purgeScheduleRow(app.db, { tenant: tenantOf(ctx), id });
  if (purged.schedules === 0) throw new NotFoundError("schedule", id);
  return { id, purged };
}
