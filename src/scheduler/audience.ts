/**
 * Planning of schedules for recipients (API-11, API-13; DEL-7 per recipient).
 *
 * A schedule with recipients is planned per membership (schedule, recipient), each with
 * its own watermark, so a recipient added later is planned from the moment it was added
 * (never backfilled) and a zone change replans one person's future only. A pass locks a
 * bounded batch of memberships whose watermark is near (SKIP LOCKED: many planners take
 * different ones), groups them by schedule, zone and watermark, expands the recurrence
 * once per group with the schedule-level {@link planSchedule} (a floating schedule in the
 * recipient's zone, RFC 5545 §3.3.5, with the schedule's DST policy; any other in its own
 * zone), and fans each planned delivery out to the group's recipients: the delivery key
 * includes the recipient id, and the quiet-hours deferral (DEL-15) is the later of the
 * reminder's window and the recipient's own (`preferences.quietHours`, read in the
 * recipient's zone unless it names one). A critical reminder is never deferred, and the
 * row records the windows it went past (`bypassed` = `QUIET_HOURS`).
 *
 * Cost (OPS-12): a daily schedule of 100,000 recipients in a handful of zones expands a
 * handful of times; the rest is one SHA-256 and one row per (recipient, reminder), a
 * batch of {@link MEMBER_BATCH} memberships per transaction, the event loop given a turn
 * every {@link SLICE_MS} of work (bench/recipients.ts, docs/benchmarks.md).
 */
import { deliveryKey, floatingDeliveryKey } from "../domain/index.js";
import { applyOffset, parseRule, type Occurrence, type QuietHours } from "../recurrence/index.js";
import type { Queryable } from "../store/database.js";
import {
  insertRecipientDeliveries,
  lockMembersToPlan,
  pinMemberPlan,
  setMemberWatermarks,
  type MemberDeliveryMove,
  type MemberPlanRow,
  type MovableMemberRow,
  type RecipientDeliveryToInsert,
} from "../store/deliveries/index.js";
import { remindersOf, type PlanReminderRow } from "../store/planning.js";
import { ruleInputOfRow } from "../definition/index.js";
import { lostLeasePolicy, planSchedule, type PlanDeps, type PlannedDelivery } from "./plan.js";
import { quietDeferral } from "./quiet-hours.js";

/** Memberships planned per transaction (OPS-12: bounds one pass's statements and its stretch). */
export const MEMBER_BATCH = 2_000;
/** Planning work (ms) between two turns of the event loop (OPS-12). */
const SLICE_MS = 10;
/** The watermark of a membership with nothing left to plan. */
const PLANNED_FOREVER = new Date("9999-12-31T00:00:00Z");
/** Most windows a deferral is moved through (a recipient's window ending in the reminder's). */
const MAX_DEFERRAL_HOPS = 4;

/**
 * DEL-15 / API-13: the instant a delivery due at `dueMs` waits until under the reminder's
 * window and the recipient's, or null; for a critical reminder null, with `bypassed` set
 * when a window would have deferred it.
 */
export function recipientDeferral(
  reminder: Pick<PlanReminderRow, "quiet_hours" | "priority">,
  recipientQuiet: QuietHours | null,
  dueMs: number,
): { deferredUntil: Date | null; bypassed: "QUIET_HOURS" | null } {
  const windows = [reminder.quiet_hours ?? null, recipientQuiet].filter(
    (w): w is QuietHours => w !== null,
  );
  let at = dueMs;
  for (let hop = 0; hop < MAX_DEFERRAL_HOPS; hop++) {
    let next = at;
    for (const w of windows) {
      const end = quietDeferral({ quiet_hours: w, priority: null }, at);
      if (end !== null && end.getTime() > next) next = end.getTime();
    }
    if (next <= at) break;
    at = next;
  }
  if (at <= dueMs) return { deferredUntil: null, bypassed: null };
  if (reminder.priority === "critical") return { deferredUntil: null, bypassed: "QUIET_HOURS" };
  return { deferredUntil: new Date(at), bypassed: null };
}

/** The recipient's quiet window in full: its zone is the recipient's unless it names one. */
export function quietOf(
  row: Pick<MemberPlanRow, "recipient_quiet_hours" | "recipient_tzid">,
): QuietHours | null {
  const q = row.recipient_quiet_hours;
  if (!q || typeof q !== "object") return null;
  return { ...q, tzid: q.tzid ?? row.recipient_tzid };
}

/** Rows per insert statement (OPS-12: embedded, a statement runs on this thread). */
const INSERT_CHUNK = 1_000;

/**
 * API-11: the delivery key of a recipient's delivery: a floating occurrence is its local
 * date-time (DEL-9: one delivery whatever the recipient's zone), any other its instant.
 */
export function memberDeliveryKey(
  scheduleId: string,
  floating: boolean,
  d: Pick<PlannedDelivery, "reminderKey" | "occurrenceAt" | "occurrenceLocal">,
  recipientId: string,
): string {
  return floating
    ? floatingDeliveryKey(scheduleId, d.reminderKey, d.occurrenceLocal!, recipientId)
    : deliveryKey(scheduleId, d.reminderKey, d.occurrenceAt, recipientId);
}

/**
 * API-11: plans the locked memberships in `tx` and sets the watermarks of those whose plan
 * did not end where the lock put it (now + plan-ahead): finite series planned to their end,
 * passes cut short, rules that do not parse in a zone (left as they were).
 * @returns the number of delivery rows inserted.
 */
export async function planMembers(
  tx: Queryable,
  members: readonly MemberPlanRow[],
  deps: Omit<PlanDeps, "db">,
): Promise<number> {
  if (members.length === 0) return 0;
  const reminders = await remindersOf(tx, { scheduleIds: [...new Set(members.map((m) => m.id))] });
  // Schedule → zone/watermark group → its memberships.
  const bySchedule = new Map<string, Map<string, MemberPlanRow[]>>();
  for (const m of members) {
    const zone = m.floating ? m.recipient_tzid : m.tzid;
    const key = `${zone}\u0000${m.planned_until?.getTime() ?? "new"}`;
    let groups = bySchedule.get(m.id);
    if (!groups) bySchedule.set(m.id, (groups = new Map()));
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push(m);
  }
  // Memberships whose watermark is not the one the lock wrote (now + plan-ahead).
  const marks: Array<{ scheduleId: string; recipientId: string; until: Date | null }> = [];
  const now = deps.clock.sqlNow();
  let inserted = 0;
  let sliceStart = performance.now();
  const turn = async () => {
    if (performance.now() - sliceStart >= SLICE_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
  };
  for (const [scheduleId, groups] of bySchedule) {
    const ofSchedule = reminders.filter((r) => r.schedule_id === scheduleId);
    const parsed = new Map<string, ReturnType<typeof parseRule>>();
    const reminderIndex = new Map(ofSchedule.map((r, i) => [r.key, i]));
    const withPolicy = ofSchedule.map((r) => ({
      key: r.key,
      onLostLease: lostLeasePolicy(r, deps.channels.get(r.channel)),
    }));
    const tenant = groups.values().next().value![0]!.tenant;
    let rows: RecipientDeliveryToInsert[] = [];
    const flush = async () => {
      if (rows.length === 0) return;
      const chunk = rows;
      rows = [];
      inserted += (
        await insertRecipientDeliveries(tx, {
          now,
          tenant,
          scheduleId,
          mode: "plan",
          reminders: withPolicy,
          rows: chunk,
        })
      ).inserted;
    };
    for (const group of groups.values()) {
      await turn();
      const first = group[0]!;
      const zone = first.floating ? first.recipient_tzid : first.tzid;
      const schedule = { ...first, tzid: zone };
      const known = parsed.get(zone);
      const rule = known ?? parseRule(ruleInputOfRow(schedule));
      parsed.set(zone, rule);
      if (!rule.ok) {
        // Not planned: each watermark back as it was (the next pass tries again).
        for (const m of group) {
          marks.push({ scheduleId, recipientId: m.recipient_id, until: m.planned_until });
        }
        if (known) continue;
        deps.logger.error(
          { scheduleId, tzid: zone, reason: rule.error.message },
          "schedule for recipients does not parse in this zone: its recipients there are not planned",
        );
        deps.metrics.sweepFailures.inc({ sweep: "plan" });
        continue;
      }
      const plan = planSchedule(schedule, rule.recurrence, ofSchedule, deps.channels, deps.options);
      const until = plan.complete ? PLANNED_FOREVER : new Date(plan.plannedUntil);
      // The lock wrote now + plan-ahead (microseconds; `db_now` is read to the millisecond).
      const asLocked =
        !plan.complete && plan.plannedUntil === first.db_now.getTime() + deps.options.planAheadMs;
      const planned = plan.deliveries.map((d) => ({
        d,
        reminder: reminderIndex.get(d.reminderKey)!,
        row: ofSchedule[reminderIndex.get(d.reminderKey)!]!,
      }));
      for (const member of group) {
        await turn();
        const quiet = quietOf(member);
        for (const { d, reminder, row } of planned) {
          const { deferredUntil, bypassed } =
            quiet === null && row.quiet_hours == null
              ? { deferredUntil: d.deferredUntil ?? null, bypassed: null }
              : recipientDeferral(row, quiet, d.dueAt.getTime());
          rows.push({
            key: memberDeliveryKey(scheduleId, first.floating, d, member.recipient_id),
            reminder,
            recipientId: member.recipient_id,
            occurrenceAt: d.occurrenceAt,
            dueAt: d.dueAt,
            deferredUntil,
            bypassed,
          });
        }
        if (!asLocked) marks.push({ scheduleId, recipientId: member.recipient_id, until });
        if (rows.length >= INSERT_CHUNK) await flush();
      }
    }
    await flush();
  }
  await setMemberWatermarks(tx, { marks });
  return inserted;
}

/**
 * How far (ms) one local date-time's instant can lie between two zones: offsets run from
 * UTC−12 to UTC+14, and a DST gap may shift it by up to an hour more.
 */
const ZONE_SPREAD_MS = 28 * 3_600_000;
/** Most occurrences read per (schedule, zone) to place the rows a zone change moves (OPS-12). */
const MOVE_SCAN_LIMIT = 20_000;

/** Index of the first occurrence at or after `ms` (occurrences ascending). */
function firstAtOrAfter(occurrences: readonly Occurrence[], ms: number): number {
  let lo = 0;
  let hi = occurrences.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (occurrences[mid]!.instant < ms) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * API-12 / DEL-9 / REC-6: where waiting rows of schedules for recipients go in the schedule
 * and the recipients' zones and quiet windows as they are now (rows of
 * {@link MovableMemberRow}): after a recipient's zone change (floating schedules) or an
 * edit of the schedule (reminder offsets, rule, RDATE/EXDATE, `endsAt`, DST policy). A
 * row's key names its occurrence ({@link memberDeliveryKey}): a floating row's the local
 * date-time (RFC 5545 §3.3.5 floating time, {@link floatingDeliveryKey}), not its zone,
 * any other's the instant; so the row is the occurrence of the rule as it is now, in the
 * recipient's zone (floating) or the schedule's, that bears its key. That occurrence lies
 * within {@link ZONE_SPREAD_MS} of the old instant, and the rule is expanded once per
 * (schedule, zone) over the rows' span. The move carries the occurrence instant, the
 * reminder's due time from it (its offset as it is now, read in that zone) and the deferral
 * of the reminder's and the recipient's quiet hours (DEL-15; none for a critical reminder,
 * which records the bypass) — what planning writes — even when that instant is already
 * past: such a row is then judged by the misfire policy, never dropped silently.
 *
 * A row no occurrence bears (a local time the new zone skips under the `skip` gap policy
 * or renames under `shift`, an occurrence the edit removed, an instant past the rule's
 * UNTIL or `endsAt`, a reminder that no longer exists, a rule that does not parse in the
 * zone) gets no move: the caller clears it like any row no longer in the set (DEL-9), and
 * the planner writes what the schedule now has. Pure apart from giving the event loop a
 * turn every {@link SLICE_MS} of work (OPS-12).
 * @param reminders the reminders of the rows' schedules.
 * @param channels when given, each move carries its reminder's lost-lease policy (DEL-6).
 * @returns one move per row placed, in the rows' order.
 */
export async function memberMoves(
  rows: readonly MovableMemberRow[],
  reminders: readonly PlanReminderRow[],
  channels?: PlanDeps["channels"],
): Promise<MemberDeliveryMove[]> {
  const reminderOf = new Map(reminders.map((r) => [`${r.schedule_id}\u0000${r.key}`, r]));
  const groups = new Map<string, MovableMemberRow[]>();
  for (const row of rows) {
    const key = `${row.schedule_id}\u0000${row.floating ? row.recipient_tzid : row.tzid}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push(row);
  }
  const moves: MemberDeliveryMove[] = [];
  let sliceStart = performance.now();
  for (const group of groups.values()) {
    const first = group[0]!;
    const zone = first.floating ? first.recipient_tzid : first.tzid;
    const rule = parseRule(ruleInputOfRow({ ...first, tzid: zone }));
    if (!rule.ok) continue;
    const { recurrence } = rule;
    let lo = Infinity;
    let hi = -Infinity;
    for (const row of group) {
      lo = Math.min(lo, row.occurrence_at.getTime());
      hi = Math.max(hi, row.occurrence_at.getTime());
    }
    const occurrences = recurrence.scan(
      lo - ZONE_SPREAD_MS,
      hi + ZONE_SPREAD_MS + 1,
      MOVE_SCAN_LIMIT,
    ).occurrences;
    for (const row of group) {
      if (performance.now() - sliceStart >= SLICE_MS) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        sliceStart = performance.now();
      }
      const reminder = reminderOf.get(`${row.schedule_id}\u0000${row.reminder_key}`);
      if (!reminder) continue;
      const at = row.occurrence_at.getTime();
      for (let i = firstAtOrAfter(occurrences, at - ZONE_SPREAD_MS); i < occurrences.length; i++) {
        const o = occurrences[i]!;
        if (o.instant > at + ZONE_SPREAD_MS) break;
        // A zoned row's key names its instant: only that occurrence can bear it.
        if (!row.floating && o.instant !== at) continue;
        const key = memberDeliveryKey(
          row.schedule_id,
          row.floating,
          {
            reminderKey: reminder.key,
            occurrenceAt: new Date(o.instant),
            occurrenceLocal: o.local,
          },
          row.recipient_id,
        );
        if (key !== row.delivery_key) continue;
        const due = applyOffset(o, reminder.offset_duration, recurrence.tzid, recurrence.dst);
        const { deferredUntil, bypassed } = recipientDeferral(reminder, quietOf(row), due);
        moves.push({
          id: row.id,
          occurrenceAt: new Date(o.instant),
          dueAt: new Date(due),
          deferredUntil,
          bypassed,
          onLostLease: channels ? lostLeasePolicy(reminder, channels.get(reminder.channel)) : null,
        });
        break;
      }
    }
  }
  return moves;
}

/**
 * API-11: one per-recipient planning pass, batch after batch within the planning time
 * budget (the next tick continues). @returns the number of delivery rows created.
 */
export async function audienceSweep(deps: PlanDeps): Promise<number> {
  let total = 0;
  const started = performance.now();
  while (performance.now() - started < deps.options.planBudgetMs) {
    const { inserted, full } = await deps.db.transaction(async (tx) => {
      await pinMemberPlan(tx);
      const { members, locked } = await lockMembersToPlan(tx, {
        now: deps.clock.sqlNow(),
        aheadMs: deps.options.planAheadMs / 2,
        limit: MEMBER_BATCH,
        planAheadMs: deps.options.planAheadMs,
      });
      return { inserted: await planMembers(tx, members, deps), full: locked >= MEMBER_BATCH };
    });
    total += inserted;
    if (!full) break;
  }
  return total;
}
