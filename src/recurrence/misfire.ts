/**
 * Misfire policy (REC-6) as a pure function: what to do with occurrences whose due time
 * has passed when the planner looks at them (after downtime, a pause or an edit).
 */

/** Series policy: `skip` (default), `latest` or `all`. */
export type MisfirePolicy = "skip" | "latest" | "all";

/**
 * DEL-17: a schedule's catch-up bounds under misfire `all`, as stored and as the API takes
 * it: `windowMs` (missed occurrences due longer ago are skipped as `stale`; absent: no
 * window) and `paceMs` (kept catch-up sends of one reminder are spread this far apart,
 * oldest first; absent or 0: all at once).
 */
export interface CatchUp {
  windowMs?: number;
  paceMs?: number;
}

/** Default grace period: 15 minutes, in ms. */
export const DEFAULT_GRACE_MS = 900_000;
/** Default cap of catch-up sends under `all`. */
export const DEFAULT_MAX_CATCH_UP = 100;
/** An item is marked late when it is sent more than this after its due time (ms). */
export const LATE_THRESHOLD_MS = 1000;

/** One planned delivery: the occurrence it belongs to and when it is due (both epoch ms). */
export interface MisfireItem {
  occurrenceAt: number;
  dueAt: number;
}

/** Input of {@link applyMisfire}. */
export interface MisfireInput {
  items: readonly MisfireItem[];
  /** Now (epoch ms), from the authoritative clock. */
  nowMs: number;
  /** Series policy; ignored for one-offs. Default `skip`. */
  policy?: MisfirePolicy;
  /** Grace period in ms (default 900,000 = 15 min): items due within it are not missed. */
  graceMs?: number;
  /** True for a one-off reminder (a schedule without recurrence). */
  oneOff: boolean;
  /** Expiry (epoch ms): after it nothing is sent. */
  expiresAtMs?: number | null;
  /** Cap of catch-up sends under `all` (default 100). */
  maxCatchUp?: number;
  /**
   * DEL-17: catch-up window in ms under `all`: missed items due before `nowMs − catchUpWindowMs`
   * are skipped as `stale`. Absent or null: no window (only `maxCatchUp` bounds it).
   */
  catchUpWindowMs?: number | null;
  /**
   * DEL-17: pacing in ms under `all`: the k-th missed item kept (oldest first, k from 0) is
   * sent no earlier than `nowMs + k × catchUpPaceMs` ({@link MisfireDecision.runAtMs}).
   * Absent or 0: no pacing (all kept items are due at once).
   */
  catchUpPaceMs?: number;
}

/** Decision for one item, in the order of the input. */
export interface MisfireDecision {
  action: "send" | "skip";
  /** True when sent more than {@link LATE_THRESHOLD_MS} after its due time. */
  late: boolean;
  /** Why an item is skipped: missed beyond grace (`stale`) or past its expiry (`expired`). */
  reason?: "stale" | "expired";
  /** DEL-17: a paced catch-up send's earliest send time (epoch ms); absent: unchanged. */
  runAtMs?: number;
}

/**
 * Decides, per item, whether to send or skip (REC-6).
 *
 * - Expiry: when `expiresAtMs` is set and `nowMs` is past it, every item is skipped with
 *   reason `expired` (one-offs and series alike).
 * - One-off: always sent; `late` when due more than 1 s before now.
 * - Series: an item due at or after `nowMs − graceMs` is sent (`late` when due more than
 *   1 s before now). Items due earlier are *missed*:
 *   `skip` → all skipped as `stale`;
 *   `latest` → the most recent missed item is sent (late) unless an item within the
 *   grace period is already due, the others are `stale`;
 *   `all` → the most recent `maxCatchUp` missed items are sent (late), oldest first;
 *   older ones are `stale`. With `catchUpWindowMs` (DEL-17) missed items due before
 *   `nowMs − catchUpWindowMs` are `stale` too; with `catchUpPaceMs` the kept missed items
 *   are spread `catchUpPaceMs` apart from `nowMs` on, oldest first (`runAtMs`).
 *
 * Pure: no clock, no I/O. Decisions come back in input order; send them in ascending
 * `dueAt` order.
 */
export function applyMisfire(input: MisfireInput): MisfireDecision[] {
  const { items, nowMs, oneOff } = input;
  const policy = input.policy ?? "skip";
  const graceMs = Math.max(0, input.graceMs ?? DEFAULT_GRACE_MS);
  const maxCatchUp = Math.max(0, Math.floor(input.maxCatchUp ?? DEFAULT_MAX_CATCH_UP));
  const expired =
    input.expiresAtMs !== undefined && input.expiresAtMs !== null && nowMs > input.expiresAtMs;
  const isLate = (item: MisfireItem): boolean => item.dueAt < nowMs - LATE_THRESHOLD_MS;
  const send = (item: MisfireItem): MisfireDecision => ({ action: "send", late: isLate(item) });
  const stale: MisfireDecision = { action: "skip", late: false, reason: "stale" };

  if (expired) return items.map(() => ({ action: "skip", late: false, reason: "expired" }));
  if (oneOff) return items.map(send);

  const cutoff = nowMs - graceMs;
  const missed = items
    .map((item, index) => ({ item, index }))
    .filter(({ item }) => item.dueAt < cutoff)
    .sort((a, b) => a.item.dueAt - b.item.dueAt || a.index - b.index);
  const keep = new Set<number>();
  if (policy === "latest") {
    const dueInGrace = items.some((item) => item.dueAt >= cutoff && item.dueAt <= nowMs);
    const last = missed[missed.length - 1];
    if (!dueInGrace && last !== undefined) keep.add(last.index);
  } else if (policy === "all") {
    const windowMs = input.catchUpWindowMs;
    const inWindow =
      windowMs === undefined || windowMs === null
        ? missed
        : missed.filter(({ item }) => item.dueAt >= nowMs - Math.max(0, windowMs));
    for (const m of inWindow.slice(Math.max(0, inWindow.length - maxCatchUp))) keep.add(m.index);
  }
  const paceMs = policy === "all" ? Math.max(0, input.catchUpPaceMs ?? 0) : 0;
  const slot = new Map<number, number>();
  if (paceMs > 0) {
    let k = 0;
    for (const m of missed) if (keep.has(m.index)) slot.set(m.index, nowMs + k++ * paceMs);
  }
  return items.map((item, index) => {
    if (item.dueAt >= cutoff) return send(item);
    if (!keep.has(index)) return stale;
    const runAtMs = slot.get(index);
    return runAtMs === undefined ? send(item) : { ...send(item), runAtMs };
  });
}
