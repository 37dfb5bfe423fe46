/**
 * DEL-16 / DEL-13: what the book of held rows believes of a lease and of a rate-limit slot
 * when the reply of a claim or renewal is processed later than the statement ran (a
 * stalled worker): the lease never looks longer than the database's, the slot never
 * looks earlier.
 */
import { describe, expect, it } from "vitest";
import { HeldBook } from "../../../src/scheduler/held.js";
import type { ClaimedDelivery } from "../../../src/store/deliveries/index.js";

/** A claimed row: lease granted at `dbNow` for `leaseMs`, optional slot `sendAt`. */
function claimed(dbNow: number, leaseMs: number, sendAt?: number) {
  const row = {
    id: 7,
    attempt: 1,
    lease_expires_at: new Date(dbNow + leaseMs),
    db_now: new Date(dbNow),
    ...(sendAt === undefined ? {} : { send_at: new Date(sendAt) }),
  };
  // Only the fields the book reads; the rest of a claimed row does not matter here.
  return row as unknown as ClaimedDelivery & { send_at?: Date };
}

describe("HeldBook", () => {
  const DB_NOW = 1_000_000; // the statement's now(), database clock
  const LEASE = 30_000;

  it("DEL-16: a claim whose reply is processed after a stall longer than the lease shows no lease left", () => {
    const book = new HeldBook();
    // Process clock 5,000 behind the database; the statement was sent at local 995,000,
    // and the worker froze 40 s before it processed the reply.
    const sentAt = DB_NOW - 5_000;
    const repliedAt = sentAt + 40_000;
    const [held] = book.add([claimed(DB_NOW, LEASE)], sentAt, repliedAt);
    expect(HeldBook.leaseLeft(held!, repliedAt)).toBeLessThanOrEqual(0);
    // Without a stall it sees the whole lease (less nothing: sent and replied at once).
    const [fresh] = new HeldBook().add([claimed(DB_NOW, LEASE)], sentAt, sentAt);
    expect(HeldBook.leaseLeft(fresh!, sentAt)).toBe(LEASE);
  });

  it("DEL-16: a renewal measures its lease from the moment it was sent, not its reply", () => {
    const book = new HeldBook();
    const [held] = book.add([claimed(DB_NOW, LEASE)], DB_NOW, DB_NOW);
    const renewalDbNow = DB_NOW + 10_000;
    const sentAt = DB_NOW + 10_000;
    const repliedAt = sentAt + 25_000; // stalled 25 s before the reply was read
    HeldBook.renewed(held!, renewalDbNow + LEASE, renewalDbNow, sentAt, repliedAt);
    expect(HeldBook.leaseLeft(held!, repliedAt)).toBe(LEASE - 25_000);
  });

  it("DEL-13: a rate-limit slot is never reached early because of the round trip", () => {
    const book = new HeldBook();
    const slot = DB_NOW + 100;
    // Sent at local DB_NOW - 50 (the round trip's first half), replied at DB_NOW.
    const [held] = book.add([claimed(DB_NOW, LEASE, slot)], DB_NOW - 50, DB_NOW);
    // At local DB_NOW + 60 the database clock is at most DB_NOW + 110 and at least
    // DB_NOW + 60: the slot may not have come yet, so the send waits.
    expect(HeldBook.slotWait(held!, DB_NOW + 60)).toBe(40);
    expect(HeldBook.slotWait(held!, DB_NOW + 100)).toBe(0);
    expect(HeldBook.slotWait({ ...held!, sendAt: null }, DB_NOW)).toBe(0);
  });
});
