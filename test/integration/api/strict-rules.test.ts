/**
 * REC-3 through the API: the strict posture on `POST /v1/schedules` and the preview — a
 * local UNTIL with a zoned DTSTART, a UTC offset as `tzid`, numbers beyond a part's range.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { TestClock } from "../../../src/clock/index.js";
import type { ErrorBody } from "../../../src/contracts/index.js";
import { silentLogger } from "../../../src/observability/logger.js";

let punctual: Punctual;
let app: PunctualApi;

beforeAll(async () => {
  punctual = await createPunctual({
    dataDir: null,
    clock: new TestClock("2027-01-04T08:00:00Z"),
    logger: silentLogger(),
  });
  app = createApi(punctual);
});

afterAll(async () => {
  await punctual?.close(0);
});

const body = {
  dtstart: "2027-01-04T09:00:00",
  tzid: "Europe/Berlin",
  rrule: "FREQ=DAILY;COUNT=3",
  reminders: [{ key: "r1", offset: "-PT15M", channel: "log" }],
};

async function refusal(
  path: string,
  payload: unknown,
): Promise<{ field: string; message: string }[]> {
  const res = await app.request(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(payload),
  });
  expect(res.status).toBe(400);
  const error = ((await res.json()) as ErrorBody).error;
  expect(error.code).toBe("VALIDATION_FAILED");
  return (error.issues ?? []).map((i) => ({ field: i.field, message: i.message }));
}

describe("REC-3: strict posture on the API", () => {
  it.each([
    [
      "a local UNTIL with a zoned DTSTART",
      { rrule: "FREQ=DAILY;UNTIL=20270110T090000" },
      "rrule.UNTIL",
      /UTC date-time/,
    ],
    ["a UTC offset as tzid", { tzid: "+05:00" }, "tzid", /UTC offset.*IANA name/],
    [
      "COUNT=1000000000",
      { rrule: "FREQ=DAILY;COUNT=1000000000" },
      "rrule.COUNT",
      /between 1 and 100000000/,
    ],
    [
      "INTERVAL=99999999999",
      { rrule: "FREQ=DAILY;INTERVAL=99999999999" },
      "rrule.INTERVAL",
      /between 1 and 1000000/,
    ],
  ] as [string, Record<string, unknown>, string, RegExp][])(
    "REC-3: POST /v1/schedules refuses %s, naming the part and what is allowed",
    async (_what, change, field, message) => {
      const issues = await refusal("/v1/schedules", { ...body, ...change });
      expect(issues).toContainEqual({ field, message: expect.stringMatching(message) });
    },
  );

  it("API-1 REC-3: an RRULE: prefix is accepted and stored without it, on create and on edit; a doubled one is refused", async () => {
    const send = (method: string, path: string, payload: unknown, headers = {}) =>
      app.request(path, {
        method,
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(payload),
      });
    const res = await send("POST", "/v1/schedules", {
      ...body,
      rrule: " rrule:FREQ=DAILY;COUNT=3",
    });
    expect(res.status).toBe(201);
    const created = (await res.json()) as { id: string; rrule: string };
    expect(created.rrule).toBe("FREQ=DAILY;COUNT=3");
    const read = (await (await app.request(`/v1/schedules/${created.id}`)).json()) as {
      rrule: string;
    };
    expect(read.rrule).toBe("FREQ=DAILY;COUNT=3");
    const edited = await send(
      "PATCH",
      `/v1/schedules/${created.id}`,
      { rrule: "RRULE:FREQ=DAILY;COUNT=2" },
      { "if-match": '"1"' },
    );
    expect(edited.status).toBe(200);
    expect(((await edited.json()) as { rrule: string }).rrule).toBe("FREQ=DAILY;COUNT=2");
    const doubled = await refusal("/v1/schedules", { ...body, rrule: "RRULE:RRULE:FREQ=DAILY" });
    expect(doubled.map((i) => i.field)).toContain("rrule");
  });

  it("API-1 REC-3: one refusal names every bad field: an unknown zone does not hide a bad rule", async () => {
    const issues = await refusal("/v1/schedules", {
      ...body,
      tzid: "Nowhere/City",
      rrule: "FREQ=FORTNIGHTLY",
      reminders: [{ key: "r1", offset: "-PT15M", channel: "pigeon" }],
    });
    expect(issues.map((i) => i.field).sort()).toEqual([
      "reminders.0.channel",
      "rrule.FREQ",
      "tzid",
    ]);
  });

  it("REC-3: the preview refuses a UTC offset as tzid the same way", async () => {
    const issues = await refusal("/v1/preview", { dtstart: body.dtstart, tzid: "-0800", count: 3 });
    expect(issues).toContainEqual({ field: "tzid", message: expect.stringMatching(/IANA name/) });
  });
});
