/**
 * The Clock port (OPS-9). The database clock is authoritative for due times and leases;
 * a process uses its Clock only to arm timers and to pin "now" in tests.
 *
 * - {@link SystemClock}: real time; `sqlNow()` is `null`, so SQL uses the database's `now()`.
 * - {@link TestClock}: a controllable clock; `sqlNow()` returns the pinned instant, so
 *   every query sees the same "now" as the test, and timers fire only on `advance`.
 */

/** Cancels a timer armed with {@link Clock.setTimer}. */
export type CancelTimer = () => void;

/**
 * Where a process reads the time and arms timers (OPS-9): {@link SystemClock} in production,
 * {@link TestClock} (or the testing kit's clock) in tests. Pass one as `createScheduler({ clock })`.
 */
export interface Clock {
  /** Current time in epoch milliseconds, as this process sees it. */
  now(): number;
  /**
   * The instant SQL should use as "now": `null` means the database clock (`now()`),
   * a `Date` pins it (tests).
   */
  sqlNow(): Date | null;
  /** Calls `fn` after `delayMs` milliseconds (clamped to ≥ 0). */
  setTimer(delayMs: number, fn: () => void): CancelTimer;
}

/** Real time. Timers are unref'd so they never keep the process alive on their own. */
export class SystemClock implements Clock {
  now(): number {
    return Date.now();
  }
  sqlNow(): Date | null {
    return null;
  }
  setTimer(delayMs: number, fn: () => void): CancelTimer {
    // setTimeout holds at most 2^31-1 ms; longer waits re-arm on the next wake-up.
    const handle = setTimeout(fn, Math.min(Math.max(0, delayMs), 2_147_483_647));
    handle.unref();
    return () => clearTimeout(handle);
  }
}

interface PendingTimer {
  at: number;
  seq: number;
  fn: () => void;
}

/**
 * A clock that moves only when told to. `advance(ms)` runs due timers in time order.
 * Its `sqlNow()` pins the database's "now" to the same instant.
 */
export class TestClock implements Clock {
  #now: number;
  #seq = 0;
  #timers: PendingTimer[] = [];

  constructor(start: Date | number | string = "2027-01-04T08:00:00Z") {
    this.#now = typeof start === "number" ? start : new Date(start).getTime();
  }
  now(): number {
    return this.#now;
  }
  sqlNow(): Date {
    return new Date(this.#now);
  }
  setTimer(delayMs: number, fn: () => void): CancelTimer {
    const timer: PendingTimer = { at: this.#now + Math.max(0, delayMs), seq: this.#seq++, fn };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t !== timer);
    };
  }
  /** Moves time forward by `ms`, firing timers that fall due, in order. */
  advance(ms: number): void {
    this.set(this.#now + ms);
  }
  /** Sets the time (never backwards), firing timers that fall due, in order. */
  set(to: Date | number | string): void {
    const target = typeof to === "number" ? to : new Date(to).getTime();
    if (target < this.#now) throw new Error("TestClock cannot go backwards");
    for (;;) {
      const due = this.#timers
        .filter((t) => t.at <= target)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.#now = Math.max(this.#now, due.at);
      due.fn();
    }
    this.#now = target;
  }
  /** Number of armed timers (tests assert nothing is left running). */
  pendingTimers(): number {
    return this.#timers.length;
  }
}
