/**
 * Trigger and backfill of a schedule for recipients (API-9 with API-11): like planning,
 * one delivery per recipient, each keyed with the recipient, whose target, opt-outs and
 * presence on the schedule are judged at send (`NO_TARGET`, `OPTED_OUT`,
 * `recipient_removed`, src/scheduler/recipient-gate.ts), deferred by the reminder's and
 * the recipient's quiet hours unless critical (DEL-15, API-13). A floating schedule is read
 * in each recipient's zone and keyed by the occurrence's local date-time (DEL-9), so a
 * backfill finds the rows planning made.
 *
 * Cost (OPS-12): the recipients are read in keyset pages of {@link PAGE}, the rows
 * written through the one insert for recipients ({@link insertRecipientDeliveries}) in
 * statements of at most {@link PAGE} rows, all in one transaction (a trigger is all or
 * nothing, so its replay is exact).
 */
import { createHash } from "node:crypto";
import { applyOffset, type Occurrence, type Recurrence } from "../recurrence/index.js";
import { ConflictError } from "../errors/index.js";
import { memberDeliveryKey, quietOf, recipientDeferral } from "../scheduler/audience.js";
import { lostLeasePolicy } from "../scheduler/plan.js";
import type { Queryable } from "../store/database.js";
import {
  insertRecipientDeliveries,
  membersToPlanPage,
  triggeredDeliveries,
  type MemberToPlanRow,
  type RecipientDeliveryToInsert,
} from "../store/deliveries/index.js";
import type { DeliveryRow, ReminderRow } from "../store/schedules.js";
import type { AppContext } from "./context.js";
import { parseStoredRule, type StoredRule } from "./stored-rule.js";

/** Recipients per page read, and rows per insert statement. */
const PAGE = 1_000;

/**
 * Writes `rows` through {@link insertRecipientDeliveries} ({@link PAGE} a statement, with
 * the rest of its parameters `p`, "now" the app's).
 * @returns how many rows it inserted in all (a row whose key exists is not).
 */
async function insertInPages(
  app: AppContext,
  tx: Queryable,
  rows: readonly RecipientDeliveryToInsert[],
  p: Omit<Parameters<typeof insertRecipientDeliveries>[1], "now" | "rows">,
): Promise<number> {
  let inserted = 0;
  for (let i = 0; i < rows.length; i += PAGE) {
    const page = rows.slice(i, i + PAGE);
    inserted += (await insertRecipientDeliveries(tx, { ...p, now: app.now(), rows: page }))
      .inserted;
  }
  return inserted;
}

/** Deliveries a trigger's reply lists (the first, by id); `total` counts them all. */
export const TRIGGER_REPLY_LIMIT = 100;

/**
 * The delivery key of a trigger's delivery for a recipient: `dk_` + 32 hex characters of
 * SHA-256 over `trigger`, the schedule, the reminder, the trigger id and the recipient.
 * Never an occurrence's key; the same trigger id gives the same keys (a replay sends
 * nothing more).
 */
export function recipientTriggerKey(
  scheduleId: string,
  reminderKey: string,
  triggerId: string,
  recipientId: string,
): string {
  const hash = createHash("sha256")
    .update(`trigger\u0000${scheduleId}\u0000${reminderKey}\u0000${triggerId}\u0000${recipientId}`)
    .digest("hex");
  return `dk_${hash.slice(0, 32)}`;
}

/** Every recipient of a schedule, page by page. */
async function* membersOf(db: Queryable, scheduleId: string): AsyncGenerator<MemberToPlanRow[]> {
  let afterId: string | null = null;
  for (;;) {
    const page = await membersToPlanPage(db, { scheduleId, afterId, limit: PAGE });
    if (page.length > 0) yield page;
    if (page.length < PAGE) return;
    afterId = page.at(-1)!.recipient_id;
  }
}

/** The reminders of a call with their lost-lease policy, as the insert takes them. */
function withPolicy(app: AppContext, reminders: readonly ReminderRow[]) {
  return reminders.map((r) => ({
    key: r.key,
    onLostLease: lostLeasePolicy(
      r,
      app.channels.has(r.channel) ? app.channels.get(r.channel) : undefined,
    ),
  }));
}

/**
 * API-9 / API-11: a trigger of a schedule for recipients: one delivery per (reminder,
 * recipient), due now (deferred by quiet hours unless critical), recorded as the
 * trigger's. A trigger id used before returns what it made and makes nothing.
 * @returns the first {@link TRIGGER_REPLY_LIMIT} deliveries by id, and how many there are.
 * @throws ConflictError when the schedule is not active (nothing was made).
 */
export async function triggerForRecipients(
  app: AppContext,
  p: {
    tenant: string;
    scheduleId: string;
    /** The schedule's state as read (a view's: `finished` is an active one). */
    state: string;
    triggerId: string;
    reminders: readonly ReminderRow[];
  },
): Promise<{ created: boolean; rows: DeliveryRow[]; total: number }> {
  const before = await triggeredDeliveries(app.db, {
    scheduleId: p.scheduleId,
    triggerId: p.triggerId,
    limit: TRIGGER_REPLY_LIMIT,
  });
  if (before.total > 0) return { created: false, ...before };
  if (p.state !== "active" && p.state !== "finished") {
    throw new ConflictError(
      `schedule ${p.scheduleId} is ${p.state}; only an active schedule can be triggered`,
    );
  }
  const policies = withPolicy(app, p.reminders);
  const nowMs = app.clock.now();
  const now = new Date(nowMs);
  const made = await app.db.transaction(async (tx) => {
    let inserted = 0;
    for await (const page of membersOf(tx, p.scheduleId)) {
      const rows: RecipientDeliveryToInsert[] = [];
      for (const member of page) {
        const quiet = quietOf(member);
        p.reminders.forEach((r, reminder) => {
          const { deferredUntil, bypassed } = recipientDeferral(r, quiet, nowMs);
          rows.push({
            key: recipientTriggerKey(p.scheduleId, r.key, p.triggerId, member.recipient_id),
            reminder,
            recipientId: member.recipient_id,
            occurrenceAt: now,
            dueAt: now,
            deferredUntil,
            bypassed,
          });
        });
      }
      inserted += await insertInPages(app, tx, rows, {
        tenant: p.tenant,
        scheduleId: p.scheduleId,
        mode: "trigger",
        reminders: policies,
        triggerId: p.triggerId,
      });
    }
    return inserted;
  });
  const after = await triggeredDeliveries(app.db, {
    scheduleId: p.scheduleId,
    triggerId: p.triggerId,
    limit: TRIGGER_REPLY_LIMIT,
  });
  // No row at all: the schedule has no recipient, or it left `active` meanwhile (the
  // insert takes only an active one); a concurrent trigger with this id may have won.
  return { created: made > 0 || after.total === 0, ...after };
}

/** One planned row of a backfill for a recipient. */
export interface RecipientBackfillRow extends RecipientDeliveryToInsert {
  reminderKey: string;
}

/**
 * API-9 / API-11: the rows a backfill of [fromMs, toMs) plans for a schedule's
 * recipients: each recipient's occurrences (a floating schedule read in the recipient's
 * zone) with each reminder's due time, keyed as planning keys them. Stops (returns null)
 * past `max` rows.
 * @throws ConflictError when the rule does not parse in a recipient's zone.
 */
export async function backfillRowsForRecipients(
  db: Queryable,
  p: {
    scheduleId: string;
    schedule: StoredRule;
    floating: boolean;
    reminders: readonly ReminderRow[];
    fromMs: number;
    toMs: number;
    max: number;
  },
): Promise<RecipientBackfillRow[] | null> {
  const byZone = new Map<string, { recurrence: Recurrence; occurrences: Occurrence[] }>();
  const out: RecipientBackfillRow[] = [];
  for await (const page of membersOf(db, p.scheduleId)) {
    for (const member of page) {
      const zone = p.floating ? member.recipient_tzid : (p.schedule.tzid ?? "UTC");
      let expanded = byZone.get(zone);
      if (!expanded) {
        const parsed = parseStoredRule({ ...p.schedule, tzid: zone });
        if (!parsed.ok) {
          throw new ConflictError(`schedule ${p.scheduleId}: its rule does not parse in ${zone}`);
        }
        const scanned = parsed.recurrence.scan(p.fromMs, p.toMs, p.max + 1);
        if (scanned.occurrences.length > p.max || scanned.truncated) return null;
        expanded = { recurrence: parsed.recurrence, occurrences: scanned.occurrences };
        byZone.set(zone, expanded);
      }
      const { recurrence, occurrences } = expanded;
      const quiet = quietOf(member);
      for (const o of occurrences) {
        const occurrenceAt = new Date(o.instant);
        p.reminders.forEach((r, reminder) => {
          const due = applyOffset(o, r.offset_duration, recurrence.tzid, recurrence.dst);
          const { deferredUntil, bypassed } = recipientDeferral(r, quiet, due);
          out.push({
            key: memberDeliveryKey(
              p.scheduleId,
              p.floating,
              { reminderKey: r.key, occurrenceAt, occurrenceLocal: o.local },
              member.recipient_id,
            ),
            reminderKey: r.key,
            reminder,
            recipientId: member.recipient_id,
            occurrenceAt,
            dueAt: new Date(due),
            deferredUntil,
            bypassed,
          });
        });
        if (out.length > p.max) return null;
      }
    }
  }
  return out;
}

/**
 * API-9 / API-11: writes a backfill's missing rows for recipients in `tx`, in statements
 * of at most {@link PAGE} rows. @returns how many were created.
 */
export async function insertBackfillForRecipients(
  app: AppContext,
  tx: Queryable,
  p: {
    tenant: string;
    scheduleId: string;
    reminders: readonly ReminderRow[];
    rows: readonly RecipientBackfillRow[];
  },
): Promise<number> {
  return insertInPages(app, tx, p.rows, {
    tenant: p.tenant,
    scheduleId: p.scheduleId,
    mode: "backfill",
    reminders: withPolicy(app, p.reminders),
  });
}
