/**
 * Reminder kinds (DEL-11): a registry of named reminder shapes per tenant, kept in the
 * database (`punctual_reminder_kinds`), seeded from the `reminderKinds` library option at
 * start and written through `PUT /v1/reminder-kinds/{key}` and `punctual kinds set`.
 *
 * Rules (docs/api.md, "Reminder kinds"):
 * - Validated on every write and at start: unique keys, a channel this process has, a
 *   valid offset, a target the channel accepts, templates that parse and render. Errors
 *   name the entry and the field (`reminderKinds.2.channel`).
 * - A reminder naming a kind gets the kind's fields, its own fields winning; the fields
 *   are **copied when the schedule is written** (create or edit), never looked up at send
 *   time, so old deliveries stay stable when a kind changes or is removed, and every
 *   process sees a kind written by another at once (it is read from the database at each
 *   write, OPS-11).
 * - A series-only kind on a one-off schedule is refused (400, `reminders.N.kind`).
 * - A disabled kind is refused to new reminders (400, `reminders.N.kind`); reminders
 *   already written from it keep sending.
 */
import { sampleIdentity, sampleRender, validateTemplate } from "../channels/template.js";
import {
  reminderKindBodySchema,
  reminderKindSchema,
  reminderKindKeySchema,
  type ReminderKind,
  type ReminderKindView,
} from "../contracts/kinds.js";
import { ConfigError, NotFoundError, ValidationError, type FieldIssue } from "../errors/index.js";
import { parseOffset } from "../recurrence/index.js";
import {
  deleteReminderKind,
  listReminderKinds as listKindRows,
  reminderKindsByKey,
  upsertReminderKind,
  type ReminderKindRow,
} from "../store/kinds.js";
import type { ChannelDelivery } from "../channels/types.js";
import type { Queryable } from "../store/database.js";
import { redactTarget } from "../store/schedules.js";
import { DEFAULT_TENANT, tenantOf, type AppContext, type CallContext } from "./context.js";
import { issuesFromZod, prefixIssues, unknownChannelMessage } from "./input.js";

/** Checks what the shape alone cannot: channel, offset, target and templates. */
/** The sample delivery a kind's template is tried against (CH-6): real forms, fresh each time. */
function kindSample(app: AppContext, kind: ReminderKind): ChannelDelivery {
  const at = new Date(Math.ceil(app.clock.now() / 60_000) * 60_000);
  return {
    ...sampleIdentity(),
    reminderKey: kind.key,
    occurrenceAt: at,
    dueAt: at,
    attempt: 1,
    late: false,
    payload: null,
    target: kind.target ?? {},
    tzid: "UTC",
    channel: kind.channel,
  };
}

function kindIssues(
  app: AppContext,
  kind: ReminderKind,
  at: string,
  tenant: string = DEFAULT_TENANT,
): FieldIssue[] {
  const field = (name: string) => (at ? `${at}.${name}` : name);
  const issues: FieldIssue[] = [];
  try {
    parseOffset(kind.offset);
  } catch (err) {
    issues.push(
      ...prefixIssues(err, field("offset")).map((x) => ({ ...x, field: field("offset") })),
    );
  }
  if (!app.channels.has(kind.channel)) {
    issues.push({
      field: field("channel"),
      message: unknownChannelMessage(app.channels.names(), kind.channel),
      value: kind.channel,
    });
    return issues;
  }
  if (kind.target !== undefined) {
    try {
      app.channels.get(kind.channel).validateTarget(kind.target, { tenant });
    } catch (err) {
      const prefix = field("target");
      issues.push(
        ...prefixIssues(err, prefix).map((x) => ({
          ...x,
          field: x.field.replace(`${prefix}.target`, prefix),
        })),
      );
    }
  }
  if (kind.template) {
    try {
      validateTemplate(kind.template, field("template"), kindSample(app, kind));
    } catch (err) {
      if (err instanceof ValidationError) issues.push(...err.issues);
      else throw err;
    }
  }
  return issues;
}

/**
 * DEL-11: validates a list of kinds as the `reminderKinds` option gives them: shape,
 * unique keys, known channels, valid offsets, targets and templates.
 * @returns the kinds with defaults filled in.
 * @throws ValidationError whose fields name the entry (`reminderKinds.2.channel`).
 */
export function validateReminderKinds(
  app: AppContext,
  input: readonly unknown[],
  prefix = "reminderKinds",
): ReminderKind[] {
  const issues: FieldIssue[] = [];
  const kinds: ReminderKind[] = [];
  const seen = new Map<string, number>();
  input.forEach((entry, i) => {
    const at = `${prefix}.${i}`;
    const parsed = reminderKindSchema.safeParse(entry);
    if (!parsed.success) {
      issues.push(...issuesFromZod(parsed.error, at, entry));
      return;
    }
    const kind = parsed.data;
    const first = seen.get(kind.key);
    if (first !== undefined) {
      issues.push({
        field: `${at}.key`,
        message: `duplicate kind key (also ${prefix}.${first})`,
        value: kind.key,
      });
    } else seen.set(kind.key, i);
    issues.push(...kindIssues(app, kind, at));
    kinds.push(kind);
  });
  if (issues.length > 0) throw new ValidationError(issues);
  return kinds;
}

function toView(row: ReminderKindRow): ReminderKindView {
  return {
    key: row.key,
    channel: row.channel,
    offset: row.offset_duration,
    target: row.target === null ? null : redactTarget(row.target, row.channel),
    template: row.template ?? null,
    seriesOnly: row.series_only,
    enabled: row.enabled,
    version: Number(row.version),
    createdAt: new Date(row.created_at).toISOString(),
    updatedAt: new Date(row.updated_at).toISOString(),
  };
}

async function write(
  app: AppContext,
  kind: ReminderKind,
  tenant: string,
): Promise<{ kind: ReminderKindView; changed: boolean }> {
  const { row, changed } = await upsertReminderKind(app.db, app.now(), {
    tenant,
    key: kind.key,
    channel: kind.channel,
    offset: kind.offset,
    target: kind.target ?? null,
    template: kind.template ?? null,
    seriesOnly: kind.seriesOnly,
    enabled: kind.enabled,
  });
  return { kind: toView(row), changed };
}

/**
 * DEL-11, at start: validates the `reminderKinds` option and writes each kind to the
 * registry of the default tenant (the option wins over an API edit of the same key;
 * kinds defined only through the API are kept). A kind equal to the stored one keeps
 * its version.
 * @throws ConfigError naming each bad entry and field: the process does not start.
 */
export async function seedReminderKinds(
  app: AppContext,
  input: readonly unknown[],
  ctx: CallContext = {},
): Promise<ReminderKindView[]> {
  let kinds: ReminderKind[];
  try {
    kinds = validateReminderKinds(app, input);
  } catch (err) {
    if (err instanceof ValidationError) {
      throw new ConfigError(`invalid reminderKinds option: ${err.message}`);
    }
    throw err;
  }
  const out: ReminderKindView[] = [];
  for (const kind of kinds) {
    const { kind: view, changed } = await write(app, kind, tenantOf(ctx));
    if (changed)
      app.logger.info({ kind: view.key, version: view.version }, "reminder kind written");
    out.push(view);
  }
  return out;
}

/**
 * DEL-11: creates or replaces the kind `key` (`PUT /v1/reminder-kinds/{key}`).
 * @returns the stored kind; `created` when the key was new.
 * @throws ValidationError naming each bad field.
 */
export async function putReminderKind(
  app: AppContext,
  key: string,
  body: unknown,
  ctx: CallContext = {},
): Promise<{ kind: ReminderKindView; created: boolean }> {
  const issues: FieldIssue[] = [];
  const keyResult = reminderKindKeySchema.safeParse(key);
  if (!keyResult.success) issues.push(...issuesFromZod(keyResult.error, "key", key));
  const parsed = reminderKindBodySchema.safeParse(body);
  if (!parsed.success) issues.push(...issuesFromZod(parsed.error, "", body));
  if (issues.length > 0 || !parsed.success) throw new ValidationError(issues);
  const kind: ReminderKind = { ...parsed.data, key };
  const more = kindIssues(app, kind, "", tenantOf(ctx));
  if (more.length > 0) throw new ValidationError(more);
  if (kind.template) await sampleRender(kind.template, "template", kindSample(app, kind));
  const { kind: view, changed } = await write(app, kind, tenantOf(ctx));
  return { kind: view, created: changed && view.version === 1 };
}

/** DEL-11: the kinds of the caller's tenant, by key. */
export async function listReminderKinds(
  app: AppContext,
  ctx: CallContext = {},
): Promise<ReminderKindView[]> {
  return (await listKindRows(app.db, { tenant: tenantOf(ctx) })).map(toView);
}

/** DEL-11: one kind of the caller's tenant. @throws NotFoundError */
export async function getReminderKind(
  app: AppContext,
  key: string,
  ctx: CallContext = {},
): Promise<ReminderKindView> {
  const [row] = await reminderKindsByKey(app.db, {
    tenant: tenantOf(ctx),
    keys: [key],
  });
  if (!row) throw new NotFoundError("reminder kind", key);
  return toView(row);
}

/**
 * DEL-11: removes a kind. Reminders written from it keep their copied fields.
 * @throws NotFoundError when the tenant has no such kind.
 */
export async function removeReminderKind(
  app: AppContext,
  key: string,
  ctx: CallContext = {},
): Promise<void> {
  const removed = await deleteReminderKind(app.db, { tenant: tenantOf(ctx), key });
  if (!removed) throw new NotFoundError("reminder kind", key);
}

/**
 * DEL-11: fills the reminders of a create or edit request that name a `kind` with the
 * kind's fields (the reminder's own fields win; the reminder key defaults to the kind
 * key), reading the kinds of `tenant` from the database.
 * `db` is the transaction of the write when there is one.
 * @returns the expanded request (unchanged when no reminder names a kind) and the
 * issues: an unknown or disabled kind, a series-only kind on a one-off schedule
 * (`reminders.N.kind`).
 */
export async function resolveReminderKinds(
  app: AppContext,
  input: unknown,
  tenant: string,
  db: Queryable = app.db,
): Promise<{ input: unknown; issues: FieldIssue[] }> {
  if (!input || typeof input !== "object" || Array.isArray(input)) return { input, issues: [] };
  const body = input as Record<string, unknown>;
  const reminders = body.reminders;
  if (!Array.isArray(reminders)) return { input, issues: [] };
  const named = (r: unknown): string | null =>
    r && typeof r === "object" && typeof (r as { kind?: unknown }).kind === "string"
      ? (r as { kind: string }).kind
      : null;
  const keys = [...new Set(reminders.map(named).filter((k): k is string => k !== null))];
  if (keys.length === 0) return { input, issues: [] };
  const rows = new Map(
    (await reminderKindsByKey(db, { tenant, keys })).map((row) => [row.key, row]),
  );
  const rdate = body.rdate;
  const oneOff = !body.rrule && !(Array.isArray(rdate) && rdate.length > 0);
  const issues: FieldIssue[] = [];
  const expanded = reminders.map((reminder: unknown, i) => {
    const key = named(reminder);
    if (key === null) return reminder;
    const field = `reminders.${i}.kind`;
    const row = rows.get(key);
    if (!row) {
      issues.push({
        field,
        message: "no such reminder kind (GET /v1/reminder-kinds lists them)",
        value: key,
      });
      return reminder;
    }
    if (!row.enabled) {
      issues.push({ field, message: "reminder kind is disabled", value: key });
      return reminder;
    }
    if (row.series_only && oneOff) {
      issues.push({
        field,
        message: "series-only reminder kind on a one-off schedule: add an rrule or rdate",
        value: key,
      });
      return reminder;
    }
    return {
      key: row.key,
      offset: row.offset_duration,
      channel: row.channel,
      ...(row.target ? { target: row.target } : {}),
      ...(row.template ? { template: row.template } : {}),
      // `null` in a reminder (as a read shows an unset field) leaves the kind's value.
      ...Object.fromEntries(
        Object.entries(reminder as Record<string, unknown>).filter(([, v]) => v !== null),
      ),
    };
  });
  return { input: { ...body, reminders: expanded }, issues };
}
