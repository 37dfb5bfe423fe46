/**
 * The renewal schedule of held leases (DEL-16), shared by the lease keeper and the digest
 * sender: every third of the lease, one renewal at a time.
 *
 * The next renewal is armed as one starts, not when it ends (fixed rate), so a slow round
 * trip never leaves held leases without an armed renewal. A renewal falling due while the
 * previous one is still in flight runs once more when that one ends, with the instant it
 * then is: its leases are renewed from a fresh "now", and a clock that jumps far ahead
 * fires at most two renewals, not one per period skipped.
 */
import type { CancelTimer, Clock } from "../clock/index.js";

export class RenewalSchedule {
  readonly #clock: Clock;
  readonly #everyMs: () => number;
  readonly #renew: () => Promise<void>;
  readonly #wanted: () => boolean;
  #timer: CancelTimer | null = null;
  #renewing: Promise<void> | null = null;
  #stopped = false;

  /**
   * @param clock the process clock its timers are armed on.
   * @param everyMs the renewal period, ms (read each time a timer is armed).
   * @param renew renews every held lease; must not throw (its errors are its own to log).
   * @param wanted whether anything is held: no timer is armed while this is false.
   */
  constructor(
    clock: Clock,
    everyMs: () => number,
    renew: () => Promise<void>,
    wanted: () => boolean,
  ) {
    this.#clock = clock;
    this.#everyMs = everyMs;
    this.#renew = renew;
    this.#wanted = wanted;
  }

  /** Arms the renewal timer if leases are held, none is armed and it is not stopped. */
  ensure(): void {
    if (this.#stopped || this.#timer || !this.#wanted()) return;
    this.#timer = this.#clock.setTimer(this.#everyMs(), () => {
      this.#timer = null;
      const inFlight = this.#renewing;
      if (inFlight) {
        // Still in flight: once more when it ends, from that instant.
        void inFlight.finally(() => {
          if (this.#stopped) return;
          this.ensure();
          void this.renew();
        });
        return;
      }
      this.ensure();
      void this.renew();
    });
  }

  /** Disarms the timer (nothing held any more). */
  disarm(): void {
    this.#timer?.();
    this.#timer = null;
  }

  /** Renews now, or joins the renewal in flight. Never rejects. */
  renew(): Promise<void> {
    if (!this.#renewing) {
      this.#renewing = this.#renew().finally(() => {
        this.#renewing = null;
      });
    }
    return this.#renewing;
  }

  /** Stops arming renewals (shutdown); held leases keep what they have. */
  stop(): void {
    this.#stopped = true;
    this.disarm();
  }

  /** Allows renewals again after {@link stop} ({@link ensure} arms the next). */
  resume(): void {
    this.#stopped = false;
  }
}
