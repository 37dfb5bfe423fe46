/**
 * Schedules and their reminders: create (idempotent by key), read, list, cancel, pause,
 * resume. Parameters are listed per statement; `$1` is "now" where present.
 */
import type { DeliveryView, ReminderView, ScheduleView, AttemptView } from "../contracts/index.js";
import type { ReminderTemplate } from "../channels/template.js";
import type { CatchUp, QuietHours } from "../recurrence/index.js";
import type { Queryable } from "./database.js";
import { columnsOf, execute, firstRow, rows } from "./statement.js";
import { staleAtSql, syncWaitingSql } from "./waiting.js";

const NOW = "coalesce($1::timestamptz, now())";

/** A row of `punctual_schedules`, every column (what `select *` returns). */
export interface ScheduleRow {
  id: string;
  tenant: string;
  source: string | null;
  external_id: string | null;
  idempotency_key: string | null;
  request_hash: string | null;
  state: ScheduleView["state"];
  invalid_reason: string | null;
  version: number;
  dtstart: string;
  tzid: string;
  rrule: string | null;
  rdate: string[];
  exdate: string[];
  recurring: boolean;
  ends_at: Date | null;
  expires_at: Date | null;
  dst_gap: "shift" | "skip";
  dst_overlap: "earlier" | "later";
  misfire: "skip" | "latest" | "all";
  grace_ms: number;
  perpetual: boolean;
  payload: unknown;
  /** Planning watermark: deliveries due before it exist (DEL-7). */
  planned_until: Date | null;
  /** No occurrence left after the watermark. */
  plan_complete: boolean;
  /** REC-5: when the expansion cap was logged. */
  cap_logged_at: Date | null;
  created_at: Date;
  updated_at: Date;
  cancelled_at: Date | null;
  cancelled_by: "user" | "import" | null;
  /** DEL-17: catch-up bounds under misfire `all` (migration 0009), or null. */
  catch_up: CatchUp | null;
  /** What a person calls it, at most 500 characters (migration 0016), or null. */
  title: string | null;
}

/** The keys of {@link ScheduleRow}: the columns of `punctual_schedules`, for statements that return its rows whole. */
export const SCHEDULE_ROW_KEYS = columnsOf<ScheduleRow>()([
  "id",
  "tenant",
  "source",
  "external_id",
  "idempotency_key",
  "request_hash",
  "state",
  "invalid_reason",
  "version",
  "dtstart",
  "tzid",
  "rrule",
  "rdate",
  "exdate",
  "recurring",
  "ends_at",
  "expires_at",
  "dst_gap",
  "dst_overlap",
  "misfire",
  "grace_ms",
  "perpetual",
  "payload",
  "planned_until",
  "plan_complete",
  "cap_logged_at",
  "created_at",
  "updated_at",
  "cancelled_at",
  "cancelled_by",
  "catch_up",
  "title",
]);

/** A schedule row with the "now" of the statement that wrote or locked it (ready to plan). */
export type ScheduleRowAt = ScheduleRow & { db_now: Date };

/** The keys of {@link ScheduleRowAt}. */
export const SCHEDULE_AT_ROW_KEYS = columnsOf<ScheduleRowAt>()([...SCHEDULE_ROW_KEYS, "db_now"]);

/** A row of `punctual_reminders`, every column. */
export interface ReminderRow {
  schedule_id: string;
  key: string;
  offset_duration: string;
  channel: string;
  target: Record<string, unknown>;
  on_lost_lease: "retry" | "in_doubt" | null;
  max_attempts: number;
  /** CH-6: the reminder's template, or null. */
  template: ReminderTemplate | null;
  /** DEL-13: the reminder's limiter key; null: its channel name. */
  rate_limit_key: string | null;
  /** DEL-15: the reminder's quiet window (migration 0009), or null. */
  quiet_hours: QuietHours | null;
  /** DEL-15: `critical` bypasses the quiet window; null: normal. */
  priority: "normal" | "critical" | null;
}

/** Result columns of {@link REMINDERS_SQL}. */
export const REMINDERS_COLUMNS = columnsOf<ReminderRow>()([
  "schedule_id",
  "key",
  "offset_duration",
  "channel",
  "target",
  "on_lost_lease",
  "max_attempts",
  "template",
  "rate_limit_key",
  "quiet_hours",
  "priority",
]);

/**
 * Inserts a schedule unless one with the same (tenant, idempotency key) exists.
 * Parameters: $1 now, $2 tenant, $3 idempotency key, $4 request hash, $5 dtstart, $6 tzid,
 * $7 rrule, $8 rdate, $9 exdate, $10 recurring, $11 ends_at, $12 expires_at, $13 dst gap,
 * $14 dst overlap, $15 misfire, $16 grace ms, $17 perpetual, $18 payload (json text),
 * $19 source, $20 external id, $21 catch-up (json text or null, DEL-17), $22 title or null.
 * Returns the new row (with `db_now`, ready to plan), or nothing when the key was already
 * used (the caller reads it).
 */
export const INSERT_SCHEDULE_SQL = `
insert into punctual_schedules
  (tenant, idempotency_key, request_hash, dtstart, tzid, rrule, rdate, exdate, recurring,
   ends_at, expires_at, dst_gap, dst_overlap, misfire, grace_ms, perpetual, payload, source,
   external_id, created_at, updated_at, catch_up, title)
values ($2, $3, $4, $5, $6, $7, $8::text[], $9::text[], $10, $11, $12, $13, $14, $15, $16, $17,
        $18::jsonb, $19, $20, ${NOW}, ${NOW}, $21::jsonb, $22::text)
on conflict (tenant, idempotency_key) where idempotency_key is not null do nothing
returning *, ${NOW} as db_now`;

/** Parameters: $1 schedule id, then parallel arrays $2 keys, $3 offsets, $4 channels, $5 targets (json text), $6 lost-lease policies, $7 max attempts, $8 templates (json text or null), $9 rate-limit keys (or null, DEL-13), $10 quiet hours (json text or null, DEL-15), $11 priorities (or null). */
export const INSERT_REMINDERS_SQL = `
insert into punctual_reminders (schedule_id, key, offset_duration, channel, target, on_lost_lease, max_attempts, template, rate_limit_key, quiet_hours, priority)
select $1, u.key, u.offset_duration, u.channel, u.target::jsonb, u.on_lost_lease, u.max_attempts, u.template::jsonb, u.rate_limit_key, u.quiet_hours::jsonb, u.priority
from unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[], $9::text[], $10::text[], $11::text[])
  as u(key, offset_duration, channel, target, on_lost_lease, max_attempts, template, rate_limit_key, quiet_hours, priority)`;

/** $1 tenant, $2 idempotency key */
export const SCHEDULE_BY_IDEMPOTENCY_KEY_SQL = `
select * from punctual_schedules where tenant = $1 and idempotency_key = $2`;

/** $1 tenant, $2 id */
export const SCHEDULE_BY_ID_SQL = `select * from punctual_schedules where tenant = $1 and id = $2`;

/**
 * OPS-12: the FROM items that read the reminders of the schedule ids in the uuid array
 * `ids` (SQL, e.g. `$1`) as relation `r`: one primary-key lookup per distinct id. The
 * lateral subquery runs once per id; `offset 0` keeps the planner from merging it into a
 * join, which it would plan from estimates: on a table never analyzed (PGlite does not
 * analyze on its own) it takes `schedule_id = any(<20 ids>)` to match a tenth of the rows
 * and reads the whole table instead, for every batch of an import.
 */
export function remindersOfIdsSql(ids: string): string {
  return `(select distinct unnest(${ids}::uuid[]) as id) ids
  cross join lateral (
    select * from punctual_reminders x where x.schedule_id = ids.id offset 0
  ) r`;
}

/** $1 schedule ids (repeats read once); by primary key whatever the statistics (OPS-12). */
export const REMINDERS_SQL = `
select r.* from ${remindersOfIdsSql("$1")} order by r.schedule_id, r.key`;

/** Keyset page: $1 tenant, $2 state or NULL, $3 after (created_at, id) as created_at or NULL, $4 after id or NULL, $5 limit, $6 source or NULL (API-3) */
export const LIST_SCHEDULES_SQL = `
select *,
       -- Full (microsecond) precision for the cursor: a JS Date would round to ms and a
       -- bulk import gives many rows the same created_at.
       to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at_cursor
from punctual_schedules
where tenant = $1 and ($2::text is null or state = $2)
  and ($6::text is null or source = $6)
  and ($3::timestamptz is null or (created_at, id) > ($3::timestamptz, $4::uuid))
order by created_at, id
limit $5`;

/**
 * DEL-10: cancel, in one statement with its deliveries: the schedule becomes `cancelled`
 * and every waiting delivery (`pending`, `retry`, `paused`) becomes `cancelled`. A
 * `claimed` delivery is in flight: its send finishes and is recorded; nothing new starts:
 * a retry of it ends `cancelled` (SETTLE_SQL, trigger `punctual_deliveries_rewait`).
 * Parameters: $1 now, $2 tenant, $3 id, $4 who ('user' | 'import').
 * Returns the schedule row (absent: not found).
 */
export const CANCEL_SCHEDULE_SQL = `
with cancelled as (
  update punctual_schedules
  set state = 'cancelled', invalid_reason = null, cancelled_at = coalesce(cancelled_at, ${NOW}),
      cancelled_by = case when state = 'cancelled' then cancelled_by else $4 end,
      version = version + case when state = 'cancelled' then 0 else 1 end, updated_at = ${NOW}
  where tenant = $2 and id = $3
  returning *
),
stopped as (
  update punctual_deliveries d
  set state = 'cancelled', reason = 'schedule_cancelled', finished_at = ${NOW}, updated_at = ${NOW}
  from cancelled c
  where d.schedule_id = c.id and d.state in ('pending', 'retry', 'paused')
  returning d.id, d.channel
)
select c.*, (select count(*) from stopped) as cancelled_deliveries,
  (select coalesce(jsonb_object_agg(x.channel, x.n), '{}'::jsonb)
     from (select channel, count(*) as n from stopped group by channel) x) as cancelled_by_channel
from cancelled c`;

/**
 * DEL-10: pause or resume, in one statement with the waiting deliveries. Pausing holds
 * every `pending`/`retry` row (state `paused`: out of the claim index, never claimed);
 * resuming puts them back (`pending` when never tried, else `retry`), with their
 * `stale_at`, so the misfire sweep judges what was missed meanwhile (REC-6) before any of
 * it is claimed. A `claimed` row finishes its send; if it must retry it comes back held
 * (trigger `punctual_deliveries_rewait`).
 * Parameters: $1 now, $2 tenant, $3 id, $4 from state, $5 to state.
 * Returns the row when the transition happened.
 */
export const SET_SCHEDULE_STATE_SQL = `
with changed as (
  update punctual_schedules
  set state = $5, version = version + 1, updated_at = ${NOW}
  where tenant = $2 and id = $3 and state = $4
  returning *
),
held as (
  update punctual_deliveries d
  ${syncWaitingSql("c", "changed c")}
  returning d.id
)
select c.*, (select count(*) from held) as moved_deliveries from changed c`;

/** Deliveries page: $1 tenant, $2 schedule id or NULL, $3 state or NULL, $4 after id or NULL, $5 limit */
export const LIST_DELIVERIES_SQL = `
select d.* from punctual_deliveries d
join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $1 and ($2::uuid is null or d.schedule_id = $2)
  and ($3::text is null or d.state = $3)
  and ($4::bigint is null or d.id > $4)
order by d.id
limit $5`;

/** $1 tenant, $2 delivery id */
export const DELIVERY_BY_ID_SQL = `
select d.* from punctual_deliveries d join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $1 and d.id = $2`;

/**
 * DEL-14: every attempt of a delivery, oldest first: the rows of `punctual_attempts` in
 * the order they were recorded, then the attempt that sent it when the settle kept that
 * one on the delivery row (view `punctual_delivery_attempts`, migration 0007).
 * $1 delivery id.
 */
export const ATTEMPTS_SQL = `
select id, delivery_id, attempt, worker, started_at, ended_at, outcome, settled, status,
       message_id, error
from punctual_delivery_attempts where delivery_id = $1 order by id nulls last`;

/**
 * DEL-12: redrive a dead or in-doubt delivery with the same key: back to `pending`, due now,
 * failures reset (attempt keeps counting: it is the fencing token). The Retry-After age
 * budget starts over (`first_attempt_at` cleared); `deferrals` is kept, so the attempts
 * spent (`attempt − deferrals`) stay true, and a row that died `RATE_LIMITED` gets one
 * more try before a rate limit is dead again (DEL-13). Only while its
 * schedule is not cancelled and its reminder still exists (else nothing could send it).
 * Of a paused schedule it is held (`paused`) until the schedule resumes. A redrive is an
 * operator's decision: no grace applies (`stale_at` NULL), the expiry does.
 * Parameters: $1 now, $2 tenant, $3 delivery id.
 */
export const REDRIVE_SQL = `
update punctual_deliveries d
set state = case when s.state = 'active' then 'pending' else 'paused' end,
    run_at = ${NOW}, failures = 0, first_attempt_at = null,
    finished_at = null, reason = null,
    sent_at = null, expires_at = s.expires_at, stale_at = null, updated_at = ${NOW}
from punctual_schedules s
where s.id = d.schedule_id and s.tenant = $2 and d.id = $3 and d.state in ('dead', 'in_doubt')
  and s.state <> 'cancelled'
  and exists (select 1 from punctual_reminders r
              where r.schedule_id = d.schedule_id and r.key = d.reminder_key)
returning d.*`;

/**
 * DEL-12: an operator resolves an in-doubt delivery — `sent` (it did arrive) or `dead` —
 * or acknowledges a dead letter (`dead`: reason `resolved`, no longer counted as an open
 * dead letter; `sent`: it arrived after all).
 * Parameters: $1 now, $2 tenant, $3 delivery id, $4 'sent' | 'dead'.
 */
export const RESOLVE_SQL = `
update punctual_deliveries d
set state = $4, sent_at = case when $4 = 'sent' then ${NOW} end,
    finished_at = case when $4 = 'dead' then ${NOW} end,
    reason = case when $4 = 'dead' then 'resolved' end, updated_at = ${NOW}
from punctual_schedules s
where s.id = d.schedule_id and s.tenant = $2 and d.id = $3
  and (d.state = 'in_doubt' or (d.state = 'dead' and d.reason is distinct from 'resolved'))
returning d.*`;

/** A row of `punctual_deliveries`, every column. */
export interface DeliveryRow {
  id: number;
  delivery_key: string;
  schedule_id: string;
  reminder_key: string;
  occurrence_at: Date;
  due_at: Date;
  run_at: Date;
  state: DeliveryView["state"];
  /** Claims so far: the settle's fencing token (DEL-2). Attempts spent: `attempt − deferrals`. */
  attempt: number;
  failures: number;
  max_attempts: number;
  /** Claims that ended deferred by a Retry-After (DEL-13, migration 0004). */
  deferrals: number;
  /** When the first try began; the deferral budget's age counts from it (DEL-13). */
  first_attempt_at: Date | null;
  channel: string;
  on_lost_lease: string;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  claimed_at: Date | null;
  sent_at: Date | null;
  finished_at: Date | null;
  reason: string | null;
  last_error: string | null;
  late: boolean;
  /** The schedule's expiry, copied for admission (DEL-3); meaningful on waiting rows. */
  expires_at: Date | null;
  /** REC-6: past it a never-tried recurring row waits for the misfire sweep; NULL: no limit. */
  stale_at: Date | null;
  /** `run_at` while `pending` or `retry`, else NULL (generated): the claim index's key. */
  claimable_at: Date | null;
  /** DEL-14: the worker whose attempt sent this row, when the settle kept it on the row. */
  sent_by: string | null;
  /** When that attempt's send started. */
  send_started_at: Date | null;
  /** That attempt's channel status code (HTTP status for webhooks), if any. */
  send_status: number | null;
  /** That attempt's channel message id, if any. */
  send_message_id: string | null;
  /** DEL-13: the row's limiter, `tenant/key` (null: planned by a release before 0010, not limited). */
  limiter: string | null;
  /** DEL-15: the instant a delivery due in a quiet window was deferred to (migration 0009). */
  deferred_until: Date | null;
  /** DEL-15: why it was deferred (`QUIET_HOURS`); null when not deferred. */
  deferred_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

/** An attempt (DEL-14): a row of `punctual_attempts` or the sending attempt kept on the delivery row. */
export interface AttemptRow {
  /** The `punctual_attempts` row id; NULL for the attempt kept on the delivery row. */
  id: number | null;
  delivery_id: number;
  attempt: number;
  worker: string;
  started_at: Date;
  ended_at: Date;
  outcome: string;
  settled: boolean;
  status: number | null;
  message_id: string | null;
  error: string | null;
}

/** The keys of {@link DeliveryRow}: the columns of `punctual_deliveries`. */
export const DELIVERY_ROW_KEYS = columnsOf<DeliveryRow>()([
  "id",
  "delivery_key",
  "schedule_id",
  "reminder_key",
  "occurrence_at",
  "due_at",
  "run_at",
  "state",
  "attempt",
  "failures",
  "max_attempts",
  "channel",
  "on_lost_lease",
  "lease_owner",
  "lease_expires_at",
  "claimed_at",
  "sent_at",
  "finished_at",
  "reason",
  "last_error",
  "late",
  "created_at",
  "updated_at",
  "expires_at",
  "stale_at",
  "claimable_at",
  "deferrals",
  "first_attempt_at",
  "sent_by",
  "send_started_at",
  "send_status",
  "send_message_id",
  "limiter",
  "deferred_until",
  "deferred_reason",
]);

/** Result columns of {@link ATTEMPTS_SQL}. */
export const ATTEMPTS_COLUMNS = columnsOf<AttemptRow>()([
  "id",
  "delivery_id",
  "attempt",
  "worker",
  "started_at",
  "ended_at",
  "outcome",
  "settled",
  "status",
  "message_id",
  "error",
]);

/** Result columns of {@link SCHEDULE_BY_IDEMPOTENCY_KEY_SQL}. */
export const SCHEDULE_BY_IDEMPOTENCY_KEY_COLUMNS = SCHEDULE_ROW_KEYS;
/** Result columns of {@link SCHEDULE_BY_ID_SQL}. */
export const SCHEDULE_BY_ID_COLUMNS = SCHEDULE_ROW_KEYS;
/** Result columns of {@link SCHEDULES_OF_SOURCE_SQL}. */
export const SCHEDULES_OF_SOURCE_COLUMNS = SCHEDULE_ROW_KEYS;
/** Result columns of {@link INSERT_SCHEDULE_SQL}. */
export const INSERT_SCHEDULE_COLUMNS = SCHEDULE_AT_ROW_KEYS;
/** Result columns of {@link UPDATE_SCHEDULE_SQL}. */
export const UPDATE_SCHEDULE_COLUMNS = SCHEDULE_AT_ROW_KEYS;
/** Result columns of {@link INSERT_SCHEDULES_BULK_SQL}. */
export const INSERT_SCHEDULES_BULK_COLUMNS = SCHEDULE_AT_ROW_KEYS;
/** Result columns of {@link LIST_DELIVERIES_SQL}. */
export const LIST_DELIVERIES_COLUMNS = DELIVERY_ROW_KEYS;
/** Result columns of {@link DELIVERY_BY_ID_SQL}. */
export const DELIVERY_BY_ID_COLUMNS = DELIVERY_ROW_KEYS;
/** Result columns of {@link REDRIVE_SQL}. */
export const REDRIVE_COLUMNS = DELIVERY_ROW_KEYS;
/** Result columns of {@link RESOLVE_SQL}. */
export const RESOLVE_COLUMNS = DELIVERY_ROW_KEYS;

/** A schedule of a {@link LIST_SCHEDULES_SQL} page, with its keyset cursor. */
export type ListedScheduleRow = ScheduleRow & {
  /** `created_at` at full (microsecond) precision, ISO 8601 UTC. */
  created_at_cursor: string;
};

/** Result columns of {@link LIST_SCHEDULES_SQL}. */
export const LIST_SCHEDULES_COLUMNS = columnsOf<ListedScheduleRow>()([
  ...SCHEDULE_ROW_KEYS,
  "created_at_cursor",
]);

/** What {@link CANCEL_SCHEDULE_SQL} returns: the schedule and how many waiting rows it cancelled. */
export type CancelledScheduleRow = ScheduleRow & {
  cancelled_deliveries: number;
  /** Deliveries this statement cancelled, by channel (OPS-13 counts them). */
  cancelled_by_channel: Record<string, number>;
};

/** Result columns of {@link CANCEL_SCHEDULE_SQL}. */
export const CANCEL_SCHEDULE_COLUMNS = columnsOf<CancelledScheduleRow>()([
  ...SCHEDULE_ROW_KEYS,
  "cancelled_deliveries",
  "cancelled_by_channel",
]);

/** What {@link SET_SCHEDULE_STATE_SQL} returns: the schedule and how many waiting rows it moved. */
export type TransitionedScheduleRow = ScheduleRow & { moved_deliveries: number };

/** Result columns of {@link SET_SCHEDULE_STATE_SQL}. */
export const SET_SCHEDULE_STATE_COLUMNS = columnsOf<TransitionedScheduleRow>()([
  ...SCHEDULE_ROW_KEYS,
  "moved_deliveries",
]);

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** Channels whose target URL is itself the credential (an incoming-webhook URL, CH-3). */
const URL_IS_SECRET = new Set(["slack", "discord"]);

/**
 * Hides secrets of a target: any key named like secret, token, password; and, for Slack
 * and Discord, the path and query of the URL (`https://hooks.slack.com/[redacted]`), which
 * hold the webhook's token.
 */
export function redactTarget(
  target: Record<string, unknown>,
  channel?: string,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(target ?? {})) {
    out[k] = /secret|token|password|authorization/i.test(k) && v != null ? "[redacted]" : v;
  }
  if (channel && URL_IS_SECRET.has(channel) && typeof out.url === "string") {
    try {
      out.url = `${new URL(out.url).origin}/[redacted]`;
    } catch {
      out.url = "[redacted]";
    }
  }
  return out;
}

export function toReminderView(row: ReminderRow): ReminderView {
  return {
    key: row.key,
    offset: row.offset_duration,
    channel: row.channel,
    target: redactTarget(row.target, row.channel),
    delivery:
      row.on_lost_lease === "retry"
        ? "at-least-once"
        : row.on_lost_lease === "in_doubt"
          ? "at-most-once"
          : null,
    maxAttempts: row.max_attempts,
    template: row.template ?? null,
    rateLimitKey: row.rate_limit_key ?? null,
    quietHours: row.quiet_hours ?? null,
    priority: row.priority ?? "normal",
  };
}

export function toScheduleView(row: ScheduleRow, reminders: ReminderRow[]): ScheduleView {
  return {
    id: row.id,
    version: row.version,
    state: row.state,
    invalidReason: row.invalid_reason,
    dtstart: row.dtstart,
    tzid: row.tzid,
    rrule: row.rrule,
    rdate: row.rdate,
    exdate: row.exdate,
    endsAt: iso(row.ends_at),
    expiresAt: iso(row.expires_at),
    dst: { gap: row.dst_gap, overlap: row.dst_overlap },
    misfire: row.misfire,
    graceMs: row.grace_ms,
    catchUp: row.catch_up ?? null,
    perpetual: row.perpetual,
    payload: row.payload,
    reminders: reminders.filter((r) => r.schedule_id === row.id).map(toReminderView),
    title: row.title ?? null,
    source: row.source,
    externalId: row.external_id,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    cancelledAt: iso(row.cancelled_at),
  };
}

export function toDeliveryView(row: DeliveryRow): DeliveryView {
  return {
    id: row.id,
    deliveryKey: row.delivery_key,
    scheduleId: row.schedule_id,
    reminderKey: row.reminder_key,
    occurrenceAt: row.occurrence_at.toISOString(),
    dueAt: row.due_at.toISOString(),
    runAt: row.run_at.toISOString(),
    state: row.state,
    attempt: row.attempt - row.deferrals,
    failures: row.failures,
    maxAttempts: row.max_attempts,
    deferrals: row.deferrals,
    channel: row.channel,
    leaseOwner: row.lease_owner,
    leaseExpiresAt: iso(row.lease_expires_at),
    sentAt: iso(row.sent_at),
    finishedAt: iso(row.finished_at),
    reason: row.reason,
    lastError: row.last_error,
    late: row.late,
    deferredUntil: iso(row.deferred_until),
    deferredReason: row.deferred_reason,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

export function toAttemptView(row: AttemptRow): AttemptView {
  return {
    attempt: row.attempt,
    worker: row.worker,
    startedAt: row.started_at.toISOString(),
    endedAt: row.ended_at.toISOString(),
    outcome: row.outcome,
    settled: row.settled,
    status: row.status,
    messageId: row.message_id,
    error: row.error,
  };
}

/**
 * DEL-9: writes an edited definition and bumps the version (optimistic concurrency:
 * the caller checked the version under the row lock).
 * Parameters: $1 now, $2 id, $3 dtstart, $4 tzid, $5 rrule, $6 rdate, $7 exdate,
 * $8 recurring, $9 ends_at, $10 expires_at, $11 dst gap, $12 dst overlap, $13 misfire,
 * $14 grace ms, $15 perpetual, $16 payload (json text), $17 request hash, $18 catch-up
 * (json text or null, DEL-17), $19 title or null.
 */
export const UPDATE_SCHEDULE_SQL = `
update punctual_schedules
set dtstart = $3, tzid = $4, rrule = $5, rdate = $6::text[], exdate = $7::text[], recurring = $8,
    ends_at = $9, expires_at = $10, dst_gap = $11, dst_overlap = $12, misfire = $13,
    grace_ms = $14, perpetual = $15, payload = $16::jsonb, request_hash = $17,
    catch_up = $18::jsonb, title = $19::text, plan_complete = false, cap_logged_at = null,
    version = version + 1, updated_at = ${NOW}
where id = $2
returning *, ${NOW} as db_now`;

/** $1 schedule id */
export const DELETE_REMINDERS_SQL = `delete from punctual_reminders where schedule_id = $1`;

/** Schedules of an import source: $1 tenant, $2 source */
export const SCHEDULES_OF_SOURCE_SQL = `
select * from punctual_schedules where tenant = $1 and source = $2 order by external_id`;

/**
 * Bulk create for imports: many schedules in one statement.
 * Parameters: $1 now, $2 tenant, then parallel arrays $3 request hashes, $4 dtstart,
 * $5 tzid, $6 rrule, $7 rdate (json text arrays), $8 exdate (json text arrays),
 * $9 recurring, $10 ends_at, $11 expires_at, $12 dst gap, $13 dst overlap, $14 misfire,
 * $15 grace ms, $16 perpetual, $17 payload (json text), $18 source, $19 external id,
 * $20 titles (or null).
 * Returns the new rows (with `db_now`, ready to plan).
 */
export const INSERT_SCHEDULES_BULK_SQL = `
insert into punctual_schedules
  (tenant, request_hash, dtstart, tzid, rrule, rdate, exdate, recurring, ends_at, expires_at,
   dst_gap, dst_overlap, misfire, grace_ms, perpetual, payload, source, external_id,
   created_at, updated_at, title)
select $2, u.hash, u.dtstart, u.tzid, u.rrule,
       array(select jsonb_array_elements_text(u.rdate::jsonb)),
       array(select jsonb_array_elements_text(u.exdate::jsonb)),
       u.recurring, u.ends_at, u.expires_at, u.gap, u.overlap, u.misfire, u.grace_ms, u.perpetual,
       u.payload::jsonb, u.source, u.external_id, ${NOW}, ${NOW}, u.title
from unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::boolean[],
            $10::timestamptz[], $11::timestamptz[], $12::text[], $13::text[], $14::text[],
            $15::int[], $16::boolean[], $17::text[], $18::text[], $19::text[], $20::text[])
  as u(hash, dtstart, tzid, rrule, rdate, exdate, recurring, ends_at, expires_at, gap, overlap,
       misfire, grace_ms, perpetual, payload, source, external_id, title)
returning *, ${NOW} as db_now`;

/**
 * Bulk reminders. Parameters: parallel arrays $1 schedule ids, $2 keys, $3 offsets,
 * $4 channels, $5 targets (json text), $6 lost-lease policies, $7 max attempts,
 * $8 templates (json text or null), $9 rate-limit keys (or null).
 */
export const INSERT_REMINDERS_BULK_SQL = `
insert into punctual_reminders (schedule_id, key, offset_duration, channel, target, on_lost_lease, max_attempts, template, rate_limit_key)
select u.schedule_id, u.key, u.offset_duration, u.channel, u.target::jsonb, u.on_lost_lease, u.max_attempts, u.template::jsonb, u.rate_limit_key
from unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[], $9::text[])
  as u(schedule_id, key, offset_duration, channel, target, on_lost_lease, max_attempts, template, rate_limit_key)`;

/**
 * Brings a cancelled schedule back (an event that reappears in an imported calendar).
 * $1 now, $2 id. Its deliveries cancelled with it and not yet past the grace period
 * become pending again (same keys); realign then drops those no longer in the set.
 */
export const REVIVE_SCHEDULE_SQL = `
with revived as (
  update punctual_schedules
  set state = 'active', cancelled_at = null, cancelled_by = null, updated_at = ${NOW}
  where id = $2 and state = 'cancelled' and cancelled_by = 'import'
  returning id, grace_ms, recurring, expires_at
)
update punctual_deliveries d
set state = 'pending', finished_at = null, reason = null, expires_at = r.expires_at,
    stale_at = ${staleAtSql("r")}, updated_at = ${NOW}
from revived r
where d.schedule_id = r.id and d.state = 'cancelled' and d.reason = 'schedule_cancelled'
  and d.due_at >= ${NOW} - make_interval(secs => r.grace_ms::double precision / 1000)`;

// ---------------------------------------------------------------------------------------
// One typed function per statement.

/** The definition columns of a schedule, as {@link insertSchedule} and {@link updateScheduleDefinition} write them. */
export interface ScheduleDefinition {
  dtstart: string;
  tzid: string;
  rrule: string | null;
  rdate: readonly string[];
  exdate: readonly string[];
  /** Whether it has more than one occurrence (a rule or RDATEs). */
  recurring: boolean;
  /** ISO 8601 instants or null. */
  endsAt: string | null;
  expiresAt: string | null;
  dstGap: "shift" | "skip";
  dstOverlap: "earlier" | "later";
  misfire: "skip" | "latest" | "all";
  graceMs: number;
  perpetual: boolean;
  /** The payload as JSON text. */
  payloadJson: string;
  /** DEL-17: catch-up bounds as JSON text, or null (absent: null). Not written by bulk creates. */
  catchUpJson?: string | null;
  /** The schedule's title (at most 500 characters, validated before), or null (absent: null). */
  title?: string | null;
}

/** The definition in the order the statements take it ($n … $n+13). */
export function definitionParams(d: ScheduleDefinition): unknown[] {
  return [
    d.dtstart,
    d.tzid,
    d.rrule,
    d.rdate,
    d.exdate,
    d.recurring,
    d.endsAt,
    d.expiresAt,
    d.dstGap,
    d.dstOverlap,
    d.misfire,
    d.graceMs,
    d.perpetual,
    d.payloadJson,
  ];
}

/** Parameters of {@link insertSchedule}. */
export interface InsertScheduleParams {
  /** Pinned "now" (tests) or null for the database clock. */
  now: Date | null;
  tenant: string;
  idempotencyKey: string | null;
  /** Hash of the validated definition (idempotent replays compare it). */
  requestHash: string;
  definition: ScheduleDefinition;
  source: string | null;
  externalId: string | null;
}

/**
 * API-1: runs {@link INSERT_SCHEDULE_SQL}. Returns the new row, or `null` when the
 * idempotency key was already used by this tenant.
 */
export function insertSchedule(
  tx: Queryable,
  p: InsertScheduleParams,
): Promise<ScheduleRowAt | null> {
  return firstRow<ScheduleRowAt>(tx, INSERT_SCHEDULE_SQL, [
    p.now,
    p.tenant,
    p.idempotencyKey,
    p.requestHash,
    ...definitionParams(p.definition),
    p.source,
    p.externalId,
    p.definition.catchUpJson ?? null,
    p.definition.title ?? null,
  ]);
}

/** A reminder to insert, as {@link insertReminders} and {@link insertRemindersBulk} take it. */
export interface ReminderToInsert {
  key: string;
  /** ISO 8601 duration, signed. */
  offset: string;
  channel: string;
  /** The target as JSON text. */
  targetJson: string;
  /** DEL-6 override; null: the channel decides. */
  onLostLease: "retry" | "in_doubt" | null;
  maxAttempts: number;
  /** CH-6: the template as JSON text, or null (absent: null). */
  templateJson?: string | null;
  /** DEL-13: the limiter key, or null (absent: null, the channel name). */
  rateLimitKey?: string | null;
  /** DEL-15: the quiet window as JSON text, or null (absent: null). Not written by bulk creates. */
  quietHoursJson?: string | null;
  /** DEL-15: `critical` bypasses quiet hours; null or absent: normal. */
  priority?: "normal" | "critical" | null;
}

/** API-1 / DEL-9: runs {@link INSERT_REMINDERS_SQL}: the reminders of one schedule. */
export async function insertReminders(
  tx: Queryable,
  p: { scheduleId: string; reminders: readonly ReminderToInsert[] },
): Promise<void> {
  const r = p.reminders;
  await execute(tx, INSERT_REMINDERS_SQL, [
    p.scheduleId,
    r.map((x) => x.key),
    r.map((x) => x.offset),
    r.map((x) => x.channel),
    r.map((x) => x.targetJson),
    r.map((x) => x.onLostLease),
    r.map((x) => x.maxAttempts),
    r.map((x) => x.templateJson ?? null),
    r.map((x) => x.rateLimitKey ?? null),
    r.map((x) => x.quietHoursJson ?? null),
    r.map((x) => x.priority ?? null),
  ]);
}

/** API-1: runs {@link SCHEDULE_BY_IDEMPOTENCY_KEY_SQL}; null when the key is unused. */
export function scheduleByIdempotencyKey(
  db: Queryable,
  p: { tenant: string; idempotencyKey: string | null },
): Promise<ScheduleRow | null> {
  return firstRow<ScheduleRow>(db, SCHEDULE_BY_IDEMPOTENCY_KEY_SQL, [p.tenant, p.idempotencyKey]);
}

/** API-2: runs {@link SCHEDULE_BY_ID_SQL}; null when the tenant has no such schedule. */
export function scheduleById(
  db: Queryable,
  p: { tenant: string; id: string },
): Promise<ScheduleRow | null> {
  return firstRow<ScheduleRow>(db, SCHEDULE_BY_ID_SQL, [p.tenant, p.id]);
}

/** API-1: runs {@link REMINDERS_SQL}: the reminders of `scheduleIds`, by schedule and key. */
export function remindersOfSchedules(
  db: Queryable,
  p: { scheduleIds: readonly string[] },
): Promise<ReminderRow[]> {
  return rows<ReminderRow>(db, REMINDERS_SQL, [p.scheduleIds]);
}

/** Parameters of {@link listScheduleRows}. */
export interface ListSchedulesParams {
  tenant: string;
  state: string | null;
  /** Only the schedules of this source (an import's calendar, an upsert's system), or null. */
  source?: string | null;
  /** Keyset cursor: `created_at` (full precision, ISO) and id of the last row seen, or null. */
  afterCreatedAt: string | null;
  afterId: string | null;
  limit: number;
}

/** API-1: runs {@link LIST_SCHEDULES_SQL}: one page, oldest first. */
export function listScheduleRows(
  db: Queryable,
  p: ListSchedulesParams,
): Promise<ListedScheduleRow[]> {
  return rows<ListedScheduleRow>(db, LIST_SCHEDULES_SQL, [
    p.tenant,
    p.state,
    p.afterCreatedAt,
    p.afterId,
    p.limit,
    p.source ?? null,
  ]);
}

/** Parameters of {@link cancelScheduleRow}. */
export interface CancelScheduleParams {
  now: Date | null;
  tenant: string;
  id: string;
  by: "user" | "import";
}

/** DEL-10: runs {@link CANCEL_SCHEDULE_SQL}; null when the tenant has no such schedule. */
export function cancelScheduleRow(
  db: Queryable,
  p: CancelScheduleParams,
): Promise<CancelledScheduleRow | null> {
  return firstRow<CancelledScheduleRow>(db, CANCEL_SCHEDULE_SQL, [p.now, p.tenant, p.id, p.by]);
}

/** Parameters of {@link setScheduleState}. */
export interface SetScheduleStateParams {
  now: Date | null;
  tenant: string;
  id: string;
  from: string;
  to: string;
}

/** DEL-10: runs {@link SET_SCHEDULE_STATE_SQL}; null when the schedule was not in state `from`. */
export function setScheduleState(
  db: Queryable,
  p: SetScheduleStateParams,
): Promise<TransitionedScheduleRow | null> {
  return firstRow<TransitionedScheduleRow>(db, SET_SCHEDULE_STATE_SQL, [
    p.now,
    p.tenant,
    p.id,
    p.from,
    p.to,
  ]);
}

/** Parameters of {@link listDeliveryRows}. */
export interface ListDeliveriesParams {
  tenant: string;
  scheduleId: string | null;
  state: string | null;
  /** Keyset: only ids above it; null from the start. */
  afterId: number | null;
  limit: number;
}

/** DEL-1: runs {@link LIST_DELIVERIES_SQL}: one page, by id. */
export function listDeliveryRows(db: Queryable, p: ListDeliveriesParams): Promise<DeliveryRow[]> {
  return rows<DeliveryRow>(db, LIST_DELIVERIES_SQL, [
    p.tenant,
    p.scheduleId,
    p.state,
    p.afterId,
    p.limit,
  ]);
}

/** DEL-12: runs {@link DELIVERY_BY_ID_SQL}; null when the tenant has no such delivery. */
export function deliveryById(
  db: Queryable,
  p: { tenant: string; id: number },
): Promise<DeliveryRow | null> {
  return firstRow<DeliveryRow>(db, DELIVERY_BY_ID_SQL, [p.tenant, p.id]);
}

/** DEL-14: runs {@link ATTEMPTS_SQL}: a delivery's attempts, oldest first. */
export function attemptsOf(db: Queryable, p: { deliveryId: number }): Promise<AttemptRow[]> {
  return rows<AttemptRow>(db, ATTEMPTS_SQL, [p.deliveryId]);
}

/** DEL-12: runs {@link REDRIVE_SQL}; null when the delivery cannot be redriven. */
export function redriveDeliveryRow(
  db: Queryable,
  p: { now: Date | null; tenant: string; id: number },
): Promise<DeliveryRow | null> {
  return firstRow<DeliveryRow>(db, REDRIVE_SQL, [p.now, p.tenant, p.id]);
}

/** DEL-12: runs {@link RESOLVE_SQL}; null when the delivery is not in doubt nor an open dead letter. */
export function resolveDeliveryRow(
  db: Queryable,
  p: { now: Date | null; tenant: string; id: number; outcome: "sent" | "dead" },
): Promise<DeliveryRow | null> {
  return firstRow<DeliveryRow>(db, RESOLVE_SQL, [p.now, p.tenant, p.id, p.outcome]);
}

/** Parameters of {@link updateScheduleDefinition}. */
export interface UpdateScheduleParams {
  now: Date | null;
  id: string;
  definition: ScheduleDefinition;
  requestHash: string;
}

/** DEL-9: runs {@link UPDATE_SCHEDULE_SQL}; null when there is no such schedule. */
export function updateScheduleDefinition(
  tx: Queryable,
  p: UpdateScheduleParams,
): Promise<ScheduleRowAt | null> {
  return firstRow<ScheduleRowAt>(tx, UPDATE_SCHEDULE_SQL, [
    p.now,
    p.id,
    ...definitionParams(p.definition),
    p.requestHash,
    p.definition.catchUpJson ?? null,
    p.definition.title ?? null,
  ]);
}

/** DEL-9: runs {@link DELETE_REMINDERS_SQL}: every reminder of the schedule. */
export async function deleteReminders(tx: Queryable, p: { scheduleId: string }): Promise<void> {
  await execute(tx, DELETE_REMINDERS_SQL, [p.scheduleId]);
}

/** API-5: runs {@link SCHEDULES_OF_SOURCE_SQL}: the schedules an import source made, by external id. */
export function schedulesOfSource(
  db: Queryable,
  p: { tenant: string; source: string },
): Promise<ScheduleRow[]> {
  return rows<ScheduleRow>(db, SCHEDULES_OF_SOURCE_SQL, [p.tenant, p.source]);
}

/** A schedule to create in bulk, as {@link insertSchedulesBulk} takes it. */
export interface ScheduleToInsert {
  requestHash: string;
  definition: ScheduleDefinition;
  source: string | null;
  externalId: string | null;
}

/** API-5: runs {@link INSERT_SCHEDULES_BULK_SQL}: many schedules in one statement. */
export function insertSchedulesBulk(
  tx: Queryable,
  p: { now: Date | null; tenant: string; schedules: readonly ScheduleToInsert[] },
): Promise<ScheduleRowAt[]> {
  const s = p.schedules;
  return rows<ScheduleRowAt>(tx, INSERT_SCHEDULES_BULK_SQL, [
    p.now,
    p.tenant,
    s.map((x) => x.requestHash),
    s.map((x) => x.definition.dtstart),
    s.map((x) => x.definition.tzid),
    s.map((x) => x.definition.rrule),
    s.map((x) => JSON.stringify(x.definition.rdate)),
    s.map((x) => JSON.stringify(x.definition.exdate)),
    s.map((x) => x.definition.recurring),
    s.map((x) => x.definition.endsAt),
    s.map((x) => x.definition.expiresAt),
    s.map((x) => x.definition.dstGap),
    s.map((x) => x.definition.dstOverlap),
    s.map((x) => x.definition.misfire),
    s.map((x) => x.definition.graceMs),
    s.map((x) => x.definition.perpetual),
    s.map((x) => x.definition.payloadJson),
    s.map((x) => x.source),
    s.map((x) => x.externalId),
    s.map((x) => x.definition.title ?? null),
  ]);
}

/** API-5: runs {@link INSERT_REMINDERS_BULK_SQL}: the reminders of many schedules. */
export async function insertRemindersBulk(
  tx: Queryable,
  p: { reminders: ReadonlyArray<ReminderToInsert & { scheduleId: string }> },
): Promise<void> {
  const r = p.reminders;
  await execute(tx, INSERT_REMINDERS_BULK_SQL, [
    r.map((x) => x.scheduleId),
    r.map((x) => x.key),
    r.map((x) => x.offset),
    r.map((x) => x.channel),
    r.map((x) => x.targetJson),
    r.map((x) => x.onLostLease),
    r.map((x) => x.maxAttempts),
    r.map((x) => x.templateJson ?? null),
    r.map((x) => x.rateLimitKey ?? null),
  ]);
}

/** API-5 / DEL-10: runs {@link REVIVE_SCHEDULE_SQL}: a schedule cancelled by an import becomes active again. */
export async function reviveSchedule(
  tx: Queryable,
  p: { now: Date | null; id: string },
): Promise<void> {
  await execute(tx, REVIVE_SCHEDULE_SQL, [p.now, p.id]);
}
