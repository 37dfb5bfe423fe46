/**
 * HTTP API, iCalendar import (API-5, DEL-9, DEL-10), in process through `app.request()`
 * on an in-memory embedded database and a TestClock: create, idempotent re-import,
 * realign of an edited series, cancel of a removed event, dry run, and the refusals.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import type { ImportSummary } from "../../../src/app/import.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { TestClock } from "../../../src/clock/index.js";
import type { DeliveryView, ErrorBody } from "../../../src/contracts/index.js";
import type { DryRunDelivery } from "../../../src/ical/index.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { installTransitionTrigger } from "../../support/transitions.js";

const fixtures = fileURLToPath(new URL("../../fixtures/ics/", import.meta.url));
const read = (name: string): string => readFileSync(fixtures + name, "utf8");

const STANDUP = "weekly-standup@punctual.test";
const REVIEW = "quarterly-review@punctual.test";
const API_KEY = "import-test-key-0123456789";

let clock: TestClock;
let punctual: Punctual;
let app: PunctualApi;
let secured: Punctual;

beforeAll(async () => {
  clock = new TestClock("2027-01-04T08:00:00Z");
  punctual = await createPunctual({
    dataDir: null,
    clock,
    logger: silentLogger(),
    // Plan the whole test calendar at once, so every reminder exists as a delivery row.
    scheduler: { planAheadMs: 60 * 86_400_000 },
  });
  // The delivery state machine, checked here too (test/support/transitions.ts).
  await installTransitionTrigger(punctual.db);
  app = createApi(punctual);
  secured = await createPunctual({
    dataDir: null,
    clock,
    logger: silentLogger(),
    api: { apiKey: API_KEY },
  });
});

afterAll(async () => {
  await punctual?.close(0);
  await secured?.close(0);
});

/** POSTs a calendar to `/v1/imports` with the given query. */
function importRequest(
  body: string,
  query: Record<string, string | string[]>,
  headers: Record<string, string> = { "content-type": "text/calendar" },
  on: PunctualApi = app,
) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    for (const v of [value].flat()) params.append(key, v);
  }
  return on.request(`/v1/imports?${params.toString()}`, { method: "POST", headers, body });
}

const teamOptions = { source: "team", remind: "-PT15M", channel: "log" };

async function tick(): Promise<void> {
  const report = await punctual.scheduler.tick();
  if (report.failedSweep) throw new Error(`sweep ${report.failedSweep} failed`);
  await punctual.scheduler.drain();
}

async function allDeliveries(): Promise<DeliveryView[]> {
  return (await punctual.listDeliveries({ limit: 1000 })).items;
}

/** Deliveries of one imported event, by its UID (the schedule's externalId). */
async function deliveriesOf(summary: ImportSummary, uid: string): Promise<DeliveryView[]> {
  const id = summary.schedules.find((s) => s.uid === uid)?.scheduleId;
  expect(id).toBeTruthy();
  return (await allDeliveries()).filter((d) => d.scheduleId === id);
}

async function fieldsOf(res: Response): Promise<string[]> {
  const body = (await res.json()) as ErrorBody;
  expect(body.error.code).toBe("VALIDATION_FAILED");
  return (body.error.issues ?? []).map((i) => i.field);
}

describe("API-5 import a calendar, re-import, realign and cancel (one calendar's life)", () => {
  let first: ImportSummary;

  it("API-5: POST /v1/imports creates one schedule per event UID", async () => {
    const res = await importRequest(read("team-v1.ics"), teamOptions);
    expect(res.status).toBe(200);
    first = (await res.json()) as ImportSummary;
    expect(first).toMatchObject({
      source: "team",
      created: 2,
      updated: 0,
      unchanged: 0,
      cancelled: 0,
      skipped: [],
      floatingTzid: "UTC",
    });
    expect(first.schedules.map((s) => [s.uid, s.action]).sort()).toEqual([
      [REVIEW, "created"],
      [STANDUP, "created"],
    ]);
    const standup = await punctual.getSchedule(
      first.schedules.find((s) => s.uid === STANDUP)?.scheduleId ?? "",
    );
    expect(standup).toMatchObject({
      source: "team",
      externalId: STANDUP,
      dtstart: "2027-01-11T09:00:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=WEEKLY;BYDAY=MO;COUNT=6",
      exdate: ["2027-01-25T09:00:00"],
      reminders: [{ offset: "-PT15M", channel: "log" }],
    });

    await tick();
    // Mondays 11, 18 Jan, 1, 8, 15 Feb (25 Jan excluded) and the review: 08:45/13:45 local.
    expect((await deliveriesOf(first, STANDUP)).map((d) => d.dueAt).sort()).toEqual([
      "2027-01-11T07:45:00.000Z",
      "2027-01-18T07:45:00.000Z",
      "2027-02-01T07:45:00.000Z",
      "2027-02-08T07:45:00.000Z",
      "2027-02-15T07:45:00.000Z",
    ]);
    expect((await deliveriesOf(first, REVIEW)).map((d) => d.dueAt)).toEqual([
      "2027-01-13T12:45:00.000Z",
    ]);
  });

  it("DEL-9: importing the same file again is a no-op: no new schedules, no new deliveries", async () => {
    const before = await allDeliveries();
    const res = await importRequest(read("team-v1.ics"), teamOptions);
    expect(res.status).toBe(200);
    const again = (await res.json()) as ImportSummary;
    expect(again).toMatchObject({ created: 0, updated: 0, unchanged: 2, cancelled: 0 });
    expect(again.schedules.map((s) => s.scheduleId).sort()).toEqual(
      first.schedules.map((s) => s.scheduleId).sort(),
    );
    await tick();
    const after = await allDeliveries();
    expect(after).toHaveLength(before.length);
    expect(after.map((d) => [d.id, d.dueAt, d.state])).toEqual(
      before.map((d) => [d.id, d.dueAt, d.state]),
    );
  });

  it("DEL-9, DEL-10: an edited file realigns the moved series, keeps the sent delivery, and cancels the removed event", async () => {
    // The first stand-up reminder goes out before the calendar is edited.
    clock.set("2027-01-11T07:46:00Z");
    await tick();
    const sent = (await deliveriesOf(first, STANDUP)).filter((d) => d.state === "sent");
    expect(sent.map((d) => d.dueAt)).toEqual(["2027-01-11T07:45:00.000Z"]);

    // Stand-up moved from Mondays to Tuesdays with a new EXDATE; the review removed.
    const res = await importRequest(read("team-v2.ics"), teamOptions);
    expect(res.status).toBe(200);
    const edited = (await res.json()) as ImportSummary;
    expect(edited).toMatchObject({ created: 0, updated: 1, unchanged: 0, cancelled: 1 });
    expect(edited.schedules.map((s) => [s.uid, s.action]).sort()).toEqual([
      [REVIEW, "cancelled"],
      [STANDUP, "updated"],
    ]);

    // DEL-10: the removed event's schedule and its waiting delivery are cancelled.
    const reviewId = first.schedules.find((s) => s.uid === REVIEW)?.scheduleId ?? "";
    expect((await punctual.getSchedule(reviewId)).state).toBe("cancelled");
    const review = await deliveriesOf(first, REVIEW);
    expect(review.map((d) => d.state)).toEqual(["cancelled"]);

    // DEL-9: the waiting rows follow the Tuesdays (26 Jan and 9 Feb excluded); the sent one stays.
    const expectWaiting = async () => {
      const standup = await deliveriesOf(first, STANDUP);
      expect(
        standup
          .filter((d) => d.state === "pending" || d.state === "retry")
          .map((d) => d.dueAt)
          .sort(),
      ).toEqual([
        "2027-01-12T07:45:00.000Z",
        "2027-01-19T07:45:00.000Z",
        "2027-02-02T07:45:00.000Z",
        "2027-02-16T07:45:00.000Z",
      ]);
      expect(standup.filter((d) => d.state === "sent").map((d) => [d.id, d.dueAt])).toEqual(
        sent.map((d) => [d.id, d.dueAt]),
      );
    };
    await expectWaiting();
    await tick(); // the scheduler's next pass plans nothing more
    await expectWaiting();
  });

  it("DEL-9: importing the edited file again changes nothing more", async () => {
    const before = await allDeliveries();
    const res = await importRequest(read("team-v2.ics"), teamOptions);
    const body = (await res.json()) as ImportSummary;
    expect(body).toMatchObject({ created: 0, updated: 0, unchanged: 1, cancelled: 0 });
    await tick();
    expect((await allDeliveries()).map((d) => [d.id, d.dueAt, d.state])).toEqual(
      before.map((d) => [d.id, d.dueAt, d.state]),
    );
  });
});

describe("API-5 an event that comes back", () => {
  it("DEL-10: an event removed from the calendar and later restored is the same schedule again, active, with its reminders", async () => {
    const res = await importRequest(read("team-v1.ics"), teamOptions);
    const body = (await res.json()) as ImportSummary;
    expect(body).toMatchObject({ created: 0, updated: 2, cancelled: 0 });
    const review = body.schedules.find((s) => s.uid === REVIEW)!;
    const schedule = await punctual.getSchedule(review.scheduleId!);
    expect(schedule.state).toBe("active");
    expect(schedule.cancelledAt).toBeNull();
    const rows = (await punctual.listDeliveries({ scheduleId: schedule.id })).items;
    expect(rows.some((d) => d.state === "pending")).toBe(true);
    // And once more: nothing changes.
    const again = (await (
      await importRequest(read("team-v1.ics"), teamOptions)
    ).json()) as ImportSummary;
    expect(again).toMatchObject({ created: 0, updated: 0, unchanged: 2, cancelled: 0 });
  });
});

describe("API-5 a schedule a person cancelled", () => {
  it("DEL-10: a re-import never revives a schedule a user cancelled", async () => {
    const first = (await (
      await importRequest(read("team-v1.ics"), teamOptions)
    ).json()) as ImportSummary;
    const standup = first.schedules.find((s) => s.uid === STANDUP)!;
    await punctual.cancelSchedule(standup.scheduleId!);
    const again = (await (
      await importRequest(read("team-v1.ics"), teamOptions)
    ).json()) as ImportSummary;
    expect(again.updated).toBe(0);
    expect(again.skipped.map((s) => s.reason).join(" ")).toMatch(/cancelled by a user/);
    expect((await punctual.getSchedule(standup.scheduleId!)).state).toBe("cancelled");
  });
});

describe("API-5 an event that cannot be read this time", () => {
  it("DEL-10: a re-import that skips an event as unreadable keeps its schedule, with a warning, instead of cancelling it as gone", async () => {
    const options = { ...teamOptions, source: "team-unreadable" };
    const first = (await (
      await importRequest(read("team-v1.ics"), options)
    ).json()) as ImportSummary;
    const standup = first.schedules.find((s) => s.uid === STANDUP)!.scheduleId!;
    // An edited export with the series' rule broken: the event is still in the file.
    const broken = read("team-v1.ics").replace(
      "RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=6",
      "RRULE:FREQ=WEEKLY;BYDAY=XX;COUNT=6",
    );
    const again = (await (await importRequest(broken, options)).json()) as ImportSummary;
    expect(again.skipped.map((e) => e.uid)).toEqual([STANDUP]);
    expect(again.cancelled).toBe(0);
    expect(again.warnings.join(" ")).toContain(`schedule ${standup} is kept as it was`);
    expect((await punctual.getSchedule(standup)).state).toBe("active");
    // Gone from the file (not merely unreadable), it is cancelled as before.
    const without = read("team-v1.ics").replace(
      /BEGIN:VEVENT\r?\nUID:weekly-standup[\s\S]*?END:VEVENT\r?\n/,
      "",
    );
    const gone = (await (await importRequest(without, options)).json()) as ImportSummary;
    expect(gone.cancelled).toBe(1);
    expect((await punctual.getSchedule(standup)).state).toBe("cancelled");
  });
});

describe("API-5 a cut-off file", () => {
  it("DEL-10: a file that ends before END:VCALENDAR cancels nothing it does not contain", async () => {
    const full = read("team-v1.ics");
    const cut = full.slice(0, full.indexOf("END:VEVENT"));
    const res = await importRequest(cut, teamOptions);
    const body = (await res.json()) as ImportSummary;
    expect(body.cancelled).toBe(0);
    expect(body.warnings.join(" ")).toMatch(/cut off/);
  });
});

describe("API-5 an imported schedule edited by hand", () => {
  it("API-5: the calendar wins once, then re-imports are no-ops again", async () => {
    const first = (await (
      await importRequest(read("team-v1.ics"), teamOptions)
    ).json()) as ImportSummary;
    const review = first.schedules.find((s) => s.uid === REVIEW)!;
    const before = await punctual.getSchedule(review.scheduleId!);
    await punctual.updateSchedule(
      before.id,
      { graceMs: 60_000, payload: { edited: true } },
      { version: before.version },
    );
    const second = (await (
      await importRequest(read("team-v1.ics"), teamOptions)
    ).json()) as ImportSummary;
    expect(second.updated).toBe(1);
    const restored = await punctual.getSchedule(before.id);
    expect(restored.graceMs).toBe(before.graceMs);
    expect(restored.payload).toEqual(before.payload);
    const third = (await (
      await importRequest(read("team-v1.ics"), teamOptions)
    ).json()) as ImportSummary;
    expect(third).toMatchObject({ updated: 0, created: 0 });
    expect((await punctual.getSchedule(before.id)).version).toBe(restored.version);
  });
});

describe("API-5 dry run", () => {
  it("API-5: dryRun=true answers the deliveries of [from, to) in the contract shape and stores nothing", async () => {
    const schedulesBefore = (await punctual.listSchedules({ limit: 1000 })).items.length;
    const res = await importRequest(read("dry-run-contract.ics"), {
      source: "contract",
      remind: "-PT15M",
      channel: "log",
      tzid: "Europe/Berlin",
      dryRun: "true",
      from: "2027-02-20T00:00:00Z",
      to: "2027-03-20T00:00:00Z",
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      from: string;
      to: string;
      deliveries: DryRunDelivery[];
      skipped: Array<{ uid: string | null; line: number | null; reason: string }>;
      events: number;
      floatingTzid: string;
    };
    expect(body.from).toBe("2027-02-20T00:00:00.000Z");
    expect(body.to).toBe("2027-03-20T00:00:00.000Z");
    expect(body.floatingTzid).toBe("Europe/Berlin");
    expect(body.events).toBe(3);
    const r = "remind--PT15M";
    expect(body.deliveries).toEqual([
      {
        uid: "market-day@punctual.test",
        recurrenceId: null,
        occurrenceAt: "2027-03-01",
        dueAt: "2027-02-28T22:45:00Z",
        reminderKey: r,
      },
      {
        uid: "alpha@punctual.test",
        recurrenceId: null,
        occurrenceAt: "2027-03-02T15:00:00Z",
        dueAt: "2027-03-02T14:45:00Z",
        reminderKey: r,
      },
      {
        uid: "sync@punctual.test",
        recurrenceId: null,
        occurrenceAt: "2027-03-02T15:00:00Z",
        dueAt: "2027-03-02T14:45:00Z",
        reminderKey: r,
      },
      {
        uid: "market-day@punctual.test",
        recurrenceId: null,
        occurrenceAt: "2027-03-08",
        dueAt: "2027-03-07T22:45:00Z",
        reminderKey: r,
      },
      {
        uid: "sync@punctual.test",
        recurrenceId: "20270309T100000",
        occurrenceAt: "2027-03-10T20:00:00Z",
        dueAt: "2027-03-10T19:45:00Z",
        reminderKey: r,
      },
      {
        uid: "market-day@punctual.test",
        recurrenceId: null,
        occurrenceAt: "2027-03-15",
        dueAt: "2027-03-14T22:45:00Z",
        reminderKey: r,
      },
      {
        uid: "sync@punctual.test",
        recurrenceId: null,
        occurrenceAt: "2027-03-16T14:00:00Z",
        dueAt: "2027-03-16T13:45:00Z",
        reminderKey: r,
      },
    ]);
    expect(body.skipped).toEqual([
      { uid: "broken@punctual.test", line: 36, reason: expect.stringMatching(/UNTL/) },
    ]);
    expect((await punctual.listSchedules({ limit: 1000 })).items).toHaveLength(schedulesBefore);
  });

  it("API-5: without from/to the window is [now, now + 30 days)", async () => {
    const now = clock.now();
    const res = await importRequest(read("team-v1.ics"), { ...teamOptions, dryRun: "true" });
    const body = (await res.json()) as { from: string; to: string; deliveries: DryRunDelivery[] };
    expect([body.from, body.to]).toEqual([
      new Date(now).toISOString(),
      new Date(now + 30 * 86_400_000).toISOString(),
    ]);
    expect(body.deliveries.length).toBeGreaterThan(0);
    for (const d of body.deliveries) {
      const at = Date.parse(d.occurrenceAt);
      expect(at >= now && at < now + 30 * 86_400_000).toBe(true);
    }
  });

  it("API-5: a calendar larger than the API's 1 MiB body limit is accepted by the import route", async () => {
    const events = Array.from(
      { length: 1_500 },
      (_, i) =>
        `BEGIN:VEVENT\r\nUID:big-${i}@punctual.test\r\nDTSTART:20270301T${String(i % 24).padStart(2, "0")}0000Z\r\n` +
        `DURATION:PT1H\r\nSUMMARY:Event ${i}\r\nDESCRIPTION:${"x".repeat(70)}\r\n ${"y".repeat(600)}\r\nEND:VEVENT\r\n`,
    ).join("");
    const text = `BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//punctual tests//big//EN\r\n${events}END:VCALENDAR\r\n`;
    expect(Buffer.byteLength(text)).toBeGreaterThan(punctual.config.api.bodyLimitBytes);
    const res = await importRequest(text, {
      source: "big",
      remind: "-PT15M",
      channel: "log",
      dryRun: "true",
      from: "2027-03-01T00:00:00Z",
      to: "2027-03-02T00:00:00Z",
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { deliveries: DryRunDelivery[]; events: number };
    expect(body.events).toBe(1_500);
    expect(body.deliveries).toHaveLength(1_500);
    // The other routes keep their limit.
    const other = await app.request("/v1/schedules", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ padding: text }),
    });
    expect(other.status).toBe(413);
  });
});

describe("API-5 refusals: strict with people, lenient with files", () => {
  it("API-5: a body that is not iCalendar is 400 VALIDATION_FAILED naming `file`", async () => {
    const res = await importRequest(read("not-a-calendar.txt"), teamOptions);
    expect(res.status).toBe(400);
    expect(await fieldsOf(res)).toEqual(["file"]);
  });

  it.each([
    ["a bad remind offset", { remind: ["-PT15M", "soon"] }, ["remind.1"]],
    ["an unknown zone", { tzid: "Mars/Olympus_Mons" }, ["tzid"]],
    ["no source", { source: undefined }, ["source"]],
    ["an unknown channel", { channel: "pigeon" }, ["channel"]],
    ["no reminder at all", { remind: undefined }, ["remind"]],
    ["a webhook without a target", { channel: "webhook" }, ["target"]],
    ["a webhook target that is not a URL", { channel: "webhook", target: "nope" }, ["target"]],
    ["a target with the log channel", { target: "https://example.com/hook" }, ["target"]],
    ["from without dryRun", { from: "2027-01-01T00:00:00Z" }, ["from"]],
    ["a bad dryRun flag", { dryRun: "yes" }, ["dryRun"]],
    [
      "to before from",
      { dryRun: "true", from: "2027-02-01T00:00:00Z", to: "2027-01-01T00:00:00Z" },
      ["to"],
    ],
    ["an unknown parameter", { remnd: "-PT15M" }, ["remnd"]],
  ])("API-5: %s is 400 naming the parameter", async (_name, change, fields) => {
    const query: Record<string, string | string[]> = {};
    for (const [key, value] of Object.entries({ ...teamOptions, ...change })) {
      if (value !== undefined) query[key] = value;
    }
    const res = await importRequest(read("team-v1.ics"), query);
    expect(res.status).toBe(400);
    expect(await fieldsOf(res)).toEqual(fields);
  });

  it("API-5, API-7: text/calendar with a charset is accepted; text/plain and application/octet-stream are 415, as JSON is", async () => {
    const query = { ...teamOptions, source: "media", dryRun: "true" };
    const ok = await importRequest(read("team-v1.ics"), query, {
      "content-type": "Text/Calendar; charset=utf-8",
    });
    expect(ok.status).toBe(200);
    for (const type of ["text/plain; charset=utf-8", "application/octet-stream"]) {
      const res = await importRequest(read("team-v1.ics"), query, { "content-type": type });
      expect(res.status).toBe(415);
    }
    const json = await importRequest(read("team-v1.ics"), query, {
      "content-type": "application/json",
    });
    expect(json.status).toBe(415);
    expect(((await json.json()) as ErrorBody).error.code).toBe("UNSUPPORTED_MEDIA_TYPE");
  });

  it("API-5: one bad event is skipped with its UID, line and reason; the rest imports", async () => {
    const res = await importRequest(read("dry-run-contract.ics"), {
      source: "contract",
      remind: "-PT15M",
      channel: "log",
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as ImportSummary;
    expect(body.created).toBe(3);
    expect(body.skipped).toEqual([
      { uid: "broken@punctual.test", line: 36, reason: expect.stringMatching(/UNTL/) },
    ]);
  });

  it("API-2: the import route requires the API key when one is configured", async () => {
    const securedApp = createApi(secured);
    const without = await importRequest(read("team-v1.ics"), teamOptions, undefined, securedApp);
    expect(without.status).toBe(401);
    const withKey = await importRequest(
      read("team-v1.ics"),
      { ...teamOptions, dryRun: "true" },
      { "content-type": "text/calendar", authorization: `Bearer ${API_KEY}` },
      securedApp,
    );
    expect(withKey.status).toBe(200);
  });

  it("API-1: the OpenAPI document describes POST /v1/imports and GET /v1/imports/{id}", async () => {
    const doc = (await (await app.request("/openapi.json")).json()) as {
      paths: Record<
        string,
        Record<string, { parameters: Array<{ name: string }>; responses: Record<string, unknown> }>
      >;
    };
    const op = doc.paths["/v1/imports"]?.post;
    expect(op?.parameters.map((p) => p.name).sort()).toEqual(
      [
        "async",
        "channel",
        "dryRun",
        "from",
        "remind",
        "source",
        "target",
        "to",
        "tzid",
        "useAlarms",
      ].sort(),
    );
    expect(Object.keys(op?.responses ?? {})).toContain("202");
    expect(Object.keys(doc.paths["/v1/imports/{id}"]?.get?.responses ?? {})).toContain("200");
  });
});
