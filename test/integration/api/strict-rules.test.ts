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

  it("REC-3: the preview refuses a UTC offset as tzid the same way", async () => {
    const issues = await refusal("/v1/preview", { dtstart: body.dtstart, tzid: "-0800", count: 3 });
    expect(issues).toContainEqual({ field: "tzid", message: expect.stringMatching(/IANA name/) });
  });
});
