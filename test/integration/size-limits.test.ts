/**
 * Field limits on every way in, and lists bounded in bytes (API-1, API-3, API-5), on the
 * engine of this run (npm test runs the file on PGlite and on PostgreSQL): a real large
 * import with fields at and over the limits, the library's bulk create, and a list of many
 * schedules with fields at their maximum.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../src/api/server.js";
import type { ImportSummary } from "../../src/app/import.js";
import {
  jsonBytes,
  LIST_FIELD_MAX_BYTES,
  LIST_PAGE_MAX_BYTES,
  MAX_EVENT_DESCRIPTION_CHARS,
  MAX_EVENT_TEXT_CHARS,
  MAX_PAYLOAD_BYTES,
  MAX_TITLE_CHARS,
  type ErrorBody,
  type ScheduleView,
} from "../../src/contracts/index.js";
import { ValidationError } from "../../src/errors/index.js";
import type { Database, QueryOptions, QueryResult } from "../../src/store/database.js";
import { testPunctual, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual;
let app: PunctualApi;
/** Bytes (as JSON text) of every row the database handed to this process. */
let fetched = 0;

/** `db`, counting the bytes of the rows its statements return in {@link fetched}. */
function counting(db: Database): Database {
  return {
    get engine() {
      return db.engine;
    },
    get description() {
      return db.description;
    },
    async query<T>(
      sql: string,
      params?: readonly unknown[],
      options?: QueryOptions,
    ): Promise<QueryResult<T>> {
      const result = await db.query<T>(sql, params, options);
      fetched += Buffer.byteLength(
        JSON.stringify(result.rows, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)),
      );
      return result;
    },
    transaction: db.transaction.bind(db),
    listen: db.listen.bind(db),
    close: db.close.bind(db),
  } as Database;
}

beforeAll(async () => {
  t = await testPunctual({ wrapDb: counting });
  app = createApi(t.punctual);
});

afterAll(async () => {
  await t?.close();
});

function call(method: string, path: string, body?: unknown, type = "application/json") {
  return app.request(path, {
    method,
    headers: { "content-type": type },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
}

const base = {
  dtstart: "2027-02-01T09:00:00",
  tzid: "UTC",
  rrule: "FREQ=DAILY;COUNT=2",
  reminders: [{ key: "r", offset: "PT0S", channel: "log" }],
};

/** A payload whose JSON text is exactly `bytes` long: `{"s":"xxx…"}`. */
const payloadOf = (bytes: number) => ({ s: "x".repeat(bytes - '{"s":""}'.length) });

/** Largest stored payload (bytes of its JSON text) and title (characters). */
async function largestStored(): Promise<{ payload: number; title: number }> {
  const r = await t.punctual.db.query<{ payload: unknown; title: string | null }>(
    `select payload, title from punctual_schedules`,
  );
  return {
    payload: Math.max(...r.rows.map((x) => jsonBytes(x.payload))),
    title: Math.max(...r.rows.map((x) => x.title?.length ?? 0)),
  };
}

const fold = (line: string): string => {
  // RFC 5545 §3.1: lines of at most 75 octets, continued with a leading space.
  const parts: string[] = [];
  for (let i = 0; i < line.length; i += 70) parts.push(line.slice(i, i + 70));
  return parts.join("\r\n ");
};

function vevent(uid: string, fields: Record<string, string>, hour: number): string {
  const lines = [
    "BEGIN:VEVENT",
    fold(`UID:${uid}`),
    `DTSTART:20270301T${String(hour % 24).padStart(2, "0")}0000Z`,
    "DURATION:PT1H",
    ...Object.entries(fields).map(([k, v]) => fold(`${k}:${v}`)),
    "END:VEVENT",
  ];
  return lines.join("\r\n") + "\r\n";
}

describe("API-1 API-5: the same field limits on every way in", () => {
  it("API-1: a payload over the limit is 400 naming `payload` and its size; one at the limit is created", async () => {
    const over = await call("POST", "/v1/schedules", {
      ...base,
      payload: payloadOf(MAX_PAYLOAD_BYTES + 1),
    });
    expect(over.status).toBe(400);
    const body = (await over.json()) as ErrorBody;
    expect(body.error.issues?.map((i) => i.field)).toEqual(["payload"]);
    expect(body.error.message).toContain(`is ${MAX_PAYLOAD_BYTES + 1}`);
    // Bytes, not characters: 2-byte characters count twice.
    const wide = await call("POST", "/v1/schedules", {
      ...base,
      payload: { s: "é".repeat(MAX_PAYLOAD_BYTES / 2) },
    });
    expect(wide.status).toBe(400);
    const at = await call("POST", "/v1/schedules", {
      ...base,
      payload: payloadOf(MAX_PAYLOAD_BYTES),
    });
    expect(at.status).toBe(201);
    const edit = await call("PATCH", `/v1/schedules/${((await at.json()) as ScheduleView).id}`, {
      payload: payloadOf(MAX_PAYLOAD_BYTES + 1),
    });
    expect(edit.status).toBe(400);
  });

  it("API-1: the library's bulk create refuses a payload or title over the limit, naming the item and field", async () => {
    const { value } = t.punctual.validateSchedule({ ...base, source: "bulk", externalId: "b1" });
    const big = { ...value, payload: payloadOf(MAX_PAYLOAD_BYTES + 1) };
    const long = { ...value, externalId: "b2", title: "t".repeat(MAX_TITLE_CHARS + 1) };
    const err = await t.punctual.createSchedulesBulk([value, big, long]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues.map((i) => i.field)).toEqual(["1.payload", "2.title"]);
    const r = await t.punctual.db.query(`select 1 from punctual_schedules where source = 'bulk'`);
    expect(r.rows).toHaveLength(0);
  });

  it("API-5: a large import: events at the limits are created, each over one is skipped with a warning naming its UID, field and size", async () => {
    const atLimit = 40;
    const events: string[] = [];
    for (let i = 0; i < atLimit; i++) {
      events.push(
        vevent(
          `at-${i}@size.test`,
          {
            SUMMARY: "s".repeat(MAX_EVENT_TEXT_CHARS),
            LOCATION: "l".repeat(MAX_EVENT_TEXT_CHARS),
            DESCRIPTION: "d".repeat(MAX_EVENT_DESCRIPTION_CHARS),
          },
          i,
        ),
      );
    }
    const over: Array<[string, string, number]> = [
      ["SUMMARY", "over-summary@size.test", MAX_EVENT_TEXT_CHARS + 1],
      ["LOCATION", "over-location@size.test", MAX_EVENT_TEXT_CHARS * 10],
      ["DESCRIPTION", "over-description@size.test", MAX_EVENT_DESCRIPTION_CHARS + 1],
      ["SUMMARY", "huge-summary@size.test", 2 * 1024 * 1024],
    ];
    over.forEach(([field, uid, size], i) =>
      events.push(vevent(uid, { [field]: "o".repeat(size) }, i)),
    );
    const longUid = "u".repeat(1_001);
    events.push(vevent(longUid, { SUMMARY: "long uid" }, 5));
    const text = `BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//punctual tests//size//EN\r\n${events.join("")}END:VCALENDAR\r\n`;
    expect(Buffer.byteLength(text)).toBeGreaterThan(2 * 1024 * 1024);
    const res = await call(
      "POST",
      "/v1/imports?source=size-cal&remind=-PT15M&channel=log",
      text,
      "text/calendar",
    );
    expect(res.status).toBe(200);
    const summary = (await res.json()) as ImportSummary;
    expect(summary.created).toBe(atLimit);
    for (const [field, uid, size] of over) {
      const skip = summary.skipped.find((s) => s.uid === uid);
      expect(skip?.reason).toContain(`${field} is ${size} characters`);
      expect(
        summary.warnings.some((w) => w.includes(uid) && w.includes(`${field} is ${size}`)),
      ).toBe(true);
    }
    const uidSkip = summary.skipped.find((s) => s.uid?.startsWith("uuuu"));
    expect(uidSkip?.reason).toContain("UID is 1001 characters");
    expect(uidSkip?.uid?.length).toBeLessThan(100);
    // Nothing stored passes a limit, and the answer does not repeat the oversize text.
    const stored = await largestStored();
    expect(stored.payload).toBeLessThanOrEqual(MAX_PAYLOAD_BYTES);
    expect(stored.title).toBeLessThanOrEqual(MAX_TITLE_CHARS);
    expect(JSON.stringify(summary).length).toBeLessThan(200_000);
  });
});

describe("API-3: list answers are bounded in bytes", () => {
  it("API-3: a list of many max-size schedules leaves large fields out (marked) and stays under its byte bound; the single read has them", async () => {
    const n = 30;
    const template = { subject: "s", text: `{{ payload.s | size }} ${"t".repeat(60_000)}` };
    const exdate = Array.from({ length: 150 }, (_, i) =>
      new Date(Date.UTC(2028, 0, 1 + i, 9)).toISOString().slice(0, 19),
    );
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const res = await call("POST", "/v1/schedules", {
        ...base,
        source: "size-list",
        rrule: "FREQ=DAILY;COUNT=400",
        exdate,
        payload: payloadOf(MAX_PAYLOAD_BYTES),
        reminders: [0, 1, 2, 3].map((k) => ({
          key: `r${k}`,
          offset: `-PT${k + 1}M`,
          channel: "log",
          template,
        })),
      });
      expect(res.status).toBe(201);
      ids.push(((await res.json()) as ScheduleView).id);
    }
    const res = await call("GET", "/v1/schedules?source=size-list&limit=1000");
    expect(res.status).toBe(200);
    const text = await res.text();
    // Stored: n × (64 KiB payload + 4 × 60 KiB templates) ≈ 9 MB. Listed: a few KiB each.
    const perItem = 16 * 1024;
    expect(Buffer.byteLength(text)).toBeLessThan(n * perItem);
    expect(Buffer.byteLength(text)).toBeLessThan(LIST_PAGE_MAX_BYTES);
    const list = JSON.parse(text) as { items: ScheduleView[] };
    expect(list.items).toHaveLength(n);
    for (const item of list.items) {
      expect(item).toMatchObject({ payload: null, payloadTruncated: true });
      expect(item.exdate).toEqual([]);
      expect(item.exdateTruncated).toBe(true);
      for (const r of item.reminders)
        expect(r).toMatchObject({ template: null, templateTruncated: true });
    }
    // The single read shows every field whole, unmarked.
    const one = (await (await call("GET", `/v1/schedules/${ids[0]}`)).json()) as ScheduleView;
    expect(one.payload).toEqual(payloadOf(MAX_PAYLOAD_BYTES));
    expect(one.reminders[0]?.template).toEqual(template);
    expect("payloadTruncated" in one).toBe(false);
  });

  it("API-3: small fields are listed as stored, unmarked", async () => {
    const small = { ...base, source: "size-small", payload: payloadOf(LIST_FIELD_MAX_BYTES - 100) };
    expect((await call("POST", "/v1/schedules", small)).status).toBe(201);
    const list = (await (await call("GET", "/v1/schedules?source=size-small")).json()) as {
      items: ScheduleView[];
    };
    expect(list.items[0]?.payload).toEqual(small.payload);
    expect("payloadTruncated" in list.items[0]!).toBe(false);
    expect("templateTruncated" in list.items[0]!.reminders[0]!).toBe(false);
  });

  it("API-3 API-5: 8 lists at once over a large import and max-size schedules each read a bounded amount from the database, whatever is stored", async () => {
    // What the tests above stored: a large import at the limits, 30 schedules of 64 KiB
    // payloads and 4 × 60 KiB templates. Each list below asks for all of it.
    const stored = await t.punctual.db.query<{ n: string }>(
      `select (select coalesce(sum(octet_length(payload::text)), 0) from punctual_schedules) +
              (select coalesce(sum(octet_length(template::text)), 0) from punctual_reminders) as n`,
    );
    expect(Number(stored.rows[0]!.n)).toBeGreaterThan(8 * 1024 * 1024);
    const paths = [
      "/v1/schedules?limit=1000",
      "/v1/schedules?limit=1000&order=desc",
      "/v1/schedules?source=size-list&limit=1000",
      "/v1/schedules?source=size-cal&limit=1000",
      "/v1/deliveries?limit=1000",
      "/v1/deliveries?limit=1000&order=desc",
      "/v1/schedules?limit=1000&q=at-",
      "/v1/schedules?limit=500",
    ];
    for (const path of paths) {
      fetched = 0;
      const res = await call("GET", path);
      expect(res.status).toBe(200);
      expect(Buffer.byteLength(await res.text())).toBeLessThan(LIST_PAGE_MAX_BYTES);
      // The statements answered, and with a bounded amount: large fields stay in the database.
      expect(fetched, path).toBeGreaterThan(0);
      expect(fetched, path).toBeLessThan(1024 * 1024);
    }
    fetched = 0;
    const all = await Promise.all(paths.map((path) => call("GET", path)));
    const sizes = await Promise.all(all.map(async (r) => Buffer.byteLength(await r.text())));
    expect(all.map((r) => r.status)).toEqual(paths.map(() => 200));
    expect(Math.max(...sizes)).toBeLessThan(LIST_PAGE_MAX_BYTES);
    expect(fetched).toBeLessThan(paths.length * 1024 * 1024);
  });
});
