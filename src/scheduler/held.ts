/**
 * The rows one worker holds between its claim and its settle, with what it knows of each
 * lease. Every stage of the pipeline (producer, executor, completer, lease keeper) reads
 * and updates the same book, so "how many rows does this process hold, and how much
 * lease is left on each" has one answer.
 *
 * Lease arithmetic is on the database clock (OPS-9) without trusting the process clock's
 * absolute value: each claim or renewal reply carries the statement's `now`; the book
 * keeps the offset between it and the process clock at that moment, so a process whose
 * clock is skewed (or faked) still sees the lease the database sees, as long as its clock
 * advances at the right rate.
 */
import type { CancelTimer } from "../clock/index.js";
import type { ClaimedDelivery } from "../store/deliveries.js";

/** Where a held row is in the pipeline. */
export type HeldPhase = "queued" | "sending" | "settling";

/** One claimed row this worker holds. */
export interface HeldRow {
  readonly row: ClaimedDelivery;
  phase: HeldPhase;
  /** Lease expiry on the database clock, epoch ms. */
  leaseExpiresAt: number;
  /** Database clock minus process clock at the last claim or renewal reply, ms. */
  offsetMs: number;
  /** Aborts the send (phase `sending`). */
  abort: AbortController | null;
  /** Fires the abort a safety margin before the lease ends (phase `sending`). */
  watchdog: CancelTimer | null;
  /**
   * DEL-13: the row's rate-limit slot, database clock epoch ms: the executor never starts
   * its send before it. Null: no slot (an unlimited key), send when a send slot frees.
   */
  readonly sendAt: number | null;
}

/** The book of held rows, by delivery id. */
export class HeldBook {
  readonly #rows = new Map<number, HeldRow>();
  #waiters: Array<() => void> = [];

  /**
   * Adds claimed rows; `localNow` is the process clock when the claim's reply arrived. A
   * row with `send_at` (claimed under a rate limit) keeps it as its {@link HeldRow.sendAt}.
   */
  add(rows: readonly (ClaimedDelivery & { send_at?: Date })[], localNow: number): HeldRow[] {
    return rows.map((row) => {
      const held: HeldRow = {
        row,
        phase: "queued",
        leaseExpiresAt: row.lease_expires_at.getTime(),
        offsetMs: row.db_now.getTime() - localNow,
        abort: null,
        watchdog: null,
        sendAt: row.send_at ? row.send_at.getTime() : null,
      };
      this.#rows.set(row.id, held);
      return held;
    });
  }

  /** Forgets a row (settled, released or given up); wakes {@link changed} waiters. */
  delete(id: number): void {
    const held = this.#rows.get(id);
    if (!held) return;
    held.watchdog?.();
    held.watchdog = null;
    this.#rows.delete(id);
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }

  get(id: number): HeldRow | undefined {
    return this.#rows.get(id);
  }

  /** Number of rows held, in every phase. */
  get size(): number {
    return this.#rows.size;
  }

  /** Every held row. */
  all(): HeldRow[] {
    return [...this.#rows.values()];
  }

  /** Ids of every held row. */
  ids(): number[] {
    return [...this.#rows.keys()];
  }

  /** Resolves the next time a row leaves the book. */
  changed(): Promise<void> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Estimated database clock for `held`, epoch ms. */
  static dbNow(held: HeldRow, localNow: number): number {
    return localNow + held.offsetMs;
  }

  /** Lease left on `held`, ms (negative once it ran out). */
  static leaseLeft(held: HeldRow, localNow: number): number {
    return held.leaseExpiresAt - HeldBook.dbNow(held, localNow);
  }
}
