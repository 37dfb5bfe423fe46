import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../src/store/database.js";
import { openPglite } from "../../src/store/pglite.js";

// The embedded engine runs every statement on this thread; these tests need no schema.
describe("embedded statements take turns with the event loop (OPS-12)", () => {
  let db: Database;
  beforeAll(async () => {
    db = await openPglite({ dataDir: null });
  });
  afterAll(async () => {
    await db.close();
  });

  it("OPS-12: a callback queued before a transaction of 3,000 statements runs before it ends", async () => {
    let ranAt = -1;
    let done = 0;
    setImmediate(() => {
      ranAt = done;
    });
    await db.transaction(async (tx) => {
      // Each statement is at least tens of µs of CPU: 3,000 of them outlast any slice.
      for (let i = 0; i < 3_000; i++) {
        await tx.query("select $1::int as i", [i]);
        done++;
      }
    });
    expect(ranAt).toBeGreaterThanOrEqual(0);
    expect(ranAt).toBeLessThan(3_000);
  });

  it("OPS-12: statements outside a transaction take turns too", async () => {
    let ranAt = -1;
    let done = 0;
    setImmediate(() => {
      ranAt = done;
    });
    for (let i = 0; i < 3_000; i++) {
      await db.query("select $1::int as i", [i]);
      done++;
    }
    expect(ranAt).toBeGreaterThanOrEqual(0);
    expect(ranAt).toBeLessThan(3_000);
  });
});
