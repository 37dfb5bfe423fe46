/**
 * API-11 / API-12 / API-13 through the HTTP API: a schedule for recipients (floating, a
 * reminder with a category and no target) is created and read back, its recipients are
 * changed in pages with `PUT /v1/schedules/{id}/recipients`, bad input is a 400 naming
 * the field and the value with nothing stored, and the route is in the OpenAPI document.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { TestClock } from "../../../src/clock/index.js";
import type { ErrorBody, ScheduleView } from "../../../src/contracts/index.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { installTransitionTrigger } from "../../support/transitions.js";

let punctual: Punctual;
let app: PunctualApi;

beforeAll(async () => {
  punctual = await createPunctual({
    dataDir: null,
    clock: new TestClock("2027-01-04T08:00:00Z"),
    logger: silentLogger(),
  });
  await installTransitionTrigger(punctual.db);
  app = createApi(punctual);
});

afterAll(async () => {
  await punctual?.close(0);
});

function send(method: string, path: string, body: unknown) {
  return app.request(path, {
    method,
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

const schedule = {
  dtstart: "2027-01-05T09:00:00",
  floating: true,
  rrule: "FREQ=DAILY;COUNT=3",
  recipients: ["ann"],
  reminders: [{ key: "r", channel: "log", category: "digest" }],
};

describe("API-11 / API-12 in the HTTP API", () => {
  it("API-11: a floating schedule for recipients is created with a category; API-12: its recipients change in pages", async () => {
    for (const id of ["ann", "bob"]) {
      expect((await send("PUT", `/v1/recipients/${id}`, { tzid: "Asia/Tokyo" })).status).toBe(201);
    }
    const res = await send("POST", "/v1/schedules", schedule);
    expect(res.status).toBe(201);
    const created = (await res.json()) as ScheduleView;
    expect(created.reminders[0]).toMatchObject({ key: "r", category: "digest" });
    const page = await send("PUT", `/v1/schedules/${created.id}/recipients`, {
      add: ["bob"],
      remove: ["ann"],
    });
    expect(page.status).toBe(200);
    expect(await page.json()).toEqual({ added: 1, removed: 1, cancelled: 0, recipients: 1 });
    const bad = await send("PUT", `/v1/schedules/${created.id}/recipients`, { add: ["nobody"] });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as ErrorBody).error.issues).toEqual([
      { field: "add.0", message: "no such recipient", value: "nobody" },
    ]);
    const missing = await send(
      "PUT",
      "/v1/schedules/00000000-0000-4000-8000-000000000000/recipients",
      { add: ["bob"] },
    );
    expect(missing.status).toBe(404);
  });

  it("API-11: a floating schedule's view says so: tzid null and floating true, in the create reply, a read, the list, an edit's reply and a cancel", async () => {
    expect((await send("PUT", "/v1/recipients/cy", { tzid: "Asia/Tokyo" })).status).toBe(201);
    const made = await send("POST", "/v1/schedules", { ...schedule, recipients: ["cy"] });
    const created = (await made.json()) as ScheduleView;
    const floating = { tzid: null, floating: true, dtstartLocal: "2027-01-05T09:00:00" };
    expect(created).toMatchObject(floating);
    const read = (await (
      await send("GET", `/v1/schedules/${created.id}`, undefined)
    ).json()) as ScheduleView;
    expect(read).toMatchObject(floating);
    const list = (await (await send("GET", "/v1/schedules?limit=1000", undefined)).json()) as {
      items: ScheduleView[];
    };
    expect(list.items.find((v) => v.id === created.id)).toMatchObject(floating);
    const zoned = list.items.filter((v) => v.id !== created.id && v.floating === undefined);
    for (const v of zoned) expect(typeof v.tzid).toBe("string");
    const edited = await send("PATCH", `/v1/schedules/${created.id}`, { title: "daily" });
    expect(edited.status).toBe(200);
    expect(await edited.json()).toMatchObject({ ...floating, title: "daily" });
    const cancelled = await send("DELETE", `/v1/schedules/${created.id}`, undefined);
    expect(await cancelled.json()).toMatchObject({ ...floating, state: "cancelled" });
  });

  it("API-11: a floating schedule with a tzid, or an unknown recipient, is a 400 naming the field and value; nothing stored", async () => {
    const before = (await punctual.listSchedules()).items.length;
    const zoned = await send("POST", "/v1/schedules", { ...schedule, tzid: "Europe/Berlin" });
    expect(zoned.status).toBe(400);
    expect(((await zoned.json()) as ErrorBody).error.issues).toContainEqual(
      expect.objectContaining({ field: "tzid", value: "Europe/Berlin" }),
    );
    const unknown = await send("POST", "/v1/schedules", { ...schedule, recipients: ["zed"] });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as ErrorBody).error.issues).toEqual([
      { field: "recipients.0", message: "no such recipient", value: "zed" },
    ]);
    expect((await punctual.listSchedules()).items).toHaveLength(before);
  });

  it("API-11, API-12: more than 10,000 recipients in one body is a 400 naming the field and its count; nothing stored", async () => {
    const before = (await punctual.listSchedules()).items.length;
    const many = Array.from({ length: 10_001 }, (_, i) => `r-${i}`);
    const created = await send("POST", "/v1/schedules", { ...schedule, recipients: many });
    expect(created.status).toBe(400);
    expect(((await created.json()) as ErrorBody).error.issues).toEqual([
      {
        field: "recipients",
        message:
          "must list at most 10000 recipients; add more with PUT /v1/schedules/{id}/recipients",
        value: 10_001,
      },
    ]);
    expect((await punctual.listSchedules()).items).toHaveLength(before);
    await punctual.putRecipient("ann", { tzid: "UTC" });
    const existing = (await (await send("POST", "/v1/schedules", schedule)).json()) as ScheduleView;
    const page = await send("PUT", `/v1/schedules/${existing.id}/recipients`, { remove: many });
    expect(page.status).toBe(400);
    expect(((await page.json()) as ErrorBody).error.issues).toEqual([
      {
        field: "remove",
        message: "a page holds at most 10000 ids; send more pages",
        value: 10_001,
      },
    ]);
    expect((await punctual.listScheduleRecipients(existing.id)).items.map((r) => r.id)).toEqual([
      "ann",
    ]);
  });

  it("API-12: the page route and the list route are in the OpenAPI document", async () => {
    const doc = (await (await app.request("/openapi.json")).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    expect(Object.keys(doc.paths["/v1/schedules/{id}/recipients"] ?? {}).sort()).toEqual([
      "get",
      "put",
    ]);
  });
});
