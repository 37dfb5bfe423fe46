/**
 * OPS-13 / API-9: a schedule's missed occurrences — what the stored rule called for in a
 * bounded window (the last {@link MISSED_WINDOW_MS}) beside what its deliveries became:
 * sent, skipped by reason, waiting, failed, cancelled, or never recorded. Read by
 * `describe()` (src/app/handles.ts) and so by `GET /v1/schedules/{id}`.
 *
 * Bounded work (OPS-12): the expansion stops at {@link MISSED_MAX_OCCURRENCES} occurrences
 * or at the rule engine's own work cap, and says so (`complete: false`); the counts are
 * one grouped statement over the schedule's rows in the window, scoped by tenant.
 */
import {
  MISSED_MAX_OCCURRENCES,
  MISSED_WINDOW_MS,
  type MissedOccurrencesSummary,
} from "../contracts/missed.js";
import type { ScheduleView } from "../contracts/index.js";
import { applyOffset, type Recurrence } from "../recurrence/index.js";
import { parseStoredRule } from "./stored-rule.js";
import type { Queryable } from "../store/database.js";
import { occurrenceCounts } from "../store/missed.js";

/** Widening of the scan for calendar offsets (`P1D`) that a DST change lengthens, ms. */
const DST_SLACK_MS = 2 * 3_600_000;

const WAITING = new Set(["pending", "retry", "claimed", "paused", "grouped"]);
const FAILED = new Set(["dead", "in_doubt"]);

/**
 * The summary for `schedule` of `tenant` at `nowMs` (epoch ms, the scheduler's clock).
 * A cancelled or invalid schedule (no rule to expand) expects nothing; its rows still count.
 */
export async function missedSummary(
  db: Queryable,
  tenant: string,
  schedule: ScheduleView,
  nowMs: number,
): Promise<MissedOccurrencesSummary> {
  const rule = ruleOf(schedule);
  const recurring = schedule.rrule !== null || schedule.rdate.length > 0;
  // A series plans nothing before it was created: the window starts at its creation, less
  // the longest lead of a reminder due before its occurrence.
  const createdMs = Date.parse(schedule.createdAt) - (rule?.leadMs ?? 0);
  const fromMs = recurring
    ? Math.max(nowMs - MISSED_WINDOW_MS, createdMs)
    : nowMs - MISSED_WINDOW_MS;
  const { expected, complete } = rule
    ? expectedDeliveries(schedule, rule, fromMs, nowMs)
    : { expected: 0, complete: schedule.state === "cancelled" || schedule.state === "invalid" };
  const counts = await occurrenceCounts(db, {
    tenant,
    scheduleId: schedule.id,
    from: new Date(fromMs),
    to: new Date(nowMs),
  });
  const summary: MissedOccurrencesSummary = {
    from: new Date(fromMs).toISOString(),
    to: new Date(nowMs).toISOString(),
    expected,
    complete,
    sent: 0,
    skipped: {},
    waiting: 0,
    failed: 0,
    cancelled: 0,
    unrecorded: 0,
  };
  let recorded = 0;
  for (const row of counts) {
    const n = Number(row.count);
    recorded += n;
    if (row.state === "sent") summary.sent += n;
    else if (row.state === "skipped") {
      const reason = row.reason ?? "unknown";
      summary.skipped[reason] = (summary.skipped[reason] ?? 0) + n;
    } else if (WAITING.has(row.state)) summary.waiting += n;
    else if (FAILED.has(row.state)) summary.failed += n;
    else if (row.state === "cancelled") summary.cancelled += n;
  }
  summary.unrecorded = Math.max(0, expected - recorded);
  return summary;
}

/** A schedule's parsed rule and how far its reminders fall before (lead) or after (lag) an occurrence, ms. */
interface Rule {
  recurrence: Recurrence;
  leadMs: number;
  lagMs: number;
}

/** The stored rule of a schedule that can still send (null: cancelled, invalid, unparsable). */
function ruleOf(schedule: ScheduleView): Rule | null {
  if (schedule.state === "cancelled" || schedule.state === "invalid") return null;
  const parsed = parseStoredRule(schedule);
  if (!parsed.ok) return null;
  const { recurrence } = parsed;
  const deltas = schedule.reminders.map(
    (r) =>
      applyOffset(recurrence.first, r.offset, recurrence.tzid, recurrence.dst) -
      recurrence.first.instant,
  );
  return {
    recurrence,
    leadMs: Math.max(0, ...deltas.map((d) => -d)),
    lagMs: Math.max(0, ...deltas),
  };
}

/**
 * Deliveries the stored rule calls for: pairs of an occurrence and a reminder whose due
 * instant (occurrence + offset, in the schedule's zone) lies in `[fromMs, toMs]`. The
 * occurrences scanned are widened by the reminders' offsets (and two hours for a calendar
 * offset that a DST change stretches), so a reminder due before its occurrence counts
 * from its due time.
 */
function expectedDeliveries(
  schedule: ScheduleView,
  rule: Rule,
  fromMs: number,
  toMs: number,
): { expected: number; complete: boolean } {
  if (fromMs > toMs) return { expected: 0, complete: true };
  const { recurrence } = rule;
  const scanTo = toMs + rule.leadMs + DST_SLACK_MS + 1;
  // The bound holds for the schedule (OPS-12): its reminders share it, each offset applied
  // to every occurrence scanned (50 reminders × 10,000 occurrences held the loop ~0.5 s).
  const limit = Math.max(
    100,
    Math.floor(MISSED_MAX_OCCURRENCES / Math.max(1, schedule.reminders.length)),
  );
  const scan = recurrence.scan(fromMs - rule.lagMs - DST_SLACK_MS, scanTo, limit);
  let expected = 0;
  for (const o of scan.occurrences) {
    for (const r of schedule.reminders) {
      const due = applyOffset(o, r.offset, recurrence.tzid, recurrence.dst);
      if (due >= fromMs && due <= toMs) expected++;
    }
  }
  // A full page may stop anywhere before scanTo (its throughMs then says nothing more).
  const complete = !scan.truncated && scan.occurrences.length < limit;
  return { expected, complete };
}
