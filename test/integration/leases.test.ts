/**
 * DEL-8: a task that must run once cluster-wide takes a database lease on the database
 * clock: one holder at a time, renewable by its holder, taken over once expired.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ACQUIRE_LEASE_SQL } from "../../src/store/operations.js";
import type { Database } from "../../src/store/database.js";
import { openTestDatabase } from "../support/db.js";

let handle: Awaited<ReturnType<typeof openTestDatabase>>;
let db: Database;
beforeAll(async () => {
  handle = await openTestDatabase();
  db = handle.db;
});
afterAll(async () => {
  await handle.close();
});

const at = (iso: string) => new Date(iso);
const acquire = async (owner: string, now: string, ttlMs = 60_000) =>
  (await db.query(ACQUIRE_LEASE_SQL, [at(now), "task", owner, ttlMs])).rows.length === 1;

describe("cluster-wide leases", () => {
  it("DEL-8: one holder at a time; the holder renews; another takes over only after expiry", async () => {
    expect(await acquire("a", "2027-01-04T08:00:00Z")).toBe(true);
    expect(await acquire("b", "2027-01-04T08:00:30Z")).toBe(false);
    expect(await acquire("a", "2027-01-04T08:00:30Z")).toBe(true); // renewed to 08:01:30
    expect(await acquire("b", "2027-01-04T08:01:00Z")).toBe(false);
    expect(await acquire("b", "2027-01-04T08:01:30Z")).toBe(true);
    expect(await acquire("a", "2027-01-04T08:01:31Z")).toBe(false);
    expect(await acquire("a", "2027-01-04T08:02:29Z")).toBe(false);
    expect(await acquire("a", "2027-01-04T08:02:30Z")).toBe(true); // b's lease ran out
  });
});
