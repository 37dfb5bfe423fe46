/**
 * API-11 / API-12 through the HTTP API on a real engine (PGlite or PostgreSQL, per
 * PUNCTUAL_TEST_ENGINE): a schedule's read shows `floating: true` and its recipient count;
 * `GET /v1/schedules/{id}/recipients` lists its recipients by id in cursor pages; another
 * tenant's schedule is not found, a bad limit or cursor is a 400.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { TestClock } from "../../../src/clock/index.js";
import type { ScheduleView } from "../../../src/contracts/index.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { openTestDatabase, type TestDatabase } from "../../support/db.js";

let handle: TestDatabase;
let punctual: Punctual;
let app: PunctualApi;

beforeAll(async () => {
  handle = await openTestDatabase();
  punctual = await createPunctual({
    database: handle.db,
    clock: new TestClock("2027-01-04T08:00:00Z"),
    logger: silentLogger(),
  });
  app = createApi(punctual);
});

afterAll(async () => {
  await punctual?.close(0);
  await handle?.close();
});

function send(method: string, path: string, body?: unknown, tenant?: string) {
  return app.request(path, {
    method,
    headers: {
      "content-type": "application/json",
      ...(tenant !== undefined ? { "punctual-tenant": tenant } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
}

type Page = { items: Array<{ id: string; addedAt: string }>; nextCursor: string | null };

describe("API-11 / API-12: a schedule's recipients in its read and its list", () => {
  it("API-11: the read of a floating schedule for recipients shows floating and its recipient count; API-12: its recipients list in cursor pages", async () => {
    const ids = ["r-05", "r-01", "r-04", "r-03", "r-02"];
    for (const id of ids) {
      expect((await send("PUT", `/v1/recipients/${id}`, { tzid: "Asia/Tokyo" })).status).toBe(201);
    }
    const created = await send("POST", "/v1/schedules", {
      dtstart: "2027-01-05T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY;COUNT=3",
      recipients: ids,
      reminders: [{ key: "r", channel: "log" }],
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as ScheduleView;

    const read = (await (await send("GET", `/v1/schedules/${id}`)).json()) as ScheduleView;
    expect(read).toMatchObject({
      floating: true,
      recipientCount: 5,
      dtstart: "2027-01-05T09:00:00",
      dtstartLocal: "2027-01-05T09:00:00",
    });

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = `?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const res = await send("GET", `/v1/schedules/${id}/recipients${query}`);
      expect(res.status).toBe(200);
      const page = (await res.json()) as Page;
      expect(page.items.length).toBeLessThanOrEqual(2);
      for (const item of page.items) expect(Date.parse(item.addedAt)).not.toBeNaN();
      seen.push(...page.items.map((r) => r.id));
      cursor = page.nextCursor;
      pages++;
    } while (cursor !== null && pages < 10);
    expect(seen).toEqual(["r-01", "r-02", "r-03", "r-04", "r-05"]);
    expect(pages).toBe(3);

    // A change shows in both.
    await send("PUT", `/v1/schedules/${id}/recipients`, { remove: ["r-03"] });
    const after = (await (await send("GET", `/v1/schedules/${id}`)).json()) as ScheduleView;
    expect(after.recipientCount).toBe(4);
    const all = (await (await send("GET", `/v1/schedules/${id}/recipients`)).json()) as Page;
    expect(all).toEqual({
      items: ["r-01", "r-02", "r-04", "r-05"].map((r) => ({ id: r, addedAt: expect.any(String) })),
      nextCursor: null,
    });

    // Another tenant: not found. Bad limit, a cursor of another list: 400.
    expect((await send("GET", `/v1/schedules/${id}/recipients`, undefined, "other")).status).toBe(
      404,
    );
    expect((await send("GET", `/v1/schedules/${id}/recipients?limit=0`)).status).toBe(400);
    const recipientsPage = (await (await send("GET", "/v1/recipients?limit=1")).json()) as {
      nextCursor: string;
    };
    const foreign = await send(
      "GET",
      `/v1/schedules/${id}/recipients?cursor=${encodeURIComponent(recipientsPage.nextCursor)}`,
    );
    expect(foreign.status).toBe(400);
  });

  it("API-11: a schedule without recipients shows neither field and lists none", async () => {
    const created = await send("POST", "/v1/schedules", {
      dtstart: "2027-01-05T09:00:00",
      tzid: "Europe/Berlin",
      reminders: [{ key: "r", channel: "log" }],
    });
    const { id } = (await created.json()) as ScheduleView;
    const read = (await (await send("GET", `/v1/schedules/${id}`)).json()) as ScheduleView;
    expect(read.floating).toBeUndefined();
    expect(read.recipientCount).toBeUndefined();
    expect(read.dtstartLocal).toBe("2027-01-05T09:00:00+01:00");
    const page = (await (await send("GET", `/v1/schedules/${id}/recipients`)).json()) as Page;
    expect(page).toEqual({ items: [], nextCursor: null });
  });
});
