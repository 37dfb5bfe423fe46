/**
 * The clock of the testing kit (API-8): time moves only when the test says so, forwards
 * or backwards, and the database's "now" follows it (every statement takes the pinned
 * instant as `$1`, see src/clock/).
 */
import { ManualTimers, type CancelTimer, type Clock } from "../clock/index.js";

/** An instant as the kit accepts it: a `Date`, epoch milliseconds, or an ISO 8601 string. */
export type Instant = Date | number | string;

/**
 * Epoch milliseconds of `instant`.
 * @throws RangeError when the string or number is not a valid instant.
 */
export function toEpochMs(instant: Instant): number {
  const ms = typeof instant === "number" ? instant : new Date(instant).getTime();
  if (!Number.isFinite(ms)) throw new RangeError(`not a valid instant: ${String(instant)}`);
  return ms;
}

/**
 * A clock that moves only when told to: `advance(ms)` and `set(instant)`. Timers armed on
 * it (send latency, send deadlines, lease renewals) fire, in time order, when the clock
 * passes their instant. Going backwards fires nothing; a timer armed before fires when the
 * clock reaches its instant again.
 */
export class ManualClock implements Clock {
  #now: number;
  readonly #timers = new ManualTimers();

  /** @param start the first instant (default: the real current time). */
  constructor(start: Instant = Date.now()) {
    this.#now = toEpochMs(start);
  }

  /** The current instant, epoch ms. */
  now(): number {
    return this.#now;
  }

  /** The current instant as a `Date`. */
  date(): Date {
    return new Date(this.#now);
  }

  /** The database's "now": always the pinned instant of this clock. */
  sqlNow(): Date {
    return new Date(this.#now);
  }

  /** Calls `fn` once the clock has moved `delayMs` (clamped to ≥ 0) past now. */
  setTimer(delayMs: number, fn: () => void): CancelTimer {
    return this.#timers.arm(this.#now + Math.max(0, delayMs), fn);
  }

  /** Moves the clock by `ms` (negative goes back), firing timers that fall due, in order. */
  advance(ms: number): void {
    if (!Number.isFinite(ms)) throw new RangeError(`advance(ms) needs a finite number, not ${ms}`);
    this.set(this.#now + ms);
  }

  /**
   * Sets the clock to `instant`. Forwards, timers that fall due fire in time order (each
   * sees the clock at its own instant); backwards, nothing fires.
   * @throws RangeError for an invalid instant.
   */
  set(instant: Instant): void {
    const target = toEpochMs(instant);
    if (target >= this.#now) {
      this.#timers.fireUntil(target, (at) => (this.#now = Math.max(this.#now, at)));
    }
    this.#now = target;
  }

  /** The instant of the earliest armed timer, epoch ms, or null when none is armed. */
  nextTimerAt(): number | null {
    return this.#timers.next();
  }

  /** Number of armed timers. */
  pendingTimers(): number {
    return this.#timers.size;
  }
}

/**
 * One scheduler instance's view of the shared {@link ManualClock}: the same time, but its
 * timers can all be disarmed at once when the instance is crashed, so nothing of it runs
 * again.
 */
export class InstanceClock implements Clock {
  readonly #clock: ManualClock;
  readonly #cancels = new Set<CancelTimer>();
  #dead = false;

  constructor(clock: ManualClock) {
    this.#clock = clock;
  }
  now(): number {
    return this.#clock.now();
  }
  sqlNow(): Date {
    return this.#clock.sqlNow();
  }
  setTimer(delayMs: number, fn: () => void): CancelTimer {
    if (this.#dead) return () => {};
    const cancel = this.#clock.setTimer(delayMs, () => {
      this.#cancels.delete(cancel);
      if (!this.#dead) fn();
    });
    this.#cancels.add(cancel);
    return () => {
      this.#cancels.delete(cancel);
      cancel();
    };
  }
  /** Disarms every timer of this instance; later timers are never armed. */
  kill(): void {
    this.#dead = true;
    for (const cancel of this.#cancels) cancel();
    this.#cancels.clear();
  }
}
