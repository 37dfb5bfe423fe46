/**
 * `createPunctual()` / `createScheduler()` (API-4): wires the store, the scheduler loop
 * and the channels into one object, the facade the HTTP API and the CLI are built on.
 */
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { z } from "zod";
import type { Channel } from "../channels/types.js";
import { ChannelRegistry, createLogChannel, createWebhookChannel } from "../channels/index.js";
import { SystemClock, type Clock } from "../clock/index.js";
import { resolveConfig, type ConfigInput, type PunctualConfig } from "../config/index.js";
import {
  createScheduleSchema,
  updateScheduleSchema,
  type UpdateScheduleInput,
  listDeliveriesQuerySchema,
  listSchedulesQuerySchema,
  type AttemptView,
  type CreateScheduleInput,
  type DeliveryView,
  type ScheduleView,
} from "../contracts/index.js";
import {
  ConflictError,
  NotFoundError,
  PunctualError,
  ValidationError,
  type FieldIssue,
} from "../errors/index.js";
import { createLogger, type Logger } from "../observability/logger.js";
import { createMetrics, type Metrics } from "../observability/metrics.js";
import { parseOffset, validateRule } from "../recurrence/index.js";
import type { Database, Queryable } from "../store/database.js";
import { assertSchemaCurrent, migrate, schemaVersion, expectedVersion } from "../store/migrator.js";
import { initSetting, notifyWake, ping } from "../store/operations.js";
import { openPglite } from "../store/pglite.js";
import { openPostgres } from "../store/postgres.js";
import {
  attemptsOf,
  cancelScheduleRow,
  deleteReminders,
  deliveryById,
  insertReminders,
  insertRemindersBulk,
  insertSchedule,
  insertSchedulesBulk,
  listDeliveryRows,
  listScheduleRows,
  redriveDeliveryRow,
  remindersOfSchedules,
  resolveDeliveryRow,
  reviveSchedule,
  scheduleById,
  scheduleByIdempotencyKey,
  setScheduleState,
  toAttemptView,
  toDeliveryView,
  toScheduleView,
  updateScheduleDefinition,
  type ReminderRow,
  type ReminderToInsert,
  type ScheduleDefinition,
} from "../store/schedules.js";
import { Scheduler } from "../scheduler/scheduler.js";
import { realignSchedule, type RealignReport } from "../scheduler/realign.js";
import { planLocked } from "../scheduler/plan.js";
import { lockScheduleForEdit } from "../store/planning.js";

/** Release version (from package.json). */
export const VERSION: string = (() => {
  try {
    const pkg = JSON.parse(
      readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
    ) as { version?: string };
    return pkg.version ?? "0.0.0";
  } catch {
    return "0.0.0";
  }
})();

/** Options of {@link createPunctual}: the configuration plus what code can inject. */
export interface PunctualOptions extends ConfigInput {
  /** Bring your own database (tests, embedding); otherwise opened from the configuration. */
  database?: Database;
  /** Extra channels (handler functions, e-mail …), beside the built-in webhook and log. */
  channels?: Channel[];
  clock?: Clock;
  logger?: Logger;
  /** `start` (API + scheduler) or `worker`; recorded in the instances table. */
  role?: string;
}

/** Tenant used when the API runs without keys. */
export const DEFAULT_TENANT = "default";

/** Who is calling: every query is scoped to a tenant (API-2). */
export interface CallContext {
  tenant?: string;
}

/** Result of a create: `created` is false when an Idempotency-Key replay returned the existing one. */
export interface CreateResult {
  schedule: ScheduleView;
  created: boolean;
  warnings: string[];
}

/** Health of this process (OPS-4). */
export interface Health {
  live: boolean;
  ready: boolean;
  checks: { database: boolean; schema: boolean; heartbeat: boolean };
  lastPassAt: string | null;
  detail: string[];
}

/** zod issues as field issues (`reminders.0.offset`), naming short scalar values from `input`. */
export function issuesFromZod(error: z.ZodError, prefix = "", input?: unknown): FieldIssue[] {
  return error.issues.map((issue) => {
    const field = [prefix, ...issue.path.map(String)].filter(Boolean).join(".") || "(body)";
    if (issue.code === "unrecognized_keys") {
      return { field, message: `unknown field(s): ${issue.keys.join(", ")}` };
    }
    // Name the offending value when it is a short scalar.
    let value: unknown = input;
    for (const key of issue.path) {
      value =
        value && typeof value === "object"
          ? (value as Record<PropertyKey, unknown>)[key]
          : undefined;
    }
    const shown =
      (typeof value === "string" && value.length <= 200) ||
      typeof value === "number" ||
      typeof value === "boolean";
    return shown ? { field, message: issue.message, value } : { field, message: issue.message };
  });
}

/** Parses with a zod schema, or throws ValidationError naming every bad field. */
export function parseInput<T extends z.ZodType>(
  schema: T,
  input: unknown,
  prefix = "",
): z.output<T> {
  const result = schema.safeParse(input);
  if (!result.success) throw new ValidationError(issuesFromZod(result.error, prefix, input));
  return result.data;
}

function prefixIssues(err: unknown, prefix: string): FieldIssue[] {
  if (err instanceof ValidationError) {
    return err.issues.map((i) => ({ ...i, field: `${prefix}.${i.field}` }));
  }
  return [{ field: prefix, message: err instanceof Error ? err.message : String(err) }];
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * Hash of a schedule's validated definition (everything but where it came from): equal
 * hashes mean an idempotent replay, or an unchanged event on re-import.
 */
export function definitionHash(
  value: z.output<typeof createScheduleSchema>,
  defaultMaxAttempts = 5,
): string {
  const { source: _source, externalId: _externalId, ...definition } = value;
  // Absent and default values hash alike, so an edit that spells out a default (or an
  // import that leaves one out) is not a change.
  const normalized = {
    ...definition,
    rrule: definition.rrule ?? null,
    endsAt: definition.endsAt ?? null,
    expiresAt: definition.expiresAt ?? null,
    dst: { gap: definition.dst?.gap ?? "shift", overlap: definition.dst?.overlap ?? "earlier" },
    payload: definition.payload ?? null,
    reminders: definition.reminders.map((r) => ({
      key: r.key,
      offset: r.offset,
      channel: r.channel,
      target: r.target ?? {},
      delivery: r.delivery ?? null,
      maxAttempts: r.maxAttempts ?? defaultMaxAttempts,
    })),
  };
  return createHash("sha256").update(canonicalJson(normalized)).digest("hex");
}

/** The definition columns of a validated schedule, as the store writes them. */
function definitionOf(value: z.output<typeof createScheduleSchema>): ScheduleDefinition {
  return {
    dtstart: value.dtstart,
    tzid: value.tzid,
    rrule: value.rrule ?? null,
    rdate: value.rdate,
    exdate: value.exdate,
    recurring: Boolean(value.rrule) || value.rdate.length > 0,
    endsAt: value.endsAt ?? null,
    expiresAt: value.expiresAt ?? null,
    dstGap: value.dst?.gap ?? "shift",
    dstOverlap: value.dst?.overlap ?? "earlier",
    misfire: value.misfire,
    graceMs: value.graceMs,
    perpetual: value.perpetual,
    payloadJson: JSON.stringify(value.payload ?? null),
  };
}

/** The reminders of a validated schedule, as the store writes them. */
function remindersOf(
  reminders: z.output<typeof createScheduleSchema>["reminders"],
  defaultMaxAttempts: number,
): ReminderToInsert[] {
  return reminders.map((r) => ({
    key: r.key,
    offset: r.offset,
    channel: r.channel,
    targetJson: JSON.stringify(r.target ?? {}),
    onLostLease:
      r.delivery === "at-least-once" ? "retry" : r.delivery === "at-most-once" ? "in_doubt" : null,
    maxAttempts: r.maxAttempts ?? defaultMaxAttempts,
  }));
}

/** The running punctual: store, scheduler, channels, and the operations on them. */
export class Punctual {
  readonly config: PunctualConfig;
  readonly db: Database;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly channels: ChannelRegistry;
  readonly scheduler: Scheduler;
  /** The default webhook signing secret in use, and where it came from. */
  readonly webhookSecret: { secret: string; source: "configured" | "generated" };
  #closed = false;
  #closers: Array<() => Promise<void> | void> = [];

  /** @internal use {@link createPunctual}. */
  constructor(parts: {
    config: PunctualConfig;
    db: Database;
    clock: Clock;
    logger: Logger;
    metrics: Metrics;
    channels: ChannelRegistry;
    role: string;
    closers: Array<() => Promise<void> | void>;
    webhookSecret: { secret: string; source: "configured" | "generated" };
  }) {
    this.webhookSecret = parts.webhookSecret;
    this.config = parts.config;
    this.db = parts.db;
    this.clock = parts.clock;
    this.logger = parts.logger;
    this.metrics = parts.metrics;
    this.channels = parts.channels;
    this.#closers = parts.closers;
    const map = new Map(parts.channels.names().map((n) => [n, parts.channels.get(n)]));
    this.scheduler = new Scheduler({
      db: parts.db,
      clock: parts.clock,
      logger: parts.logger,
      metrics: parts.metrics,
      channels: map,
      options: parts.config.scheduler,
      version: VERSION,
      role: parts.role,
    });
  }

  /** Starts the scheduler loop. */
  async start(): Promise<void> {
    await this.scheduler.start();
  }

  /** OPS-6: stops the loop (finishing in-flight sends) and closes the database. Idempotent. */
  async close(graceMs?: number): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.scheduler.stop(graceMs);
    for (const close of this.#closers) await close();
  }

  #now(): Date | null {
    return this.clock.sqlNow();
  }

  #wake(): void {
    this.scheduler.wake();
    if (this.db.engine === "postgres") {
      notifyWake(this.db, { payload: "" }).catch((err) =>
        this.logger.warn({ err }, "NOTIFY failed"),
      );
    }
  }

  /**
   * Validates a create request strictly (REC-3 strict posture, DEL-11 channels, CH-1
   * targets). Returns the parsed input and warnings.
   * @throws ValidationError naming every bad field.
   */
  validateSchedule(input: unknown): {
    value: z.output<typeof createScheduleSchema>;
    warnings: string[];
  } {
    const value = parseInput(createScheduleSchema, input);
    const issues: FieldIssue[] = [];
    const warnings: string[] = [];
    try {
      const recurrence = validateRule({
        dtstart: value.dtstart,
        tzid: value.tzid,
        rrule: value.rrule ?? null,
        rdate: value.rdate,
        exdate: value.exdate,
        endsAt: value.endsAt ?? null,
        dst: value.dst,
      });
      if (value.expiresAt && Date.parse(value.expiresAt) <= recurrence.first.instant) {
        issues.push({
          field: "expiresAt",
          message: "is at or before the first occurrence: nothing could ever be sent",
          value: value.expiresAt,
        });
      }
      if (!recurrence.bounded && !value.perpetual) {
        warnings.push(
          `unbounded series: planned for ${this.config.scheduler.maxExpansionDays} days, then stopped (logged at ERROR); add COUNT/UNTIL or endsAt, or set perpetual: true`,
        );
      }
    } catch (err) {
      if (err instanceof ValidationError) issues.push(...err.issues);
      else throw err;
    }
    const keys = new Set<string>();
    value.reminders.forEach((reminder, i) => {
      const at = `reminders.${i}`;
      if (keys.has(reminder.key))
        issues.push({ field: `${at}.key`, message: "duplicate reminder key", value: reminder.key });
      keys.add(reminder.key);
      try {
        parseOffset(reminder.offset);
      } catch (err) {
        issues.push(...prefixIssues(err, `${at}`).map((x) => ({ ...x, field: `${at}.offset` })));
      }
      if (!this.channels.has(reminder.channel)) {
        issues.push({
          field: `${at}.channel`,
          message: `unknown channel; known: ${this.channels.names().join(", ")}`,
          value: reminder.channel,
        });
        return;
      }
      try {
        this.channels.get(reminder.channel).validateTarget(reminder.target);
      } catch (err) {
        issues.push(
          ...prefixIssues(err, at).map((x) => ({
            ...x,
            field: x.field.replace(`${at}.target.target`, `${at}.target`),
          })),
        );
      }
    });
    if (issues.length > 0) throw new ValidationError(issues);
    return { value, warnings };
  }

  /**
   * Creates a schedule with its reminders in one transaction (API-1). With an
   * idempotency key, a retried create returns the first schedule (`created: false`);
   * the same key with a different body is a ConflictError.
   * @throws ValidationError, ConflictError
   */
  async createSchedule(
    input: CreateScheduleInput | unknown,
    options: CallContext & { idempotencyKey?: string } = {},
  ): Promise<CreateResult> {
    const tenant = options.tenant ?? DEFAULT_TENANT;
    const { value, warnings } = this.validateSchedule(input);
    const hash = definitionHash(value, this.config.scheduler.maxAttempts);
    const idem = options.idempotencyKey ?? null;
    const result = await this.db.transaction(async (tx) => {
      const row = await insertSchedule(tx, {
        now: this.#now(),
        tenant,
        idempotencyKey: idem,
        requestHash: hash,
        definition: definitionOf(value),
        source: value.source ?? null,
        externalId: value.externalId ?? null,
      });
      if (!row) return null;
      await this.#insertReminders(tx, row.id, value.reminders);
      // Plan the first window in the same transaction: the deliveries exist the moment
      // the schedule does (DEL-1), and a reminder due in seconds needs no planning pass.
      await planLocked(tx, [row], this.#planDeps());
      const reminders = await remindersOfSchedules(tx, { scheduleIds: [row.id] });
      return toScheduleView(row, reminders);
    });
    if (result) {
      this.#wake();
      return { schedule: result, created: true, warnings };
    }
    // The idempotency key was used before: same body → the same schedule; else a conflict.
    const existing = await scheduleByIdempotencyKey(this.db, { tenant, idempotencyKey: idem });
    if (!existing) throw new ConflictError("idempotency key collision; retry the request");
    if (existing.request_hash !== hash) {
      throw new ConflictError(
        `Idempotency-Key "${idem}" was already used with a different request body (schedule ${existing.id})`,
        "IDEMPOTENCY_KEY_REUSED",
      );
    }
    return { schedule: await this.getSchedule(existing.id, options), created: false, warnings };
  }

  /**
   * DEL-9: edits a schedule at `version` (optimistic concurrency) and realigns its waiting
   * deliveries in the same transaction. Fields left out keep their value; `reminders`, when
   * given, replaces the whole list.
   * With `revive`, a cancelled schedule becomes active again (imports: an event that came
   * back to its calendar).
   * @throws ValidationError, NotFoundError, ConflictError (`STALE_VERSION` when `version`
   * is not the current one; `CONFLICT` for a cancelled schedule without `revive`)
   */
  async updateSchedule(
    id: string,
    patch: UpdateScheduleInput | unknown,
    options: CallContext & { version?: number; revive?: boolean } = {},
  ): Promise<{ schedule: ScheduleView; realigned: RealignReport; warnings: string[] }> {
    const tenant = options.tenant ?? DEFAULT_TENANT;
    const changes = parseInput(updateScheduleSchema, patch);
    const current = await this.getSchedule(id, options);
    const merged = {
      dtstart: current.dtstart,
      tzid: current.tzid,
      rrule: current.rrule,
      rdate: current.rdate,
      exdate: current.exdate,
      endsAt: current.endsAt,
      expiresAt: current.expiresAt,
      dst: current.dst,
      misfire: current.misfire,
      graceMs: current.graceMs,
      perpetual: current.perpetual,
      payload: current.payload,
      reminders: undefined as unknown,
      // Only the fields the caller sent (zod fills defaults for absent optional fields).
      ...Object.fromEntries(
        Object.entries(changes).filter(
          ([k, v]) => v !== undefined && Object.prototype.hasOwnProperty.call(patch, k),
        ),
      ),
    };
    const keepReminders = (patch as { reminders?: unknown } | null)?.reminders === undefined;
    if (keepReminders) {
      // Reminder targets are stored unredacted: read them back for validation.
      const rows = await remindersOfSchedules(this.db, { scheduleIds: [id] });
      merged.reminders = rows.map((r) => ({
        key: r.key,
        offset: r.offset_duration,
        channel: r.channel,
        target: r.target,
        ...(r.on_lost_lease
          ? { delivery: r.on_lost_lease === "retry" ? "at-least-once" : "at-most-once" }
          : {}),
        maxAttempts: r.max_attempts,
      }));
    }
    const { value, warnings } = this.validateSchedule(merged);
    const hash = definitionHash(value, this.config.scheduler.maxAttempts);
    const realigned = await this.db.transaction(async (tx) => {
      const locked = await lockScheduleForEdit(tx, { now: this.#now(), tenant, id });
      if (!locked) throw new NotFoundError("schedule", id);
      if (options.version !== undefined && options.version !== locked.version) {
        throw new ConflictError(
          `schedule ${id} is at version ${locked.version}, not ${options.version}: read it again and retry`,
          "STALE_VERSION",
        );
      }
      if (locked.state === "cancelled") {
        if (!options.revive)
          throw new ConflictError(`schedule ${id} is cancelled; create a new one`);
        await reviveSchedule(tx, { now: this.#now(), id });
      }
      const updated = await updateScheduleDefinition(tx, {
        now: this.#now(),
        id,
        definition: definitionOf(value),
        requestHash: hash,
      });
      await deleteReminders(tx, { scheduleId: id });
      await this.#insertReminders(tx, id, value.reminders);
      return realignSchedule(tx, updated!, this.#planDeps());
    });
    this.#wake();
    return { schedule: await this.getSchedule(id, options), realigned, warnings };
  }

  #planDeps() {
    return {
      clock: this.clock,
      logger: this.logger,
      metrics: this.metrics,
      options: this.config.scheduler,
      channels: this.#channelMap(),
    };
  }

  #channelMap(): ReadonlyMap<string, Channel> {
    return new Map(this.channels.names().map((n) => [n, this.channels.get(n)]));
  }

  async #insertReminders(
    tx: Queryable,
    scheduleId: string,
    reminders: z.output<typeof createScheduleSchema>["reminders"],
  ): Promise<void> {
    await insertReminders(tx, {
      scheduleId,
      reminders: remindersOf(reminders, this.config.scheduler.maxAttempts),
    });
  }

  /**
   * Creates many already-validated schedules in one transaction (imports: each carries a
   * `source` and an `externalId`). Two statements whatever the count.
   * @returns the new ids by external id.
   */
  async createSchedulesBulk(
    values: Array<z.output<typeof createScheduleSchema>>,
    ctx: CallContext = {},
  ): Promise<Map<string, string>> {
    const ids = new Map<string, string>();
    if (values.length === 0) return ids;
    await this.db.transaction(async (tx) => {
      const rows = await insertSchedulesBulk(tx, {
        now: this.#now(),
        tenant: ctx.tenant ?? DEFAULT_TENANT,
        schedules: values.map((v) => ({
          requestHash: definitionHash(v, this.config.scheduler.maxAttempts),
          definition: definitionOf(v),
          source: v.source ?? null,
          externalId: v.externalId ?? null,
        })),
      });
      // Every schedule of a bulk create carries an external id (imports).
      for (const row of rows) ids.set(row.external_id as string, row.id);
      const reminders = values.flatMap((v) =>
        remindersOf(v.reminders, this.config.scheduler.maxAttempts).map((r) => ({
          ...r,
          scheduleId: ids.get(v.externalId ?? "")!,
        })),
      );
      await insertRemindersBulk(tx, { reminders });
      await planLocked(tx, rows, this.#planDeps());
    });
    this.#wake();
    return ids;
  }

  /** @throws NotFoundError */
  async getSchedule(id: string, ctx: CallContext = {}): Promise<ScheduleView> {
    if (!z.uuid().safeParse(id).success) throw new NotFoundError("schedule", id);
    const row = await scheduleById(this.db, { tenant: ctx.tenant ?? DEFAULT_TENANT, id });
    if (!row) throw new NotFoundError("schedule", id);
    const reminders = await remindersOfSchedules(this.db, { scheduleIds: [id] });
    return toScheduleView(row, reminders);
  }

  /** Lists schedules, oldest first, with a keyset cursor. */
  async listSchedules(
    query: unknown = {},
    ctx: CallContext = {},
  ): Promise<{ items: ScheduleView[]; nextCursor: string | null }> {
    const q = parseInput(listSchedulesQuerySchema, query);
    let afterAt: string | null = null;
    let afterId: string | null = null;
    if (q.cursor) {
      const [at, id] = Buffer.from(q.cursor, "base64url").toString("utf8").split("|");
      if (!at || !id || !z.uuid().safeParse(id).success || Number.isNaN(Date.parse(at))) {
        throw new ValidationError({
          field: "cursor",
          message: "not a cursor from a previous page",
          value: q.cursor,
        });
      }
      afterAt = at;
      afterId = id;
    }
    const rows = await listScheduleRows(this.db, {
      tenant: ctx.tenant ?? DEFAULT_TENANT,
      state: q.state ?? null,
      afterCreatedAt: afterAt,
      afterId,
      limit: q.limit,
    });
    const reminders: ReminderRow[] = rows.length
      ? await remindersOfSchedules(this.db, { scheduleIds: rows.map((r) => r.id) })
      : [];
    const last = rows[rows.length - 1];
    return {
      items: rows.map((r) => toScheduleView(r, reminders)),
      nextCursor:
        last && rows.length === q.limit
          ? Buffer.from(`${last.created_at_cursor}|${last.id}`).toString("base64url")
          : null,
    };
  }

  /**
   * DEL-10: cancels a schedule and every waiting delivery in one statement. In-flight
   * sends finish and are recorded; nothing new starts. Idempotent.
   * @throws NotFoundError
   */
  async cancelSchedule(
    id: string,
    ctx: CallContext & { by?: "user" | "import" } = {},
  ): Promise<ScheduleView & { cancelledDeliveries: number }> {
    if (!z.uuid().safeParse(id).success) throw new NotFoundError("schedule", id);
    const row = await cancelScheduleRow(this.db, {
      now: this.#now(),
      tenant: ctx.tenant ?? DEFAULT_TENANT,
      id,
      by: ctx.by ?? "user",
    });
    if (!row) throw new NotFoundError("schedule", id);
    const reminders = await remindersOfSchedules(this.db, { scheduleIds: [id] });
    return {
      ...toScheduleView(row, reminders),
      cancelledDeliveries: Number(row.cancelled_deliveries),
    };
  }

  async #transition(id: string, from: string, to: string, ctx: CallContext): Promise<ScheduleView> {
    const current = await this.getSchedule(id, ctx);
    if (current.state === to) return current;
    const changed = await setScheduleState(this.db, {
      now: this.#now(),
      tenant: ctx.tenant ?? DEFAULT_TENANT,
      id,
      from,
      to,
    });
    if (!changed)
      throw new ConflictError(`schedule ${id} is ${current.state}; cannot move it to ${to}`);
    if (to === "active") this.#wake();
    return this.getSchedule(id, ctx);
  }

  /** DEL-10: pauses a schedule (nothing is claimed meanwhile). @throws NotFoundError, ConflictError */
  pauseSchedule(id: string, ctx: CallContext = {}): Promise<ScheduleView> {
    return this.#transition(id, "active", "paused", ctx);
  }

  /** DEL-10: resumes a paused schedule; missed occurrences follow its misfire policy (REC-6). */
  resumeSchedule(id: string, ctx: CallContext = {}): Promise<ScheduleView> {
    return this.#transition(id, "paused", "active", ctx);
  }

  /** Lists deliveries (DEL-1), by id, with keyset pagination (`after`). */
  async listDeliveries(
    query: unknown = {},
    ctx: CallContext = {},
  ): Promise<{ items: DeliveryView[]; nextAfter: number | null }> {
    const q = parseInput(listDeliveriesQuerySchema, query);
    const rows = await listDeliveryRows(this.db, {
      tenant: ctx.tenant ?? DEFAULT_TENANT,
      scheduleId: q.scheduleId ?? null,
      state: q.state ?? null,
      afterId: q.after ?? null,
      limit: q.limit,
    });
    const last = rows[rows.length - 1];
    return {
      items: rows.map(toDeliveryView),
      nextAfter: last && rows.length === q.limit ? last.id : null,
    };
  }

  /** A delivery with its attempt history (DEL-12, DEL-14). @throws NotFoundError */
  async getDelivery(
    id: number,
    ctx: CallContext = {},
  ): Promise<DeliveryView & { attempts: AttemptView[] }> {
    const row = await deliveryById(this.db, { tenant: ctx.tenant ?? DEFAULT_TENANT, id });
    if (!row) throw new NotFoundError("delivery", String(id));
    const attempts = await attemptsOf(this.db, { deliveryId: id });
    return { ...toDeliveryView(row), attempts: attempts.map(toAttemptView) };
  }

  /** DEL-12: sends a dead or in-doubt delivery again, with the same delivery key. */
  async redriveDelivery(id: number, ctx: CallContext = {}): Promise<DeliveryView> {
    const row = await redriveDeliveryRow(this.db, {
      now: this.#now(),
      tenant: ctx.tenant ?? DEFAULT_TENANT,
      id,
    });
    if (!row) {
      const current = await this.getDelivery(id, ctx);
      throw new ConflictError(
        current.state === "dead" || current.state === "in_doubt"
          ? `delivery ${id} cannot be redriven: its schedule is cancelled or its reminder "${current.reminderKey}" was removed`
          : `delivery ${id} is ${current.state}; only dead or in_doubt deliveries can be redriven`,
      );
    }
    this.#wake();
    return toDeliveryView(row);
  }

  /** DEL-12: an operator settles an in-doubt delivery as `sent` or `dead`. */
  async resolveDelivery(
    id: number,
    outcome: "sent" | "dead",
    ctx: CallContext = {},
  ): Promise<DeliveryView> {
    const row = await resolveDeliveryRow(this.db, {
      now: this.#now(),
      tenant: ctx.tenant ?? DEFAULT_TENANT,
      id,
      outcome,
    });
    if (!row) {
      const current = await this.getDelivery(id, ctx);
      throw new ConflictError(
        `delivery ${id} is ${current.state}; only in_doubt deliveries and open dead letters can be resolved`,
      );
    }
    return toDeliveryView(row);
  }

  /** OPS-4: liveness and readiness (database reachable, schema current, last pass fresh). */
  async health(): Promise<Health> {
    const detail: string[] = [];
    let database = false;
    let schema = false;
    try {
      await ping(this.db);
      database = true;
      const version = await schemaVersion(this.db);
      schema = version === expectedVersion();
      if (!schema) detail.push(`schema version ${version}, expected ${expectedVersion()}`);
    } catch (err) {
      detail.push(`database unreachable: ${err instanceof Error ? err.message : String(err)}`);
    }
    const last = this.scheduler.lastPassAt;
    const heartbeat =
      last !== null &&
      this.clock.now() - last <= this.config.scheduler.heartbeatStaleMs &&
      this.scheduler.running;
    if (!heartbeat)
      detail.push(last === null ? "no scheduler pass yet" : "last scheduler pass is stale");
    return {
      live: true,
      ready: database && schema && heartbeat,
      checks: { database, schema, heartbeat },
      lastPassAt: last === null ? null : new Date(last).toISOString(),
      detail,
    };
  }

  /** Prometheus text exposition, with gauges refreshed from the database. */
  async metricsText(): Promise<{ contentType: string; body: string }> {
    try {
      await this.scheduler.refreshGauges();
    } catch (err) {
      this.logger.warn({ err }, "could not refresh gauges");
    }
    return {
      contentType: this.metrics.registry.contentType,
      body: await this.metrics.registry.metrics(),
    };
  }
}

/**
 * Opens the database named by the configuration: PostgreSQL when `databaseUrl` is set,
 * else PGlite in `dataDir` (or in memory when `dataDir` is null).
 */
export async function openDatabase(config: PunctualConfig, logger: Logger): Promise<Database> {
  if (config.databaseUrl) {
    return openPostgres({
      url: config.databaseUrl,
      onError: (err) => logger.warn({ err }, "idle database client error"),
    });
  }
  return openPglite({ dataDir: config.dataDir });
}

/**
 * Builds a running-ready punctual: validates configuration (OPS-5), opens the database,
 * migrates it when embedded (or when `migrate: true`), refuses an unmigrated or newer
 * schema, and wires the channels. Call `start()` to run the scheduler loop.
 * @throws ConfigError, SchemaMismatchError, DataDirLockedError
 */
export async function createPunctual(options: PunctualOptions = {}): Promise<Punctual> {
  const { database, channels: extra, clock, logger: givenLogger, role, ...configInput } = options;
  const config = resolveConfig(configInput);
  const logger = givenLogger ?? createLogger({ level: config.logLevel });
  const closers: Array<() => Promise<void> | void> = [];
  const db = database ?? (await openDatabase(config, logger));
  if (!database) closers.push(() => db.close());
  try {
    if (db.engine === "pglite" || config.migrate) {
      const applied = await migrate(db);
      if (applied.length) logger.info({ applied, database: db.description }, "migrations applied");
    }
    await assertSchemaCurrent(db);
    const secret = config.webhookSecret ?? (await sharedWebhookSecret(db, logger));
    const webhook = createWebhookChannel({
      secret,
      allowPrivateTargets: config.allowPrivateTargets,
      timeoutMs: config.scheduler.sendTimeoutMs,
      logger,
    });
    closers.unshift(() => webhook.close());
    const registry = new ChannelRegistry([webhook, createLogChannel({ logger }), ...(extra ?? [])]);
    return new Punctual({
      config,
      db,
      clock: clock ?? new SystemClock(),
      logger,
      metrics: createMetrics(),
      channels: registry,
      role: role ?? "library",
      closers,
      webhookSecret: { secret, source: config.webhookSecret ? "configured" : "generated" },
    });
  } catch (err) {
    for (const close of closers) await close();
    throw err;
  }
}

/** API-4 name for library users: the same as {@link createPunctual}. */
export const createScheduler = createPunctual;

/**
 * The default webhook signing secret when none is configured: generated once, kept in
 * the database so every process signs alike. `punctual status` shows where to read it.
 */
async function sharedWebhookSecret(db: Database, logger: Logger): Promise<string> {
  const fresh = `whsec_${randomBytes(24).toString("base64")}`;
  const value = await initSetting(db, { key: "webhook_secret", valueJson: JSON.stringify(fresh) });
  if (typeof value !== "string")
    throw new PunctualError("SETTINGS", "webhook_secret setting is not a string");
  if (value === fresh) {
    logger.info(
      "generated a webhook signing secret and stored it in the database (setting webhook_secret); set PUNCTUAL_WEBHOOK_SECRET to choose your own",
    );
  }
  return value;
}
