/**
 * Planning horizon of unbounded series (REC-5).
 */
import type { Recurrence } from "./types.js";

/** Default planning horizon of an unbounded, non-perpetual series: 366 days, in ms. */
export const DEFAULT_HORIZON_MS = 366 * 86_400_000;

/** Input of {@link planningWindow}. */
export interface PlanningWindowInput {
  recurrence: Recurrence;
  /** Epoch ms the window is measured from (the schedule's creation or now). */
  anchorMs: number;
  /** Declared `perpetual: true`: no cap. */
  perpetual: boolean;
  /** Horizon in ms (default 366 days). */
  horizonMs?: number;
}

/**
 * Upper bound (exclusive, epoch ms) up to which a series may be planned, and whether that
 * bound truncates the series (REC-5). Bounded series and perpetual series are not capped
 * (`Infinity`, `truncated: false`); an unbounded series that is not perpetual is capped
 * at `anchorMs + horizonMs` and `truncated` is true — the caller logs that at ERROR once
 * per schedule and counts it in a metric.
 */
export function planningWindow(input: PlanningWindowInput): {
  untilMs: number;
  truncated: boolean;
} {
  if (input.recurrence.bounded || input.perpetual) return { untilMs: Infinity, truncated: false };
  return { untilMs: input.anchorMs + (input.horizonMs ?? DEFAULT_HORIZON_MS), truncated: true };
}
