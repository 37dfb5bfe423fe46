/**
 * Schedules for recipients (API-11, API-12): what a schedule's `recipients` and
 * `floating` mean when it is written, the paged `PUT /v1/schedules/{id}/recipients`, and
 * how a change of a recipient (zone, quiet hours, removal) realigns its deliveries under
 * the DEL-9 rules. Planning itself is `src/scheduler/audience.ts`; the statements are
 * `src/store/deliveries/recipients.ts`.
 */
import { z } from "zod";
import {
  MAX_SCHEDULE_RECIPIENTS,
  pageLimitSchema,
  recipientsPageIdsSchema,
} from "../contracts/index.js";
import { NotFoundError, ValidationError, type FieldIssue } from "../errors/index.js";
import type { Queryable } from "../store/database.js";
import {
  addMembers,
  cancelRealignedMemberRows,
  audienceOf,
  listScheduleRecipientRows,
  forgetRecipient,
  lockRecipientMemberships,
  missingRecipients,
  movableMemberRows,
  movableScheduleRows,
  moveMemberDeliveries,
  putAudience,
  removeMembers,
  replanMembers,
  type MemberDeliveryMove,
} from "../store/deliveries/index.js";
import { lockScheduleForEdit, remindersOf } from "../store/planning.js";
import type { Channel } from "../channels/types.js";
import { memberMoves } from "../scheduler/audience.js";
import { scheduleById } from "../store/schedules.js";
import { cursorPart, decodeCursor, encodeCursor, type CursorScope } from "./cursor.js";
import { tenantOf, type AppContext, type CallContext } from "./context.js";
import { parseInput } from "./input.js";

/** An instant (`Z` or a UTC offset) rather than a local date-time. */
const HAS_OFFSET = /(?:Z|[+-]\d{2}(?::?\d{2})?)$/i;

/**
 * API-11: the issues of a schedule's `recipients` and `floating` that need no database:
 * `floating` without `recipients`, a floating schedule given a `tzid` or an instant
 * `dtstart`, a recipient listed twice. `raw` is the body as sent (zod fills `tzid`).
 */
export function audienceIssues(
  value: { recipients?: string[] | undefined; floating?: boolean | undefined; dtstart: string },
  raw: unknown,
): FieldIssue[] {
  const issues: FieldIssue[] = [];
  if (value.floating === true) {
    if (value.recipients === undefined) {
      issues.push({
        field: "floating",
        message: "a floating schedule is read in each recipient's zone: give it recipients",
        value: true,
      });
    }
    const tzid = (raw as { tzid?: unknown } | null)?.tzid;
    if (tzid !== undefined && tzid !== null) {
      issues.push({
        field: "tzid",
        message:
          "a floating schedule has no zone of its own (it is read in each recipient's zone): leave tzid out",
        value: tzid,
      });
    }
    if (HAS_OFFSET.test(value.dtstart)) {
      issues.push({
        field: "dtstart",
        message:
          "a floating schedule's dtstart is a local date-time without offset (RFC 5545 floating time), e.g. 2027-01-04T09:00:00",
        value: value.dtstart,
      });
    }
  }
  const seen = new Map<string, number>();
  value.recipients?.forEach((id, i) => {
    const first = seen.get(id);
    if (first !== undefined) {
      issues.push({
        field: `recipients.${i}`,
        message: `lists a recipient twice (first at recipients.${first})`,
        value: id,
      });
    } else seen.set(id, i);
  });
  return issues;
}

/**
 * API-11: `recipients.N` issues for ids the tenant has no recipient for (another tenant's
 * are "not found" too). `field` names the list (`recipients`, `add`).
 */
async function unknownIssues(
  db: Queryable,
  tenant: string,
  ids: readonly string[],
  field: string,
): Promise<FieldIssue[]> {
  if (ids.length === 0) return [];
  const missing = new Set(await missingRecipients(db, { tenant, ids }));
  const issues: FieldIssue[] = [];
  ids.forEach((id, i) => {
    if (missing.has(id))
      issues.push({ field: `${field}.${i}`, message: "no such recipient", value: id });
  });
  return issues.slice(0, 100);
}

/**
 * API-11: writes the audience of a schedule created with `recipients`, in its
 * transaction: every recipient must exist for the tenant (else 400, nothing stored). The
 * memberships start unplanned, so they are planned like a new schedule.
 * @throws ValidationError naming each unknown id.
 */
export async function createAudience(
  tx: Queryable,
  p: { now: Date | null; tenant: string; scheduleId: string; ids: string[]; floating: boolean },
): Promise<void> {
  const issues = await unknownIssues(tx, p.tenant, p.ids, "recipients");
  if (issues.length > 0) throw new ValidationError(issues);
  await putAudience(tx, { scheduleId: p.scheduleId, floating: p.floating });
  await addMembers(tx, {
    now: p.now,
    scheduleId: p.scheduleId,
    tenant: p.tenant,
    ids: p.ids,
    plannedUntil: null,
  });
}

/** What an edit of a schedule for recipients changed (API-12). */
export interface AudienceEditReport {
  added: number;
  removed: number;
  /** Waiting deliveries cancelled (recipients removed; tried ones whose occurrence left, DEL-9). */
  cancelled: number;
  /** Memberships planned again from now. */
  replanned: number;
  /** Waiting deliveries moved in place (same key) to an instant already past (DEL-9, REC-6). */
  moved: number;
}

/**
 * API-12 (DEL-9 rules, REC-6): realigns a schedule for recipients after an edit, in the
 * edit's transaction, as an ordinary schedule's edit realigns it. `recipients`, when given,
 * replaces the list: new ones are planned from now (never backfilled), removed ones have
 * their waiting deliveries cancelled. Every waiting row of the others is placed
 * in the edited schedule ({@link memberMoves}: the occurrence that bears its key, in the
 * recipient's zone or the schedule's): a row whose occurrence left the set is deleted; a
 * row whose due time is now past, before or after the edit (a reminder 15 minutes before
 * 09:00 made 30 minutes before at 08:40), keeps its key and moves there in place, so the
 * misfire policy sends it late or records it skipped `stale` — never lost because the
 * planner, which plans from now, would not write it again; the other rows due from now on
 * are cleared and every membership planned again from now (the planner writes them as the
 * schedule now is, same key where the occurrence stayed). A row waiting to retry (tried,
 * DEL-4) is never deleted nor planned again: placed, it moves in place keeping its backoff
 * (its next try at the later of its retry time and its new due time); not placed, it is
 * cancelled with reason `realigned`, keeping its attempts (DEL-14). Rows claimed,
 * triggered or finished are untouched.
 * @throws ValidationError for unknown ids.
 */
export async function editAudience(
  tx: Queryable,
  p: {
    now: Date | null;
    dbNow: Date;
    tenant: string;
    scheduleId: string;
    recipients: string[] | undefined;
    floating: boolean;
    /** The channels by name, for the lost-lease policy of a moved row (DEL-6). */
    channels: ReadonlyMap<string, Channel>;
  },
): Promise<AudienceEditReport> {
  const report: AudienceEditReport = {
    added: 0,
    removed: 0,
    cancelled: 0,
    replanned: 0,
    moved: 0,
  };
  await putAudience(tx, { scheduleId: p.scheduleId, floating: p.floating });
  if (p.recipients !== undefined) {
    const issues = await unknownIssues(tx, p.tenant, p.recipients, "recipients");
    if (issues.length > 0) throw new ValidationError(issues);
    const gone = await removeMembers(tx, {
      now: p.now,
      scheduleId: p.scheduleId,
      keep: p.recipients,
    });
    report.removed = gone.removed;
    report.cancelled = gone.cancelled;
    report.added = await addMembers(tx, {
      now: p.now,
      scheduleId: p.scheduleId,
      tenant: p.tenant,
      ids: p.recipients,
      plannedUntil: p.dbNow,
    });
  }
  // DEL-9 / REC-6: the rows the planner, planning from now, would not write again.
  const movable = await movableScheduleRows(tx, { scheduleId: p.scheduleId });
  const keep: number[] = [];
  const clear: number[] = [];
  if (movable.length > 0) {
    const nowMs = p.dbNow.getTime();
    const reminders = await remindersOf(tx, { scheduleIds: [p.scheduleId] });
    const placed = new Map(
      (await memberMoves(movable, reminders, p.channels)).map((m) => [m.id, m]),
    );
    const moves: MemberDeliveryMove[] = [];
    const cancel: number[] = [];
    for (const row of movable) {
      const move = placed.get(row.id);
      const past = row.due_at.getTime() < nowMs;
      // DEL-4 / DEL-14: a tried row is never planned again nor deleted: it moves or is
      // cancelled here, whatever its due time.
      const tried = row.attempt > 0;
      if (!move) {
        // Left the set: a row due from now on is cleared with the rest below.
        if (tried) cancel.push(row.id);
        else if (past) clear.push(row.id);
      } else if (tried || past || move.dueAt.getTime() < nowMs) {
        moves.push(move);
        keep.push(row.id);
      }
    }
    report.moved = await moveMemberDeliveries(tx, { now: p.now, moves });
    report.cancelled += await cancelRealignedMemberRows(tx, { now: p.now, ids: cancel });
  }
  const replanned = await replanMembers(tx, {
    now: p.now,
    tenant: p.tenant,
    recipientIds: null,
    scheduleId: p.scheduleId,
    keep,
    clear,
  });
  report.replanned = replanned.replanned;
  return report;
}

/** `PUT /v1/schedules/{id}/recipients` body (API-12): ids to add and to remove, one page. */
export const scheduleRecipientsPageSchema = z
  .object({
    add: recipientsPageIdsSchema.optional(),
    remove: recipientsPageIdsSchema.optional(),
  })
  .strict()
  .superRefine((v, ctx) => {
    const total = (v.add?.length ?? 0) + (v.remove?.length ?? 0);
    if (total > MAX_SCHEDULE_RECIPIENTS) {
      ctx.addIssue({
        code: "custom",
        path: ["add"],
        message: `a page holds at most ${MAX_SCHEDULE_RECIPIENTS} ids in add and remove together (has ${total}); send more pages`,
      });
    }
  });

/** What `PUT /v1/schedules/{id}/recipients` did. */
export interface RecipientsPageResult {
  added: number;
  removed: number;
  /** Waiting deliveries of removed recipients cancelled. */
  cancelled: number;
  /** Recipients of the schedule after this page. */
  recipients: number;
}

/**
 * API-12: one page of changes to a schedule's recipients, in one transaction: `add`ed
 * ones are planned from now (never backfilled; one already there is left as it is),
 * `remove`d ones leave with their waiting deliveries cancelled. Idempotent: the same page
 * again changes nothing.
 * @throws NotFoundError (no such schedule for the tenant), ValidationError (unknown ids, a
 * schedule without recipients, an id both added and removed).
 */
export async function putScheduleRecipients(
  app: AppContext,
  id: string,
  body: unknown,
  ctx: CallContext = {},
): Promise<RecipientsPageResult> {
  const page = parseInput(scheduleRecipientsPageSchema, body);
  const tenant = tenantOf(ctx);
  if (!z.uuid().safeParse(id).success) throw new NotFoundError("schedule", id);
  const result = await app.db.transaction(async (tx) => {
    const locked = await lockScheduleForEdit(tx, { now: app.now(), tenant, id });
    if (!locked) throw new NotFoundError("schedule", id);
    const audience = await audienceOf(tx, { scheduleId: id });
    if (!audience) {
      throw new ValidationError({
        field: "add",
        message: "this schedule was not created with recipients",
        value: id,
      });
    }
    const add = page.add ?? [];
    const remove = new Set(page.remove ?? []);
    const both = add.findIndex((x) => remove.has(x));
    if (both >= 0) {
      throw new ValidationError({
        field: `add.${both}`,
        message: "is both added and removed in this page",
        value: add[both],
      });
    }
    const issues = await unknownIssues(tx, tenant, add, "add");
    if (issues.length > 0) throw new ValidationError(issues);
    const gone =
      remove.size > 0
        ? await removeMembers(tx, { now: app.now(), scheduleId: id, ids: [...remove] })
        : { removed: 0, cancelled: 0 };
    const added = await addMembers(tx, {
      now: app.now(),
      scheduleId: id,
      tenant,
      ids: add,
      plannedUntil: locked.db_now,
    });
    const after = await audienceOf(tx, { scheduleId: id });
    return {
      added,
      removed: gone.removed,
      cancelled: gone.cancelled,
      recipients: Number(after?.recipients ?? 0),
    };
  });
  app.wake();
  return result;
}

/**
 * API-12 (DEL-9 rules, REC-6): a recipient's zone or quiet hours changed: its future
 * deliveries on every schedule are realigned, in the writing transaction. On a floating
 * schedule each never-tried waiting row due from now on keeps its key and moves to its
 * occurrence's instant in the new zone ({@link memberMoves}), even one already past (a
 * move east at 08:00 in New York puts today's 09:00 in Tokyo 13 hours back): the misfire
 * policy then sends it late or records it skipped `stale`, so no day is lost silently, and a
 * move west (the instant later) stays one delivery. The rest of those rows — on other
 * schedules, or an occurrence the new zone does not have — are cleared, and every
 * membership is planned again from now (the plan sweep, woken, writes what is missing; the
 * moved rows' keys make it write nothing twice). Rows claimed, tried or finished are
 * untouched. The memberships are locked first, so rows a planner was writing in the old
 * zone are moved too.
 * @returns the memberships planned again.
 */
export async function realignRecipients(
  tx: Queryable,
  p: { now: Date | null; tenant: string; ids: readonly string[] },
): Promise<number> {
  if (p.ids.length === 0) return 0;
  await lockRecipientMemberships(tx, { tenant: p.tenant, recipientIds: p.ids });
  const movable = await movableMemberRows(tx, {
    now: p.now,
    tenant: p.tenant,
    recipientIds: p.ids,
  });
  let keep: number[] = [];
  if (movable.length > 0) {
    const reminders = await remindersOf(tx, {
      scheduleIds: [...new Set(movable.map((r) => r.schedule_id))],
    });
    const moves = await memberMoves(movable, reminders);
    await moveMemberDeliveries(tx, { now: p.now, moves });
    keep = moves.map((m) => m.id);
  }
  const r = await replanMembers(tx, {
    now: p.now,
    tenant: p.tenant,
    recipientIds: p.ids,
    scheduleId: null,
    keep,
  });
  return r.replanned;
}

/**
 * API-12: a recipient leaves the registry: its waiting deliveries everywhere are
 * cancelled and it leaves every schedule (in the deleting transaction).
 */
export async function forgetRecipientEverywhere(
  tx: Queryable,
  p: { now: Date | null; tenant: string; id: string },
): Promise<void> {
  await forgetRecipient(tx, p);
}

/** Query of `GET /v1/schedules/{id}/recipients`: `limit` (1–1000, default 100) and `cursor`. */
export const listScheduleRecipientsQuerySchema = z
  .object({
    limit: pageLimitSchema(),
    /** Opaque cursor from the previous page's `nextCursor`. */
    cursor: z.string().max(1_000).optional(),
  })
  .strict();

/** One recipient of a schedule, as the API lists it. */
export interface ScheduleRecipientView {
  /** The recipient's id in the registry. */
  id: string;
  /** When it joined the schedule, ISO 8601 UTC. */
  addedAt: string;
}

/**
 * API-12: the recipients of a schedule of the caller's tenant, by id (byte order), one
 * keyset page of `limit` (default 100); `nextCursor` (null on the last page) continues it.
 * A schedule without recipients has an empty list.
 * @throws NotFoundError no such schedule for the tenant; ValidationError a bad `limit`
 *   or a `cursor` of another list.
 */
export async function listScheduleRecipients(
  app: AppContext,
  id: string,
  query: unknown = {},
  ctx: CallContext = {},
): Promise<{ items: ScheduleRecipientView[]; nextCursor: string | null }> {
  const q = parseInput(listScheduleRecipientsQuerySchema, query);
  if (!z.uuid().safeParse(id).success) throw new NotFoundError("schedule", id);
  const row = await scheduleById(app.db, { tenant: tenantOf(ctx), id });
  if (!row) throw new NotFoundError("schedule", id);
  const scope: CursorScope = { list: "schedule-recipients", schedule: id };
  let afterId: string | null = null;
  if (q.cursor !== undefined) {
    [afterId] = decodeCursor(q.cursor, scope, [cursorPart.text]) as [string];
  }
  // One row more than asked tells whether the list goes on.
  const rows = await listScheduleRecipientRows(app.db, {
    scheduleId: id,
    afterId,
    limit: q.limit + 1,
  });
  const page = rows.slice(0, q.limit);
  const last = page.at(-1);
  return {
    items: page.map((r) => ({ id: r.id, addedAt: r.added_at.toISOString() })),
    nextCursor: rows.length > q.limit && last ? encodeCursor([last.id], scope) : null,
  };
}
