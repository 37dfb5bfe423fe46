/**
 * One run at a time, requests coalesced (OPS-1): a request while a run is in flight
 * marks one follow-up, however many requests arrive; the follow-up starts when the run
 * ends. The scheduler uses one for maintenance passes and one for claims, so wake-ups
 * from timers, NOTIFY and freed slots never stack up.
 */
export class SingleFlight {
  readonly #run: () => Promise<void>;
  readonly #enabled: () => boolean;
  readonly #before: () => void;
  #current: Promise<void> | null = null;
  #again = false;

  /**
   * @param run the work; it must not throw (errors are its own to log).
   * @param enabled requests are ignored while this is false (stopping).
   * @param before called right before each run (e.g. to cancel a timer it replaces).
   */
  constructor(run: () => Promise<void>, enabled: () => boolean, before: () => void = () => {}) {
    this.#run = run;
    this.#enabled = enabled;
    this.#before = before;
  }

  /** The run in flight, if any. */
  get current(): Promise<void> | null {
    return this.#current;
  }

  /** Whether a follow-up is already requested. */
  get pending(): boolean {
    return this.#again;
  }

  /** Starts a run now, or marks one follow-up if a run is in flight. */
  request(): void {
    if (!this.#enabled()) return;
    if (this.#current) {
      this.#again = true;
      return;
    }
    this.#before();
    this.#current = this.#run().finally(() => {
      this.#current = null;
      if (this.#again) {
        this.#again = false;
        this.request();
      }
    });
  }
}
