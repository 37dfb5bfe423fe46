/**
 * Reminder kinds (DEL-11): the registry of a tenant, one row per key. Every statement is
 * scoped by tenant. `$1` is "now" (NULL = database clock) where present.
 * Invariant: a kind's `version` grows by one on each write that changes it and stays put
 * on a write that changes nothing (the library option rewrites its kinds at every start).
 */
import type { ReminderKindView } from "../contracts/kinds.js";
import type { Queryable } from "./database.js";
import { NOW } from "./deliveries/sql.js";
import { columnsOf, execute, rows, rowsStatement } from "./statement.js";

/** A row of `punctual_reminder_kinds`, every column. */
export interface ReminderKindRow {
  tenant: string;
  key: string;
  channel: string;
  offset_duration: string;
  target: ReminderKindView["target"];
  template: ReminderKindView["template"];
  series_only: boolean;
  enabled: boolean;
  version: number;
  created_at: Date;
  updated_at: Date;
}

const KIND_KEYS = [
  "tenant",
  "key",
  "channel",
  "offset_duration",
  "target",
  "template",
  "series_only",
  "enabled",
  "version",
  "created_at",
  "updated_at",
] as const;

/**
 * Creates or replaces a kind. A write equal to the stored kind changes nothing (same
 * version, same `updated_at`) and returns no row; {@link upsertReminderKind} then reads it.
 * $1 now, $2 tenant, $3 key, $4 channel, $5 offset, $6 target (json text or null),
 * $7 template (json text or null), $8 series only, $9 enabled.
 */
export const UPSERT_REMINDER_KIND_SQL = `
insert into punctual_reminder_kinds
  (tenant, key, channel, offset_duration, target, template, series_only, enabled, created_at, updated_at)
values ($2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, ${NOW}, ${NOW})
on conflict (tenant, key) do update
  set channel = excluded.channel, offset_duration = excluded.offset_duration,
      target = excluded.target, template = excluded.template,
      series_only = excluded.series_only, enabled = excluded.enabled,
      version = punctual_reminder_kinds.version + 1, updated_at = ${NOW}
  where (punctual_reminder_kinds.channel, punctual_reminder_kinds.offset_duration,
         punctual_reminder_kinds.target, punctual_reminder_kinds.template,
         punctual_reminder_kinds.series_only, punctual_reminder_kinds.enabled)
        is distinct from
        (excluded.channel, excluded.offset_duration, excluded.target, excluded.template,
         excluded.series_only, excluded.enabled)
returning *`;

/** Result columns of {@link UPSERT_REMINDER_KIND_SQL}. */
export const UPSERT_REMINDER_KIND_COLUMNS = columnsOf<ReminderKindRow>()(KIND_KEYS);

/** Every kind of a tenant, by key. $1 tenant */
export const LIST_REMINDER_KINDS_SQL = `
select * from punctual_reminder_kinds where tenant = $1 order by key`;

/** Result columns of {@link LIST_REMINDER_KINDS_SQL}. */
export const LIST_REMINDER_KINDS_COLUMNS = columnsOf<ReminderKindRow>()(KIND_KEYS);

/** The kinds of a tenant named by `keys`. $1 tenant, $2 keys */
export const REMINDER_KINDS_BY_KEY_SQL = `
select * from punctual_reminder_kinds where tenant = $1 and key = any($2::text[]) order by key`;

/** Result columns of {@link REMINDER_KINDS_BY_KEY_SQL}. */
export const REMINDER_KINDS_BY_KEY_COLUMNS = columnsOf<ReminderKindRow>()(KIND_KEYS);

/** Removes one kind; stored reminders keep their copied fields. $1 tenant, $2 key */
export const DELETE_REMINDER_KIND_SQL = `
delete from punctual_reminder_kinds where tenant = $1 and key = $2`;

/**
 * A kind to write, as {@link upsertReminderKind} takes it: the fields of its view (its
 * `offset` an ISO 8601 duration, already validated) and its tenant.
 */
export type ReminderKindToWrite = Pick<
  ReminderKindView,
  "key" | "channel" | "offset" | "target" | "template" | "seriesOnly" | "enabled"
> & { tenant: string };

/**
 * DEL-11: runs {@link UPSERT_REMINDER_KIND_SQL}, then reads the kind back when the write
 * changed nothing.
 * @returns the stored kind and whether this call changed it.
 */
export async function upsertReminderKind(
  db: Queryable,
  now: Date | null,
  k: ReminderKindToWrite,
): Promise<{ row: ReminderKindRow; changed: boolean }> {
  const written = await rows<ReminderKindRow>(db, UPSERT_REMINDER_KIND_SQL, [
    now,
    k.tenant,
    k.key,
    k.channel,
    k.offset,
    k.target === null ? null : JSON.stringify(k.target),
    k.template === null ? null : JSON.stringify(k.template),
    k.seriesOnly,
    k.enabled,
  ]);
  if (written[0]) return { row: written[0], changed: true };
  const [row] = await reminderKindsByKey(db, { tenant: k.tenant, keys: [k.key] });
  return { row: row!, changed: false };
}

/** DEL-11: runs {@link LIST_REMINDER_KINDS_SQL}. */
export const listReminderKinds = rowsStatement<ReminderKindRow, { tenant: string }>(
  LIST_REMINDER_KINDS_SQL,
  (p) => [p.tenant],
);

/** DEL-11: runs {@link REMINDER_KINDS_BY_KEY_SQL}. */
export const reminderKindsByKey = rowsStatement<
  ReminderKindRow,
  { tenant: string; keys: readonly string[] }
>(REMINDER_KINDS_BY_KEY_SQL, (p) => [p.tenant, p.keys]);

/** DEL-11: runs {@link DELETE_REMINDER_KIND_SQL}; true when the kind existed. */
export async function deleteReminderKind(
  db: Queryable,
  p: { tenant: string; key: string },
): Promise<boolean> {
  return (await execute(db, DELETE_REMINDER_KIND_SQL, [p.tenant, p.key])) > 0;
}
