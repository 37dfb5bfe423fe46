/**
 * The rows one worker holds between its claim and its settle, with what it knows of each
 * lease. Every stage of the pipeline (producer, executor, completer, lease keeper) reads
 * and updates the same book, so "how many rows does this process hold, and how much
 * lease is left on each" has one answer.
 *
 * Lease arithmetic is on the database clock (OPS-9) without trusting the process clock's
 * absolute value: each claim or renewal reply carries the statement's `now`; the book
 * keeps the offset between it and the process clock, so a process whose clock is skewed
 * (or faked) still sees the lease the database sees, as long as its clock advances at the
 * right rate.
 *
 * DEL-16: the offset is taken against the process clock read **before** the statement
 * was sent, never when its reply is processed. The database started the lease somewhere
 * between the two; a worker that stalls in between (a GC pause, SIGSTOP, a saturated core)
 * would otherwise believe a whole lease is left when it may already have run out and the
 * row been recovered and sent by another worker. Reading the clock first can only make
 * the lease look shorter than it is (by the round trip), never longer. The rate-limit
 * slot (DEL-13) is the opposite bound: "not before" must not start early, so it is read
 * with the offset at the reply, which can only make the database clock look earlier.
 */
import type { CancelTimer } from "../clock/index.js";
import type { ClaimedDelivery } from "../store/deliveries/index.js";
import type { SendAbort } from "./send-abort.js";
import type { HeldTrace } from "./tracing.js";

/** Where a held row is in the pipeline. */
export type HeldPhase = "queued" | "sending" | "settling";

/** One claimed row this worker holds. */
export interface HeldRow {
  readonly row: ClaimedDelivery;
  phase: HeldPhase;
  /** Lease expiry on the database clock, epoch ms. */
  leaseExpiresAt: number;
  /**
   * Database clock minus the process clock read just before the last claim or renewal
   * was sent, ms: never less than the true offset, so {@link HeldBook.leaseLeft} never
   * overstates the lease (DEL-16).
   */
  offsetMs: number;
  /**
   * Database clock minus the process clock when the last claim or renewal reply was
   * processed, ms: never more than the true offset, so {@link HeldBook.slotWait} never
   * starts a send before its slot (DEL-13).
   */
  replyOffsetMs: number;
  /** Aborts the send (phase `sending`). */
  abort: SendAbort | null;
  /** Fires the abort a safety margin before the lease ends (phase `sending`). */
  watchdog: CancelTimer | null;
  /**
   * DEL-13: the row's rate-limit slot, database clock epoch ms: the executor never starts
   * its send before it. Null: no slot (an unlimited key), send when a send slot frees.
   */
  readonly sendAt: number | null;
  /** OPS-15: the row's spans, while an OpenTelemetry SDK records them (absent otherwise). */
  trace?: HeldTrace;
}

/** The book of held rows, by delivery id. */
export class HeldBook {
  readonly #rows = new Map<number, HeldRow>();
  #waiters: Array<() => void> = [];

  /**
   * Adds claimed rows. `sentAt` is the process clock read before the claim statement was
   * sent, `repliedAt` when its reply is processed (ms). A row with `send_at` (claimed under
   * a rate limit) keeps it as its {@link HeldRow.sendAt}.
   */
  add(
    rows: readonly (ClaimedDelivery & { send_at?: Date })[],
    sentAt: number,
    repliedAt: number,
  ): HeldRow[] {
    return rows.map((row) => {
      const dbNow = row.db_now.getTime();
      const held: HeldRow = {
        row,
        phase: "queued",
        leaseExpiresAt: row.lease_expires_at.getTime(),
        offsetMs: dbNow - sentAt,
        replyOffsetMs: dbNow - repliedAt,
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

  /**
   * Records a renewal of `held`: its new expiry (database clock, epoch ms), the
   * statement's `now` (`dbNow`, epoch ms) and the process clock before the renewal was sent
   * (`sentAt`) and when its reply is processed (`repliedAt`), ms.
   */
  static renewed(
    held: HeldRow,
    leaseExpiresAt: number,
    dbNow: number,
    sentAt: number,
    repliedAt: number,
  ): void {
    held.leaseExpiresAt = leaseExpiresAt;
    held.offsetMs = dbNow - sentAt;
    held.replyOffsetMs = dbNow - repliedAt;
  }

  /**
   * Latest the database clock can be for `held` at process time `localNow`, epoch ms
   * (the bound leases are measured against).
   */
  static dbNow(held: HeldRow, localNow: number): number {
    return localNow + held.offsetMs;
  }

  /**
   * Lease left on `held`, ms (negative once it ran out); never more than the database
   * would say (DEL-16).
   */
  static leaseLeft(held: HeldRow, localNow: number): number {
    return held.leaseExpiresAt - HeldBook.dbNow(held, localNow);
  }

  /**
   * How long `held` must still wait for its rate-limit slot at process time `localNow`, ms
   * (≤ 0: it may start; DEL-13). Measured against the earliest the database clock can be,
   * so a send never starts before its slot.
   */
  static slotWait(held: HeldRow, localNow: number): number {
    if (held.sendAt === null) return 0;
    return held.sendAt - (localNow + held.replyOffsetMs);
  }
}
