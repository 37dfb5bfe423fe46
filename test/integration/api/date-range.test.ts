/**
 * API-1 API-9: a date input in year 0, a negative year or past year 9999 (once read in
 * UTC) is a 400 naming the field, never a server error: every date field of the API, the
 * import's query and file, and the CLI's local validation.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import type { ImportSummary } from "../../../src/app/import.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { CliError } from "../../../src/cli/errors.js";
import { runValidate } from "../../../src/cli/local.js";
import { TestClock } from "../../../src/clock/index.js";
import type { ErrorBody, ScheduleView } from "../../../src/contracts/index.js";
import { silentLogger } from "../../../src/observability/logger.js";

let punctual: Punctual;
let app: PunctualApi;
let id: string;

const base = {
  dtstart: "2027-01-04T09:00:00",
  tzid: "UTC",
  rrule: "FREQ=DAILY;COUNT=3",
  reminders: [{ key: "r", offset: "PT0S", channel: "log" }],
};

function send(method: string, path: string, body?: unknown) {
  return app.request(path, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

beforeAll(async () => {
  punctual = await createPunctual({
    dataDir: null,
    clock: new TestClock("2027-01-04T08:00:00Z"),
    logger: silentLogger(),
  });
  app = createApi(punctual);
  id = ((await (await send("POST", "/v1/schedules", base)).json()) as ScheduleView).id;
});

afterAll(async () => {
  await punctual?.close(0);
});

/** Beyond 9999 in UTC, though written in year 9999. */
const PAST_9999 = "9999-12-31T23:59:59-14:00";

const cases: Array<[string, string, string, () => unknown, string]> = [
  [
    "POST",
    "/v1/schedules",
    "dtstart year 0",
    () => ({ ...base, dtstart: "0000-01-04T09:00:00" }),
    "dtstart",
  ],
  [
    "POST",
    "/v1/schedules",
    "dtstart instant year 0",
    () => ({ ...base, dtstart: "0000-01-04T09:00:00Z" }),
    "dtstart",
  ],
  [
    "POST",
    "/v1/schedules",
    "dtstart negative year",
    () => ({ ...base, dtstart: "-0001-01-01T00:00:00Z" }),
    "dtstart",
  ],
  [
    "POST",
    "/v1/schedules",
    "dtstart year 10000",
    () => ({ ...base, dtstart: "10000-01-01T00:00:00Z" }),
    "dtstart",
  ],
  [
    "POST",
    "/v1/schedules",
    "dtstart past 9999 by its offset",
    () => ({ ...base, dtstart: PAST_9999 }),
    "dtstart",
  ],
  [
    "POST",
    "/v1/schedules",
    "endsAt year 0",
    () => ({ ...base, rrule: "FREQ=DAILY", endsAt: "0000-01-01T00:00:00Z" }),
    "endsAt",
  ],
  [
    "POST",
    "/v1/schedules",
    "endsAt past 9999",
    () => ({ ...base, rrule: "FREQ=DAILY", endsAt: PAST_9999 }),
    "endsAt",
  ],
  [
    "POST",
    "/v1/schedules",
    "expiresAt past 9999",
    () => ({ ...base, expiresAt: PAST_9999 }),
    "expiresAt",
  ],
  ["POST", "/v1/schedules", "rdate past 9999", () => ({ ...base, rdate: [PAST_9999] }), "rdate.0"],
  [
    "POST",
    "/v1/schedules",
    "exdate year 0",
    () => ({ ...base, exdate: ["0000-06-01T09:00:00"] }),
    "exdate.0",
  ],
  [
    "POST",
    "/v1/schedules",
    "UNTIL year 0",
    () => ({ ...base, rrule: "FREQ=DAILY;UNTIL=00000101T000000Z" }),
    "rrule.UNTIL",
  ],
  [
    "PATCH",
    "/v1/schedules/:id",
    "PATCH endsAt past 9999",
    () => ({ rrule: "FREQ=DAILY", endsAt: PAST_9999 }),
    "endsAt",
  ],
  [
    "POST",
    "/v1/schedules/:id/backfill",
    "backfill from year 0",
    () => ({ from: "0000-01-01T00:00:00Z", to: "2027-01-01T00:00:00Z" }),
    "from",
  ],
  [
    "POST",
    "/v1/schedules/:id/backfill",
    "backfill to past 9999",
    () => ({ from: "2027-01-01T00:00:00Z", to: PAST_9999 }),
    "to",
  ],
  ["POST", "/v1/deliveries/redrive", "redrive from past 9999", () => ({ from: PAST_9999 }), "from"],
  [
    "POST",
    "/v1/deliveries/resolve",
    "resolve to year 0",
    () => ({ outcome: "dead", to: "0000-01-01T00:00:00Z" }),
    "to",
  ],
];

describe("API-1 API-9: dates outside the years 0001–9999", () => {
  it.each(cases)(
    "API-1: %s %s (%s) is 400 naming the field",
    async (method, path, _what, body, field) => {
      const res = await send(method, path.replace(":id", id), body());
      expect(res.status).toBe(400);
      const error = ((await res.json()) as ErrorBody).error;
      expect(error.issues?.map((i) => i.field)).toContain(field);
    },
  );

  it("API-5: the import's from/to query past 9999 is 400 naming it", async () => {
    const res = await app.request(
      `/v1/imports?source=dates&remind=PT0S&channel=log&dryRun=true&from=${encodeURIComponent(PAST_9999)}`,
      {
        method: "POST",
        headers: { "content-type": "text/calendar" },
        body: "BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n",
      },
    );
    expect(res.status).toBe(400);
    expect(((await res.json()) as ErrorBody).error.issues?.map((i) => i.field)).toContain("from");
  });

  it("API-5: an event dated year 0 or past 9999 is skipped with its reason; the rest imports", async () => {
    const ev = (uid: string, start: string) =>
      `BEGIN:VEVENT\r\nUID:${uid}\r\nDTSTART:${start}\r\nSUMMARY:x\r\nEND:VEVENT\r\n`;
    const text =
      "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//dates//EN\r\n" +
      ev("zero@dates", "00000101T090000Z") +
      ev("ok@dates", "20270301T090000Z") +
      "END:VCALENDAR\r\n";
    const res = await app.request("/v1/imports?source=dates-file&remind=PT0S&channel=log", {
      method: "POST",
      headers: { "content-type": "text/calendar" },
      body: text,
    });
    expect(res.status).toBe(200);
    const summary = (await res.json()) as ImportSummary;
    expect(summary.created).toBe(1);
    expect(summary.skipped.map((s) => s.uid)).toEqual(["zero@dates"]);
  });

  it("API-1: the CLI's local validation names dtstart for a date past 9999, never a crash", () => {
    const io = { out: () => {}, err: () => {} };
    for (const dtstart of [PAST_9999, "0000-01-01T00:00:00Z"]) {
      let caught: unknown;
      try {
        runValidate({ rrule: "FREQ=DAILY", dtstart, tzid: "UTC" }, io);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(CliError);
      expect((caught as CliError).issues.map((i) => i.field)).toContain("dtstart");
    }
  });
});
