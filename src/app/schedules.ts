/**
 * Schedules (API-1, DEL-9, DEL-10): validate, create (one or many), edit with realign,
 * read, list, cancel, pause and resume. Each operation takes the {@link AppContext} of a
 * running punctual; `Punctual` exposes them as methods.
 */
import { createHash } from "node:crypto";
import { z } from "zod";
import {
  createScheduleSchema,
  jsonBytes,
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
import { ConflictError, NotFoundError, ValidationError, type FieldIssue } from "../errors/index.js";
import { sampleIdentity, sampleRender, validateTemplate } from "../channels/template.js";
import {
  applyOffset,
  canonicalTimeZone,
  dtstartOffsetConflict,
  parseOffset,
  validateRule,
  type Occurrence,
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
  type ReminderToInsert,
  type ScheduleDefinition,
} from "../store/schedules.js";
import { DEFAULT_TENANT, planDeps, type AppContext, type CallContext } from "./context.js";
import { activeTraceParent } from "../observability/tracing.js";
import { cursorPart, decodeCursor, encodeCursor, type CursorScope } from "./cursor.js";
import { parseInput, prefixIssues } from "./input.js";
import { resolveReminderKinds } from "./kinds.js";
import { catchUpIssues, quietHoursIssues } from "./policy.js";
import {
  audienceIssues,
  createAudience,
  editAudience,
  type AudienceEditReport,
} from "./audience.js";
import { audienceOf } from "../store/deliveries/index.js";

/** API-12: an audience edit as the edit's realign report (cancelled rows count as deleted). */
function audienceRealigned(r: AudienceEditReport): RealignReport {
  return { deleted: r.cancelled, moved: 0, created: 0 };
}

/** Result of a create: `created` is false when an Idempotency-Key replay returned the existing one. */
export interface CreateResult {
  schedule: ScheduleView;
  created: boolean;
  warnings: string[];
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
      // CH-6: only hashed when present, so schedules without one keep their hash.
      ...(r.template ? { template: r.template } : {}),
      ...(r.rateLimitKey ? { rateLimitKey: r.rateLimitKey } : {}),
      // DEL-15: likewise.
      ...(r.quietHours ? { quietHours: r.quietHours } : {}),
      ...(r.priority === "critical" ? { priority: r.priority } : {}),
      // API-13: likewise.
      ...(r.category ? { category: r.category } : {}),
    })),
  };
  // DEL-17: only hashed when present.
  if (!definition.catchUp) delete (normalized as { catchUp?: unknown }).catchUp;
  // API-1: likewise, so schedules without a title keep their hash.
  if (!definition.title) delete (normalized as { title?: unknown }).title;
  return createHash("sha256").update(canonicalJson(normalized)).digest("hex");
}

/** The definition columns of a validated schedule, as the store writes them. */
export function definitionOf(value: z.output<typeof createScheduleSchema>): ScheduleDefinition {
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
    catchUpJson: value.catchUp ? JSON.stringify(value.catchUp) : null,
    title: value.title ?? null,
  };
}

/** The reminders of a validated schedule, as the store writes them. */
export function remindersOf(
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
    templateJson: r.template ? JSON.stringify(r.template) : null,
    rateLimitKey: r.rateLimitKey ?? null,
    quietHoursJson: r.quietHours ? JSON.stringify(r.quietHours) : null,
    priority: r.priority === "critical" ? "critical" : null,
    category: r.category ?? null,
  }));
}

/**
 * Validates a create request strictly (REC-3 strict posture, DEL-11 channels, CH-1
 * targets). Returns the parsed input and warnings.
 * @throws ValidationError naming every bad field.
 */
export function validateSchedule(
  app: AppContext,
  input: unknown,
  options: { warnPastDue?: boolean; tenant?: string; raw?: unknown } = {},
): {
  value: z.output<typeof createScheduleSchema>;
  warnings: string[];
  /** The first occurrence, when the rule is valid (the sample of templates, CH-6). */
  first: Occurrence | null;
} {
  const value = parseInput(createScheduleSchema, input);
  // Stored as the zone database spells it, so lists, filters and hashes see one name.
  value.tzid = canonicalTimeZone(value.tzid);
  // API-1: the rule is stored without the optional `RRULE:` prefix, so views, filters and
  // hashes see one spelling (a doubled prefix is left to validateRule, which refuses it).
  if (typeof value.rrule === "string" && /^\s*RRULE:(?!\s*RRULE:)/i.test(value.rrule)) {
    value.rrule = value.rrule.trim().slice("RRULE:".length).trimStart();
  }
  const issues: FieldIssue[] = [];
  const warnings: string[] = [];
  // CH-6: templates are tried against the schedule's payload at its first occurrence.
  let first: Occurrence | null = null;
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
        validateRule({
          dtstart: value.dtstart,
          tzid: "UTC",
          rrule: value.rrule,
          rdate: value.rdate,
          exdate: value.exdate,
          endsAt: value.endsAt ?? null,
          dst: value.dst,
        });
      } catch (ruleErr) {
        if (!(ruleErr instanceof ValidationError)) throw ruleErr;
        issues.push(...ruleErr.issues.filter((i) => i.field.startsWith("rrule")));
      }
    }
  }
  issues.push(...catchUpIssues(value));
  // API-11: recipients and floating time (the body as sent: zod fills tzid).
  issues.push(...audienceIssues(value, options.raw ?? input));
  const keys = new Set<string>();
  value.reminders.forEach((reminder, i) => {
    const at = `reminders.${i}`;
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
        message:
          `unknown channel; known: ${app.channels.names().join(", ")}` +
          (reminder.channel === "email"
            ? " (the email channel needs an SMTP server: set PUNCTUAL_SMTP_URL, e.g. smtp://user:pass@host:587)"
            : ""),
        value: reminder.channel,
      });
      return;
    }
    // API-11: a reminder to recipients without a target of its own uses theirs.
    const recipientsTarget = value.recipients !== undefined && reminder.target === undefined;
    if (!recipientsTarget)
      try {
        app.channels
          .get(reminder.channel)
          .validateTarget(reminder.target, { tenant: options.tenant ?? DEFAULT_TENANT });
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
        );
      } catch (err) {
        if (err instanceof ValidationError) issues.push(...err.issues);
        else throw err;
      }
    }
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
        warnings.push(
          `reminder ${reminder.key} fell due at ${new Date(dueAt).toISOString()}, which has passed: it is sent at once`,
        );
      }
    }
  }
  return { value, warnings, first };
}

/**
 * The sample delivery a reminder's template is tried against at create (CH-6): the
 * schedule's payload and first due time (else the next whole minute), a fresh delivery
 * key and schedule id of the real forms, so a template cannot tell the try from a send.
 */
function templateSample(
  app: AppContext,
  value: z.output<typeof createScheduleSchema>,
  reminder: z.output<typeof createScheduleSchema>["reminders"][number],
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
 * Tries on a render thread the templates {@link validateSchedule} could not try on the
 * event loop (those that are not light, CH-6).
 * @throws ValidationError naming each template that fails or overruns.
 */
async function sampleRenders(
  app: AppContext,
  value: z.output<typeof createScheduleSchema>,
  first: Occurrence | null,
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
    const checked = validateSchedule(app, resolved.input, { ...options, tenant });
    await sampleRenders(app, checked.value, checked.first);
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
  const tenant = options.tenant ?? DEFAULT_TENANT;
  const { value, warnings } = await validateWithKinds(app, input, tenant, app.db, {
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
      definition: definitionOf(value),
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
      await planLocked(tx, [row], planDeps(app));
    }
    const reminders = await remindersOfSchedules(tx, { scheduleIds: [row.id] });
    return toScheduleView(row, reminders);
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
  const tenant = options.tenant ?? DEFAULT_TENANT;
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
    const base = {
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
      catchUp: current.catchUp,
      perpetual: current.perpetual,
      payload: current.payload,
      title: current.title,
    };
    // Reminder targets are stored unredacted: read them back (under the lock) for validation.
    const stored = {
      ...base,
      reminders: storedReminders.map((r) => ({
        key: r.key,
        offset: r.offset_duration,
        channel: r.channel,
        target: r.target,
        ...(r.on_lost_lease
          ? { delivery: r.on_lost_lease === "retry" ? "at-least-once" : "at-most-once" }
          : {}),
        maxAttempts: r.max_attempts,
        ...(r.template ? { template: r.template } : {}),
        ...(r.rate_limit_key ? { rateLimitKey: r.rate_limit_key } : {}),
        ...(r.quiet_hours ? { quietHours: r.quiet_hours } : {}),
        ...(r.priority ? { priority: r.priority } : {}),
        ...(r.category ? { category: r.category } : {}),
      })) as unknown,
    };
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
      sameDefinition(app, stored, value, tenant)
    ) {
      return {
        schedule: toScheduleView(locked, storedReminders),
        realigned: { deleted: 0, moved: 0, created: 0 },
      };
    }
    if (locked.state === "cancelled") await reviveSchedule(tx, { now: app.now(), id });
    const updated = await updateScheduleDefinition(tx, {
      now: app.now(),
      id,
      definition: definitionOf(value),
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
          }),
        )
      : await realignSchedule(tx, updated!, planDeps(app));
    // The version this edit wrote (its ETag), not whatever a later edit made of it.
    const row = await scheduleById(tx, { tenant, id });
    const reminders = await remindersOfSchedules(tx, { scheduleIds: [id] });
    return { schedule: toScheduleView(row!, reminders), realigned };
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

/** Whether `stored` (a schedule's fields as read back) validates to exactly `value`. */
function sameDefinition(
  app: AppContext,
  stored: unknown,
  value: z.output<typeof createScheduleSchema>,
  tenant: string,
): boolean {
  // Defaults a reminder's row always holds, so leaving one out equals sending its value.
  const filled = (v: z.output<typeof createScheduleSchema>) =>
    canonicalJson(
      JSON.parse(
        JSON.stringify({
          ...v,
          reminders: v.reminders.map((r) => ({
            ...r,
            target: r.target ?? {},
            delivery: r.delivery ?? null,
            maxAttempts: r.maxAttempts ?? app.config.scheduler.maxAttempts,
          })),
        }),
      ),
    );
  try {
    return filled(validateSchedule(app, stored, { tenant }).value) === filled(value);
  } catch {
    return false;
  }
}

/** Writes the reminders of one schedule (API-1, DEL-9). */
async function insertScheduleReminders(
  app: AppContext,
  tx: Queryable,
  scheduleId: string,
  reminders: z.output<typeof createScheduleSchema>["reminders"],
): Promise<void> {
  await insertReminders(tx, {
    scheduleId,
    reminders: remindersOf(reminders, app.config.scheduler.maxAttempts),
  });
}

/**
 * API-1: the size limits of the create contract, checked again on values a caller says
 * are validated (the bulk create of the library), so no way in stores a payload, title or
 * external id over its limit.
 * Adds to `issues` one per field over its limit, named `N.payload`, `N.title` or
 * `N.externalId` (N: the index).
 */
function storedSizeIssues(
  v: z.output<typeof createScheduleSchema>,
  index: number,
  issues: FieldIssue[],
): void {
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
  values: Array<z.output<typeof createScheduleSchema>>,
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
      tenant: ctx.tenant ?? DEFAULT_TENANT,
      schedules: values.map((v) => ({
        requestHash: definitionHash(v, app.config.scheduler.maxAttempts),
        definition: definitionOf(v),
        source: v.source ?? null,
        externalId: v.externalId ?? null,
      })),
    });
    // Every schedule of a bulk create carries an external id (imports).
    for (const row of rows) ids.set(row.external_id as string, row.id);
    const reminders = values.flatMap((v) =>
      remindersOf(v.reminders, app.config.scheduler.maxAttempts).map((r) => ({
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

/** @throws NotFoundError */
export async function getSchedule(
  app: AppContext,
  id: string,
  ctx: CallContext = {},
): Promise<ScheduleView> {
  if (!z.uuid().safeParse(id).success) throw new NotFoundError("schedule", id);
  const row = await scheduleById(app.db, { tenant: ctx.tenant ?? DEFAULT_TENANT, id });
  if (!row) throw new NotFoundError("schedule", id);
  const reminders = await remindersOfSchedules(app.db, { scheduleIds: [id] });
  return toScheduleView(row, reminders, await finishedScheduleIds(app.db, [row]));
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
      tenant: ctx.tenant ?? DEFAULT_TENANT,
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
    let full = false;
    for (const r of rows) {
      const view = toScheduleView(r, reminders, finished);
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
            tenant: ctx.tenant ?? DEFAULT_TENANT,
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
    tenant: ctx.tenant ?? DEFAULT_TENANT,
    id,
    by: ctx.by ?? "user",
  });
  if (!row) throw new NotFoundError("schedule", id);
  // OPS-13: a cancelled delivery counts once, by the process whose statement cancelled it.
  for (const [channel, n] of Object.entries(row.cancelled_by_channel ?? {})) {
    app.metrics.outcomes.inc({ channel, outcome: "cancelled" }, Number(n));
  }
  const reminders = await remindersOfSchedules(app.db, { scheduleIds: [id] });
  return {
    ...toScheduleView(row, reminders),
    cancelledDeliveries: Number(row.cancelled_deliveries),
  };
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
    tenant: ctx.tenant ?? DEFAULT_TENANT,
    id,
    from,
    to,
  });
  if (!changed)
    throw new ConflictError(`schedule ${id} is ${current.state}; cannot move it to ${to}`);
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
