/**
 * Planning (DEL-7) and the misfire sweep (REC-6).
 *
 * plan: for a batch of active schedules whose watermark is near, materialize every
 * delivery due in [watermark, now + planAhead) with ON CONFLICT DO NOTHING, and advance
 * the watermark, all in one transaction holding the schedules' row locks (SKIP LOCKED:
 * many planners at once take different schedules). A schedule whose stored rule no
 * longer parses is quarantined (`invalid`, reason kept) while the others go on (REC-3).
 *
 * misfire: pending rows that missed their time are judged by the schedule's misfire
 * policy through the pure `applyMisfire`: skipped (recorded with reason `stale` or
 * `expired`, never silently dropped) or kept and marked late.
 */
import type { Channel } from "../channels/types.js";
import type { Clock } from "../clock/index.js";
import type { SchedulerOptions } from "../config/index.js";
import { deliveryKey } from "../domain/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import {
  activeOr,
  messagingAttributes,
  SpanKind,
  tracer,
  tracingEnabled,
  type Span,
} from "../observability/tracing.js";
import {
  applyMisfire,
  applyOffset,
  parseOffset,
  parseRule,
  planningWindow,
} from "../recurrence/index.js";
import { ruleInputOfRow } from "../definition/index.js";
import { quietDeferral } from "./quiet-hours.js";
import type { Occurrence, Recurrence } from "../recurrence/types.js";
import type { Database, Queryable } from "../store/database.js";
import {
  advanceWatermarks,
  lockSchedulesToPlan,
  quarantineSchedule,
  remindersOf,
  selectStale,
  type PlanReminderRow,
  type PlanScheduleRow,
  type StaleRow,
} from "../store/planning.js";
import {
  insertPlannedDeliveries,
  type DeliveryToInsert,
  recordMisfire,
} from "../store/deliveries/index.js";

const DAY_MS = 86_400_000;
/**
 * Most occurrences expanded per schedule per pass (shared by its reminders); the watermark
 * advances in steps past it.
 * Planning one schedule is one synchronous stretch of the event loop's thread (OPS-12):
 * 10,000 occurrences of a SECONDLY rule cost about 50 ms there, 2,000 about 10 ms.
 */
const MAX_OCCURRENCES_PER_PASS = 2_000;
/** Fewest occurrences per reminder per pass, however many reminders share the cap. */
const MIN_OCCURRENCES_PER_REMINDER = 50;
/**
 * Pages of the cap a pass may read through before `from` (the margin of a nominal offset:
 * 3 h, 10,800 occurrences of a SECONDLY rule, is 6 pages of 2,000).
 */
const MAX_MARGIN_PAGES = 16;
/** Deliveries per insert statement (OPS-12). */
const INSERT_CHUNK = 500;
/** Planning work (ms) between two turns of the event loop in one batch (OPS-12). */
const PLAN_SLICE_MS = 10;
/** Nominal (day/week) offsets follow the wall clock: allow this much for DST shifts. */
const NOMINAL_MARGIN_MS = 3 * 3_600_000;

export interface PlanDeps {
  db: Database;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  options: SchedulerOptions;
  channels: ReadonlyMap<string, Channel>;
}

/** Most (schedule, rule) pairs remembered per process as already logged for repairs. */
const MAX_REPAIRS_REMEMBERED = 10_000;
/** Per metrics registry (one per app): schedule id → the rule whose repairs were logged. */
const repairsLogged = new WeakMap<Metrics, Map<string, string>>();

/**
 * REC-3: logs, once per schedule and stored rule (per process), the repairs `parseRule` made
 * to read it (a duplicate UNTIL, a local UNTIL with a zoned DTSTART, …), at WARN with the
 * schedule id, and counts it in `punctual_rule_repairs_total`. The rule is planned as
 * repaired either way; logging again after a restart or an edit is intended.
 */
function logRepairs(
  schedule: PlanScheduleRow,
  warnings: readonly string[],
  deps: Pick<PlanDeps, "logger" | "metrics">,
): void {
  if (warnings.length === 0) return;
  let seen = repairsLogged.get(deps.metrics);
  if (seen === undefined) {
    seen = new Map();
    repairsLogged.set(deps.metrics, seen);
  }
  const signature = JSON.stringify([schedule.dtstart, schedule.tzid, schedule.rrule, warnings]);
  if (seen.get(schedule.id) === signature) return;
  seen.delete(schedule.id);
  if (seen.size >= MAX_REPAIRS_REMEMBERED) seen.delete(seen.keys().next().value as string);
  seen.set(schedule.id, signature);
  deps.metrics.ruleRepairs.inc();
  deps.logger.warn(
    { scheduleId: schedule.id, rrule: schedule.rrule, repairs: warnings.slice(0, 10) },
    "stored rule read with repairs (strict validation would refuse it); planned as repaired",
  );
}

/**
 * A delivery the planner wants to exist: the row {@link insertPlannedDeliveries} inserts,
 * with the occurrence's local wall-clock time in the zone it was expanded in (API-11: a
 * floating schedule keys its recipients' deliveries by it, `floatingDeliveryKey`).
 */
export type PlannedDelivery = DeliveryToInsert & {
  /** `Occurrence.local`: `YYYY-MM-DDTHH:mm:ss`, or `YYYY-MM-DD` when date-only. */
  occurrenceLocal?: string;
};

/** Result of planning one schedule over a window. */
export interface SchedulePlan {
  deliveries: PlannedDelivery[];
  /** New watermark (ms): everything due before it is in `deliveries` or was before. */
  plannedUntil: number;
  /** No occurrence left after the watermark. */
  complete: boolean;
  /** REC-5: the unbounded series hit its expansion cap in this window. */
  capped: boolean;
}

/** Signed shift of an offset, for windowing: approximate ms, and whether it has nominal days. */
function offsetShape(offset: string): { approxMs: number; nominal: boolean } {
  const parsed = parseOffset(offset);
  return { approxMs: parsed.days * DAY_MS + parsed.exactMs, nominal: parsed.days !== 0 };
}

/** What recovery does after a lost lease for a reminder on a channel (DEL-6). */
export function lostLeasePolicy(
  reminder: Pick<PlanReminderRow, "on_lost_lease">,
  channel: Channel | undefined,
): "retry" | "in_doubt" {
  if (reminder.on_lost_lease) return reminder.on_lost_lease;
  return channel?.idempotent ? "retry" : "in_doubt";
}

/**
 * The delivery of one reminder for one occurrence of a (non-recipient) schedule, as
 * planning writes it: its key (schedule, reminder, occurrence instant), its due time (the
 * reminder's offset applied to the occurrence in the schedule's zone with its DST policy,
 * RFC 5545 §3.8.6.3), the reminder's channel, attempt budget and quiet-hours deferral
 * (DEL-15). Pure. Planning and the realign of an edit (DEL-9) both build rows here.
 * @param policy the reminder's lost-lease policy ({@link lostLeasePolicy}).
 */
export function plannedDelivery(
  scheduleId: string,
  reminder: PlanReminderRow,
  occurrence: Occurrence,
  recurrence: Recurrence,
  policy: "retry" | "in_doubt",
): PlannedDelivery {
  const due = applyOffset(occurrence, reminder.offset_duration, recurrence.tzid, recurrence.dst);
  const occurrenceAt = new Date(occurrence.instant);
  return {
    key: deliveryKey(scheduleId, reminder.key, occurrenceAt),
    scheduleId,
    reminderKey: reminder.key,
    occurrenceAt,
    occurrenceLocal: occurrence.local,
    dueAt: new Date(due),
    channel: reminder.channel,
    onLostLease: policy,
    maxAttempts: reminder.max_attempts,
    deferredUntil: quietDeferral(reminder, due),
  };
}

/**
 * Plans one schedule: the deliveries due in [from, to) (ms), pure apart from its inputs.
 * `from` is the watermark; for a schedule never planned, recurring ones start at
 * creation minus the grace period (occurrences before a schedule existed were never
 * "missed"), one-offs at the beginning of time (a one-off due in the past is sent late).
 */
export function planSchedule(
  schedule: PlanScheduleRow,
  recurrence: Recurrence,
  reminders: readonly PlanReminderRow[],
  channels: ReadonlyMap<string, Channel>,
  options: Pick<SchedulerOptions, "planAheadMs" | "maxExpansionDays">,
): SchedulePlan {
  const now = schedule.db_now.getTime();
  const from =
    schedule.planned_until?.getTime() ??
    (schedule.recurring ? schedule.created_at.getTime() - schedule.grace_ms : -8.64e15);
  let to = now + options.planAheadMs;
  let capped = false;
  let complete = false;
  const { untilMs: capAt } = planningWindow({
    recurrence,
    anchorMs: schedule.created_at.getTime(),
    perpetual: schedule.perpetual,
    horizonMs: options.maxExpansionDays * DAY_MS,
  });
  if (capAt <= to) {
    to = capAt;
    capped = true;
    complete = true;
  }
  let plannedUntil = Math.max(from, to);
  const deliveries: PlannedDelivery[] = [];
  // The cap holds for the schedule as a whole (OPS-12): its reminders share it.
  const perReminder = Math.max(
    MIN_OCCURRENCES_PER_REMINDER,
    Math.floor(MAX_OCCURRENCES_PER_PASS / Math.max(1, reminders.length)),
  );
  for (const reminder of reminders) {
    const shape = offsetShape(reminder.offset_duration);
    const margin = shape.nominal ? NOMINAL_MARGIN_MS : 0;
    const occFrom = Math.max(-8.64e15, from - shape.approxMs - margin);
    const occTo = Math.min(8.64e15, to - shape.approxMs + margin);
    if (occFrom >= occTo) continue;
    const dueOf = (o: Occurrence) =>
      applyOffset(o, reminder.offset_duration, recurrence.tzid, recurrence.dst);
    // The scan starts `margin` early (a nominal offset moves with DST); a dense series can
    // fill a whole page there, before `from`: read on past it, a page at a time, so the
    // pass always plans forward (a SECONDLY rule with a -P1D offset planned nothing).
    const occurrences: Occurrence[] = [];
    let limit = perReminder;
    let scanned = recurrence.scan(occFrom, occTo, limit);
    for (let page = 1; ; page++) {
      for (const o of scanned.occurrences) if (dueOf(o) >= from) occurrences.push(o);
      const last = scanned.occurrences.at(-1);
      if (occurrences.length > 0 || page >= MAX_MARGIN_PAGES) break;
      // Pages read past the margin plan nothing: they take the whole cap, whatever the
      // reminder's share of it (50 reminders' share would not cross 3 h of seconds).
      const pageFull = scanned.occurrences.length >= limit;
      limit = MAX_OCCURRENCES_PER_PASS;
      if (pageFull && last !== undefined) {
        scanned = recurrence.scan(last.instant + 1, occTo, limit);
      } else if (scanned.truncated) {
        scanned = recurrence.scan(scanned.throughMs, occTo, limit);
      } else break;
    }
    let full = scanned.occurrences.length >= limit;
    let lastOccurrence = scanned.occurrences.at(-1);
    if (occurrences.length > perReminder) {
      // A whole page past the margin: plan the reminder's share of it and stop there.
      occurrences.length = perReminder;
      lastOccurrence = occurrences.at(-1);
      full = true;
    }
    const policy = lostLeasePolicy(reminder, channels.get(reminder.channel));
    for (const occurrence of occurrences) {
      const delivery = plannedDelivery(schedule.id, reminder, occurrence, recurrence, policy);
      const due = delivery.dueAt.getTime();
      if (due < from || due >= to) continue;
      deliveries.push(delivery);
    }
    if (full) {
      // Too many in one window: advance only to the last planned due time; the next pass
      // continues from there (ON CONFLICT makes the overlap harmless).
      const lastDue = dueOf(lastOccurrence!);
      plannedUntil = Math.min(plannedUntil, Math.max(from + 1, lastDue));
      complete = false;
      capped = false;
    } else if (scanned.truncated) {
      // OPS-12: the call's work cap stopped the expansion; the answer is complete only
      // up to throughMs, so the watermark stops there and the next pass goes on.
      const through = scanned.throughMs + shape.approxMs - margin;
      plannedUntil = Math.min(plannedUntil, Math.max(from + 1, through));
      complete = false;
      capped = false;
    }
  }
  if (!complete && recurrence.bounded) {
    // Finite set: complete once no occurrence can still produce a due time at or after
    // the watermark, whatever the reminder offsets.
    const maxShift =
      Math.max(0, ...reminders.map((r) => offsetShape(r.offset_duration).approxMs)) +
      NOMINAL_MARGIN_MS;
    const rest = recurrence.scan(plannedUntil - maxShift, 8.64e15, 1);
    complete = rest.occurrences.length === 0 && !rest.truncated;
  }
  return { deliveries, plannedUntil, complete, capped };
}

/** Inserts planned deliveries in chunks (ON CONFLICT DO NOTHING). @returns rows created. */
export async function insertDeliveries(
  tx: Queryable,
  now: Date | null,
  rows: PlannedDelivery[],
): Promise<number> {
  let inserted = 0;
  // OPS-12: small statements — embedded, a statement runs on this thread, so its size
  // bounds how long the event loop waits.
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
    const chunk = rows.slice(i, i + INSERT_CHUNK);
    inserted += await insertPlannedDeliveries(tx, { now, deliveries: chunk });
  }
  return inserted;
}

/**
 * Plans schedules in the given transaction. Used by the plan sweep and by edits
 * (realign, DEL-9), which plan inside their own transaction, and by creates, which hand
 * over the recurrence their validation built (`validated`, by schedule id) so the rule is
 * not read again.
 * @returns the number of delivery rows inserted.
 */
export async function planLocked(
  tx: Queryable,
  schedules: PlanScheduleRow[],
  deps: Omit<PlanDeps, "db">,
  validated?: ReadonlyMap<string, Recurrence>,
): Promise<number> {
  if (schedules.length === 0) return 0;
  const reminders = await remindersOf(tx, { scheduleIds: schedules.map((s) => s.id) });
  const now = deps.clock.sqlNow();
  const planned: PlannedDelivery[] = [];
  const marks: Array<{ id: string; until: Date; complete: boolean; capLogged: boolean }> = [];
  let sliceStart = performance.now();
  for (const schedule of schedules) {
    // OPS-12: a large batch (an import's bulk create) gives the event loop a turn between
    // slices of planning work, so health checks and other requests are not held up.
    if (performance.now() - sliceStart >= PLAN_SLICE_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
    try {
      const known = validated?.get(schedule.id);
      const parsed = known
        ? { ok: true as const, recurrence: known, warnings: [] }
        : parseRule(ruleInputOfRow(schedule));
      if (!parsed.ok) {
        await quarantineSchedule(tx, {
          now,
          scheduleId: schedule.id,
          reason: parsed.error.message.slice(0, 1_000),
        });
        deps.metrics.quarantined.inc();
        deps.logger.error(
          { scheduleId: schedule.id, reason: parsed.error.message },
          "stored rule does not parse: schedule quarantined (state invalid); others continue",
        );
        continue;
      }
      logRepairs(schedule, parsed.warnings, deps);
      const span = planSpan(schedule);
      const plan = planSchedule(
        schedule,
        parsed.recurrence,
        reminders.filter((r) => r.schedule_id === schedule.id),
        deps.channels,
        deps.options,
      );
      if (span) {
        span.setAttribute("punctual.deliveries.planned", plan.deliveries.length);
        span.setAttribute("punctual.plan.complete", plan.complete);
        span.end();
      }
      const capLogged = plan.capped && schedule.cap_logged_at === null;
      if (capLogged) {
        deps.metrics.seriesTruncated.inc();
        deps.logger.error(
          { scheduleId: schedule.id, maxExpansionDays: deps.options.maxExpansionDays },
          "unbounded series reached its expansion cap and stops here; give the rule COUNT/UNTIL, set endsAt, or declare perpetual: true",
        );
      }
      // One by one: spreading ~120k rows as arguments overflows the call stack.
      for (const delivery of plan.deliveries) planned.push(delivery);
      marks.push({
        id: schedule.id,
        until: new Date(plan.plannedUntil),
        complete: plan.complete,
        capLogged,
      });
    } catch (err) {
      // One schedule's error never stops the others (OPS-1); it is retried next pass.
      deps.logger.error({ err, scheduleId: schedule.id }, "planning one schedule failed");
      deps.metrics.sweepFailures.inc({ sweep: "plan" });
    }
  }
  const inserted = await insertDeliveries(tx, now, planned);
  if (marks.length > 0) {
    await advanceWatermarks(tx, { now, marks });
  }
  return inserted;
}

/**
 * OPS-15: the `plan` span of one schedule, or null while not tracing: a child of the
 * active span (the request that creates or edits the schedule), else of the context
 * stored with the schedule (a later planning pass joins the creating request's trace).
 */
function planSpan(schedule: PlanScheduleRow): Span | null {
  if (!tracingEnabled()) return null;
  return tracer().startSpan(
    "plan",
    {
      kind: SpanKind.INTERNAL,
      attributes: messagingAttributes("plan", { scheduleId: schedule.id }),
    },
    activeOr(schedule.trace_parent),
  );
}

/** DEL-7: one planning pass. Returns the number of delivery rows created. */
export async function planSweep(deps: PlanDeps): Promise<number> {
  let total = 0;
  // Keep going while full batches come back, so a burst of new schedules plans at once,
  // but hand over to dispatch after the time budget (the next tick continues).
  const started = performance.now();
  while (performance.now() - started < deps.options.planBudgetMs) {
    const { inserted, full } = await deps.db.transaction(async (tx) => {
      const rows = await lockSchedulesToPlan(tx, {
        now: deps.clock.sqlNow(),
        aheadMs: deps.options.planAheadMs / 2,
        limit: deps.options.planBatch,
      });
      return {
        inserted: await planLocked(tx, rows, deps),
        full: rows.length >= deps.options.planBatch,
      };
    });
    total += inserted;
    if (!full) break;
  }
  return total;
}

/**
 * REC-6: judges pending rows that missed their time, batch after batch within the
 * planning time budget (rows not judged yet are not admissible, so nothing stale is sent
 * meanwhile). Returns how many were skipped.
 */
export async function misfireSweep(deps: Omit<PlanDeps, "channels">): Promise<number> {
  const started = performance.now();
  let skipped = 0;
  while (performance.now() - started < deps.options.planBudgetMs) {
    const { skipped: n, full } = await misfireBatch(deps);
    skipped += n;
    if (!full) break;
  }
  return skipped;
}

async function misfireBatch(
  deps: Omit<PlanDeps, "channels">,
): Promise<{ skipped: number; full: boolean }> {
  const now = deps.clock.sqlNow();
  const rows = await selectStale(deps.db, { now, limitPerIndex: deps.options.misfireBatch });
  if (rows.length === 0) return { skipped: 0, full: false };
  const nowMs = rows[0]!.db_now.getTime();
  const skip: Array<{ id: number; reason: string }> = [];
  const lateIds: number[] = [];
  const channelOf = new Map<string, string>();
  const lateRunAt: Array<Date | null> = [];
  // Rows arrive grouped by (schedule, reminder, recipient), oldest first: each recipient's
  // missed rows are judged apart (API-11).
  let group: StaleRow[] = [];
  const judge = () => {
    if (group.length === 0) return;
    const first = group[0]!;
    const decisions = applyMisfire({
      items: group.map((r) => ({
        occurrenceAt: r.occurrence_at.getTime(),
        // DEL-15: a row deferred by quiet hours is judged from its deferred instant.
        dueAt: (r.deferred_until ?? r.due_at).getTime(),
      })),
      nowMs,
      policy: first.misfire,
      graceMs: first.grace_ms,
      oneOff: !first.recurring,
      expiresAtMs: first.expires_at?.getTime() ?? null,
      // DEL-17: the schedule's catch-up window and pacing.
      catchUpWindowMs: first.catch_up?.windowMs ?? null,
      catchUpPaceMs: first.catch_up?.paceMs ?? 0,
    });
    decisions.forEach((d, i) => {
      const row = group[i]!;
      if (d.action === "skip") {
        skip.push({ id: row.id, reason: d.reason ?? "stale" });
        deps.metrics.skipped.inc({ reason: d.reason ?? "stale" });
        channelOf.set(String(row.id), row.channel);
      } else if (d.late) {
        // Kept and late: marked, so the next sweep does not judge it again.
        lateIds.push(row.id);
        lateRunAt.push(d.runAtMs === undefined ? null : new Date(d.runAtMs));
      }
    });
    group = [];
  };
  for (const row of rows) {
    const prev = group[0];
    if (
      prev &&
      (prev.schedule_id !== row.schedule_id ||
        prev.reminder_key !== row.reminder_key ||
        prev.recipient_id !== row.recipient_id)
    )
      judge();
    group.push(row);
  }
  judge();
  const applied = await recordMisfire(deps.db, { now, skip, lateIds, lateRunAt });
  // OPS-13: a skipped delivery counts once, by the process whose statement skipped it.
  const reasonOf = new Map(skip.map((s) => [String(s.id), s.reason]));
  for (const id of applied?.skipped_ids ?? []) {
    deps.metrics.outcomes.inc({
      channel: channelOf.get(String(id)) ?? "unknown",
      outcome: "skipped",
    });
    deps.metrics.missedOccurrences.inc({ reason: reasonOf.get(String(id)) ?? "stale" });
  }
  if (skip.length > 0) {
    deps.logger.info(
      { skipped: skip.length, late: lateIds.length },
      "misfire policy: missed occurrences recorded as skipped",
    );
  }
  // A full batch in which nothing changed would repeat forever: stop there.
  return {
    skipped: skip.length,
    full: rows.length >= deps.options.misfireBatch && skip.length + lateIds.length > 0,
  };
}
