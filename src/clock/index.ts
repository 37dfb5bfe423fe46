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
 * The timers of a clock that moves only when told to ({@link TestClock}, the testing kit's
 * `ManualClock`): each armed at an instant, epoch ms; fired in time order, timers of one
 * instant in the order they were armed.
 */
export class ManualTimers {
  #seq = 0;
  #timers: PendingTimer[] = [];

  /** Arms `fn` at instant `at`. @returns the function that disarms it. */
  arm(at: number, fn: () => void): CancelTimer {
    const timer: PendingTimer = { at, seq: this.#seq++, fn };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t !== timer);
    };
  }

  /**
   * Fires, in time order, every timer due at or before `target` (those armed meanwhile
   * included); `moveTo` is told each one's instant just before it runs.
   */
  fireUntil(target: number, moveTo: (at: number) => void): void {
    for (;;) {
      const due = this.#timers
        .filter((t) => t.at <= target)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) return;
      this.#timers = this.#timers.filter((t) => t !== due);
      moveTo(due.at);
      due.fn();
    }
  }

  /** The instant of the earliest armed timer, epoch ms, or null when none is armed. */
  next(): number | null {
    let next: number | null = null;
    for (const t of this.#timers) if (next === null || t.at < next) next = t.at;
    return next;
  }

  /** Number of armed timers. */
  get size(): number {
    return this.#timers.length;
  }
}

/**
 * A clock that moves only when told to. `advance(ms)` runs due timers in time order.
 * Its `sqlNow()` pins the database's "now" to the same instant.
 */
export class TestClock implements Clock {
  #now: number;
  readonly #timers = new ManualTimers();

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
    return this.#timers.arm(this.#now + Math.max(0, delayMs), fn);
  }
  /** Moves time forward by `ms`, firing timers that fall due, in order. */
  advance(ms: number): void {
    this.set(this.#now + ms);
  }
  /** Sets the time (never backwards), firing timers that fall due, in order. */
  set(to: Date | number | string): void {
    const target = typeof to === "number" ? to : new Date(to).getTime();
    if (target < this.#now) throw new Error("TestClock cannot go backwards");
    this.#timers.fireUntil(target, (at) => (this.#now = Math.max(this.#now, at)));
    this.#now = target;
  }
  /** Number of armed timers (tests assert nothing is left running). */
  pendingTimers(): number {
    return this.#timers.size;
  }
}
