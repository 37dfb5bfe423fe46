/**
 * Schedule titles and the list's source filter (API-1, API-3, API-5), over HTTP through
 * `app.request()` on the test engine (PGlite or PostgreSQL, PUNCTUAL_TEST_ENGINE), and the
 * PATCH rule that lets a client send back reminders as it read them (secrets redacted)
 * without losing the stored targets.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import type { ErrorBody, ScheduleView } from "../../../src/contracts/index.js";
import { testPunctual, type TestPunctual } from "../../support/punctual.js";

let t: TestPunctual;
let app: PunctualApi;

beforeAll(async () => {
  t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
  app = createApi(t.punctual);
});

afterAll(async () => {
  await t?.close();
});

function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  return app.request(path, {
    method,
    headers: { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
}

const base = {
  dtstart: "2027-02-01T09:00:00",
  tzid: "Europe/Berlin",
  rrule: "FREQ=WEEKLY;COUNT=4",
  reminders: [{ key: "r1", offset: "-PT15M", channel: "log" }],
};

async function created(body: unknown): Promise<ScheduleView> {
  const res = await call("POST", "/v1/schedules", body);
  expect(res.status).toBe(201);
  return (await res.json()) as ScheduleView;
}

async function fieldsOf(res: Response): Promise<string[]> {
  expect(res.status).toBe(400);
  return (((await res.json()) as ErrorBody).error.issues ?? []).map((i) => i.field);
}

const calendar = (summary: string) =>
  [
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "PRODID:-//titles//EN",
    "BEGIN:VEVENT",
    "UID:sync@titles",
    "DTSTART:20270301T100000Z",
    "DTEND:20270301T110000Z",
    "RRULE:FREQ=WEEKLY;COUNT=3",
    `SUMMARY:${summary}`,
    "END:VEVENT",
    "END:VCALENDAR",
    "",
  ].join("\r\n");

function importAs(source: string, text: string) {
  return app.request(`/v1/imports?source=${source}&remind=-PT15M&channel=log`, {
    method: "POST",
    headers: { "content-type": "text/calendar" },
    body: text,
  });
}

describe("API-1 schedule titles", () => {
  it("API-1: a title is stored on create, shown on read and in lists, and absent means null", async () => {
    const s = await created({ ...base, title: "Weekly sync" });
    expect(s.title).toBe("Weekly sync");
    const read = (await (await call("GET", `/v1/schedules/${s.id}`)).json()) as ScheduleView;
    expect(read.title).toBe("Weekly sync");
    const untitled = await created(base);
    expect(untitled.title).toBeNull();
    const list = (await (await call("GET", "/v1/schedules?limit=1000")).json()) as {
      items: ScheduleView[];
    };
    expect(list.items.find((i) => i.id === s.id)?.title).toBe("Weekly sync");
  });

  it("API-1: PATCH changes the title and null removes it; other fields keep their value", async () => {
    const s = await created({ ...base, title: "Old" });
    const renamed = await call("PATCH", `/v1/schedules/${s.id}`, { title: "New" });
    expect(renamed.status).toBe(200);
    const body = (await renamed.json()) as ScheduleView;
    expect(body).toMatchObject({ title: "New", version: 2, rrule: base.rrule });
    // A PATCH sending the same title again writes nothing.
    const same = (await (
      await call("PATCH", `/v1/schedules/${s.id}`, { title: "New" })
    ).json()) as ScheduleView;
    expect(same.version).toBe(2);
    const removed = (await (
      await call("PATCH", `/v1/schedules/${s.id}`, { title: null })
    ).json()) as ScheduleView;
    expect(removed).toMatchObject({ title: null, version: 3 });
  });

  it("API-1 API-7: a title with a NUL, a lone surrogate or a control character (terminal escapes, line breaks), an empty or blank one or one over 500 characters is refused naming the field", async () => {
    for (const title of [
      "a\u0000b",
      "x\ud800",
      "\udc00y",
      "",
      "t".repeat(501),
      "   ",
      "ok\u001b[31mRED",
      "line\r\nfake line",
      "bell\u0007",
      "c1\u009b",
    ]) {
      expect(await fieldsOf(await call("POST", "/v1/schedules", { ...base, title }))).toEqual([
        "title",
      ]);
    }
    // A raw body with an escaped lone surrogate is refused the same way.
    const raw = JSON.stringify({ ...base, title: "PLACEHOLDER" }).replace("PLACEHOLDER", "\\ud83d");
    expect(await fieldsOf(await call("POST", "/v1/schedules", raw))).toEqual(["title"]);
    const s = await created({ ...base, title: "t".repeat(500) });
    expect(s.title).toHaveLength(500);
    expect(
      await fieldsOf(await call("PATCH", `/v1/schedules/${s.id}`, { title: "a\u0000" })),
    ).toEqual(["title"]);
  });

  it("API-1: the same Idempotency-Key with another title is another body (422); with the same title a replay", async () => {
    const headers = { "idempotency-key": "title-key-1" };
    const first = await call("POST", "/v1/schedules", { ...base, title: "A" }, headers);
    expect(first.status).toBe(201);
    const replay = await call("POST", "/v1/schedules", { ...base, title: "A" }, headers);
    expect(replay.status).toBe(200);
    const other = await call("POST", "/v1/schedules", { ...base, title: "B" }, headers);
    expect(other.status).toBe(422);
  });

  it("API-9: an upsert by external id sets the title, changes it, and leaving it out removes it", async () => {
    const path = "/v1/schedules/by-external-id/crm/meeting-1";
    const made = await call("PUT", path, { ...base, title: "Kick-off" });
    expect(made.status).toBe(201);
    expect(((await made.json()) as ScheduleView).title).toBe("Kick-off");
    const renamed = (await (
      await call("PUT", path, { ...base, title: "Kick-off (moved)" })
    ).json()) as ScheduleView;
    expect(renamed.title).toBe("Kick-off (moved)");
    const unchanged = (await (
      await call("PUT", path, { ...base, title: "Kick-off (moved)" })
    ).json()) as ScheduleView & { changed?: boolean };
    expect(unchanged.version).toBe(renamed.version);
    const cleared = (await (await call("PUT", path, base)).json()) as ScheduleView;
    expect(cleared.title).toBeNull();
  });

  it("API-5: an import keeps each event's SUMMARY as the title; an edited SUMMARY updates it; the same file changes nothing", async () => {
    const first = await importAs("titles-cal", calendar("Team sync"));
    expect(first.status).toBe(200);
    expect(await first.json()).toMatchObject({ created: 1 });
    const list = async () =>
      (
        (await (await call("GET", "/v1/schedules?source=titles-cal")).json()) as {
          items: ScheduleView[];
        }
      ).items;
    expect((await list()).map((s) => s.title)).toEqual(["Team sync"]);
    const again = await importAs("titles-cal", calendar("Team sync"));
    expect(await again.json()).toMatchObject({ created: 0, updated: 0, unchanged: 1 });
    const edited = await importAs("titles-cal", calendar("Team sync (room 2)"));
    expect(await edited.json()).toMatchObject({ updated: 1 });
    expect((await list()).map((s) => s.title)).toEqual(["Team sync (room 2)"]);
  });

  it("API-5 API-7: control characters of a SUMMARY (escapes, bells) become spaces in the title; the event is still imported", async () => {
    const res = await importAs("titles-ctl", calendar("ok\u001b[31mRED\u0007done"));
    expect(await res.json()).toMatchObject({ created: 1, skipped: [] });
    const list = (await (await call("GET", "/v1/schedules?source=titles-ctl")).json()) as {
      items: ScheduleView[];
    };
    expect(list.items[0]?.title).toBe("ok [31mRED done");
  });

  it("API-5: a SUMMARY longer than a title may be is cut to 500 characters, not skipped", async () => {
    const res = await importAs("titles-long", calendar("s".repeat(700)));
    expect(await res.json()).toMatchObject({ created: 1, skipped: [] });
    const list = (await (await call("GET", "/v1/schedules?source=titles-long")).json()) as {
      items: ScheduleView[];
    };
    expect(list.items[0]?.title).toBe("s".repeat(500));
  });
});

describe("API-3 list schedules by source and state", () => {
  it("API-3: ?source= lists only that source's schedules, combined with ?state=, within the tenant", async () => {
    const a = await call("PUT", "/v1/schedules/by-external-id/src-a/1", base);
    const b = await call("PUT", "/v1/schedules/by-external-id/src-a/2", base);
    await call("PUT", "/v1/schedules/by-external-id/src-b/1", base);
    const idA = ((await a.json()) as ScheduleView).id;
    const idB = ((await b.json()) as ScheduleView).id;
    expect((await call("POST", `/v1/schedules/${idB}/pause`)).status).toBe(200);
    const ids = async (query: string) =>
      (
        (await (await call("GET", `/v1/schedules?${query}`)).json()) as { items: ScheduleView[] }
      ).items.map((s) => s.id);
    // Same created_at on the test clock: the page is ordered by id then.
    expect(await ids("source=src-a")).toEqual([idA, idB].sort());
    expect(await ids("source=src-a&state=paused")).toEqual([idB]);
    expect(await ids("source=src-a&state=cancelled")).toEqual([]);
    expect(await ids("source=nothing-here")).toEqual([]);
    // Another tenant with the same source sees none of these.
    const other = await t.punctual.listSchedules({ source: "src-a" }, { tenant: "other" });
    expect(other.items).toEqual([]);
    await t.punctual.upsertScheduleByExternalId("src-a", "1", base, { tenant: "other" });
    const mine = await t.punctual.listSchedules({ source: "src-a" }, { tenant: "other" });
    expect(mine.items.map((s) => s.id)).not.toContain(idA);
    expect(mine.items).toHaveLength(1);
  });
});

describe("API-1 reminders sent back as read", () => {
  it("API-1: a reminder sent back whole, exactly as a read returned it (nulls included), is accepted and keeps what it had", async () => {
    const s = await created({
      ...base,
      reminders: [
        {
          key: "hook",
          offset: "-PT15M",
          channel: "webhook",
          target: { url: "http://127.0.0.1:9/h" },
        },
      ],
    });
    const read = s.reminders[0]!;
    expect(read).toMatchObject({ template: null, rateLimitKey: null, delivery: null });
    const res = await call("PATCH", `/v1/schedules/${s.id}`, { reminders: [read] });
    expect(res.status).toBe(200);
    const after = (await res.json()) as { reminders: Array<Record<string, unknown>> };
    expect(after.reminders).toEqual([read]);
  });

  it("API-1 DEL-9: a PATCH with a reminder's target as the API showed it (secret redacted) keeps the stored secret", async () => {
    const secret = "whsec_c2VudC1iYWNrLWFzLXJlYWQtc2VjcmV0";
    const s = await created({
      ...base,
      reminders: [
        {
          key: "hook",
          offset: "-PT15M",
          channel: "webhook",
          target: { url: "http://127.0.0.1:9/hook", secret },
        },
      ],
    });
    expect(s.reminders[0]!.target).toEqual({
      url: "http://127.0.0.1:9/hook",
      secret: "[redacted]",
    });
    const stored = async () =>
      (
        await t.punctual.db.query<{ key: string; target: Record<string, unknown> }>(
          "select key, target from punctual_reminders where schedule_id = $1 order by key",
          [s.id],
        )
      ).rows;
    // Sent back as read, plus one new reminder: the stored secret stays.
    const res = await call("PATCH", `/v1/schedules/${s.id}`, {
      reminders: [
        // The fields a client read, the target exactly as shown.
        { key: "hook", offset: "-PT30M", channel: "webhook", target: s.reminders[0]!.target },
        { key: "log", offset: "-PT5M", channel: "log" },
      ],
    });
    expect(res.status).toBe(200);
    expect(await stored()).toEqual([
      { key: "hook", target: { url: "http://127.0.0.1:9/hook", secret } },
      { key: "log", target: {} },
    ]);
    // A target that differs from what was shown is taken as sent.
    const other = "whsec_YW5vdGhlci1zZWNyZXQtdmFsdWUtaGVyZQ";
    await call("PATCH", `/v1/schedules/${s.id}`, {
      reminders: [
        {
          key: "hook",
          offset: "-PT30M",
          channel: "webhook",
          target: { url: "http://127.0.0.1:9/hook", secret: other },
        },
      ],
    });
    expect((await stored())[0]!.target).toEqual({ url: "http://127.0.0.1:9/hook", secret: other });
    // The redacted form under another key is not a way to copy a secret.
    const copy = await call("PATCH", `/v1/schedules/${s.id}`, {
      reminders: [
        {
          key: "copy",
          offset: "-PT30M",
          channel: "webhook",
          target: { url: "http://127.0.0.1:9/hook", secret: "[redacted]" },
        },
      ],
    });
    if (copy.status === 200) {
      expect((await stored())[0]!.target).toEqual({
        url: "http://127.0.0.1:9/hook",
        secret: "[redacted]",
      });
    } else {
      expect(copy.status).toBe(400);
    }
  });
});
