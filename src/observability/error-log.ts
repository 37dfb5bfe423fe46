/**
 * Rate-limited error logging per streak (OPS-2): the first failure of a streak is logged
 * with its full stack, then one line every N ticks with a count, then one line on
 * recovery. One instance per failing thing (a sweep, the database connection).
 */
import type { Logger } from "./logger.js";

export class StreakLogger {
  #failures = 0;
  #sinceLast = 0;
  constructor(
    private readonly logger: Logger,
    private readonly what: string,
    private readonly everyTicks = 30,
  ) {}

  /** Current streak length (0 when healthy). */
  get failures(): number {
    return this.#failures;
  }

  /** Records one failure; logs per the streak rule. */
  failure(err: unknown, fields: Record<string, unknown> = {}): void {
    this.#failures++;
    if (this.#failures === 1) {
      this.logger.error({ err, what: this.what, ...fields }, `${this.what} failed`);
      this.#sinceLast = 0;
      return;
    }
    this.#sinceLast++;
    if (this.#sinceLast >= this.everyTicks) {
      this.#sinceLast = 0;
      const message = err instanceof Error ? err.message : String(err);
      this.logger.error(
        { what: this.what, failures: this.#failures, error: message, ...fields },
        `${this.what} still failing (${this.#failures} in a row)`,
      );
    }
  }

  /** Records a success; logs recovery once after a streak. */
  success(): void {
    if (this.#failures > 0) {
      this.logger.info(
        { what: this.what, failures: this.#failures },
        `${this.what} recovered after ${this.#failures} failure(s)`,
      );
    }
    this.#failures = 0;
    this.#sinceLast = 0;
  }
}
