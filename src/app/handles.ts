/**
 * Schedule handles (API-4, API-9): `scheduler.schedules.get(id)` gives an object bound to
 * one schedule (and one tenant) with the operations on it — describe, update, pause,
 * resume, cancel, trigger, backfill, purge — so library code keeps a handle instead of
 * passing the id to every call.
 */
import type { ScheduleView, UpdateScheduleInput } from "../contracts/index.js";
import type { BackfillInput, TriggerInput } from "../contracts/operator.js";
import { applyOffset } from "../recurrence/index.js";
import { parseStoredRule } from "./stored-rule.js";
import type { RealignReport } from "../scheduler/realign.js";
import type { MissedOccurrencesSummary } from "../contracts/missed.js";
import { missedOccurrences } from "../store/operator.js";
import { tenantOf, type AppContext, type CallContext } from "./context.js";
import { missedSummary } from "./missed.js";
import {
  backfillSchedule,
  purgeSchedule,
  triggerSchedule,
  type BackfillResult,
  type PurgeResult,
  type TriggerResult,
} from "./operator.js";
import {
  cancelSchedule,
  createSchedule,
  getSchedule,
  pauseSchedule,
  resumeSchedule,
  updateSchedule,
  type CreateResult,
} from "./schedules.js";

/** How many upcoming occurrences {@link ScheduleHandle.describe} lists. */
export const DESCRIBE_NEXT = 5;
/** Most missed occurrences {@link ScheduleHandle.describe} lists. */
export const DESCRIBE_MISSED = 20;

/** An upcoming occurrence and when each reminder of it is due. */
export interface UpcomingOccurrence {
  /** The occurrence, ISO 8601 UTC. */
  occurrenceAt: string;
  /** Wall-clock time in the schedule's zone (`YYYY-MM-DDTHH:mm:ss`, or a date). */
  local: string;
  /** Due time of each reminder, ISO 8601 UTC. */
  reminders: Array<{ key: string; dueAt: string }>;
}

/** An occurrence the misfire policy (REC-6) or the expiry skipped. */
export interface MissedOccurrence {
  deliveryId: number;
  reminderKey: string;
  occurrenceAt: string;
  dueAt: string;
  /** `stale` (missed beyond its grace) or `expired` (past the schedule's expiry). */
  reason: string;
}

/** What {@link ScheduleHandle.describe} returns. */
export interface ScheduleDescription {
  schedule: ScheduleView;
  /**
   * The next {@link DESCRIBE_NEXT} occurrences at or after now (the clock's), from the
   * stored rule; empty for a cancelled or invalid schedule. A paused schedule lists them:
   * they are what it would send once resumed.
   */
  next: UpcomingOccurrence[];
  /** The most recent missed occurrences (at most {@link DESCRIBE_MISSED}), newest first. */
  missed: MissedOccurrence[];
  /**
   * OPS-13: what the rule called for in the last 7 days beside what was sent, skipped (by
   * reason), is waiting or failed (src/app/missed.ts).
   */
  missedSummary: MissedOccurrencesSummary;
}

/**
 * One schedule of one tenant. Holding a handle checks nothing: each method reads or
 * changes the schedule as it is then, and throws NotFoundError when it does not exist
 * (or belongs to another tenant).
 */
export class ScheduleHandle {
  readonly #app: AppContext;
  readonly #ctx: CallContext;

  /** @internal use `scheduler.schedules.get(id)`. */
  constructor(
    app: AppContext,
    readonly id: string,
    ctx: CallContext = {},
  ) {
    this.#app = app;
    this.#ctx = { tenant: tenantOf(ctx) };
  }

  /**
   * The schedule, its next 5 occurrences, its missed ones and what its rule called for in
   * the last 7 days beside what was sent (`missedSummary`).
   * @throws NotFoundError
   */
  async describe(): Promise<ScheduleDescription> {
    const schedule = await getSchedule(this.#app, this.id, this.#ctx);
    const missed = await missedOccurrences(this.#app.db, {
      tenant: this.#ctx.tenant!,
      scheduleId: this.id,
      limit: DESCRIBE_MISSED,
    });
    const now = this.#app.clock.now();
    return {
      schedule,
      next: upcoming(schedule, now, DESCRIBE_NEXT),
      missedSummary: await missedSummary(this.#app.db, this.#ctx.tenant!, schedule, now),
      missed: missed.map((m) => ({
        deliveryId: Number(m.id),
        reminderKey: m.reminder_key,
        occurrenceAt: m.occurrence_at.toISOString(),
        dueAt: m.due_at.toISOString(),
        reason: m.reason,
      })),
    };
  }

  /**
   * DEL-9: edits the schedule (fields left out keep their value; `reminders` replaces the
   * list) and realigns its waiting deliveries. With `version`, refused unless current.
   * @throws ValidationError, NotFoundError, ConflictError (`STALE_VERSION`, cancelled)
   */
  update(
    patch: UpdateScheduleInput,
    options: { version?: number } = {},
  ): Promise<{ schedule: ScheduleView; realigned: RealignReport; warnings: string[] }> {
    return updateSchedule(this.#app, this.id, patch, { ...this.#ctx, ...options });
  }

  /** DEL-10: pauses it. @throws NotFoundError, ConflictError */
  pause(): Promise<ScheduleView> {
    return pauseSchedule(this.#app, this.id, this.#ctx);
  }

  /** DEL-10: resumes it; what was missed follows its misfire policy (REC-6). @throws NotFoundError, ConflictError */
  resume(): Promise<ScheduleView> {
    return resumeSchedule(this.#app, this.id, this.#ctx);
  }

  /** DEL-10: cancels it and its waiting deliveries; the schedule is kept. Idempotent. @throws NotFoundError */
  cancel(): Promise<ScheduleView & { cancelledDeliveries: number }> {
    return cancelSchedule(this.#app, this.id, { ...this.#ctx, by: "user" });
  }

  /**
   * API-9: sends it once more now, with its own delivery key; the scheduled deliveries
   * are left alone. The same `triggerId` twice sends once.
   * @throws NotFoundError, ConflictError (not active), ValidationError
   */
  trigger(input: TriggerInput & { triggerId?: string } = {}): Promise<TriggerResult> {
    const { triggerId, ...body } = input;
    return triggerSchedule(this.#app, this.id, body, {
      ...this.#ctx,
      ...(triggerId ? { triggerId } : {}),
    });
  }

  /**
   * API-9: plans the occurrences of a past range that have no delivery yet (never a second
   * one for a sent occurrence); `dryRun` lists them without writing.
   * @throws NotFoundError, ConflictError, ValidationError naming `from` or `to`
   */
  backfill(input: BackfillInput): Promise<BackfillResult> {
    return backfillSchedule(this.#app, this.id, input, this.#ctx);
  }

  /** API-9: deletes it for good with its deliveries and attempts. @throws NotFoundError */
  purge(): Promise<PurgeResult> {
    return purgeSchedule(this.#app, this.id, this.#ctx);
  }
}

/** `scheduler.schedules`: handles on the schedules of a tenant. */
export class ScheduleHandles {
  readonly #app: AppContext;

  /** @internal built by `Punctual`. */
  constructor(app: AppContext) {
    this.#app = app;
  }

  /** A handle on schedule `id` (nothing is read until a method is called). */
  get(id: string, ctx: CallContext = {}): ScheduleHandle {
    return new ScheduleHandle(this.#app, id, ctx);
  }

  /**
   * Creates a schedule (API-1) and returns its handle with the create's result.
   * @throws ValidationError, ConflictError
   */
  async create(
    input: unknown,
    options: CallContext & { idempotencyKey?: string } = {},
  ): Promise<CreateResult & { handle: ScheduleHandle }> {
    const result = await createSchedule(this.#app, input, options);
    return { ...result, handle: this.get(result.schedule.id, options) };
  }
}

/** The next `count` occurrences of a stored schedule at or after `nowMs`. */
function upcoming(schedule: ScheduleView, nowMs: number, count: number): UpcomingOccurrence[] {
  if (schedule.state === "cancelled" || schedule.state === "invalid") return [];
  const parsed = parseStoredRule(schedule);
  if (!parsed.ok) return [];
  const { recurrence } = parsed;
  return recurrence.scan(nowMs, 8.64e15, count).occurrences.map((o) => ({
    occurrenceAt: new Date(o.instant).toISOString(),
    local: o.local,
    reminders: schedule.reminders.map((r) => ({
      key: r.key,
      dueAt: new Date(applyOffset(o, r.offset, recurrence.tzid, recurrence.dst)).toISOString(),
    })),
  }));
}
