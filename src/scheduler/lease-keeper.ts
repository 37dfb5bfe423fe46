/**
 * The lease keeper (DEL-16): while this worker holds rows — prefetched, sending, or
 * waiting for their settle — it renews their leases every third of the lease, in one
 * fenced statement for all of them. A row the renewal no longer finds (recovered or
 * reclaimed by someone else, or its lease already ran out) is given up at once: a queued
 * row is dropped unsent, a sending row's send is aborted, a settling row is left to its
 * fenced settle. A renewal that fails (database away) changes nothing here: the
 * executor's watchdog aborts each send a safety margin before the lease it knows of.
 */
import type { Clock } from "../clock/index.js";
import type { SchedulerOptions } from "../config/index.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { StreakLogger } from "../observability/error-log.js";
import type { Database } from "../store/database.js";
import { renewLeases } from "../store/deliveries/index.js";
import type { Executor } from "./executor.js";
import { HeldBook } from "./held.js";
import { RenewalSchedule } from "./renewal.js";
import { OwnAbortReason } from "./send-abort.js";

export interface LeaseKeeperDeps {
  db: Database;
  clock: Clock;
  options: SchedulerOptions;
  logger: Logger;
  metrics: Metrics;
  owner: string;
  book: HeldBook;
  executor: Executor;
  streak: StreakLogger;
}

export class LeaseKeeper {
  readonly #d: LeaseKeeperDeps;
  readonly #schedule: RenewalSchedule;

  constructor(deps: LeaseKeeperDeps) {
    this.#d = deps;
    this.#schedule = new RenewalSchedule(
      deps.clock,
      () => this.everyMs,
      () => this.#renew(),
      () => deps.book.size > 0,
    );
  }

  /** Renewal period, ms: a third of the lease. */
  get everyMs(): number {
    return Math.max(100, Math.floor(this.#d.options.leaseMs / 3));
  }

  /** Arms the renewal timer if rows are held and none is armed. */
  ensure(): void {
    this.#schedule.ensure();
  }

  /** Renews every held lease now (coalesced with a renewal in flight). Never throws. */
  renew(): Promise<void> {
    return this.#schedule.renew();
  }

  /** Stops renewing (shutdown); held rows keep the lease they have. */
  stop(): void {
    this.#schedule.stop();
  }

  /** Allows renewals again after {@link stop}. */
  resume(): void {
    this.#schedule.resume();
  }

  async #renew(): Promise<void> {
    const { book, executor, clock } = this.#d;
    const held = book.all();
    if (held.length === 0) return;
    let renewed;
    // DEL-16: read before the statement is sent, so a stall before its reply is processed
    // shortens the renewed lease this worker believes, never lengthens it.
    let sentAt = clock.now();
    try {
      renewed = await renewLeases(
        this.#d.db,
        clock.sqlNow(),
        this.#d.owner,
        this.#d.options.leaseMs,
        held.map((h) => ({ id: h.row.id, attempt: h.row.attempt })),
        () => (sentAt = clock.now()),
      );
      this.#d.streak.success();
    } catch (err) {
      this.#d.streak.failure(err, { held: held.length });
      return;
    }
    const localNow = clock.now();
    const byId = new Map(renewed.map((r) => [r.id, r]));
    for (const h of held) {
      // A row settled while the renewal ran has left the book: nothing to do.
      if (book.get(h.row.id) !== h) continue;
      const r = byId.get(h.row.id);
      // DEL-16: a lease that had run out, as this worker measures it, before the renewal
      // left (a stall while waiting for a connection) stays ended here even when the
      // database took the renewal: nothing of it is sent or counted as in-lease, and the
      // row returns through recovery once the renewed lease ends.
      if (r && HeldBook.leaseLeft(h, sentAt) <= 0) {
        this.#d.logger.warn(
          { deliveryId: h.row.id, attempt: h.row.attempt, phase: h.phase },
          "lease ran out before its renewal was sent: not extended",
        );
        continue;
      }
      if (r) {
        HeldBook.renewed(h, r.lease_expires_at.getTime(), r.db_now.getTime(), sentAt, localNow);
        executor.armWatchdog(h);
        continue;
      }
      if (h.phase === "settling") continue; // its fenced settle finds the loss and logs it
      this.#d.metrics.claimsReleased.inc({ reason: "lease_lost" });
      this.#d.logger.warn(
        { deliveryId: h.row.id, attempt: h.row.attempt, phase: h.phase },
        "lease lost before the send finished (recovered or reclaimed elsewhere): giving the row up",
      );
      if (h.phase === "queued") {
        executor.unqueue(h);
        book.delete(h.row.id);
      } else {
        h.abort?.abort(new OwnAbortReason("lease lost: another worker may own this delivery now"));
      }
    }
  }
}
