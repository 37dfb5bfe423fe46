/**
 * HTTP API, schedules and deliveries (API-1, DEL-10, DEL-12, REC-7), in process through
 * `app.request()` on an in-memory embedded database and a TestClock.
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
  clock = new TestClock("2027-01-04T08:00:00Z");
  punctual = await createPunctual({ dataDir: null, clock, logger: silentLogger() });
  // The delivery state machine, checked here too (test/support/transitions.ts).
  await installTransitionTrigger(punctual.db);
  app = createApi(punctual);
});

afterAll(async () => {
  await punctual?.close(0);
});

function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  return app.request(path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const logReminder = { key: "r1", offset: "-PT15M", channel: "log" };

const validBody = {
  dtstart: "2027-01-04T09:00:00",
  tzid: "Europe/Berlin",
  rrule: "FREQ=DAILY;COUNT=3",
  payload: { user: 42 },
  reminders: [logReminder],
};

async function issuesOf(res: Response): Promise<string[]> {
  const body = (await res.json()) as ErrorBody;
  expect(body.error.code).toBe("VALIDATION_FAILED");
  return (body.error.issues ?? []).map((i) => i.field);
}

describe("API-1 create a schedule", () => {
  it("API-1: POST /v1/schedules answers 201 with the contract fields", async () => {
    const res = await post("/v1/schedules", validBody);
    expect(res.status).toBe(201);
    const s = (await res.json()) as ScheduleView;
    expect(s).toMatchObject({
      version: 1,
      state: "active",
      dtstart: "2027-01-04T09:00:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=DAILY;COUNT=3",
      payload: { user: 42 },
      reminders: [{ key: "r1", offset: "-PT15M", channel: "log" }],
    });
    expect(s.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers.get("location")).toBe(`/v1/schedules/${s.id}`);
    expect("warnings" in s).toBe(false);
  });

  it("API-1: a zone name in any letter case is stored as the zone database spells it", async () => {
    const res = await post("/v1/schedules", { ...validBody, tzid: "europe/BERLIN" });
    expect(res.status).toBe(201);
    expect(((await res.json()) as ScheduleView).tzid).toBe("Europe/Berlin");
  });

  it("API-1: a one-off whose reminder fell due already is created with a warning that it is sent at once", async () => {
    const { rrule: _rrule, ...oneOff } = validBody;
    const past = await post("/v1/schedules", { ...oneOff, dtstart: "2026-06-01T09:00:00" });
    expect(past.status).toBe(201);
    const body = (await past.json()) as ScheduleView & { warnings?: string[] };
    expect(body.warnings).toEqual([
      "reminder r1 fell due at 2026-06-01T06:45:00.000Z, which has passed: it is sent at once",
    ]);
    const future = await post("/v1/schedules", { ...oneOff, dtstart: "2027-01-05T09:00:00" });
    const futureBody = (await future.json()) as ScheduleView;
    expect("warnings" in futureBody).toBe(false);
    // Moved into the past by an edit: the same warning.
    const moved = await app.request(`/v1/schedules/${futureBody.id}`, {
      method: "PATCH",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ dtstart: "2026-06-01T09:00:00" }),
    });
    expect(((await moved.json()) as { warnings?: string[] }).warnings).toEqual([
      "reminder r1 fell due at 2026-06-01T06:45:00.000Z, which has passed: it is sent at once",
    ]);
    // An edit that leaves the date alone does not repeat it.
    const payloadOnly = await app.request(`/v1/schedules/${futureBody.id}`, {
      method: "PATCH",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ payload: { user: 7 } }),
    });
    expect("warnings" in ((await payloadOnly.json()) as object)).toBe(false);
    // Past its expiry a one-off is skipped, not sent: the warning says so (REC-6).
    const expired = await post("/v1/schedules", {
      ...oneOff,
      dtstart: "2026-06-01T09:00:00",
      expiresAt: "2026-06-01T10:00:00Z",
    });
    expect(((await expired.json()) as { warnings?: string[] }).warnings).toEqual([
      "reminder r1 fell due at 2026-06-01T06:45:00.000Z, which has passed, and the schedule expired at 2026-06-01T10:00:00.000Z: it is skipped (expired), not sent",
    ]);
  });

  it("DEL-11: an unknown channel names the known ones, and for email the setting that enables it, on schedules and recipients", async () => {
    const hint = "the email channel needs an SMTP server: set PUNCTUAL_SMTP_URL";
    const schedule = await post("/v1/schedules", {
      ...validBody,
      reminders: [{ key: "r1", offset: "PT0S", channel: "email" }],
    });
    expect(schedule.status).toBe(400);
    expect(JSON.stringify(await schedule.json())).toContain(hint);
    const recipient = await app.request("/v1/recipients/alice", {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ tzid: "Asia/Tokyo", targets: { email: { to: "alice@example.com" } } }),
    });
    expect(recipient.status).toBe(400);
    const body = (await recipient.json()) as {
      error: { issues: Array<{ field: string; message: string }> };
    };
    expect(body.error.issues).toEqual([
      expect.objectContaining({ field: "targets.email", message: expect.stringContaining(hint) }),
    ]);
  });

  it("API-1: an unbounded series is created with a warning", async () => {
    const res = await post("/v1/schedules", { ...validBody, rrule: "FREQ=WEEKLY" });
    expect(res.status).toBe(201);
    const body = (await res.json()) as ScheduleView & { warnings: string[] };
    expect(body.warnings[0]).toMatch(/unbounded/);
  });

  it.each([
    ["a bad tzid", { tzid: "Mars/Olympus_Mons" }, "tzid"],
    ["a bad rrule part", { rrule: "FREQ=DAILY;BYHOUR=25" }, "rrule.BYHOUR"],
    [
      "a bad offset",
      { reminders: [{ ...logReminder, offset: "15 minutes" }] },
      "reminders.0.offset",
    ],
    [
      "an unknown channel",
      { reminders: [{ ...logReminder, channel: "pigeon" }] },
      "reminders.0.channel",
    ],
    ["missing reminders", { reminders: undefined }, "reminders"],
    [
      "a webhook target on 127.0.0.1 without allowPrivateTargets",
      {
        reminders: [{ key: "r1", channel: "webhook", target: { url: "http://127.0.0.1:9/hook" } }],
      },
      "reminders.0.target.url",
    ],
    ["an unknown field", { colour: "blue" }, "(body)"],
    ["a NUL in the payload", { payload: { note: "a\u0000b" } }, "payload"],
    ["an unpaired surrogate in a payload key", { payload: { "\udc00": 1 } }, "payload"],
    ["an unpaired surrogate in a payload value", { payload: ["ok", "\ud800"] }, "payload"],
    [
      "a NUL in a webhook secret",
      {
        reminders: [
          {
            key: "r1",
            channel: "webhook",
            target: { url: "https://example.com/h", secret: "a\u0000" },
          },
        ],
      },
      "reminders.0.target",
    ],
    ["a NUL in the source", { source: "cal\u0000" }, "source"],
  ])("API-1: 400 names the bad field for %s", async (_what, patch, field) => {
    const res = await post("/v1/schedules", { ...validBody, ...patch });
    expect(res.status).toBe(400);
    expect(await issuesOf(res)).toContain(field);
  });

  it("CH-2: the email channel without an SMTP server is refused naming PUNCTUAL_SMTP_URL", async () => {
    const res = await post("/v1/schedules", {
      ...validBody,
      reminders: [{ ...logReminder, channel: "email", target: { to: "ada@example.com" } }],
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as ErrorBody;
    const issue = body.error.issues?.find((i) => i.field === "reminders.0.channel");
    expect(issue?.message).toContain("PUNCTUAL_SMTP_URL");
  });

  it("API-1: one 400 names several bad fields at once", async () => {
    const res = await post("/v1/schedules", { ...validBody, tzid: "Nowhere/City", reminders: [] });
    expect(res.status).toBe(400);
    const fields = await issuesOf(res);
    expect(fields).toEqual(expect.arrayContaining(["reminders", "tzid"]));
  });

  it("API-1: malformed JSON is 400 INVALID_JSON", async () => {
    const res = await post("/v1/schedules", '{"dtstart": ');
    expect(res.status).toBe(400);
    expect(((await res.json()) as ErrorBody).error.code).toBe("INVALID_JSON");
  });

  it("API-1: a 10 MB body is refused with 413", async () => {
    const res = await post("/v1/schedules", {
      ...validBody,
      payload: "x".repeat(10 * 1024 * 1024),
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as ErrorBody).error.code).toBe("PAYLOAD_TOO_LARGE");
  });
});

describe("API-1 Idempotency-Key", () => {
  it("API-1: a replay with the same key and body returns the same schedule, once", async () => {
    const headers = { "Idempotency-Key": "create-standup-1" };
    const first = await post("/v1/schedules", validBody, headers);
    expect(first.status).toBe(201);
    const created = (await first.json()) as ScheduleView;
    const replay = await post("/v1/schedules", validBody, headers);
    expect(replay.status).toBe(200);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(((await replay.json()) as ScheduleView).id).toBe(created.id);
    const list = await punctual.listSchedules({ limit: 1000 });
    expect(list.items.filter((s) => s.id === created.id)).toHaveLength(1);
  });

  it("API-1: the same key with another body is 422 IDEMPOTENCY_KEY_REUSED", async () => {
    const headers = { "Idempotency-Key": "create-standup-2" };
    expect((await post("/v1/schedules", validBody, headers)).status).toBe(201);
    const res = await post("/v1/schedules", { ...validBody, tzid: "UTC" }, headers);
    expect(res.status).toBe(422);
    expect(((await res.json()) as ErrorBody).error.code).toBe("IDEMPOTENCY_KEY_REUSED");
  });
});

describe("API-1 read, list, cancel, pause, resume", () => {
  it("API-1: GET /v1/schedules/{id} reads; an unknown id is 404 with the error body", async () => {
    const created = (await (await post("/v1/schedules", validBody)).json()) as ScheduleView;
    const res = await app.request(`/v1/schedules/${created.id}`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as ScheduleView).id).toBe(created.id);
    const missing = await app.request("/v1/schedules/00000000-0000-4000-8000-000000000000");
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as ErrorBody).error.code).toBe("NOT_FOUND");
  });

  it("API-1: GET /v1/schedules filters by state and pages with a cursor", async () => {
    const page = await app.request("/v1/schedules?state=active&limit=1");
    expect(page.status).toBe(200);
    const body = (await page.json()) as { items: ScheduleView[]; nextCursor: string | null };
    expect(body.items).toHaveLength(1);
    expect(body.nextCursor).toEqual(expect.any(String));
    const next = await app.request(
      `/v1/schedules?state=active&limit=1&cursor=${encodeURIComponent(body.nextCursor ?? "")}`,
    );
    const nextBody = (await next.json()) as { items: ScheduleView[] };
    expect(nextBody.items[0]?.id).not.toBe(body.items[0]?.id);
    const bad = await app.request("/v1/schedules?limit=0");
    expect(bad.status).toBe(400);
    expect(await issuesOf(bad)).toContain("limit");
  });

  it("API-3: GET lists page newest first over HTTP; limit is digits only; a foreign cursor is a 400", async () => {
    await post("/v1/schedules", { ...validBody, title: "Paging A" });
    await post("/v1/schedules", { ...validBody, title: "paging b" });
    const first = await app.request("/v1/schedules?q=PAGING&order=desc&limit=1");
    expect(first.status).toBe(200);
    const body = (await first.json()) as { items: ScheduleView[]; nextCursor: string };
    const next = await app.request(
      `/v1/schedules?q=PAGING&order=desc&limit=1&cursor=${encodeURIComponent(body.nextCursor)}`,
    );
    const desc = [...body.items, ...((await next.json()) as { items: ScheduleView[] }).items].map(
      (s) => s.id,
    );
    const asc = (
      (await (await app.request("/v1/schedules?q=paging")).json()) as {
        items: ScheduleView[];
      }
    ).items.map((s) => s.id);
    expect(asc).toHaveLength(2);
    expect(desc).toEqual([...asc].reverse());
    const foreign = await app.request(
      `/v1/schedules?q=PAGING&limit=1&cursor=${encodeURIComponent(body.nextCursor)}`,
    );
    expect(foreign.status).toBe(400);
    expect(await issuesOf(foreign)).toEqual(["cursor"]);
    for (const limit of ["1e2", "0x10", "%205", "5.0", "1001"]) {
      for (const path of ["/v1/schedules", "/v1/deliveries"]) {
        const res = await app.request(`${path}?limit=${limit}`);
        expect(res.status).toBe(400);
        expect(await issuesOf(res)).toEqual(["limit"]);
      }
    }
    const due = await app.request("/v1/deliveries?dueFrom=tomorrow&order=desc");
    expect(due.status).toBe(400);
    expect(await issuesOf(due)).toEqual(["dueFrom"]);
    const deliveries = await app.request("/v1/deliveries?order=desc&limit=2&state=pending");
    expect(deliveries.status).toBe(200);
    expect(Object.keys((await deliveries.json()) as object)).toContain("nextCursor");
  });

  it("API-1 DEL-9: PATCH with If-Match edits; an old version is 412 STALE_VERSION", async () => {
    const created = (await (await post("/v1/schedules", validBody)).json()) as ScheduleView;
    const read = await app.request(`/v1/schedules/${created.id}`);
    expect(read.headers.get("etag")).toBe('"1"');
    const patch = (ifMatch: string, body: unknown) =>
      app.request(`/v1/schedules/${created.id}`, {
        method: "PATCH",
        headers: { "content-type": "application/json", "if-match": ifMatch },
        body: JSON.stringify(body),
      });
    const res = await patch('"1"', { rrule: "FREQ=DAILY;COUNT=5" });
    expect(res.status).toBe(200);
    const edited = (await res.json()) as ScheduleView & { realigned: Record<string, number> };
    expect(edited).toMatchObject({
      version: 2,
      rrule: "FREQ=DAILY;COUNT=5",
      tzid: "Europe/Berlin",
    });
    expect(edited.reminders.map((r) => r.key)).toEqual(["r1"]);
    expect(edited.realigned).toEqual(expect.objectContaining({ deleted: expect.any(Number) }));
    const stale = await patch('"1"', { rrule: "FREQ=DAILY;COUNT=2" });
    expect(stale.status).toBe(412);
    expect(((await stale.json()) as ErrorBody).error.code).toBe("STALE_VERSION");
    const bad = await patch('"2"', { rrule: "FREQ=SOMETIMES" });
    expect(bad.status).toBe(400);
    expect((await issuesOf(bad)).some((f) => f.startsWith("rrule"))).toBe(true);
  });

  it("API-1 DEL-9: a PATCH that changes nothing writes nothing: the version and ETag stay", async () => {
    const created = (await (await post("/v1/schedules", validBody)).json()) as ScheduleView;
    const patch = (body: unknown) =>
      app.request(`/v1/schedules/${created.id}`, {
        method: "PATCH",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    for (const body of [
      {},
      { payload: { user: 42 } },
      { rrule: "FREQ=DAILY;COUNT=3", tzid: "europe/berlin", reminders: [logReminder] },
    ]) {
      const same = await patch(body);
      expect(same.status, JSON.stringify(body)).toBe(200);
      expect(same.headers.get("etag"), JSON.stringify(body)).toBe('"1"');
      expect(((await same.json()) as ScheduleView).version).toBe(1);
    }
    const changed = await patch({ payload: { user: 43 } });
    expect(((await changed.json()) as ScheduleView).version).toBe(2);
  });

  it("DEL-10: DELETE cancels the schedule and its waiting deliveries", async () => {
    // Due in 30 minutes: planned by the tick, still waiting when cancelled.
    const soon = { dtstart: "2027-01-04T08:30:00Z", reminders: [{ key: "r1", channel: "log" }] };
    const created = (await (await post("/v1/schedules", soon)).json()) as ScheduleView;
    await punctual.scheduler.tick();
    const waiting = await punctual.listDeliveries({ scheduleId: created.id, state: "pending" });
    expect(waiting.items).toHaveLength(1);
    const res = await app.request(`/v1/schedules/${created.id}`, { method: "DELETE" });
    expect(res.status).toBe(200);
    const body = (await res.json()) as ScheduleView & { cancelledDeliveries: number };
    expect(body.state).toBe("cancelled");
    expect(body.cancelledDeliveries).toBe(1);
    const after = await app.request(`/v1/deliveries?scheduleId=${created.id}`);
    const items = ((await after.json()) as { items: DeliveryView[] }).items;
    expect(items.map((d) => d.state)).toEqual(["cancelled"]);
    const again = await app.request(`/v1/schedules/${created.id}`, { method: "DELETE" });
    expect(again.status).toBe(200);
  });

  it("DEL-10: pause and resume; resuming an active schedule changes nothing", async () => {
    const created = (await (await post("/v1/schedules", validBody)).json()) as ScheduleView;
    const paused = await post(`/v1/schedules/${created.id}/pause`, undefined);
    expect(paused.status).toBe(200);
    expect(((await paused.json()) as ScheduleView).state).toBe("paused");
    const resumed = await post(`/v1/schedules/${created.id}/resume`, undefined);
    expect(((await resumed.json()) as ScheduleView).state).toBe("active");
    await app.request(`/v1/schedules/${created.id}`, { method: "DELETE" });
    const conflict = await post(`/v1/schedules/${created.id}/pause`, undefined);
    expect(conflict.status).toBe(409);
    expect(((await conflict.json()) as ErrorBody).error.code).toBe("CONFLICT");
  });
});

describe("API-1 deliveries", () => {
  it("API-1: deliveries are listed by schedule after a tick, and read with their attempts", async () => {
    const body = { dtstart: "2027-01-04T08:00:00Z", reminders: [{ key: "now", channel: "log" }] };
    const created = (await (await post("/v1/schedules", body)).json()) as ScheduleView;
    await punctual.scheduler.tick();
    await punctual.scheduler.drain();
    const res = await app.request(`/v1/deliveries?scheduleId=${created.id}&state=sent&limit=10`);
    expect(res.status).toBe(200);
    const list = (await res.json()) as { items: DeliveryView[]; nextAfter: number | null };
    expect(list.items).toHaveLength(1);
    const delivery = list.items[0]!;
    expect(delivery).toMatchObject({ scheduleId: created.id, reminderKey: "now", state: "sent" });
    const detail = await app.request(`/v1/deliveries/${delivery.id}`);
    expect(detail.status).toBe(200);
    const withAttempts = (await detail.json()) as DeliveryView & { attempts: unknown[] };
    expect(withAttempts.attempts).toHaveLength(1);
    expect((await app.request("/v1/deliveries/999999")).status).toBe(404);
    expect((await app.request("/v1/deliveries/not-a-number")).status).toBe(404);
  });

  it("DEL-12: redrive and resolve refuse a sent delivery with 409; a bad outcome is 400", async () => {
    const { items } = await punctual.listDeliveries({ state: "sent", limit: 1 });
    const id = items[0]!.id;
    expect((await post(`/v1/deliveries/${id}/redrive`, undefined)).status).toBe(409);
    expect((await post(`/v1/deliveries/${id}/resolve`, { outcome: "sent" })).status).toBe(409);
    const bad = await post(`/v1/deliveries/${id}/resolve`, { outcome: "maybe" });
    expect(bad.status).toBe(400);
    expect(await issuesOf(bad)).toContain("outcome");
  });

  it("API-1: a bad delivery filter is 400 naming it", async () => {
    const res = await app.request("/v1/deliveries?state=lost");
    expect(res.status).toBe(400);
    expect(await issuesOf(res)).toContain("state");
  });
});

describe("REC-7 preview", () => {
  it("REC-7: POST /v1/preview returns [{instant, local}] with the scheduler's code", async () => {
    const res = await post("/v1/preview", {
      dtstart: "2027-03-26T09:00:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=DAILY",
      count: 3,
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual([
      { instant: "2027-03-26T08:00:00.000Z", local: "2027-03-26T09:00:00" },
      { instant: "2027-03-27T08:00:00.000Z", local: "2027-03-27T09:00:00" },
      { instant: "2027-03-28T07:00:00.000Z", local: "2027-03-28T09:00:00" },
    ]);
  });

  it("REC-7: a bad rule is 400 naming the part", async () => {
    const res = await post("/v1/preview", {
      dtstart: "2027-01-04T09:00:00",
      rrule: "FREQ=DAILY;BYMONTHDAY=40",
    });
    expect(res.status).toBe(400);
    expect(await issuesOf(res)).toContain("rrule.BYMONTHDAY");
  });
});

describe("API-1 routing", () => {
  it("API-1: an unknown route is 404 JSON and a wrong method 405", async () => {
    const res = await app.request("/v2/nothing");
    expect(res.status).toBe(404);
    expect(((await res.json()) as ErrorBody).error.code).toBe("NOT_FOUND");
    const wrong = await app.request("/v1/schedules", { method: "PUT" });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("allow")).toContain("POST");
  });

  it("API-1: /openapi.json is generated and lists every path", async () => {
    const res = await app.request("/openapi.json");
    expect(res.status).toBe(200);
    const doc = (await res.json()) as {
      openapi: string;
      paths: Record<string, Record<string, unknown>>;
    };
    expect(doc.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        "/v1/schedules",
        "/v1/schedules/{id}",
        "/v1/schedules/{id}/pause",
        "/v1/schedules/{id}/resume",
        "/v1/deliveries",
        "/v1/deliveries/{id}",
        "/v1/deliveries/{id}/redrive",
        "/v1/deliveries/{id}/resolve",
        "/v1/preview",
        "/v1/status",
        "/healthz",
        "/readyz",
        "/metrics",
      ]),
    );
    expect(Object.keys(doc.paths["/v1/schedules"]!)).toEqual(
      expect.arrayContaining(["get", "post"]),
    );
    expect(doc.paths["/v1/schedules/{id}"]).toHaveProperty("delete");
    expect(doc.paths["/v1/schedules/{id}"]).toHaveProperty("patch");
  });
});

describe("hostile payloads", () => {
  it("API-1: a payload nested thousands deep is a 400 naming the field, not a 500", async () => {
    // Written by hand: JSON.stringify itself cannot go that deep.
    const payload = "[".repeat(5_000) + "1" + "]".repeat(5_000);
    const res = await post(
      "/v1/schedules",
      `{"dtstart":"2027-01-04T08:00:00Z","payload":${payload},"reminders":[{"key":"r","offset":"-P1Y","channel":"log"}]}`,
    );
    expect(res.status).toBe(400);
    const body = (await res.json()) as ErrorBody;
    expect(body.error.issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: "payload" }),
        expect.objectContaining({ field: "reminders.0.offset", value: "-P1Y" }),
      ]),
    );
    expect((await app.request("/healthz")).status).toBe(200);
  });
});
