/**
 * API-11: `GET /v1/schedules/{id}/recipient-zones` — the zones of a schedule's recipients,
 * counted (most first, then by name), and whether it is floating: what the dashboard shows
 * a schedule's next occurrence per recipient zone from. Runs on the engine of the stage
 * (PGlite or PostgreSQL).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import type { RecipientZones } from "../../../src/app/recipient-zones.js";
import { TestClock } from "../../../src/clock/index.js";
import type { ScheduleView } from "../../../src/contracts/index.js";
import { NotFoundError } from "../../../src/errors/index.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { openTestDatabase, type TestDatabase } from "../../support/db.js";

let t: TestDatabase;
let punctual: Punctual;
let app: PunctualApi;

beforeAll(async () => {
  t = await openTestDatabase();
  punctual = await createPunctual({
    database: t.db,
    clock: new TestClock("2027-01-04T08:00:00Z"),
    logger: silentLogger(),
  });
  app = createApi(punctual);
});

afterAll(async () => {
  await punctual?.close(0);
  await t?.close();
});

function send(method: string, path: string, body?: unknown) {
  return app.request(path, {
    method,
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

async function create(body: unknown): Promise<ScheduleView> {
  const res = await send("POST", "/v1/schedules", body);
  expect(res.status).toBe(201);
  return (await res.json()) as ScheduleView;
}

describe("API-11 recipient zones of a schedule", () => {
  it("API-11: a schedule's recipient zones are counted, most recipients first, and say whether it is floating", async () => {
    const zones: Record<string, string> = {
      ann: "Asia/Tokyo",
      bob: "Europe/Berlin",
      cy: "Asia/Tokyo",
      dee: "America/New_York",
      eve: "Europe/Berlin",
      fay: "Asia/Tokyo",
    };
    for (const [id, tzid] of Object.entries(zones)) {
      expect((await send("PUT", `/v1/recipients/${id}`, { tzid })).status).toBe(201);
    }
    const floating = await create({
      dtstart: "2027-01-05T09:00:00",
      floating: true,
      rrule: "FREQ=DAILY",
      recipients: ["ann", "bob", "cy", "dee", "eve", "fay"],
      reminders: [{ key: "r", channel: "log" }],
    });
    const res = await send("GET", `/v1/schedules/${floating.id}/recipient-zones`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      scheduleId: floating.id,
      floating: true,
      recipients: 6,
      zones: [
        { tzid: "Asia/Tokyo", recipients: 3 },
        { tzid: "Europe/Berlin", recipients: 2 },
        { tzid: "America/New_York", recipients: 1 },
      ],
    } satisfies RecipientZones);

    // A zone change moves the recipient to its new zone's count.
    expect((await send("PUT", "/v1/recipients/dee", { tzid: "Europe/Berlin" })).status).toBe(200);
    const fixed = await create({
      dtstart: "2027-01-05T09:00:00",
      tzid: "Europe/Paris",
      recipients: ["dee", "bob"],
      reminders: [{ key: "r", channel: "log" }],
    });
    expect(await (await send("GET", `/v1/schedules/${fixed.id}/recipient-zones`)).json()).toEqual({
      scheduleId: fixed.id,
      floating: false,
      recipients: 2,
      zones: [{ tzid: "Europe/Berlin", recipients: 2 }],
    });
  });

  it("API-11: a schedule without recipients has none; an unknown id or another tenant's schedule is not found", async () => {
    const plain = await create({
      dtstart: "2027-01-05T09:00:00Z",
      reminders: [{ key: "r", channel: "log" }],
    });
    expect(await (await send("GET", `/v1/schedules/${plain.id}/recipient-zones`)).json()).toEqual({
      scheduleId: plain.id,
      floating: false,
      recipients: 0,
      zones: [],
    });
    for (const id of ["00000000-0000-4000-8000-000000000000", "not-a-uuid"]) {
      const missing = await send("GET", `/v1/schedules/${id}/recipient-zones`);
      expect(missing.status, id).toBe(404);
    }
    await expect(punctual.scheduleRecipientZones(plain.id, { tenant: "other" })).rejects.toThrow(
      NotFoundError,
    );
  });

  it("API-11: the route is in the OpenAPI document", async () => {
    const doc = (await (await app.request("/openapi.json")).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    expect(doc.paths["/v1/schedules/{id}/recipient-zones"]?.get).toBeDefined();
  });
});
