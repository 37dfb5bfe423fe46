/**
 * API-1: listing pages through every schedule exactly once, even when many share one
 * creation instant (bulk imports).
 */
import { afterEach, describe, expect, it } from "vitest";
import { testPunctual, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;
afterEach(async () => {
  await t?.close();
  t = null;
});

describe("listing schedules", () => {
  it("API-1: keyset pages over 25 schedules created in one statement return each once", async () => {
    t = await testPunctual();
    const { punctual } = t;
    const values = Array.from(
      { length: 25 },
      (_, i) =>
        punctual.validateSchedule({
          dtstart: "2027-01-05T08:00:00Z",
          reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
          source: "bulk",
          externalId: `e${i}`,
        }).value,
    );
    await punctual.createSchedulesBulk(values);
    // One statement gives them one creation instant; the database keeps microseconds.
    await punctual.db.query(
      "update punctual_schedules set created_at = '2027-01-04T08:00:00.123456Z' where source = 'bulk'",
    );
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 10; page++) {
      const { items, nextCursor } = await punctual.listSchedules({
        limit: 10,
        ...(cursor ? { cursor } : {}),
      });
      seen.push(...items.map((s) => s.id));
      if (!nextCursor) break;
      cursor = nextCursor;
    }
    expect(seen).toHaveLength(25);
    expect(new Set(seen).size).toBe(25);
  });
});
