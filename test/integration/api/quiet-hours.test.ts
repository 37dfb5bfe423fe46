/**
 * DEL-15 / DEL-17 through the HTTP API: quiet hours and catch-up bounds are accepted,
 * validated (naming the field and the value), described in the OpenAPI document, and a
 * deferred delivery shows `deferredUntil` and its reason in `GET /v1/deliveries`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { TestClock } from "../../../src/clock/index.js";
import type { DeliveryView, ErrorBody, ScheduleView } from "../../../src/contracts/index.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { installTransitionTrigger } from "../../support/transitions.js";

let clock: TestClock;
let punctual: Punctual;
let app: PunctualApi;

beforeAll(async () => {
  clock = new TestClock("2027-01-04T22:00:00Z");
  punctual = await createPunctual({ dataDir: null, clock, logger: silentLogger() });
  // The delivery state machine, checked here too (test/support/transitions.ts).
  await installTransitionTrigger(punctual.db);
  app = createApi(punctual);
});

afterAll(async () => {
  await punctual?.close(0);
});

function post(path: string, body: unknown) {
  return app.request(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

const quietHours = { tzid: "Europe/Berlin", start: "22:00", end: "07:00", days: ["MO"] };

describe("DEL-15 / DEL-17 in the HTTP API", () => {
  it("DEL-15: a reminder's quietHours and priority are stored and returned; the deferred delivery shows deferredUntil and QUIET_HOURS", async () => {
    const res = await post("/v1/schedules", {
      dtstart: "2027-01-04T23:30:00",
      tzid: "Europe/Berlin",
      reminders: [
        { key: "quiet", channel: "log", quietHours },
        { key: "urgent", channel: "log", quietHours, priority: "critical" },
      ],
    });
    expect(res.status).toBe(201);
    const s = (await res.json()) as ScheduleView;
    expect(s.reminders).toMatchObject([
      { key: "quiet", quietHours, priority: "normal" },
      { key: "urgent", quietHours, priority: "critical" },
    ]);
    expect(s.catchUp).toBeNull();
    await punctual.scheduler.tick();
    const list = await app.request(`/v1/deliveries?scheduleId=${s.id}`);
    expect(list.status).toBe(200);
    const { items } = (await list.json()) as { items: DeliveryView[] };
    // Monday 23:30 CET is inside Monday's window: it waits until Tuesday 07:00 CET.
    expect(items.find((d) => d.reminderKey === "quiet")).toMatchObject({
      dueAt: "2027-01-04T22:30:00.000Z",
      runAt: "2027-01-05T06:00:00.000Z",
      deferredUntil: "2027-01-05T06:00:00.000Z",
      deferredReason: "QUIET_HOURS",
    });
    expect(items.find((d) => d.reminderKey === "urgent")).toMatchObject({
      deferredUntil: null,
      deferredReason: null,
    });
  });

  it("DEL-15: a bad quietHours answers 400 naming the field and the value", async () => {
    const res = await post("/v1/schedules", {
      dtstart: "2027-01-05T09:00:00Z",
      reminders: [
        { channel: "log", quietHours: { tzid: "Europe/Nowhere", start: "22:00", end: "7:00" } },
      ],
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as ErrorBody;
    expect(body.error.issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: "reminders.0.quietHours.end", value: "7:00" }),
      ]),
    );
  });

  it("DEL-17: catchUp is stored with misfire all and refused with skip", async () => {
    const ok = await post("/v1/schedules", {
      dtstart: "2027-01-05T09:00:00Z",
      rrule: "FREQ=HOURLY;COUNT=5",
      misfire: "all",
      catchUp: { windowMs: 21_600_000, paceMs: 60_000 },
      reminders: [{ channel: "log" }],
    });
    expect(ok.status).toBe(201);
    expect(((await ok.json()) as ScheduleView).catchUp).toEqual({
      windowMs: 21_600_000,
      paceMs: 60_000,
    });
    const refused = await post("/v1/schedules", {
      dtstart: "2027-01-05T09:00:00Z",
      rrule: "FREQ=HOURLY;COUNT=5",
      catchUp: { windowMs: 21_600_000 },
      reminders: [{ channel: "log" }],
    });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as ErrorBody).error.issues?.[0]?.field).toBe("catchUp");
  });

  it("DEL-15 / DEL-17: the OpenAPI document describes quietHours, priority, catchUp and deferredUntil", async () => {
    const doc = JSON.stringify(await (await app.request("/openapi.json")).json());
    for (const name of ["quietHours", "priority", "catchUp", "deferredUntil", "deferredReason"]) {
      expect(doc).toContain(`"${name}"`);
    }
  });
});
