/**
 * `createPunctual()` / `createScheduler()` (API-4): wires the store, the scheduler loop
 * and the channels into one object, the facade the HTTP API and the CLI are built on.
 * The operations live by concern beside it — schedules.ts, deliveries.ts, health.ts,
 * import.ts (iCalendar) — and take the {@link AppContext} this class builds.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import type { z } from "zod";
import type { Channel, ChannelDelivery } from "../channels/types.js";
import { ChannelRegistry, createBuiltInChannels } from "../channels/index.js";
import { SystemClock, type Clock } from "../clock/index.js";
import { resolveConfig, type ConfigInput, type PunctualConfig } from "../config/index.js";
import type {
  AttemptView,
  CreateScheduleInput,
  DeliveryView,
  ScheduleView,
  UpdateScheduleInput,
  createScheduleSchema,
} from "../contracts/index.js";
import { PunctualError } from "../errors/index.js";
import { createLogger, safeLogger, type Logger } from "../observability/logger.js";
import { createMetrics, type Metrics } from "../observability/metrics.js";
import type { RealignReport } from "../scheduler/realign.js";
import {
  LiveSettings,
  rotateWebhookSecret,
  setRetryPolicy,
  type RetryPolicySetting,
} from "../scheduler/services/settings.js";
import { Scheduler } from "../scheduler/scheduler.js";
import { TaskRunner, type TaskContext, type TaskDefinition } from "../scheduler/tasks.js";
import type { ReminderKindInput, ReminderKindView } from "../contracts/kinds.js";
import type {
  DeliveryExplanation,
  ExplainQuery,
  ScheduleExplanation,
} from "../contracts/explain.js";
import type { Database } from "../store/database.js";
import type { ListTotal } from "../store/schedules.js";
import { assertSchemaCurrent, migrate } from "../store/migrator.js";
import { nonDurableSettings } from "../store/durability.js";
import { initSetting, notifyWake } from "../store/operations.js";
import { withLockTimeout } from "../store/lock-timeout.js";
import type { LockTakeOver } from "../store/lock.js";
import { openPglite } from "../store/pglite.js";
import { openPostgres } from "../store/postgres.js";
import * as apiKeys from "./api-keys.js";
import { channelMap, tenantOf, type AppContext, type CallContext } from "./context.js";
import * as deliveries from "./deliveries.js";
import * as explain from "./explain.js";
import * as health from "./health.js";
import { getImport, listImports } from "./imports.js";
import { runImport, startImport, type ImportOptions, type ImportSummary } from "./import/index.js";
import { abandonExpiredImports } from "../store/imports.js";
import * as kinds from "./kinds.js";
import type { Health } from "./health.js";
import * as schedules from "./schedules.js";
import * as sessions from "./sessions.js";
import type { CreateResult } from "./schedules.js";
import { ScheduleHandles } from "./handles.js";
import * as operator from "./operator.js";
import * as rateLimits from "./rate-limits.js";
import * as audience from "./audience.js";
import * as recipientZones from "./recipient-zones.js";
import type { RecipientZones } from "./recipient-zones.js";
import * as recipients from "./recipients.js";
import * as circuits from "./circuits.js";
import * as webhookSecrets from "./webhook-secrets.js";
import * as unsubscribeOps from "./unsubscribe.js";
import { sharedUnsubscribeSecret } from "./unsubscribe.js";
import type { TenantWebhookSecretView } from "../contracts/webhook-secrets.js";
import type { CircuitView, RateLimitView } from "../contracts/rate-limits.js";
import type {
  BulkRecipientsSummary,
  RecipientPage,
  RecipientView,
} from "../contracts/recipients.js";
import type { ImportRunView, ImportView } from "../contracts/index.js";

export { DEFAULT_TENANT, type CallContext } from "./context.js";
export type { Health } from "./health.js";
export { issuesFromZod, parseInput } from "./input.js";
export { definitionHash, type CreateResult } from "./schedules.js";
export { ScheduleHandle, ScheduleHandles, type ScheduleDescription } from "./handles.js";
export type {
  BackfillResult,
  BulkResult,
  PurgeResult,
  TriggerResult,
  UpsertResult,
} from "./operator.js";

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

/** What a task of the `tasks` option receives: the task context and the punctual (OPS-7). */
export interface PunctualTaskContext extends TaskContext {
  /** The running punctual the task belongs to. */
  readonly punctual: Punctual;
}

/**
 * A periodic task of the `tasks` option (OPS-7; fields documented on `TaskDefinition`):
 * `{ name, every | rrule + tzid, budgetMs, singleton?, run(ctx) }`.
 */
export interface PunctualTaskDefinition extends Omit<TaskDefinition, "run"> {
  run(ctx: PunctualTaskContext): Promise<void> | void;
}

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
  /**
   * DEL-11: reminder kinds written to the registry of the default tenant at start
   * (validated first: a bad entry stops the start with a ConfigError naming it).
   */
  reminderKinds?: readonly ReminderKindInput[];
  /** OPS-7: periodic tasks, run in their own lane while the scheduler runs. */
  tasks?: readonly PunctualTaskDefinition[];
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
  /** OPS-7: the periodic tasks of this process, started and stopped with the scheduler. */
  readonly tasks: TaskRunner;
  /** The default webhook signing secret in use, and where it came from. */
  readonly webhookSecret: { secret: string; source: "configured" | "generated" };
  #closed = false;
  /** API-14: the secret of one-click unsubscribe links. */
  readonly #unsubscribeSecret: string;
  #closers: Array<() => Promise<void> | void> = [];
  /** API-5: the asynchronous imports running in this process; `close` waits for them. */
  readonly #imports = new Set<Promise<void>>();
  /** What the operation modules work with. */
  readonly #app: AppContext;
  /** Handles on schedules (API-4): `schedules.get(id).describe()`, `.trigger()`, … */
  readonly schedules: ScheduleHandles;

  /** @internal use {@link createPunctual}. */
  constructor(parts: {
    config: PunctualConfig;
    db: Database;
    clock: Clock;
    logger: Logger;
    metrics: Metrics;
    channels: ChannelRegistry;
    role: string;
    /** Database-held settings (OPS-11); default: none over the configuration. */
    settings?: LiveSettings;
    closers: Array<() => Promise<void> | void>;
    webhookSecret: { secret: string; source: "configured" | "generated" };
    /** API-14: the secret of unsubscribe links; default a random one of this process. */
    unsubscribeSecret?: string;
    tasks?: readonly PunctualTaskDefinition[];
  }) {
    this.webhookSecret = parts.webhookSecret;
    this.#unsubscribeSecret = parts.unsubscribeSecret ?? randomBytes(32).toString("base64url");
    this.config = parts.config;
    this.db = parts.db;
    this.clock = parts.clock;
    this.logger = parts.logger;
    this.metrics = parts.metrics;
    this.channels = parts.channels;
    this.#closers = parts.closers;
    this.scheduler = new Scheduler({
      db: parts.db,
      clock: parts.clock,
      logger: parts.logger,
      metrics: parts.metrics,
      channels: channelMap(parts.channels),
      options: parts.config.scheduler,
      version: VERSION,
      role: parts.role,
      ...(parts.settings ? { settings: parts.settings } : {}),
    });
    const scheduler = this.scheduler;
    const { db, clock, logger } = parts;
    // Each task's run gets this punctual in its context (e.g. to import a calendar).
    const tasks = (parts.tasks ?? []).map((t) => ({
      ...t,
      run: (ctx: TaskContext) => t.run({ ...ctx, punctual: this }),
    }));
    this.tasks = new TaskRunner(tasks, {
      db,
      clock,
      logger: logger.child({ component: "tasks" }),
      registry: parts.metrics.registry,
      owner: scheduler.owner,
    });
    // The operations' database: their statements give up waiting for a lock a stalled
    // transaction holds (lockTimeoutMs), the scheduler's and the tasks' wait as before
    // (src/store/lock-timeout.ts says why).
    const requestDb = withLockTimeout(db, {
      lockTimeoutMs: parts.config.lockTimeoutMs,
      onTimeout: (busy) => {
        parts.metrics.lockTimeouts.inc({ relation: busy.relation ?? "unknown" });
        logger.warn(
          { code: busy.code, relation: busy.relation, lockTimeoutMs: busy.waitedMs },
          "an operation gave up waiting for a lock another transaction holds",
        );
      },
    });
    this.#app = {
      config: parts.config,
      db: requestDb,
      clock,
      logger,
      metrics: parts.metrics,
      channels: parts.channels,
      scheduler,
      now: () => clock.sqlNow(),
      wake: () => {
        scheduler.wake();
        if (db.engine === "postgres") {
          notifyWake(db, { payload: "" }).catch((err) => logger.warn({ err }, "NOTIFY failed"));
        }
      },
    };
    this.schedules = new ScheduleHandles(this.#app);
  }

  /** Starts the scheduler loop. */
  async start(): Promise<void> {
    // API-5: the imports a dead process left running are marked failed, not left running.
    await abandonExpiredImports(this.db, this.#app.now());
    await this.scheduler.start();
    this.tasks.start();
  }

  /**
   * OPS-11: rotates the database-held default webhook secret. Every process signs with the
   * new secret within one tick; until `overlapMs` has passed, requests also carry a
   * signature by the old one, so receivers can switch at their own pace.
   * @param options `secret`: the new `whsec_<base64>` secret (default: generated);
   *   `overlapMs`: how long the old secret still signs, ms.
   * @returns the new secret and the end of the overlap.
   * @throws PunctualError `SETTINGS` when the secret is configured (`PUNCTUAL_WEBHOOK_SECRET`
   *   wins over the database's: rotate it there).
   */
  async rotateWebhookSecret(options: {
    secret?: string;
    overlapMs: number;
  }): Promise<{ secret: string; overlapUntil: Date }> {
    if (this.config.webhookSecret) {
      throw new PunctualError(
        "SETTINGS",
        "the default webhook secret is configured (PUNCTUAL_WEBHOOK_SECRET); change it there, not in the database",
      );
    }
    const current = this.scheduler.settings.signingSecrets(this.clock.now())?.current;
    const secret = options.secret ?? `whsec_${randomBytes(24).toString("base64")}`;
    const overlapUntil = new Date(this.clock.now() + Math.max(0, options.overlapMs));
    await rotateWebhookSecret(this.#app.db, {
      secret,
      previous: current ?? this.webhookSecret.secret,
      until: overlapUntil,
    });
    this.scheduler.wake();
    return { secret, overlapUntil };
  }

  /**
   * OPS-11: stores the retry policy (`backoffBaseMs`, `backoffCapMs`, ms) in the database;
   * every process applies it to its next retry decision within one tick.
   * @throws Error naming the malformed field.
   */
  async setRetryPolicy(policy: RetryPolicySetting): Promise<void> {
    await setRetryPolicy(this.#app.db, policy);
    this.scheduler.wake();
  }

  /** OPS-6: stops the loop (finishing in-flight sends) and closes the database. Idempotent. */
  async close(graceMs?: number): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.tasks.stop(graceMs);
    // An asynchronous import stops after its current chunk, recorded as failed.
    await Promise.allSettled([...this.#imports]);
    await this.scheduler.stop(graceMs);
    for (const close of this.#closers) await close();
  }

  /**
   * Validates a create request strictly (REC-3 strict posture, DEL-11 channels, CH-1
   * targets, for the tenant of `ctx`). Returns the parsed input and warnings.
   * @throws ValidationError naming every bad field.
   */
  validateSchedule(
    input: unknown,
    ctx: CallContext = {},
  ): {
    value: z.output<typeof createScheduleSchema>;
    warnings: string[];
  } {
    return schedules.validateSchedule(this.#app, input, {
      ...(ctx.tenant !== undefined ? { tenant: ctx.tenant } : {}),
    });
  }

  /**
   * Creates a schedule with its reminders in one transaction (API-1). With an
   * idempotency key, a retried create returns the first schedule (`created: false`);
   * the same key with a different body is a ConflictError.
   * @throws ValidationError, ConflictError
   */
  createSchedule(
    input: CreateScheduleInput | unknown,
    options: CallContext & { idempotencyKey?: string } = {},
  ): Promise<CreateResult> {
    return schedules.createSchedule(this.#app, input, options);
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
  updateSchedule(
    id: string,
    patch: UpdateScheduleInput | unknown,
    options: CallContext & { version?: number; revive?: boolean } = {},
  ): Promise<{ schedule: ScheduleView; realigned: RealignReport; warnings: string[] }> {
    return schedules.updateSchedule(this.#app, id, patch, options);
  }

  /**
   * Creates many already-validated schedules in one transaction (imports: each carries a
   * `source` and an `externalId`). Two statements whatever the count.
   * @returns the new ids by external id.
   */
  createSchedulesBulk(
    values: Array<z.output<typeof createScheduleSchema>>,
    ctx: CallContext = {},
  ): Promise<Map<string, string>> {
    return schedules.createSchedulesBulk(this.#app, values, ctx);
  }

  /** @throws NotFoundError */
  getSchedule(id: string, ctx: CallContext = {}): Promise<ScheduleView> {
    return schedules.getSchedule(this.#app, id, ctx);
  }

  /**
   * Lists schedules (API-3), oldest first by default, with a keyset cursor; with
   * `total: true` also how many the filters match (`{ value, exact }`).
   */
  listSchedules(
    query: unknown = {},
    ctx: CallContext = {},
  ): Promise<{ items: ScheduleView[]; nextCursor: string | null; total?: ListTotal }> {
    return schedules.listSchedules(this.#app, query, ctx);
  }

  /**
   * DEL-10: cancels a schedule and every waiting delivery in one statement. In-flight
   * sends finish and are recorded; nothing new starts. Idempotent.
   * @throws NotFoundError
   */
  cancelSchedule(
    id: string,
    ctx: CallContext & { by?: "user" | "import" } = {},
  ): Promise<ScheduleView & { cancelledDeliveries: number }> {
    return schedules.cancelSchedule(this.#app, id, ctx);
  }

  /** DEL-10: pauses a schedule (nothing is claimed meanwhile). @throws NotFoundError, ConflictError */
  pauseSchedule(id: string, ctx: CallContext = {}): Promise<ScheduleView> {
    return schedules.pauseSchedule(this.#app, id, ctx);
  }

  /** DEL-10: resumes a paused schedule; missed occurrences follow its misfire policy (REC-6). */
  resumeSchedule(id: string, ctx: CallContext = {}): Promise<ScheduleView> {
    return schedules.resumeSchedule(this.#app, id, ctx);
  }

  /**
   * API-5, API-3: the tenant's written calendar imports by id, one keyset page (`order`,
   * `limit`, `cursor`, `source`, `importedFrom`, `importedTo`).
   * @throws ValidationError a bad query field or a cursor of another listing.
   */
  listImports(
    query: unknown = {},
    ctx: CallContext = {},
  ): Promise<{ items: ImportRunView[]; nextCursor: string | null }> {
    return listImports(this.#app, query, ctx);
  }

  /**
   * API-5: imports a calendar into the schedules of `options.source` (tenant
   * `options.tenant`): read, compared with what the source stored, the changes written in
   * chunks (each one transaction) under the source's import lock. Safe to repeat.
   * @throws ValidationError when the file is not iCalendar at all or breaks a limit.
   */
  importCalendar(text: string, options: ImportOptions): Promise<ImportSummary> {
    return runImport(this.#app, text, options);
  }

  /**
   * API-5: starts an import that outlives the call: its record (`running`) is made at
   * once and answered; the file is read and written in the background, chunk by chunk
   * ({@link getImport} follows it). A file that is not iCalendar, a database error or
   * {@link close} (after the current chunk) ends it `failed` with the error; if this
   * process dies, its lease expires and the next reader or start marks it failed.
   * @throws ValidationError field `chunkSize` when it is not a positive integer.
   */
  async startImport(text: string, options: ImportOptions): Promise<ImportView> {
    if (this.#closed) throw new PunctualError("CLOSED", "punctual is closed");
    const tenant = tenantOf(options);
    const record = await startImport(this.#app, tenant, options.source);
    const run = runImport(this.#app, text, {
      ...options,
      record,
      onChunk: async (p) => {
        await options.onChunk?.(p);
        if (this.#closed) {
          throw new PunctualError(
            "CLOSED",
            "interrupted: the server stopped before the import finished; import the file again",
          );
        }
      },
    }).then(
      (summary) =>
        this.logger.info(
          { importId: record.id, source: summary.source, created: summary.created },
          "calendar imported",
        ),
      (err: unknown) => this.logger.warn({ err, importId: record.id }, "calendar import failed"),
    );
    this.#imports.add(run);
    void run.finally(() => this.#imports.delete(run));
    return getImport(this.#app, record.id, { tenant });
  }

  /**
   * API-5: one import with its progress per chunk and, once read, its lists.
   * @throws NotFoundError no such import of the tenant of `ctx`.
   */
  getImport(id: number, ctx: CallContext = {}): Promise<ImportView> {
    return getImport(this.#app, id, ctx);
  }

  /**
   * Lists deliveries (DEL-1, API-3), by id, with a keyset cursor; with `total: true` also
   * how many the filters match (`{ value, exact }`).
   */
  listDeliveries(query: unknown = {}, ctx: CallContext = {}): Promise<deliveries.DeliveryPage> {
    return deliveries.listDeliveries(this.#app, query, ctx);
  }

  /** A delivery with its attempt history (DEL-12, DEL-14). @throws NotFoundError */
  getDelivery(
    id: number,
    ctx: CallContext = {},
  ): Promise<DeliveryView & { attempts: AttemptView[] }> {
    return deliveries.getDelivery(this.#app, id, ctx);
  }

  /**
   * OPS-16: why each occurrence of a schedule did or did not fire — one page of entries
   * (occurrence × reminder) due in `[from, to)` (at most 366 days), each with its verdict,
   * reason and timeline. See {@link explain.explainSchedule}.
   * @throws ValidationError (`from` after `to`, a window over 366 days), NotFoundError
   */
  explainSchedule(
    id: string,
    query: ExplainQuery | unknown = {},
    ctx: CallContext = {},
  ): Promise<ScheduleExplanation> {
    return explain.explainSchedule(this.#app, id, query, ctx);
  }

  /**
   * API-11: the zones of a schedule's recipients, counted, and whether it is floating.
   * See {@link recipientZones.scheduleRecipientZones}. @throws NotFoundError
   */
  scheduleRecipientZones(id: string, ctx: CallContext = {}): Promise<RecipientZones> {
    return recipientZones.scheduleRecipientZones(this.#app, id, ctx);
  }

  /** OPS-16: one delivery's verdict and timeline. @throws NotFoundError */
  explainDelivery(id: number, ctx: CallContext = {}): Promise<DeliveryExplanation> {
    return explain.explainDelivery(this.#app, id, ctx);
  }

  /** DEL-12: sends a dead or in-doubt delivery again, with the same delivery key. */
  redriveDelivery(id: number, ctx: CallContext = {}): Promise<DeliveryView> {
    return deliveries.redriveDelivery(this.#app, id, ctx);
  }

  /** DEL-12: an operator settles an in-doubt delivery as `sent` or `dead`. */
  resolveDelivery(
    id: number,
    outcome: "sent" | "dead",
    ctx: CallContext = {},
  ): Promise<DeliveryView> {
    return deliveries.resolveDelivery(this.#app, id, outcome, ctx);
  }

  // --- operator actions (API-9): logic in operator.ts ---------------------------------

  /** API-9: sends a schedule once more now, with its own key. See {@link operator.triggerSchedule}. */
  triggerSchedule(
    id: string,
    input: unknown = {},
    options: CallContext & { triggerId?: string } = {},
  ): Promise<operator.TriggerResult> {
    return operator.triggerSchedule(this.#app, id, input, options);
  }

  /** API-9: plans a past range's occurrences that have no delivery. See {@link operator.backfillSchedule}. */
  backfillSchedule(
    id: string,
    input: unknown,
    ctx: CallContext = {},
  ): Promise<operator.BackfillResult> {
    return operator.backfillSchedule(this.#app, id, input, ctx);
  }

  /** API-9: redrives the dead or in-doubt deliveries a filter matches. See {@link operator.redriveDeliveries}. */
  redriveDeliveries(input: unknown = {}, ctx: CallContext = {}): Promise<operator.BulkResult> {
    return operator.redriveDeliveries(this.#app, input, ctx);
  }

  /** API-9: resolves the deliveries a filter matches. See {@link operator.resolveDeliveries}. */
  resolveDeliveries(input: unknown, ctx: CallContext = {}): Promise<operator.BulkResult> {
    return operator.resolveDeliveries(this.#app, input, ctx);
  }

  /** API-9: creates or updates a schedule by its external id. See {@link operator.upsertScheduleByExternalId}. */
  upsertScheduleByExternalId(
    source: string,
    externalId: string,
    input: unknown,
    ctx: CallContext = {},
  ): Promise<operator.UpsertResult> {
    return operator.upsertScheduleByExternalId(this.#app, source, externalId, input, ctx);
  }

  /** API-9: deletes a schedule with its deliveries and attempts. See {@link operator.purgeSchedule}. */
  purgeSchedule(id: string, ctx: CallContext = {}): Promise<operator.PurgeResult> {
    return operator.purgeSchedule(this.#app, id, ctx);
  }

  /**
   * DEL-11: creates or replaces the reminder kind `key`; reminders written afterwards
   * that name it copy its fields.
   * @throws ValidationError naming each bad field (unknown channel, offset, target, template).
   */
  putReminderKind(
    key: string,
    body: unknown,
    ctx: CallContext = {},
  ): Promise<{ kind: ReminderKindView; created: boolean }> {
    return kinds.putReminderKind(this.#app, key, body, ctx);
  }

  /** DEL-11: the reminder kinds of the caller's tenant, by key. */
  listReminderKinds(ctx: CallContext = {}): Promise<ReminderKindView[]> {
    return kinds.listReminderKinds(this.#app, ctx);
  }

  /** DEL-11: one reminder kind. @throws NotFoundError */
  getReminderKind(key: string, ctx: CallContext = {}): Promise<ReminderKindView> {
    return kinds.getReminderKind(this.#app, key, ctx);
  }

  /** DEL-11: removes a kind; reminders written from it keep their fields. @throws NotFoundError */
  removeReminderKind(key: string, ctx: CallContext = {}): Promise<void> {
    return kinds.removeReminderKind(this.#app, key, ctx);
  }

  /**
   * DEL-11, at start: validates `reminderKinds` and writes them to the registry.
   * @throws ConfigError naming each bad entry and field.
   */
  seedReminderKinds(
    input: readonly ReminderKindInput[],
    ctx: CallContext = {},
  ): Promise<ReminderKindView[]> {
    return kinds.seedReminderKinds(this.#app, input, ctx);
  }

  /** DEL-13: creates or changes the shared rate limit of `key`. @throws ValidationError */
  setRateLimit(key: string, input: unknown, ctx: CallContext = {}): Promise<RateLimitView> {
    return rateLimits.setRateLimit(this.#app, key, input, ctx);
  }

  /**
   * CH-1, API-2: the caller's tenant's own webhook signing secret.
   * @throws NotFoundError when it has none (the default secret signs its webhooks).
   */
  getTenantWebhookSecret(ctx: CallContext = {}): Promise<TenantWebhookSecretView> {
    return webhookSecrets.getTenantWebhookSecret(this.#app, ctx);
  }

  /**
   * CH-1, API-2: sets or rotates the caller's tenant's own webhook signing secret; the one
   * that signed until now signs beside it for `overlapSeconds` (default 24 hours).
   * @throws ValidationError naming `secret` or `overlapSeconds`.
   */
  rotateTenantWebhookSecret(
    input: unknown = {},
    ctx: CallContext = {},
  ): Promise<TenantWebhookSecretView> {
    return webhookSecrets.rotateTenantWebhookSecret(this.#app, input, ctx);
  }

  /**
   * CH-1, API-2: removes the caller's tenant's own secret (the default signs again).
   * @throws NotFoundError when it has none.
   */
  removeTenantWebhookSecret(ctx: CallContext = {}): Promise<void> {
    return webhookSecrets.removeTenantWebhookSecret(this.#app, ctx);
  }

  /** DEL-13: the rate limits by key, with their tokens now. */
  listRateLimits(ctx: CallContext = {}): Promise<RateLimitView[]> {
    return rateLimits.listLimits(this.#app, ctx);
  }

  /** DEL-13: removes the rate limit of `key`. @throws NotFoundError */
  removeRateLimit(key: string, ctx: CallContext = {}): Promise<void> {
    return rateLimits.removeRateLimit(this.#app, key, ctx);
  }

  /**
   * API-10: creates or replaces the recipient `id` of the caller's tenant.
   * See {@link recipients.putRecipient}.
   * @throws ValidationError naming each bad field (nothing stored).
   */
  putRecipient(
    id: string,
    body: unknown,
    ctx: CallContext = {},
  ): Promise<{ recipient: RecipientView; created: boolean }> {
    return recipients.putRecipient(this.#app, id, body, ctx);
  }

  /**
   * API-14: one-click unsubscribe (RFC 8058): records the opt-out a link's token stands for
   * (its category, or all e-mail) in the recipient's preferences; idempotent. Needs no
   * caller: the token is the credential.
   * @throws NotFoundError for a forged, altered or expired token, or a recipient gone.
   */
  unsubscribe(token: string): ReturnType<typeof unsubscribeOps.unsubscribe> {
    return unsubscribeOps.unsubscribe(this.#app, this.#unsubscribeSecret, token);
  }

  /** API-14: whether an unsubscribe token verifies and has not expired (reads nothing). */
  unsubscribeTokenValid(token: string): boolean {
    return (
      unsubscribeOps.verifyUnsubscribeToken(this.#unsubscribeSecret, token, this.clock.now()) !==
      null
    );
  }

  /**
   * API-14: the unsubscribe URL of a recipient's mail, as the e-mail channel puts it in
   * `List-Unsubscribe`; null without `publicUrl`. For tests and tools that build links.
   */
  unsubscribeUrl(
    claims: { tenant: string; recipientId: string; category: string | null },
    nowMs: number = this.clock.now(),
  ): string | null {
    if (this.config.publicUrl === undefined) return null;
    return unsubscribeOps.unsubscribeUrl(
      this.config.publicUrl,
      this.#unsubscribeSecret,
      claims,
      nowMs,
    );
  }

  /** API-10: one recipient of the caller's tenant. @throws NotFoundError */
  getRecipient(id: string, ctx: CallContext = {}): Promise<RecipientView> {
    return recipients.getRecipient(this.#app, id, ctx);
  }

  /**
   * API-10: one page of the caller's recipients by id (`limit`, `cursor`, `order`, `q`).
   * @throws ValidationError a bad query field or cursor.
   */
  listRecipients(query: unknown = {}, ctx: CallContext = {}): Promise<RecipientPage> {
    return recipients.listRecipients(this.#app, query, ctx);
  }

  /** API-10: removes a recipient of the caller's tenant. @throws NotFoundError */
  removeRecipient(id: string, ctx: CallContext = {}): Promise<void> {
    return recipients.removeRecipient(this.#app, id, ctx);
  }

  /**
   * API-12: one page of changes to the recipients of schedule `id`: `{ add?, remove? }`
   * (at most 10,000 ids together). See {@link audience.putScheduleRecipients}.
   * @throws NotFoundError, ValidationError (unknown ids; nothing stored)
   */
  putScheduleRecipients(
    id: string,
    body: unknown,
    ctx: CallContext = {},
  ): Promise<audience.RecipientsPageResult> {
    return audience.putScheduleRecipients(this.#app, id, body, ctx);
  }

  /**
   * API-12: one page of the recipients of schedule `id` (`limit`, `cursor`). See
   * {@link audience.listScheduleRecipients}.
   * @throws NotFoundError, ValidationError (a bad limit or cursor)
   */
  listScheduleRecipients(
    id: string,
    query: unknown = {},
    ctx: CallContext = {},
  ): Promise<{ items: audience.ScheduleRecipientView[]; nextCursor: string | null }> {
    return audience.listScheduleRecipients(this.#app, id, query, ctx);
  }

  /**
   * API-10: creates or replaces many recipients: a JSON array of rows, or NDJSON text.
   * One result per row; a bad row does not stop the others. See
   * {@link recipients.bulkUpsertRecipients}.
   * @throws ValidationError (field `(body)`) for more than 10,000 rows (nothing stored).
   */
  bulkUpsertRecipients(body: unknown, ctx: CallContext = {}): Promise<BulkRecipientsSummary> {
    return recipients.bulkUpsertRecipients(this.#app, body, ctx);
  }

  /**
   * CH-7: the caller's tenant's circuits of target hosts that failed lately (closed ones
   * with no failures left out); every tenant's with `everyTenant`.
   */
  listCircuits(
    ctx: CallContext = {},
    options: { everyTenant?: boolean } = {},
  ): Promise<CircuitView[]> {
    return circuits.listCircuits(this.#app, ctx, options);
  }

  /** OPS-4: liveness and readiness (database reachable, schema current, last pass fresh). */
  health(): Promise<Health> {
    return health.health(this.#app);
  }

  /** Prometheus text exposition, with gauges refreshed from the database. */
  metricsText(): Promise<{ contentType: string; body: string }> {
    return health.metricsText(this.#app);
  }

  /**
   * API-2: creates an API key for a tenant (`input.tenant`, else `defaults.tenant`); the
   * result holds the key, shown this once. @throws ValidationError
   */
  createApiKey(input: unknown, defaults: { tenant: string }): Promise<apiKeys.CreatedApiKey> {
    return apiKeys.createApiKey(this.#app, input, defaults);
  }

  /** API-2: the keys of a tenant, or of every tenant with `tenant: null`. */
  listApiKeys(options: {
    tenant: string | null;
    includeRevoked?: boolean;
  }): Promise<apiKeys.ApiKeyView[]> {
    return apiKeys.listApiKeys(this.#app, options);
  }

  /**
   * API-2, API-3: one keyset page of the keys of a tenant, or of every tenant with
   * `tenant: null`; `query` holds `order`, `limit` and `cursor`.
   * @throws ValidationError a bad query field or a cursor of another listing.
   */
  listApiKeyPage(
    options: { tenant: string | null; includeRevoked?: boolean },
    query: unknown = {},
  ): Promise<{ items: apiKeys.ApiKeyView[]; nextCursor: string | null }> {
    return apiKeys.listApiKeyPage(this.#app, options, query);
  }

  /** API-2: revokes a key at once. @throws NotFoundError (another tenant's key included) */
  revokeApiKey(id: string, options: { tenant: string | null }): Promise<apiKeys.ApiKeyView> {
    return apiKeys.revokeApiKey(this.#app, id, options);
  }

  /** API-2: who a presented key is, or null when it is unknown or revoked. */
  identifyApiKey(key: string): Promise<apiKeys.ApiKeyIdentity | null> {
    return apiKeys.identifyApiKey(this.#app, key);
  }

  /**
   * API-6: opens a dashboard session for the operator's key or a live tenant key (stored
   * as a hash of its id, so any process on this database knows it).
   * @throws Error when `owner` is the operator and no operator key is configured.
   */
  openSession(owner: sessions.SessionOwner): Promise<{ id: string; csrf: string }> {
    return sessions.openSession(this.#app, owner);
  }

  /** API-6: who a session id stands for (refreshing its expiry), or null when it ended. */
  resolveSession(id: string): Promise<sessions.SessionIdentity | null> {
    return sessions.resolveSession(this.#app, id);
  }

  /** API-6: ends a session (logout). */
  closeSession(id: string): Promise<void> {
    return sessions.closeSession(this.#app, id);
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
  return openPglite({
    dataDir: config.dataDir,
    lock: { takeOverStale: config.takeOverLock },
    allowSharedDataDir: config.allowSharedDataDir,
    onTakeOver: warnLockTakeOver(logger),
    onLockLost: (holder, lockPath) =>
      logger.error(
        { lock: lockPath, holder },
        "another process took over this data folder's lock (this one was paused or cut off past the stale age): every statement is refused from now on; stop this process",
      ),
  });
}

/**
 * OPS-5: the WARN line of a stale data-folder lock taken over at start, with the previous
 * holder (pid, host, start), why it counted as stale, and how long it had not been refreshed.
 */
export function warnLockTakeOver(
  logger: Logger,
): (takeOver: LockTakeOver, lockPath: string) => void {
  return ({ previous, reason, ageMs }, lockPath) =>
    logger.warn(
      { lock: lockPath, reason, previousHolder: previous, lockAgeMs: ageMs },
      previous
        ? `took over the stale lock of process ${previous.pid} on ${previous.host} (since ${previous.startedAt}): ${reason}`
        : `took over an unreadable lock: ${reason}`,
    );
}

/**
 * Warns at start when the server's settings let an acknowledged commit be lost in a crash
 * of PostgreSQL (`fsync = off`, `synchronous_commit = off`): a forgotten claim or settle
 * comes back claimable and is sent again. See docs/operations.md, "Durable commits".
 */
async function warnIfNotDurable(db: Database, logger: Logger): Promise<void> {
  const settings = await nonDurableSettings(db);
  if (settings.length === 0) return;
  logger.warn(
    { settings, database: db.description },
    `commits are not durable (${settings.join(", ")}): after a crash of PostgreSQL, ` +
      "claims and settles it acknowledged can be forgotten and their deliveries sent again; " +
      "set fsync = on and synchronous_commit = on (docs/operations.md, Durable commits)",
  );
}

/**
 * Builds a running-ready punctual: validates configuration (OPS-5), opens the database,
 * migrates it when embedded (or when `migrate: true`), refuses an unmigrated or newer
 * schema, and wires the channels. Call `start()` to run the scheduler loop.
 * @throws ConfigError, SchemaMismatchError, DataDirLockedError
 */
export async function createPunctual(options: PunctualOptions = {}): Promise<Punctual> {
  const {
    database,
    channels: extra,
    clock,
    logger: givenLogger,
    role,
    reminderKinds,
    tasks,
    ...configInput
  } = options;
  const config = resolveConfig(configInput);
  // API-7: a logger the caller brought gets punctual's redaction too.
  const logger = givenLogger ? safeLogger(givenLogger) : createLogger({ level: config.logLevel });
  const closers: Array<() => Promise<void> | void> = [];
  const db = database ?? (await openDatabase(config, logger));
  if (!database) closers.push(() => db.close());
  try {
    if (db.engine === "pglite" || config.migrate) {
      const applied = await migrate(db, undefined, {
        onRetry: (version, err, attempt, waitMs) =>
          logger.warn(
            { version, err, attempt, waitMs },
            "migration rolled back by a lock conflict with another process: trying it again",
          ),
      });
      if (applied.length) logger.info({ applied, database: db.description }, "migrations applied");
    }
    await assertSchemaCurrent(db);
    if (db.engine === "postgres") await warnIfNotDurable(db, logger);
    const secret = config.webhookSecret ?? (await sharedWebhookSecret(db, logger));
    // API-14: signs and verifies one-click unsubscribe links, alike in every process.
    const unsubscribeSecret = await sharedUnsubscribeSecret(db, logger);
    // OPS-11: settings that reach the running process (retry policy, secret rotation).
    const settings = new LiveSettings(config.scheduler, {
      ...(config.webhookSecret ? { configured: config.webhookSecret } : {}),
      initial: secret,
    });
    // CH-1, API-2: a tenant's own secret signs its webhooks; the default signs the rest.
    const tenantSecrets = new webhookSecrets.TenantSigningSecrets();
    settings.onChange((db) => tenantSecrets.load(db));
    const builtIn = createBuiltInChannels({
      webhook: {
        secret,
        signingSecrets: (nowMs, tenant) =>
          tenantSecrets.signingSecrets(tenant, nowMs, settings.signingSecrets(nowMs)),
        allowPrivateTargets: config.allowPrivateTargets,
        timeoutMs: config.scheduler.sendTimeoutMs,
        logger,
      },
      log: { logger },
      chat: {
        allowPrivateTargets: config.allowPrivateTargets,
        timeoutMs: config.scheduler.sendTimeoutMs,
        logger,
      },
      ...(config.email.smtpUrl
        ? {
            email: {
              url: config.email.smtpUrl,
              ...(config.email.from ? { from: config.email.from } : {}),
              ...(config.email.domain ? { domain: config.email.domain } : {}),
              allowedFrom: config.email.allowedFrom,
              timeoutMs: config.scheduler.sendTimeoutMs,
              logger,
              ...(config.publicUrl !== undefined
                ? { unsubscribeUrl: listUnsubscribe(config.publicUrl, unsubscribeSecret) }
                : {}),
            },
          }
        : {}),
    });
    closers.unshift(builtIn.close);
    if (config.email.smtpUrl && config.publicUrl === undefined) {
      logger.info(
        "PUNCTUAL_PUBLIC_URL is not set: e-mail to recipients carries no List-Unsubscribe header (one-click unsubscribe, RFC 8058)",
      );
    }
    const registry = new ChannelRegistry([...builtIn.channels, ...(extra ?? [])]);
    const punctual = new Punctual({
      tasks: tasks ?? [],
      config,
      db,
      clock: clock ?? new SystemClock(),
      logger,
      // OPS-13: the CLI's processes also export the default process metrics.
      // OPS-13: no tenant name or target host in labels unless configured.
      metrics: createMetrics({
        processMetrics: role === "start" || role === "worker",
        namedLabels: config.metricsNamedLabels,
      }),
      settings,
      channels: registry,
      role: role ?? "library",
      closers,
      webhookSecret: { secret, source: config.webhookSecret ? "configured" : "generated" },
      unsubscribeSecret,
    });
    if (reminderKinds?.length) await punctual.seedReminderKinds(reminderKinds);
    return punctual;
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

/**
 * API-14: the e-mail channel's `unsubscribeUrl` — a signed link for a delivery to a
 * recipient of a tenant: the reminder's category, or all e-mail without one.
 */
function listUnsubscribe(
  publicUrl: string,
  secret: string,
): (delivery: ChannelDelivery, nowMs: number) => string | null {
  return (delivery, nowMs) =>
    delivery.recipient === undefined || delivery.tenant === undefined
      ? null
      : unsubscribeOps.unsubscribeUrl(
          publicUrl,
          secret,
          {
            tenant: delivery.tenant,
            recipientId: delivery.recipient.id,
            category: delivery.category ?? null,
          },
          nowMs,
        );
}
