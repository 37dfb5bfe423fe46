/**
 * OPS-16: a page of an explanation comes from the database column by column
 * (src/store/explain.ts, `EXPLAIN_PAGE_SQL`); `pageOf` puts each row at its place in the
 * page and gives each row its history in the order recorded, whatever order the engine's
 * plan returned the lists in.
 */
import { describe, expect, it } from "vitest";
import {
  pageOf,
  type ExplainHistoryColumns,
  type ExplainPageColumns,
  type ExplainRareTuple,
} from "../../../src/store/explain.js";

const SCHEDULE = "00000000-0000-4000-8000-000000000001";

/** The columns of rows with ids `ids`, at places `n`, every other field plain. */
function rowColumns(
  ids: number[],
  n: number[],
  triggered: number[] | null,
  rare: ExplainRareTuple[] | null,
): ExplainPageColumns {
  const k = ids.length;
  const fill = <T>(v: T) => Array<T>(k).fill(v);
  return [
    n,
    ids,
    ids.map((id) => `r${id}`),
    fill(null),
    ids.map((id) => id * 1000),
    ids.map((id) => id * 1000),
    ids.map((id) => id * 1000),
    fill("sent"),
    fill(1),
    fill(null),
    fill(null),
    fill(null),
    fill(null),
    fill(null),
    fill(null),
    fill(null),
    fill(5),
    fill(6),
    triggered,
    rare,
  ];
}

const NO_HISTORY_COLUMNS: ExplainHistoryColumns = [
  null,
  null,
  null,
  null,
  null,
  null,
  null,
  null,
  null,
  null,
  null,
  null,
];

describe("an explanation's page from its columns (OPS-16)", () => {
  it("OPS-16: each row goes to its place in the page, with its triggered flag and rare fields", () => {
    const rare: ExplainRareTuple = [
      1,
      "w",
      9,
      8,
      null,
      null,
      "default/k",
      "dk",
      "g1",
      7,
      3,
      null,
      null,
    ];
    const page = pageOf(
      { rows: rowColumns([30, 10, 20], [3, 1, 2], [2], [rare]), history: NO_HISTORY_COLUMNS },
      SCHEDULE,
    );
    expect(page.rows.map((r) => r.id)).toEqual([10, 20, 30]);
    expect(page.rows.map((r) => r.triggered)).toEqual([false, true, false]);
    expect(page.rows[0]).toMatchObject({
      schedule_id: SCHEDULE,
      reminder_key: "r10",
      lease_owner: "w",
      lease_expires_ms: 9,
      claimed_ms: 8,
      limiter: "default/k",
      digest_key: "dk",
      digest_id: "g1",
      digest_formed_ms: 7,
      digest_items: 3,
    });
    expect(page.rows[1]!.lease_owner).toBeNull();
    expect(page.history).toEqual([[], [], []]);
  });

  it("OPS-16: a row's history is its attempts in the order recorded (by id), then its actions oldest first", () => {
    // As an index on (delivery_id, attempt) returns them: by delivery, then attempt number.
    const history: ExplainHistoryColumns = [
      [10, 10, 10, 20],
      [0, 0, 1, 0],
      [7, 5, 6, 8],
      [1, 2, 3, 4],
      [1, 2, null, 4],
      ["w1", "w3", "operator", "w9"],
      [1, 3, null, 1],
      ["lease_expired", "transient", "redrive", "sent"],
      [true, true, null, true],
      [null, 503, null, 200],
      [null, "503", null, null],
      [null, null, null, null],
    ];
    const page = pageOf(
      { rows: rowColumns([10, 20, 30], [1, 2, 3], null, null), history },
      SCHEDULE,
    );
    expect(page.history.map((h) => h.map((e) => `${e.delivery_id} ${e.kind} ${e.by}`))).toEqual([
      ["10 attempt w3", "10 attempt w1", "10 action operator"],
      ["20 attempt w9"],
      [],
    ]);
    expect(page.history[0]![0]).toEqual({
      kind: "attempt",
      delivery_id: 10,
      at_ms: 2,
      ended_ms: 2,
      by: "w3",
      attempt: 3,
      what: "transient",
      settled: true,
      status: 503,
      error: "503",
      outcome: null,
    });
  });

  it("OPS-16: an empty page has no rows and no history", () => {
    const empty = rowColumns([], [], null, null).map(() => null) as unknown as ExplainPageColumns;
    expect(pageOf({ rows: empty, history: NO_HISTORY_COLUMNS }, SCHEDULE)).toEqual({
      rows: [],
      history: [],
    });
  });
});
