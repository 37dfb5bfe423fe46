/**
 * Schedules (API-1, DEL-9, DEL-10): validate, create (one or many), edit with realign,
 * read, list, cancel, pause and resume. Each operation takes the {@link AppContext} of a
 * running punctual; `Punctual` exposes them as methods.
 */
import { z } from "zod";
import {
  createScheduleSchema,
  jsonBytes,
  reminderInputSchema,
  jsonDepth,
  LIST_FIELD_MAX_BYTES,
  LIST_MAX_DATES,
  LIST_PAGE_MAX_BYTES,
  listSchedulesQuerySchema,
  MAX_EXTERNAL_ID_CHARS,
  MAX_PAYLOAD_BYTES,
  MAX_PAYLOAD_DEPTH,
  MAX_TITLE_CHARS,
  updateScheduleSchema,
  type CreateScheduleInput,
  type ScheduleView,
  type UpdateScheduleInput,
} from "../contracts/index.js";
import {
  accepts,
  ConflictError,
  NotFoundError,
  ValidationError,
  type FieldIssue,
} from "../errors/index.js";
import {
  sampleIdentity,
  sampleRender,
  TrialBudget,
  validateTemplate,
} from "../channels/template.js";
import {
  applyOffset,
  dtstartOffsetConflict,
  isValidTimeZone,
  parseOffset,
  validateRule,
  type Occurrence,
  type Recurrence,
} from "../recurrence/index.js";
import { planLocked } from "../scheduler/plan.js";
import { realignSchedule, type RealignReport } from "../scheduler/realign.js";
import type { ChannelDelivery } from "../channels/types.js";
import type { Queryable } from "../store/database.js";
import { lockScheduleForEdit } from "../store/planning.js";
import {
  cancelScheduleRow,
  deleteReminders,
  finishedScheduleIds,
  insertReminders,
  insertRemindersBulk,
  insertSchedule,
  insertSchedulesBulk,
  listedRemindersOfSchedules,
  countScheduleRows,
  listScheduleRows,
  type ListTotal,
  remindersOfSchedules,
  redactTarget,
  reviveSchedule,
  scheduleById,
  scheduleByIdempotencyKey,
  setScheduleState,
  toScheduleView,
  updateScheduleDefinition,
  type ReminderRow,
} from "../store/schedules.js";
import {
  bodyOfStored,
  canonicalJson,
  definitionChanges,
  definitionColumns,
  definitionHash,
  normaliseBody,
  reminderColumns,
  ruleInputOfBody,
  RULE_FIELDS,
  type ScheduleBody,
} from "../definition/index.js";
import { planDeps, tenantOf, type AppContext, type CallContext } from "./context.js";
import { activeTraceParent } from "../observability/tracing.js";
import { cursorPart, decodeCursor, encodeCursor, type CursorScope } from "./cursor.js";
import { issuesFromZod, parseInput, prefixIssues, unknownChannelMessage } from "./input.js";
import { resolveReminderKinds } from "./kinds.js";
import { catchUpIssues, quietHoursIssues } from "./policy.js";
import {
  audienceIssues,
  createAudience,
  editAudience,
  type AudienceEditReport,
} from "./audience.js";
import { audienceOf, floatingOf } from "../store/deliveries/index.js";

/** API-12: an audience edit as the edit's realign report (cancelled rows count as deleted). */
function audienceRealigned(r: AudienceEditReport): RealignReport {
  return { deleted: r.cancelled, moved: r.moved, created: 0 };
}

export { definitionHash } from "../definition/index.js";

/** Result of a create: `created` is false when an Idempotency-Key replay returned the existing one. */
export interface CreateResult {
  schedule: ScheduleView;
  created: boolean;
  warnings: string[];
}

/**
 * Validates a create request strictly (REC-3 strict posture, DEL-11 channels, CH-1
 * targets). Returns the parsed input and warnings.
 * @throws ValidationError naming every bad field: when some fields do not have the
 *   right shape, the checks of the fields that do (the rule, each well-formed
 *   reminder's channel, target, offset and key) still run and add their issues (API-1).
 */
export function validateSchedule(
  app: AppContext,
  input: unknown,
  options: { warnPastDue?: boolean; tenant?: string; raw?: unknown; budget?: TrialBudget } = {},
): {
  value: ScheduleBody;
  warnings: string[];
  /** The first occurrence, when the rule is valid (the sample of templates, CH-6). */
  first: Occurrence | null;
  /**
   * The recurrence the check built (REC-3 strict), for planning to use as it is: a
   * create's rule is read once.
   */
  recurrence: Recurrence | null;
} {
  // API-11: the recipient checks read the body as sent (zod fills tzid).
  // CH-6: one main-thread budget for the template tries of the whole request.
  const checkOptions = {
    tenant: options.tenant,
    raw: options.raw ?? input,
    budget: options.budget ?? new TrialBudget(),
  };
  const parsed = createScheduleSchema.safeParse(input);
  if (!parsed.success) {
    const issues = issuesFromZod(parsed.error, "", input);
    const salvaged = salvageBody(input, issues);
    if (salvaged) {
      const named = new Set(issues.map((i) => i.field));
      const more = checkDefinition(app, salvaged.value, checkOptions, salvaged);
      issues.push(...more.issues.filter((i) => !named.has(i.field)));
    }
    throw new ValidationError(issues);
  }
  const value = normaliseBody(parsed.data);
  const { issues, warnings, first, recurrence } = checkDefinition(app, value, checkOptions, {
    ruleShaped: true,
    catchUpShaped: true,
    reminderIndexes: value.reminders.map((_, i) => i),
  });
  if (issues.length > 0) throw new ValidationError(issues);
  // A one-off whose reminders fell due already is sent at once (no misfire judgement
  // applies to one-offs): say so, since a past date is often a typo.
  const recurring = Boolean(value.rrule) || value.rdate.length > 0;
  if (options.warnPastDue && first && !recurring) {
    const now = app.clock.now();
    for (const reminder of value.reminders) {
      const dueAt = applyOffset(first, reminder.offset, value.tzid, value.dst);
      if (dueAt < now - PAST_DUE_WARNING_MS) {
        // REC-6: past its expiry a one-off's reminders are skipped (`expired`), not sent.
        const expiresAt = value.expiresAt ? Date.parse(value.expiresAt) : null;
        warnings.push(
          expiresAt !== null && expiresAt <= now
            ? `reminder ${reminder.key} fell due at ${new Date(dueAt).toISOString()}, which has passed, and the schedule expired at ${new Date(expiresAt).toISOString()}: it is skipped (expired), not sent`
            : `reminder ${reminder.key} fell due at ${new Date(dueAt).toISOString()}, which has passed: it is sent at once`,
        );
      }
    }
  }
  return { value, warnings, first, recurrence };
}

/** Which parts of a body had the right shape, so their own checks can run. */
interface ShapedParts {
  /** Every rule field ({@link RULE_FIELDS}) had its shape. */
  ruleShaped: boolean;
  /** `misfire` and `catchUp` had their shape. */
  catchUpShaped: boolean;
  /** Indexes (in the body) of the reminders that had their shape, in `value.reminders` order. */
  reminderIndexes: number[];
}

/**
 * API-1: what a body that failed its shape check still lets us check: each top-level field
 * with no issue of its own, parsed alone (defaults applied), and each reminder that parses
 * alone. Null when the body is not an object.
 */
function salvageBody(
  input: unknown,
  issues: readonly FieldIssue[],
): ({ value: ScheduleBody } & ShapedParts) | null {
  if (!input || typeof input !== "object" || Array.isArray(input)) return null;
  const body = input as Record<string, unknown>;
  const failed = (field: string) =>
    issues.some((i) => i.field === field || i.field.startsWith(`${field}.`));
  const shape = createScheduleSchema.shape;
  const kept: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(shape)) {
    if (key === "reminders" || failed(key)) continue;
    const one = (schema as z.ZodType).safeParse(body[key]);
    if (one.success) kept[key] = one.data;
  }
  const reminders: Array<ScheduleBody["reminders"][number]> = [];
  const reminderIndexes: number[] = [];
  if (Array.isArray(body.reminders)) {
    body.reminders.forEach((raw, i) => {
      const one = reminderInputSchema.safeParse(raw);
      if (one.success) {
        reminders.push(one.data);
        reminderIndexes.push(i);
      }
    });
  }
  const ruleShaped = RULE_FIELDS.every((f) => f in kept || (f !== "dtstart" && !failed(f)));
  const value = {
    rdate: [],
    exdate: [],
    tzid: "UTC",
    misfire: "skip",
    graceMs: 0,
    perpetual: false,
    ...kept,
    dtstart: typeof kept.dtstart === "string" ? kept.dtstart : "",
    reminders,
  } as ScheduleBody;
  if (ruleShaped) {
    try {
      normaliseBody(value);
    } catch {
      // an unknown zone: validateRule names it
    }
  }
  return {
    value,
    ruleShaped,
    catchUpShaped: !failed("misfire") && !failed("catchUp"),
    reminderIndexes,
  };
}

/**
 * The checks of a schedule body past its shape: the rule (REC-3 strict posture), the
 * expiry against the first occurrence, the catch-up policy (DEL-17), and per reminder its
 * key, offset, quiet hours (DEL-15), channel (DEL-11), target (CH-1) and template (CH-6).
 * Only the parts `shaped` names are checked; issues name the body's own field paths.
 */
function checkDefinition(
  app: AppContext,
  value: ScheduleBody,
  options: { tenant?: string; raw: unknown; budget: TrialBudget },
  shaped: ShapedParts,
): {
  issues: FieldIssue[];
  warnings: string[];
  first: Occurrence | null;
  recurrence: Recurrence | null;
} {
  const issues: FieldIssue[] = [];
  const warnings: string[] = [];
  // CH-6: templates are tried against the schedule's payload at its first occurrence.
  let first: Occurrence | null = null;
  let checked: Recurrence | null = null;
  if (shaped.ruleShaped) {
    try {
      const recurrence = validateRule(ruleInputOfBody(value));
      checked = recurrence;
      first = recurrence.first;
      // REC-1: an instant dtstart is read on the wall clock of tzid (docs/recurrence.md);
      // an offset that tzid does not have then is most often a slip, so say which wins.
      const conflict = dtstartOffsetConflict(value.dtstart, value.tzid);
      if (conflict) {
        warnings.push(
          `dtstart ${value.dtstart} has UTC offset ${conflict.given}, but ${value.tzid} is at ${conflict.zone} then: the instant wins, so the schedule starts at ${conflict.local} ${value.tzid} (${conflict.local}${conflict.zone}) and repeats that wall-clock time; give a local time without offset to mean ${value.tzid}'s own clock`,
        );
      }
      if (value.expiresAt && Date.parse(value.expiresAt) <= recurrence.first.instant) {
        issues.push({
          field: "expiresAt",
          message: "is at or before the first occurrence: nothing could ever be sent",
          value: value.expiresAt,
        });
      }
      if (!recurrence.bounded && !value.perpetual) {
        warnings.push(
          `unbounded series: planned for ${app.config.scheduler.maxExpansionDays} days, then stopped (logged at ERROR); add COUNT/UNTIL or endsAt, or set perpetual: true`,
        );
      }
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      issues.push(...err.issues);
      // An unknown zone stops validateRule before the rule is read: check the rule in UTC
      // too, so one reply names every bad field (the zone's issue is already there).
      if (err.issues.every((i) => i.field === "tzid") && value.rrule) {
        try {
          validateRule({ ...ruleInputOfBody(value), tzid: "UTC" });
        } catch (ruleErr) {
          if (!(ruleErr instanceof ValidationError)) throw ruleErr;
          issues.push(...ruleErr.issues.filter((i) => i.field.startsWith("rrule")));
        }
      }
    }
  } else if (typeof value.tzid === "string" && !isValidTimeZone(value.tzid)) {
    // The rule cannot be read (another rule field is malformed): name a bad zone anyway.
    issues.push({ field: "tzid", message: "is not a known IANA time zone", value: value.tzid });
  }
  if (shaped.catchUpShaped) issues.push(...catchUpIssues(value));
  // API-11: recipients and floating time (the body as sent: zod fills tzid).
  issues.push(...audienceIssues(value, options.raw));
  const keys = new Set<string>();
  value.reminders.forEach((reminder, n) => {
    const at = `reminders.${shaped.reminderIndexes[n] ?? n}`;
    issues.push(...quietHoursIssues(reminder.quietHours, `${at}.quietHours`));
    if (keys.has(reminder.key))
      issues.push({ field: `${at}.key`, message: "duplicate reminder key", value: reminder.key });
    keys.add(reminder.key);
    try {
      parseOffset(reminder.offset);
    } catch (err) {
      issues.push(...prefixIssues(err, `${at}`).map((x) => ({ ...x, field: `${at}.offset` })));
    }
    if (!app.channels.has(reminder.channel)) {
      issues.push({
        field: `${at}.channel`,
        message: unknownChannelMessage(app.channels.names(), reminder.channel),
        value: reminder.channel,
      });
      return;
    }
    // DEL-19: a digest goes out as one message with items: only a channel that renders them.
    if (reminder.digest && app.channels.get(reminder.channel).digests !== true) {
      issues.push({
        field: `${at}.digest`,
        message: `channel "${reminder.channel}" cannot send a digest (a handler channel needs a digest handler: handlerChannel(name, fn, { digest }))`,
        value: reminder.channel,
      });
    }
    // API-11: a reminder to recipients without a target of its own uses theirs.
    const recipientsTarget = value.recipients !== undefined && reminder.target === undefined;
    if (!recipientsTarget)
      try {
        app.channels
          .get(reminder.channel)
          .validateTarget(reminder.target, { tenant: tenantOf(options) });
      } catch (err) {
        issues.push(
          ...prefixIssues(err, at).map((x) => ({
            ...x,
            field: x.field.replace(`${at}.target.target`, `${at}.target`),
          })),
        );
      }
    if (reminder.template) {
      try {
        validateTemplate(
          reminder.template,
          `${at}.template`,
          templateSample(app, value, reminder, first),
          options.budget,
        );
      } catch (err) {
        if (err instanceof ValidationError) issues.push(...err.issues);
        else throw err;
      }
    }
  });
  return { issues, warnings, first, recurrence: checked };
}

/**
 * The sample delivery a reminder's template is tried against at create (CH-6): the
 * schedule's payload and first due time (else the next whole minute), a fresh delivery
 * key and schedule id of the real forms, so a template cannot tell the try from a send.
 */
function templateSample(
  app: AppContext,
  value: ScheduleBody,
  reminder: ScheduleBody["reminders"][number],
  first: Occurrence | null,
): ChannelDelivery {
  const occurrenceAt = new Date(
    first ? first.instant : Math.ceil(app.clock.now() / 60_000) * 60_000,
  );
  let dueAt = occurrenceAt;
  try {
    if (first) dueAt = new Date(applyOffset(first, reminder.offset, value.tzid, value.dst));
  } catch {
    // the offset's own issue is reported by the validation
  }
  return {
    ...sampleIdentity(),
    reminderKey: reminder.key,
    occurrenceAt,
    dueAt,
    attempt: 1,
    late: false,
    payload: value.payload ?? null,
    target: reminder.target ?? {},
    tzid: value.tzid,
    channel: reminder.channel,
  };
}

/**
 * Tries on a render thread the templates {@link validateSchedule} did not try on the
 * event loop (those that are not light, or past the request's budget, CH-6).
 * @throws ValidationError naming each template that fails or overruns.
 */
async function sampleRenders(
  app: AppContext,
  value: ScheduleBody,
  first: Occurrence | null,
  budget: TrialBudget,
): Promise<void> {
  if (!value.reminders.some((r) => r.template)) return;
  const issues: FieldIssue[] = [];
  for (const [i, reminder] of value.reminders.entries()) {
    if (!reminder.template) continue;
    try {
      await sampleRender(
        reminder.template,
        `reminders.${i}.template`,
        templateSample(app, value, reminder, first),
        budget,
      );
    } catch (err) {
      if (err instanceof ValidationError) issues.push(...err.issues);
      else throw err;
    }
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

/** How far in the past a one-off's due instant must be for a create to warn about it (ms). */
const PAST_DUE_WARNING_MS = 60_000;

/**
 * {@link validateSchedule} after filling the reminders that name a kind (DEL-11). Issues
 * of the kinds come first; a reminder whose kind was refused reports only that.
 * @throws ValidationError naming every bad field.
 */
async function validateWithKinds(
  app: AppContext,
  input: unknown,
  tenant: string,
  db: Queryable,
  options: { warnPastDue?: boolean; raw?: unknown } = {},
): Promise<ReturnType<typeof validateSchedule>> {
  const resolved = await resolveReminderKinds(app, input, tenant, db);
  if (resolved.issues.length === 0) {
    const budget = new TrialBudget();
    const checked = validateSchedule(app, resolved.input, { ...options, tenant, budget });
    await sampleRenders(app, checked.value, checked.first, budget);
    return checked;
  }
  const refused = resolved.issues.map((i) => i.field.replace(/\.kind$/, "."));
  let rest: FieldIssue[] = [];
  try {
    validateSchedule(app, resolved.input, { tenant });
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    rest = err.issues.filter((i) => !refused.some((p) => i.field.startsWith(p)));
  }
  throw new ValidationError([...resolved.issues, ...rest]);
}

/**
 * Creates a schedule with its reminders in one transaction (API-1). With an
 * idempotency key, a retried create returns the first schedule (`created: false`);
 * the same key with a different body is a ConflictError.
 * @throws ValidationError, ConflictError
 */
export async function createSchedule(
  app: AppContext,
  input: CreateScheduleInput | unknown,
  options: CallContext & { idempotencyKey?: string } = {},
): Promise<CreateResult> {
  const tenant = tenantOf(options);
  const { value, warnings, recurrence } = await validateWithKinds(app, input, tenant, app.db, {
    warnPastDue: true,
  });
  const hash = definitionHash(value, app.config.scheduler.maxAttempts);
  const idem = options.idempotencyKey ?? null;
  const result = await app.db.transaction(async (tx) => {
    const row = await insertSchedule(tx, {
      now: app.now(),
      tenant,
      idempotencyKey: idem,
      requestHash: hash,
      definition: definitionColumns(value),
      source: value.source ?? null,
      externalId: value.externalId ?? null,
      traceParent: activeTraceParent(),
    });
    if (!row) return null;
    await insertScheduleReminders(app, tx, row.id, value.reminders);
    if (value.recipients !== undefined) {
      // API-11: planned per recipient by the plan sweep (woken below), in batches.
      await createAudience(tx, {
        now: app.now(),
        tenant,
        scheduleId: row.id,
        ids: value.recipients,
        floating: value.floating === true,
      });
    } else {
      // Plan the first window in the same transaction: the deliveries exist the moment
      // the schedule does (DEL-1), and a reminder due in seconds needs no planning pass.
      // The recurrence validated above is planned as it is: the rule is read once (REC-3).
      await planLocked(
        tx,
        [row],
        planDeps(app),
        recurrence ? new Map([[row.id, recurrence]]) : undefined,
      );
    }
    const reminders = await remindersOfSchedules(tx, { scheduleIds: [row.id] });
    const view = toScheduleView(row, reminders);
    return value.floating === true ? asFloating(view) : view;
  });
  if (result) {
    app.wake();
    return { schedule: result, created: true, warnings };
  }
  // The idempotency key was used before: same body → the same schedule; else a conflict.
  const existing = await scheduleByIdempotencyKey(app.db, { tenant, idempotencyKey: idem });
  if (!existing) throw new ConflictError("idempotency key collision; retry the request");
  if (existing.request_hash !== hash) {
    throw new ConflictError(
      `Idempotency-Key "${idem}" was already used with a different request body (schedule ${existing.id})`,
      "IDEMPOTENCY_KEY_REUSED",
    );
  }
  return { schedule: await getSchedule(app, existing.id, options), created: false, warnings };
}

/**
 * DEL-9: edits a schedule and realigns its waiting deliveries in the same transaction.
 * The patch is merged onto the version locked in that transaction (`SELECT … FOR UPDATE`),
 * so concurrent edits apply one after the other and none reverts another; with `version`
 * (If-Match) an edit of any other version is refused instead (optimistic concurrency).
 * Fields left out keep their value; `reminders`, when given, replaces the whole list.
 * With `revive`, a cancelled schedule becomes active again (imports: an event that came
 * back to its calendar).
 * @throws ValidationError, NotFoundError, ConflictError (`STALE_VERSION` when `version`
 * is not the current one; `CONFLICT` for a cancelled schedule without `revive`)
 */
export async function updateSchedule(
  app: AppContext,
  id: string,
  patch: UpdateScheduleInput | unknown,
  options: CallContext & { version?: number; revive?: boolean } = {},
): Promise<{ schedule: ScheduleView; realigned: RealignReport; warnings: string[] }> {
  const tenant = tenantOf(options);
  const changes = parseInput(updateScheduleSchema, patch);
  if (!z.uuid().safeParse(id).success) throw new NotFoundError("schedule", id);
  // Only the fields the caller sent (zod fills defaults for absent optional fields).
  const sent = Object.fromEntries(
    Object.entries(changes).filter(
      ([k, v]) => v !== undefined && Object.prototype.hasOwnProperty.call(patch, k),
    ),
  );
  let warnings: string[] = [];
  const result = await app.db.transaction(async (tx) => {
    const locked = await lockScheduleForEdit(tx, { now: app.now(), tenant, id });
    if (!locked) throw new NotFoundError("schedule", id);
    if (options.version !== undefined && options.version !== locked.version) {
      throw new ConflictError(
        `schedule ${id} is at version ${locked.version}, not ${options.version}: read it again and retry`,
        "STALE_VERSION",
      );
    }
    if (locked.state === "cancelled" && !options.revive) {
      throw new ConflictError(`schedule ${id} is cancelled; create a new one`);
    }
    const current = toScheduleView(locked, []);
    const storedReminders = await remindersOfSchedules(tx, { scheduleIds: [id] });
    // API-11 / API-12: a schedule for recipients stays one; no other becomes one.
    const audience = await audienceOf(tx, { scheduleId: id });
    if (!audience && ("recipients" in sent || "floating" in sent)) {
      const field = "recipients" in sent ? "recipients" : "floating";
      throw new ValidationError({
        field,
        message: "only a schedule created with recipients has them",
        value: sent[field],
      });
    }
    // Reminder targets are stored unredacted: read them back (under the lock) for validation.
    // (`current` is the row's own view: its tzid is the stored one, `UTC` when floating.)
    const stored = bodyOfStored({ ...current, tzid: current.tzid ?? "UTC" }, storedReminders);
    // DEL-11: the reminders as sent (a kind fills the fields they leave out, not zod's defaults).
    // A target sent back as a read showed it (secrets redacted) keeps the stored one.
    const rawReminders = keepRedactedTargets(
      (patch as { reminders?: unknown } | null)?.reminders,
      storedReminders,
    );
    const merged = {
      ...stored,
      // API-11: a floating schedule keeps no zone of its own.
      ...(audience ? { recipients: [], floating: audience.floating } : {}),
      ...(audience?.floating ? { tzid: undefined } : {}),
      ...sent,
      ...(rawReminders === undefined ? {} : { reminders: rawReminders }),
    };
    // A one-off moved into the past (or given new reminders there) is sent at once: say so.
    const validated = await validateWithKinds(app, merged, tenant, tx, {
      warnPastDue: "dtstart" in sent || rawReminders !== undefined,
      raw: patch,
    });
    warnings = validated.warnings;
    const { value } = validated;
    // A patch that changes nothing (every field sent as stored) writes nothing: the
    // version, and so the ETag, stay. The stored definition is read the same way as the
    // patched one; when it cannot be read back exactly, the edit is written.
    if (
      locked.state !== "cancelled" &&
      !("recipients" in sent || "floating" in sent) &&
      unchanged(app, stored, value)
    ) {
      const view = toScheduleView(locked, storedReminders);
      return {
        schedule: audience?.floating ? asFloating(view) : view,
        realigned: { deleted: 0, moved: 0, created: 0 },
      };
    }
    if (locked.state === "cancelled") await reviveSchedule(tx, { now: app.now(), id });
    const updated = await updateScheduleDefinition(tx, {
      now: app.now(),
      id,
      definition: definitionColumns(value),
      requestHash: definitionHash(value, app.config.scheduler.maxAttempts),
    });
    await deleteReminders(tx, { scheduleId: id });
    await insertScheduleReminders(app, tx, id, value.reminders);
    const realigned = audience
      ? audienceRealigned(
          await editAudience(tx, {
            now: app.now(),
            dbNow: locked.db_now,
            tenant,
            scheduleId: id,
            recipients: "recipients" in sent ? value.recipients : undefined,
            floating: value.floating ?? audience.floating,
            channels: planDeps(app).channels,
          }),
        )
      : await realignSchedule(tx, updated!, planDeps(app));
    // The version this edit wrote (its ETag), not whatever a later edit made of it.
    const row = await scheduleById(tx, { tenant, id });
    const reminders = await remindersOfSchedules(tx, { scheduleIds: [id] });
    const view = toScheduleView(row!, reminders);
    const floating = audience !== null && (value.floating ?? audience.floating);
    return { schedule: floating ? asFloating(view) : view, realigned };
  });
  app.wake();
  return { ...result, warnings };
}

/**
 * API-1 / DEL-9: a reminder of an edit whose key and channel are those of a stored
 * reminder, and whose target is exactly that reminder's target as the API shows it
 * (secrets `[redacted]`), keeps the stored target: a client can send back what it read,
 * changing other fields, without knowing the secrets. Any other target is taken as sent.
 */
function keepRedactedTargets(reminders: unknown, stored: readonly ReminderRow[]): unknown {
  if (!Array.isArray(reminders)) return reminders;
  return reminders.map((r: unknown) => {
    if (r === null || typeof r !== "object") return r;
    const { key, channel, target } = r as { key?: unknown; channel?: unknown; target?: unknown };
    if (target === undefined) return r;
    const match = stored.find((s) => s.key === key && s.channel === (channel ?? "webhook"));
    if (!match) return r;
    const shown = redactTarget(match.target, match.channel);
    if (canonicalJson(shown) === canonicalJson(match.target)) return r;
    return canonicalJson(target) === canonicalJson(shown) ? { ...r, target: match.target } : r;
  });
}

/**
 * Whether `stored` (a schedule's body as read back) is the definition `value` (DEL-9): its
 * shape checked and normalised as a create's is, then compared field by field. When it
 * cannot be read back that way, it is taken as changed (the edit is written).
 */
function unchanged(app: AppContext, stored: unknown, value: ScheduleBody): boolean {
  const parsed = createScheduleSchema.safeParse(stored);
  if (!parsed.success || !accepts(normaliseBody, parsed.data)) return false;
  return definitionChanges(parsed.data, value, app.config.scheduler.maxAttempts).none;
}

/** Writes the reminders of one schedule (API-1, DEL-9). */
async function insertScheduleReminders(
  app: AppContext,
  tx: Queryable,
  scheduleId: string,
  reminders: ScheduleBody["reminders"],
): Promise<void> {
  await insertReminders(tx, {
    scheduleId,
    reminders: reminderColumns(reminders, app.config.scheduler.maxAttempts),
  });
}

/**
 * API-1: the size limits of the create contract, checked again on values a caller says
 * are validated (the bulk create of the library), so no way in stores a payload, title or
 * external id over its limit.
 * Adds to `issues` one per field over its limit, named `N.payload`, `N.title` or
 * `N.externalId` (N: the index).
 */
function storedSizeIssues(v: ScheduleBody, index: number, issues: FieldIssue[]): void {
  if (v.payload !== undefined && v.payload !== null) {
    if (jsonDepth(v.payload) > MAX_PAYLOAD_DEPTH)
      issues.push({
        field: `${index}.payload`,
        message: `must not nest objects or arrays deeper than ${MAX_PAYLOAD_DEPTH} levels`,
      });
    else {
      const bytes = jsonBytes(v.payload);
      if (bytes > MAX_PAYLOAD_BYTES)
        issues.push({
          field: `${index}.payload`,
          message: `must be at most ${MAX_PAYLOAD_BYTES} bytes as JSON (is ${bytes})`,
        });
    }
  }
  if (typeof v.title === "string" && v.title.length > MAX_TITLE_CHARS)
    issues.push({
      field: `${index}.title`,
      message: `must be at most ${MAX_TITLE_CHARS} characters (is ${v.title.length})`,
    });
  if (typeof v.externalId === "string" && v.externalId.length > MAX_EXTERNAL_ID_CHARS)
    issues.push({
      field: `${index}.externalId`,
      message: `must be at most ${MAX_EXTERNAL_ID_CHARS} characters (is ${v.externalId.length})`,
    });
}

/**
 * Creates many already-validated schedules in one transaction (imports: each carries a
 * `source` and an `externalId`). Two statements whatever the count.
 * @returns the new ids by external id.
 * @throws ValidationError when a value passes a size limit of the create contract
 *   (payload bytes, title, external id), naming `N.field`; nothing is stored then.
 */
export async function createSchedulesBulk(
  app: AppContext,
  values: Array<ScheduleBody>,
  ctx: CallContext = {},
): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  if (values.length === 0) return ids;
  const issues: FieldIssue[] = [];
  values.forEach((v, i) => storedSizeIssues(v, i, issues));
  if (issues.length > 0) throw new ValidationError(issues);
  await app.db.transaction(async (tx) => {
    const rows = await insertSchedulesBulk(tx, {
      now: app.now(),
      tenant: tenantOf(ctx),
      schedules: values.map((v) => ({
        requestHash: definitionHash(v, app.config.scheduler.maxAttempts),
        definition: definitionColumns(v),
        source: v.source ?? null,
        externalId: v.externalId ?? null,
      })),
    });
    // Every schedule of a bulk create carries an external id (imports).
    for (const row of rows) ids.set(row.external_id as string, row.id);
    const reminders = values.flatMap((v) =>
      reminderColumns(v.reminders, app.config.scheduler.maxAttempts).map((r) => ({
        ...r,
        scheduleId: ids.get(v.externalId ?? "")!,
      })),
    );
    await insertRemindersBulk(tx, { reminders });
    await planLocked(tx, rows, planDeps(app));
  });
  app.wake();
  return ids;
}

/**
 * API-11: the view of a floating schedule says so: `floating: true`, `tzid` null (it has
 * no zone of its own: `dtstart` and the rule are read in each recipient's, RFC 5545
 * §3.3.5), and `dtstartLocal` the wall clock as given, without an offset.
 */
export function asFloating<V extends ScheduleView>(view: V): V {
  view.floating = true;
  view.tzid = null;
  view.dtstartLocal = view.dtstart;
  return view;
}

/** @throws NotFoundError */
export async function getSchedule(
  app: AppContext,
  id: string,
  ctx: CallContext = {},
): Promise<ScheduleView> {
  if (!z.uuid().safeParse(id).success) throw new NotFoundError("schedule", id);
  const row = await scheduleById(app.db, { tenant: tenantOf(ctx), id });
  if (!row) throw new NotFoundError("schedule", id);
  const reminders = await remindersOfSchedules(app.db, { scheduleIds: [id] });
  const view = toScheduleView(row, reminders, await finishedScheduleIds(app.db, [row]));
  // API-11: a schedule for recipients says so, with how many it has.
  const audience = await audienceOf(app.db, { scheduleId: id });
  if (audience) {
    view.recipientCount = Number(audience.recipients);
    if (audience.floating) asFloating(view);
  }
  return view;
}

/**
 * Lists schedules (API-1, API-3) by creation (created_at, then id): `order` `asc` (oldest
 * first, the default) or `desc`, filtered by `state`, `source` and `q` (a case-insensitive
 * substring of the title or the external id), one keyset page of `limit` rows.
 * `nextCursor` (null on the last page) continues the same order and filters. With
 * `total`, also how many schedules the filters match (exact up to 10,000, else the
 * planner's estimate, `exact: false`).
 * @throws ValidationError a bad query field, or a `cursor` of another order or filter set.
 */
export async function listSchedules(
  app: AppContext,
  query: unknown = {},
  ctx: CallContext = {},
): Promise<{ items: ScheduleView[]; nextCursor: string | null; total?: ListTotal }> {
  const q = parseInput(listSchedulesQuerySchema, query);
  const scope: CursorScope = {
    list: "schedules",
    order: q.order,
    state: q.state,
    source: q.source,
    q: q.q,
  };
  let afterAt: string | null = null;
  let afterId: string | null = null;
  if (q.cursor !== undefined) {
    [afterAt, afterId] = decodeCursor(q.cursor, scope, [cursorPart.instant, cursorPart.uuid]) as [
      string,
      string,
    ];
  }
  // API-3: bounded in bytes whatever was stored. Large fields are left out of the items
  // (marked), rows are read LIST_CHUNK at a time, and the page ends early (with a cursor)
  // before its items pass LIST_PAGE_MAX_BYTES.
  const items: ScheduleView[] = [];
  let bytes = 0;
  let last: { created_at_cursor: string; id: string } | null = null;
  let more = false;
  while (items.length < q.limit) {
    const want = Math.min(LIST_CHUNK, q.limit - items.length);
    const rows = await listScheduleRows(app.db, {
      tenant: tenantOf(ctx),
      state: q.state ?? null,
      source: q.source ?? null,
      q: q.q ?? null,
      order: q.order,
      afterCreatedAt: afterAt,
      afterId,
      limit: want,
      payloadMaxBytes: LIST_FIELD_MAX_BYTES,
      maxDates: LIST_MAX_DATES,
    });
    if (rows.length === 0) break;
    const reminders = await listedRemindersOfSchedules(app.db, {
      scheduleIds: rows.map((r) => r.id),
      fieldMaxBytes: LIST_FIELD_MAX_BYTES,
    });
    const finished = await finishedScheduleIds(app.db, rows);
    const floating = await floatingOf(app.db, { scheduleIds: rows.map((r) => r.id) });
    let full = false;
    for (const r of rows) {
      const view = toScheduleView(r, reminders, finished);
      if (floating.has(r.id)) asFloating(view);
      const size = jsonBytes(view) + 1;
      if (items.length > 0 && bytes + size > LIST_PAGE_MAX_BYTES) {
        full = true;
        break;
      }
      items.push(view);
      bytes += size;
      last = r;
    }
    if (full) {
      more = true;
      break;
    }
    if (rows.length < want) break; // the end of the list
    const tail = rows[rows.length - 1]!;
    afterAt = tail.created_at_cursor;
    afterId = tail.id;
  }
  if (!more && last !== null && items.length === q.limit) more = true;
  return {
    items,
    nextCursor:
      more && last !== null ? encodeCursor([last.created_at_cursor, last.id], scope) : null,
    ...(q.total
      ? {
          total: await countScheduleRows(app.db, {
            tenant: tenantOf(ctx),
            state: q.state ?? null,
            source: q.source ?? null,
            q: q.q ?? null,
          }),
        }
      : {}),
  };
}

/** Rows of a schedule list read per statement (API-3): bounds what one request holds. */
const LIST_CHUNK = 50;

/**
 * DEL-10: cancels a schedule and every waiting delivery in one statement. In-flight
 * sends finish and are recorded; nothing new starts. Idempotent.
 * @throws NotFoundError
 */
export async function cancelSchedule(
  app: AppContext,
  id: string,
  ctx: CallContext & { by?: "user" | "import" } = {},
): Promise<ScheduleView & { cancelledDeliveries: number }> {
  if (!z.uuid().safeParse(id).success) throw new NotFoundError("schedule", id);
  const row = await cancelScheduleRow(app.db, {
    now: app.now(),
    tenant: tenantOf(ctx),
    id,
    by: ctx.by ?? "user",
  });
  if (!row) throw new NotFoundError("schedule", id);
  // OPS-13: a cancelled delivery counts once, by the process whose statement cancelled it.
  for (const [channel, n] of Object.entries(row.cancelled_by_channel ?? {})) {
    app.metrics.outcomes.inc({ channel, outcome: "cancelled" }, Number(n));
  }
  const reminders = await remindersOfSchedules(app.db, { scheduleIds: [id] });
  const view = toScheduleView(row, reminders);
  if ((await floatingOf(app.db, { scheduleIds: [id] })).has(id)) asFloating(view);
  return { ...view, cancelledDeliveries: Number(row.cancelled_deliveries) };
}

async function transition(
  app: AppContext,
  id: string,
  from: string,
  to: string,
  ctx: CallContext,
): Promise<ScheduleView> {
  const current = await getSchedule(app, id, ctx);
  if (current.state === to) return current;
  const changed = await setScheduleState(app.db, {
    now: app.now(),
    tenant: tenantOf(ctx),
    id,
    from,
    to,
  });
  if (!changed)
    throw new ConflictError(
      `schedule ${id} is in state "${current.state}"; cannot move it to ${to}`,
    );
  if (to === "active") app.wake();
  return getSchedule(app, id, ctx);
}

/** DEL-10: pauses a schedule (nothing is claimed meanwhile). @throws NotFoundError, ConflictError */
export function pauseSchedule(
  app: AppContext,
  id: string,
  ctx: CallContext = {},
): Promise<ScheduleView> {
  return transition(app, id, "active", "paused", ctx);
}

/** DEL-10: resumes a paused schedule; missed occurrences follow its misfire policy (REC-6). */
export function resumeSchedule(
  app: AppContext,
  id: string,
  ctx: CallContext = {},
): Promise<ScheduleView> {
  return transition(app, id, "paused", "active", ctx);
}
