/**
 * OPS-16: why a reminder did or did not fire. For a schedule and a window of due times
 * (at most {@link EXPLAIN_MAX_WINDOW_MS}), one entry per occurrence × reminder that the
 * stored rule expects or that a delivery row records, with a verdict, its reason and the
 * timeline (planned, claimed, each attempt, deferrals, the end, operator actions).
 *
 * Bounded work (OPS-12): a page holds at most `limit` (≤ 10,000) entries; the rule is
 * walked with the recurrence engine's bounded scans, page by page, only as far as the
 * page needs; the rows are one keyset page of one schedule's deliveries.
 *
 * Paging merges two sorted sources by the key (occurrence, reminder key, delivery id):
 * the expected pairs (id 0) and the stored rows. Each source gives its first `limit + 1`
 * items past the cursor, so the first `limit` of the merge are exact; an expected pair
 * and a row with the same occurrence and reminder are one entry.
 */
import {
  EXPLAIN_DEFAULT_AHEAD_MS,
  EXPLAIN_DEFAULT_BACK_MS,
  EXPLAIN_MAX_WINDOW_MS,
  explainQuerySchema,
  type DeliveryExplanation,
  type ExplainEntry,
  type ExplainEvent,
  type ExplainVerdict,
  type ScheduleExplanation,
} from "../contracts/explain.js";
import { NotFoundError, ValidationError } from "../errors/index.js";
import { applyOffset, parseOffset, type Occurrence, type Recurrence } from "../recurrence/index.js";
import { targetHost } from "../scheduler/circuits.js";
import {
  explainDeliveryRow,
  explainHistory,
  explainPage,
  explainHolds,
  type ExplainDeliveryRow,
  type ExplainHistoryRow,
} from "../store/explain.js";
import { scheduleAudience } from "../store/recipient-zones.js";
import {
  finishedScheduleIds,
  remindersOfSchedules,
  scheduleById,
  type ReminderRow,
  type ScheduleRow,
} from "../store/schedules.js";
import { tenantOf, type AppContext, type CallContext } from "./context.js";
import { cursorPart, decodeCursor, encodeCursor } from "./cursor.js";
import { parseInput } from "./input.js";
import { parseStoredRow } from "./stored-rule.js";

const DAY_MS = 86_400_000;
/** Widening of the scan for calendar offsets (`P1D`) that a DST change lengthens, ms. */
const DST_SLACK_MS = 2 * 3_600_000;
/** Occurrences read per scan call while filling a page. */
const SCAN_PAGE = 2_000;

/** The sort key of an entry: occurrence (epoch ms), reminder key, delivery id (0: no row). */
type EntryKey = readonly [number, string, number];

/** An occurrence × reminder that the rule expects, due in the window. */
interface ExpectedPair {
  occurrenceMs: number;
  reminderKey: string;
  dueMs: number;
}

/**
 * OPS-16: one page of the explanation of schedule `id` of the tenant over due times in
 * `[from, to)` (defaults: 7 days before now to 1 day after).
 * @throws ValidationError `from` after `to`, a window over 366 days, a bad `limit` or
 *   `cursor` (each names the field and the value); NotFoundError no such schedule.
 */
export async function explainSchedule(
  app: AppContext,
  id: string,
  query: unknown = {},
  ctx: CallContext = {},
): Promise<ScheduleExplanation> {
  const q = parseInput(explainQuerySchema, query);
  const tenant = tenantOf(ctx);
  const nowMs = app.clock.now();
  const fromMs = q.from === undefined ? nowMs - EXPLAIN_DEFAULT_BACK_MS : Date.parse(q.from);
  const toMs = q.to === undefined ? nowMs + EXPLAIN_DEFAULT_AHEAD_MS : Date.parse(q.to);
  if (fromMs > toMs) {
    throw new ValidationError({
      field: "from",
      message: `must not be after to (${new Date(toMs).toISOString()})`,
      value: q.from ?? new Date(fromMs).toISOString(),
    });
  }
  if (toMs - fromMs > EXPLAIN_MAX_WINDOW_MS) {
    throw new ValidationError({
      field: "to",
      message: `the window from ${new Date(fromMs).toISOString()} may span at most 366 days`,
      value: q.to ?? new Date(toMs).toISOString(),
    });
  }
  if (!isUuid(id)) throw new NotFoundError("schedule", id);
  const schedule = await scheduleById(app.db, { tenant, id });
  if (!schedule) throw new NotFoundError("schedule", id);
  const reminders = (await remindersOfSchedules(app.db, { scheduleIds: [id] })).sort((a, b) =>
    a.key < b.key ? -1 : a.key > b.key ? 1 : 0,
  );
  const scope = {
    list: "explain",
    scheduleId: id,
    from: new Date(fromMs).toISOString(),
    to: new Date(toMs).toISOString(),
  };
  let after: EntryKey | null = null;
  if (q.cursor !== undefined) {
    const [occ, key, rowId] = decodeCursor(q.cursor, scope, [
      cursorPart.id,
      cursorPart.text,
      cursorPart.id,
    ]);
    after = [occ as number, key as string, rowId as number];
  }
  const limit = q.limit;
  const parsed = parseStoredRow(schedule);
  const recurrence = parsed.ok ? parsed.recurrence : null;
  // API-11: a schedule for recipients is planned per recipient (a floating one in each
  // recipient's zone): its rows are listed, each with its recipient, and no pair is
  // expected from the schedule's own zone (`complete: false`).
  const [audience, finished] = await Promise.all([
    scheduleAudience(app.db, { scheduleId: id, tenant }),
    finishedScheduleIds(app.db, [schedule]),
  ]);
  const expected =
    recurrence && audience === null
      ? expectedPairs(recurrence, reminders, fromMs, toMs, after, limit + 1)
      : [];
  const page = await explainPage(app.db, {
    tenant,
    scheduleId: id,
    dueFrom: new Date(fromMs),
    dueTo: new Date(toMs),
    after: after && {
      occurrenceAt: new Date(after[0]),
      reminderKey: after[1],
      id: after[2],
    },
    limit: limit + 1,
  });
  const stored = page.rows;

  // Merge the two sorted sources into at most `limit` entries: the expected pair `i`
  // and the row `j` are one entry when they have the same occurrence and reminder; else
  // the one whose key (a pair's id is 0) is smaller comes first.
  const picks: Array<{ row: number; pair: number }> = [];
  let i = 0;
  let j = 0;
  while (picks.length < limit && (i < expected.length || j < stored.length)) {
    const pair = expected[i];
    const row = stored[j];
    if (
      pair &&
      row &&
      pair.occurrenceMs === row.occurrence_ms &&
      pair.reminderKey === row.reminder_key
    ) {
      picks.push({ row: j++, pair: i++ });
    } else if (
      row &&
      (!pair ||
        row.occurrence_ms < pair.occurrenceMs ||
        (row.occurrence_ms === pair.occurrenceMs && row.reminder_key < pair.reminderKey))
    ) {
      picks.push({ row: j++, pair: -1 });
    } else {
      picks.push({ row: -1, pair: i++ });
    }
  }
  const more = i < expected.length || j < stored.length;
  const pageRows: ExplainDeliveryRow[] = [];
  for (const pick of picks) if (pick.row >= 0) pageRows.push(stored[pick.row]!);
  const holds = await holdsOf(app, tenant, pageRows, reminders, nowMs);
  const context: NotPlannedContext = {
    schedule,
    recurrence,
    maxExpansionDays: app.config.scheduler.maxExpansionDays,
  };
  const entries = picks.map((pick) =>
    pick.row >= 0
      ? rowEntry(stored[pick.row]!, page.history[pick.row]!, nowMs, holds)
      : notPlannedEntry(expected[pick.pair]!, context),
  );
  const last = picks.at(-1);
  const lastKey: EntryKey | null =
    last === undefined
      ? null
      : last.row >= 0
        ? [stored[last.row]!.occurrence_ms, stored[last.row]!.reminder_key, stored[last.row]!.id]
        : [expected[last.pair]!.occurrenceMs, expected[last.pair]!.reminderKey, 0];
  return {
    scheduleId: id,
    // The state a view of the schedule shows (`finished` included, API-1).
    state: finished.has(schedule.id) ? "finished" : schedule.state,
    from: new Date(fromMs).toISOString(),
    to: new Date(toMs).toISOString(),
    entries,
    nextCursor: more && lastKey ? encodeCursor(lastKey, scope) : null,
    complete: recurrence !== null && audience === null,
  };
}

/**
 * OPS-16: the explanation of one delivery of the tenant: its entry as
 * {@link explainSchedule} gives it.
 * @throws NotFoundError no such delivery.
 */
export async function explainDelivery(
  app: AppContext,
  id: number,
  ctx: CallContext = {},
): Promise<DeliveryExplanation> {
  const tenant = tenantOf(ctx);
  if (!Number.isSafeInteger(id) || id < 0) throw new NotFoundError("delivery", String(id));
  const row = await explainDeliveryRow(app.db, { tenant, id });
  if (!row) throw new NotFoundError("delivery", String(id));
  const nowMs = app.clock.now();
  const reminders = await remindersOfSchedules(app.db, { scheduleIds: [row.schedule_id] });
  const [history, holds] = await Promise.all([
    explainHistory(app.db, { deliveryIds: [id] }),
    holdsOf(app, tenant, [row], reminders, nowMs),
  ]);
  return { scheduleId: row.schedule_id, entry: rowEntry(row, history, nowMs, holds) };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
function isUuid(v: string): boolean {
  return UUID.test(v);
}

/**
 * What holds a page's waiting rows back now (CH-7, DEL-13): the open circuits of the
 * reminders' target hosts, by reminder key, and the empty buckets of the rows' limiters.
 * Read only when some row is waiting past its due time (or was pushed back): nothing to
 * read for a history of sent rows.
 */
async function holdsOf(
  app: AppContext,
  tenant: string,
  page: readonly ExplainDeliveryRow[],
  reminders: readonly ReminderRow[],
  nowMs: number,
): Promise<Holds> {
  const waiting = page.filter((r) => isHeldCandidate(r, nowMs));
  if (waiting.length === 0) return NO_HOLDS;
  const hostOf = new Map<string, string>();
  for (const r of reminders) {
    const host = targetHost(r.target);
    if (host !== null) hostOf.set(r.key, host);
  }
  const hosts = new Set<string>();
  const limiters = new Set<string>();
  for (const r of waiting) {
    const host = hostOf.get(r.reminder_key);
    if (host !== undefined) hosts.add(host);
    if (r.limiter !== null) limiters.add(r.limiter);
  }
  const found = await explainHolds(app.db, {
    now: app.clock.sqlNow(),
    tenant,
    hosts: [...hosts],
    limiters: [...limiters],
  });
  const circuits = new Map<string, number>();
  const limits = new Map<string, number>();
  for (const h of found) (h.kind === "circuit" ? circuits : limits).set(h.name, h.until_ms);
  return {
    circuitUntil: (row) => {
      const host = hostOf.get(row.reminder_key);
      return host === undefined ? undefined : circuits.get(host);
    },
    limitUntil: (row) => (row.limiter === null ? undefined : limits.get(row.limiter)),
  };
}

/** What holds a waiting row back, as {@link holdsOf} read it: until when (epoch ms), if anything. */
interface Holds {
  circuitUntil(row: ExplainDeliveryRow): number | undefined;
  limitUntil(row: ExplainDeliveryRow): number | undefined;
}

const NO_HOLDS: Holds = { circuitUntil: () => undefined, limitUntil: () => undefined };

/**
 * A row that something other than its own time may hold: a `pending` row past its run
 * time and not yet claimed, or given back with a later run time than its due time (an
 * open circuit's next probe, CH-7); any `retry` row (an open circuit gives it back with its
 * run time at the next probe). A row deferred by quiet hours has its own reason.
 */
function isHeldCandidate(row: ExplainDeliveryRow, nowMs: number): boolean {
  if (row.state === "retry") return true;
  if (row.state !== "pending") return false;
  if (row.deferred_until_ms !== null && row.deferred_until_ms > nowMs) return false;
  return row.run_ms <= nowMs || row.run_ms > row.due_ms;
}

/**
 * The first `want` pairs (occurrence × reminder, reminders by key) whose due instant lies
 * in `[fromMs, toMs)` and whose key is past `after`, in key order. The occurrences
 * scanned are widened by the reminders' offsets (and two hours for a calendar offset a
 * DST change stretches), like the missed count (src/app/missed.ts). Bounded: at most
 * `want` pairs, the scan advancing in pages of {@link SCAN_PAGE} occurrences.
 */
function expectedPairs(
  recurrence: Recurrence,
  reminders: readonly ReminderRow[],
  fromMs: number,
  toMs: number,
  after: EntryKey | null,
  want: number,
): ExpectedPair[] {
  if (reminders.length === 0 || fromMs >= toMs) return [];
  const deltas = reminders.map(
    (r) =>
      applyOffset(recurrence.first, r.offset_duration, recurrence.tzid, recurrence.dst) -
      recurrence.first.instant,
  );
  // An offset without days is exact (RFC 5545 §3.3.6): due = occurrence + ms, no zone
  // arithmetic per occurrence (a year of an hourly rule is 8,784 of them).
  const dueFns = reminders.map((r) => {
    const { days, exactMs } = parseOffset(r.offset_duration);
    return days === 0
      ? (o: Occurrence) => o.instant + exactMs
      : (o: Occurrence) => applyOffset(o, r.offset_duration, recurrence.tzid, recurrence.dst);
  });
  const leadMs = Math.max(0, ...deltas.map((d) => -d));
  const lagMs = Math.max(0, ...deltas);
  let cursor = Math.max(fromMs - lagMs - DST_SLACK_MS, after ? after[0] : -8.64e15);
  const scanTo = Math.min(8.64e15, toMs + leadMs + DST_SLACK_MS);
  const out: ExpectedPair[] = [];
  while (cursor < scanTo && out.length < want) {
    const scan = recurrence.scan(cursor, scanTo, SCAN_PAGE);
    for (const o of scan.occurrences) {
      for (let k = 0; k < reminders.length; k++) {
        const r = reminders[k]!;
        if (after && (o.instant < after[0] || (o.instant === after[0] && r.key <= after[1]))) {
          continue;
        }
        const due = dueFns[k]!(o);
        if (due >= fromMs && due < toMs) {
          out.push({ occurrenceMs: o.instant, reminderKey: r.key, dueMs: due });
          if (out.length >= want) return out;
        }
      }
    }
    const last = scan.occurrences.at(-1);
    if (scan.occurrences.length >= SCAN_PAGE && last) cursor = last.instant + 1;
    else if (scan.truncated) cursor = scan.throughMs;
    else break;
  }
  return out;
}

/** What {@link notPlannedEntry} needs to say why an expected delivery has no row. */
interface NotPlannedContext {
  schedule: ScheduleRow;
  recurrence: Recurrence | null;
  maxExpansionDays: number;
}

/**
 * The reason an expected delivery has no row (see `NOT_PLANNED_REASONS`), in the order
 * planning would have met it: the schedule's state, then the start of planning (a series
 * plans from its creation less the grace, src/scheduler/plan.ts), the expansion cap of an
 * unbounded series (REC-5), the planning watermark (DEL-7).
 */
export function notPlannedReason(
  dueMs: number,
  c: NotPlannedContext,
): { reason: string; detail?: string } {
  const s = c.schedule;
  if (s.state === "cancelled") return { reason: "schedule_cancelled" };
  if (s.state === "invalid") return { reason: "schedule_invalid", detail: s.invalid_reason ?? "" };
  if (s.state === "paused") return { reason: "schedule_paused" };
  if (s.recurring && dueMs < s.created_at.getTime() - s.grace_ms) {
    return { reason: "before_schedule_existed" };
  }
  const capped = c.recurrence !== null && !c.recurrence.bounded && !s.perpetual;
  if (capped && dueMs >= s.created_at.getTime() + c.maxExpansionDays * DAY_MS) {
    return { reason: "cap_reached" };
  }
  if (s.planned_until === null || dueMs >= s.planned_until.getTime()) {
    return { reason: "beyond_planning_horizon" };
  }
  return { reason: "not_recorded" };
}

function notPlannedEntry(pair: ExpectedPair, c: NotPlannedContext): ExplainEntry {
  const { reason, detail } = notPlannedReason(pair.dueMs, c);
  return {
    occurrenceAt: new Date(pair.occurrenceMs).toISOString(),
    reminderKey: pair.reminderKey,
    dueAt: new Date(pair.dueMs).toISOString(),
    verdict: "not_planned",
    reason: detail === undefined ? reason : `${reason}: ${detail}`,
    deliveryId: null,
    triggered: false,
    events: [],
  };
}

/** Two-digit and three-digit zero-padded numbers, for {@link iso}. */
const PAD2 = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, "0"));
const PAD3 = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, "0"));
/** Years 0000–9999 (the range `toISOString` writes with four digits), epoch ms. */
const ISO_MIN_MS = -62_167_219_200_000;
const ISO_MAX_MS = 253_402_300_799_999;
/** UTC day (days since the epoch) → its `YYYY-MM-DDT`, for {@link iso}; cleared when large. */
const isoDays = new Map<number, string>();
const ISO_DAYS_MAX = 4_096;

/**
 * A direct-mapped cache of strings by a whole number (`size` a power of two): a slot
 * holds the last key hashed to it and its string. Bounded memory, no eviction work.
 */
function textCache(size: number) {
  const keys = new Float64Array(size).fill(NaN);
  const texts = new Array<string>(size).fill("");
  const mask = size - 1;
  /** The slot of `key` (Fibonacci hashing of its low 32 bits). */
  const slotOf = (key: number) => (Math.imul(key | 0, 0x9e3779b1) >>> 16) & mask;
  return {
    get(key: number): string | undefined {
      const slot = slotOf(key);
      return keys[slot] === key ? texts[slot] : undefined;
    },
    set(key: number, text: string): string {
      const slot = slotOf(key);
      keys[slot] = key;
      texts[slot] = text;
      return text;
    },
  };
}

/** Instant (epoch ms) → its ISO 8601 string, for {@link iso}. */
const isoInstants = textCache(4_096);
/** Millisecond of a UTC day → its `HH:mm:ss.sssZ`, for {@link iso}. */
const isoTimes = textCache(1_024);

/**
 * `new Date(ms).toISOString()` (ISO 8601 UTC, `YYYY-MM-DDTHH:mm:ss.sssZ`) without a
 * `Date`: a page of 10,000 entries writes about 60,000 instants, and building a `Date` for
 * each was the largest part of the explanation's own time (docs/benchmarks.md). The date
 * part of each UTC day is written once (up to {@link ISO_DAYS_MAX} days kept), and an
 * instant or a time of day met again (an entry's occurrence, due time and send are often
 * one instant; rows planned together share their creation) is the string written for it
 * before: fewer strings to build, and fewer kept alive until the answer is sent. Outside
 * years 0000–9999 it is `toISOString` itself.
 * @param ms epoch milliseconds, an integer.
 */
export function iso(ms: number): string {
  const known = isoInstants.get(ms);
  if (known !== undefined) return known;
  if (ms < ISO_MIN_MS || ms > ISO_MAX_MS) return new Date(ms).toISOString();
  const day = Math.floor(ms / DAY_MS);
  let prefix = isoDays.get(day);
  if (prefix === undefined) {
    if (isoDays.size >= ISO_DAYS_MAX) isoDays.clear();
    prefix = new Date(day * DAY_MS).toISOString().slice(0, 11);
    isoDays.set(day, prefix);
  }
  const ofDay = ms - day * DAY_MS;
  let time = isoTimes.get(ofDay);
  if (time === undefined) {
    const h = Math.floor(ofDay / 3_600_000);
    let rest = ofDay - h * 3_600_000;
    const m = Math.floor(rest / 60_000);
    rest -= m * 60_000;
    const sec = Math.floor(rest / 1000);
    time = isoTimes.set(ofDay, `${PAD2[h]}:${PAD2[m]}:${PAD2[sec]}.${PAD3[rest - sec * 1000]}Z`);
  }
  return isoInstants.set(ms, prefix + time);
}

/**
 * `by` of every `planned` event: the process that planned a row is not recorded (planning
 * is a set-based insert by whichever process holds the plan turn, or the request that
 * created or edited the schedule), so the event says so rather than leaving `by` out.
 */
export const PLANNER_UNKNOWN = "unknown";

/**
 * A waiting row held back now (CH-7, DEL-13): by its target host's open circuit, until the
 * later of the circuit's next probe and the row's own time (`CIRCUIT_OPEN`); else, when
 * `limited` (the row is due), by an empty rate-limit bucket (`RATE_LIMITED`). Undefined
 * when nothing holds it.
 */
function heldVerdict(
  row: ExplainDeliveryRow,
  holds: Holds,
  limited: boolean,
): { verdict: ExplainVerdict; reason: string; until: number } | undefined {
  const circuit = holds.circuitUntil(row);
  if (circuit !== undefined) {
    return { verdict: "deferred", reason: "CIRCUIT_OPEN", until: Math.max(circuit, row.run_ms) };
  }
  const limit = limited ? holds.limitUntil(row) : undefined;
  return limit === undefined
    ? undefined
    : { verdict: "deferred", reason: "RATE_LIMITED", until: limit };
}

/**
 * The verdict of a delivery row at `nowMs` and its reason code:
 * `sent`; `pending` (on time, or being sent: `sending`); `deferred` (held by quiet hours
 * `QUIET_HOURS`, an open circuit of its target host `CIRCUIT_OPEN` (CH-7), an empty
 * rate-limit bucket `RATE_LIMITED` (DEL-13), a Retry-After reply `RETRY_AFTER`, a retry
 * backoff `RETRY`, a paused schedule `PAUSED`); `skipped`, `failed` (`dead`),
 * `in_doubt`, `cancelled` with the row's reason. A member frozen into a digest is
 * `pending` (`in_digest`) unless its digest waits unsent: then `deferred` with the
 * digest's reason (`RATE_LIMITED`, `CIRCUIT_OPEN`, `RETRY_AFTER`) and instant, the same
 * for every member. `holds` says what holds a waiting row back now; with `until`, the
 * instant it is held to.
 */
export function rowVerdict(
  row: ExplainDeliveryRow,
  lastAttempt: ExplainHistoryRow | undefined,
  nowMs: number,
  holds: Holds = NO_HOLDS,
): { verdict: ExplainVerdict; reason: string | null; until?: number } {
  switch (row.state) {
    case "sent":
      return { verdict: "sent", reason: row.reason };
    case "claimed":
      return { verdict: "pending", reason: "sending" };
    // DEL-19: frozen into a digest that is being sent or waits to retry; DEL-13 / CH-7:
    // a digest held back by its rate limit, its host's circuit or a Retry-After holds
    // every member, until the same instant.
    case "grouped":
      if (row.digest_deferred_reason !== null && row.digest_deferred_until_ms !== null) {
        return {
          verdict: "deferred",
          reason: row.digest_deferred_reason,
          until: row.digest_deferred_until_ms,
        };
      }
      return { verdict: "pending", reason: "in_digest" };
    case "paused":
      return { verdict: "deferred", reason: "PAUSED" };
    case "pending": {
      if (row.deferred_until_ms !== null && row.deferred_until_ms > nowMs) {
        return { verdict: "deferred", reason: row.deferred_reason, until: row.deferred_until_ms };
      }
      const held = isHeldCandidate(row, nowMs) ? heldVerdict(row, holds, true) : undefined;
      return held ?? { verdict: "pending", reason: null };
    }
    case "retry": {
      const held = heldVerdict(row, holds, row.run_ms <= nowMs);
      if (held !== undefined) return held;
      return {
        verdict: "deferred",
        reason: lastAttempt?.what === "rate_limited" ? "RETRY_AFTER" : "RETRY",
        until: row.run_ms,
      };
    }
    case "skipped":
      return { verdict: "skipped", reason: row.reason };
    case "dead":
      return { verdict: "failed", reason: row.reason };
    case "in_doubt":
      return { verdict: "in_doubt", reason: row.reason };
    case "cancelled":
      return { verdict: "cancelled", reason: row.reason };
    default:
      return { verdict: "pending", reason: null };
  }
}

/**
 * The entry of a delivery row: its verdict and timeline (oldest first). `history` holds
 * its recorded attempts, then its operator actions (src/store/explain.ts); the sending
 * attempt kept on a sent row is read from the row.
 *
 * A page may hold 10,000 entries: each event is built with its optional fields assigned
 * after it (in the order the contract lists them) rather than spread from objects made
 * for the purpose, and the timeline is sorted only when it is out of order.
 */
function rowEntry(
  row: ExplainDeliveryRow,
  history: readonly ExplainHistoryRow[],
  nowMs: number,
  holds: Holds,
): ExplainEntry {
  let attempts = history;
  for (const h of history) {
    if (h.kind !== "attempt") {
      attempts = history.filter((x) => x.kind === "attempt");
      break;
    }
  }
  const last = attempts.length === 0 ? undefined : attempts[attempts.length - 1];
  const { verdict, reason, until } = rowVerdict(row, last, nowMs, holds);
  const planned: ExplainEvent = {
    type: "planned",
    at: iso(row.created_ms),
    // Planning does not record its process (see PLANNER_UNKNOWN).
    by: PLANNER_UNKNOWN,
  };
  if (row.triggered) planned.reason = "triggered";
  const events: ExplainEvent[] = [planned];
  if (row.deferred_until_ms !== null && row.deferred_reason) {
    events.push({
      type: "deferred",
      at: iso(row.due_ms),
      until: iso(row.deferred_until_ms),
      reason: row.deferred_reason,
    });
  }
  // Operator actions first: at the same instant, a redrive comes before the try it causes.
  if (attempts !== history) {
    for (const h of history) {
      if (h.kind !== "action") continue;
      const action: ExplainEvent = {
        type: h.what === "resolve" ? "resolve" : "redrive",
        at: iso(h.at_ms),
        by: h.by,
      };
      if (h.outcome !== null) action.reason = h.outcome;
      events.push(action);
    }
  }
  for (const a of attempts) {
    const attempt: ExplainEvent = {
      type: "attempt",
      at: iso(a.at_ms),
      by: a.by,
      attempt: a.attempt!,
      endedAt: iso(a.ended_ms!),
      outcome: a.what,
      settled: a.settled!,
    };
    if (a.status !== null) attempt.status = a.status;
    if (a.error !== null) attempt.error = a.error;
    events.push(attempt);
  }
  // DEL-14: the sending attempt kept on the row (after the recorded ones, like the view
  // `punctual_delivery_attempts`).
  if (row.sent_by !== null && row.send_started_ms !== null && row.sent_ms !== null) {
    const sending: ExplainEvent = {
      type: "attempt",
      at: iso(row.send_started_ms),
      by: row.sent_by,
      attempt: row.attempt,
      endedAt: iso(row.sent_ms),
      outcome: "sent",
      settled: true,
    };
    if (row.send_status !== null) sending.status = row.send_status;
    events.push(sending);
  }
  // DEL-19: the member was frozen into a digest; its outcome is the digest's.
  const digestId = row.digest_id;
  if (digestId !== null && row.digest_formed_ms !== null) {
    const digested: ExplainEvent = { type: "digested", at: iso(row.digest_formed_ms), digestId };
    if (row.digest_items !== null) digested.items = row.digest_items;
    events.push(digested);
  }
  let end: ExplainEvent | null = null;
  switch (row.state) {
    case "claimed":
      end = {
        type: "claimed",
        at: iso(row.claimed_ms!),
        by: row.lease_owner!,
        attempt: row.attempt,
        leaseExpiresAt: iso(row.lease_expires_ms!),
      };
      break;
    case "retry":
      end = {
        type: "deferred",
        at: iso(last ? last.ended_ms! : row.updated_ms),
        until: iso(until ?? row.run_ms),
        reason: reason ?? "RETRY",
      };
      break;
    case "grouped":
      // DEL-13 / CH-7: its digest was given back, or told to wait by a Retry-After.
      if (verdict === "deferred" && reason !== null && until !== undefined) {
        end = {
          type: "deferred",
          at: iso(reason === "RETRY_AFTER" && last ? last.ended_ms! : row.updated_ms),
          until: iso(until),
          reason,
        };
      }
      break;
    case "pending":
      if ((reason === "CIRCUIT_OPEN" || reason === "RATE_LIMITED") && until !== undefined) {
        end = {
          type: "deferred",
          // Given back by an open circuit: when it was; held by a bucket: since it was due.
          at: iso(row.run_ms > row.due_ms ? row.updated_ms : row.run_ms),
          until: iso(until),
          reason,
        };
      }
      break;
    case "sent":
      end = { type: "sent", at: iso(row.sent_ms!) };
      if (row.sent_by !== null) end.by = row.sent_by;
      if (digestId !== null) end.digestId = digestId;
      break;
    case "skipped":
    case "in_doubt":
    case "cancelled":
    case "dead":
      end = {
        type: row.state === "dead" ? "failed" : row.state,
        at: iso(row.finished_ms!),
        reason: row.reason ?? "",
      };
      if (digestId !== null) end.digestId = digestId;
      break;
    default:
      break;
  }
  if (end !== null) events.push(end);
  // ISO 8601 UTC strings of years 0000–9999 sort as their instants; a stable sort keeps
  // the order above for events at the same instant.
  if (!inOrder(events)) events.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
  return entryOf(row, verdict, reason, events);
}

/** True when `events` are in the order of their `at` (ISO 8601 UTC strings) already. */
function inOrder(events: readonly ExplainEvent[]): boolean {
  for (let k = 1; k < events.length; k++) if (events[k - 1]!.at > events[k]!.at) return false;
  return true;
}

/**
 * The entry of `row` with its verdict and timeline; `recipientId` and `digestId` only
 * when the row has them, each in its place (the order of {@link ExplainEntry}).
 */
function entryOf(
  row: ExplainDeliveryRow,
  verdict: ExplainVerdict,
  reason: string | null,
  events: ExplainEvent[],
): ExplainEntry {
  return {
    occurrenceAt: iso(row.occurrence_ms),
    reminderKey: row.reminder_key,
    ...(row.recipient_id === null ? {} : { recipientId: row.recipient_id }),
    dueAt: iso(row.due_ms),
    verdict,
    reason,
    deliveryId: row.id,
    triggered: row.triggered,
    ...(row.digest_id === null ? {} : { digestId: row.digest_id }),
    events,
  };
}
