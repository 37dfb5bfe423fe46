/**
 * OPS-12 through the HTTP API: previews, the reading of an import and its dry run are
 * computed on worker threads, so the event loop's thread spends (almost) no expansion
 * work on them, with the same answers. Work is counted in expansion steps on this thread
 * (`meterWork`), never in elapsed time.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { TestClock } from "../../../src/clock/index.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { meterWork } from "../../../src/recurrence/expand.js";
import { preview } from "../../../src/recurrence/preview.js";
import { MAX_COUNT_STEPS } from "../../../src/recurrence/index.js";

let punctual: Punctual;
let app: PunctualApi;

beforeAll(async () => {
  punctual = await createPunctual({
    dataDir: null,
    clock: new TestClock("2031-01-05T08:00:00Z"),
    logger: silentLogger(),
  });
  app = createApi(punctual);
});
afterAll(() => punctual?.close(0));

/** Steps of expansion work this thread spent while `run` ran. */
async function stepsHere<T>(run: () => Promise<T>): Promise<{ steps: number; result: T }> {
  const stop = meterWork();
  try {
    const result = await run();
    return { steps: stop(), result };
  } finally {
    stop();
  }
}

const post = async (path: string, body: string, type = "application/json"): Promise<Response> =>
  app.request(path, { method: "POST", headers: { "content-type": type }, body });

/** A calendar of `n` daily COUNT series this process has not seen (distinct starts). */
function countCalendar(n: number, hour: number): string {
  const events = Array.from(
    { length: n },
    (_, i) =>
      `BEGIN:VEVENT\r\nUID:count-${hour}-${i}@punctual.test\r\nDTSTAMP:20310101T000000Z\r\nDTSTART;TZID=Europe/Berlin:203102${String(10 + i).padStart(2, "0")}T${String(hour).padStart(2, "0")}1500\r\nRRULE:FREQ=DAILY;COUNT=15000\r\nSUMMARY:Series ${i}\r\nEND:VEVENT\r\n`,
  );
  return `BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//punctual//test//EN\r\n${events.join("")}END:VCALENDAR\r\n`;
}

describe("OPS-12: CPU-heavy API work runs on worker threads", () => {
  it("OPS-12: POST /v1/preview spends no expansion step on the event loop's thread and answers what preview() answers", async () => {
    const input = {
      dtstart: "2031-03-05T07:45:00",
      tzid: "America/Denver",
      rrule: "FREQ=DAILY;COUNT=15000",
      count: 10_000,
    };
    const { steps, result } = await stepsHere(() => post("/v1/preview", JSON.stringify(input)));
    expect(result.status).toBe(200);
    expect(steps).toBe(0);
    expect(await result.json()).toEqual(preview(input));

    const bad = { dtstart: "2031-01-05T09:00:00", rrule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30" };
    const refused = await stepsHere(() => post("/v1/preview", JSON.stringify(bad)));
    expect(refused.steps).toBe(0);
    expect(refused.result.status).toBe(400);
    const body = (await refused.result.json()) as { error: { code: string; issues: unknown[] } };
    expect(body.error.code).toBe("VALIDATION_FAILED");
    expect(body.error.issues[0]).toMatchObject({ field: expect.stringMatching(/^rrule/) });
  });

  it("OPS-12: POST /v1/schedules validates its rule's COUNT set on a worker thread, not on the event loop's", async () => {
    const body = {
      dtstart: "2031-04-06T06:30:00",
      tzid: "Asia/Tokyo",
      rrule: "FREQ=DAILY;COUNT=15000",
      payload: {},
      reminders: [{ offset: "-PT15M", channel: "log" }],
    };
    const { steps, result } = await stepsHere(() => post("/v1/schedules", JSON.stringify(body)));
    expect(result.status).toBe(201);
    // The walk of 15,000 days is done elsewhere; planning here reads the walked set.
    expect(steps).toBeLessThan(5_000);
  });

  it("OPS-12: PATCH /v1/schedules/{id} validates a changed rule's COUNT set on a worker thread, not on the event loop's", async () => {
    const created = await post(
      "/v1/schedules",
      JSON.stringify({
        dtstart: "2031-05-06T06:30:00",
        tzid: "Asia/Tokyo",
        rrule: "FREQ=WEEKLY",
        payload: {},
        reminders: [{ offset: "-PT15M", channel: "log" }],
      }),
    );
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    // Only the rule is sent: the walk needs the stored DTSTART and zone merged in.
    const { steps, result } = await stepsHere(() =>
      Promise.resolve(
        app.request(`/v1/schedules/${id}`, {
          method: "PATCH",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ rrule: "FREQ=DAILY;COUNT=15000" }),
        }),
      ),
    );
    expect(result.status).toBe(200);
    expect(((await result.json()) as { rrule: string }).rrule).toBe("FREQ=DAILY;COUNT=15000");
    expect(steps).toBeLessThan(5_000);
  });

  it("OPS-12: POST /v1/imports reads the calendar and walks its series on a worker thread; the dry run too", async () => {
    const text = countCalendar(6, 7);
    const imported = await stepsHere(() =>
      post("/v1/imports?source=offload&remind=-PT15M&channel=log", text, "text/calendar"),
    );
    expect(imported.result.status).toBe(200);
    expect(await imported.result.json()).toMatchObject({ created: 6, skipped: [] });
    // In this thread alone the six walks cost more than 6 × 15,000 steps.
    expect(imported.steps).toBeLessThan(MAX_COUNT_STEPS / 2);

    const dry = await stepsHere(() =>
      post(
        "/v1/imports?source=offload-dry&remind=-PT15M&channel=log&dryRun=true&to=2031-03-01T00:00:00Z",
        countCalendar(6, 9),
        "text/calendar",
      ),
    );
    expect(dry.result.status).toBe(200);
    expect(dry.steps).toBe(0);
    const listed = (await dry.result.json()) as { deliveries: unknown[]; events: number };
    expect(listed.events).toBe(6);
    expect(listed.deliveries.length).toBeGreaterThan(0);
  });
});
