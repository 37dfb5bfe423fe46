/**
 * Bodies that would be stored other than as sent (API-7): invalid UTF-8 and numbers
 * that overflow, over HTTP through `app.request()` on the test engine (PGlite or
 * PostgreSQL, PUNCTUAL_TEST_ENGINE). Each refusal stores nothing.
 */
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import type { ErrorBody } from "../../../src/contracts/index.js";
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

const base = {
  dtstart: "2027-02-01T09:00:00",
  tzid: "Europe/Berlin",
  rrule: "FREQ=WEEKLY;COUNT=4",
  reminders: [{ key: "r1", offset: "-PT15M", channel: "log" }],
};

function post(body: Uint8Array | string, type = "application/json") {
  return app.request("/v1/schedules", {
    method: "POST",
    headers: { "content-type": type },
    body,
  });
}

async function stored(): Promise<number> {
  const res = await app.request("/v1/schedules?limit=100");
  expect(res.status).toBe(200);
  return ((await res.json()) as { items: unknown[] }).items.length;
}

describe("request body encoding (API-7)", () => {
  it("API-7: a body sent gzip-compressed is 415 naming the coding, with Accept-Encoding: identity; nothing is stored", async () => {
    const before = await stored();
    const json = JSON.stringify({ ...base, title: "compressed" });
    for (const coding of ["gzip", "br", "identity, gzip"]) {
      const res = await app.request("/v1/schedules", {
        method: "POST",
        headers: { "content-type": "application/json", "content-encoding": coding },
        body: new Uint8Array(gzipSync(json)),
      });
      expect(res.status).toBe(415);
      expect(res.headers.get("accept-encoding")).toBe("identity");
      const body = (await res.json()) as ErrorBody;
      expect(body.error.code).toBe("UNSUPPORTED_MEDIA_TYPE");
      expect(body.error.message).toContain(`Content-Encoding ${coding.replace("identity, ", "")}`);
    }
    expect(await stored()).toBe(before);
    // `identity` is no coding at all: the body is read as sent.
    const ok = await app.request("/v1/schedules", {
      method: "POST",
      headers: { "content-type": "application/json", "content-encoding": "identity" },
      body: json,
    });
    expect(ok.status).toBe(201);
  });

  it("API-7: a JSON body that is not valid UTF-8 is refused with 400 naming the body and the byte; nothing is stored", async () => {
    const before = await stored();
    const text = JSON.stringify({ ...base, title: "Caf__" });
    const at = Buffer.byteLength(text.slice(0, text.indexOf("__")));
    const bytes = Buffer.from(text);
    bytes[at] = 0xc3; // a lead byte
    bytes[at + 1] = 0x28; // "(" where a continuation byte must be
    const res = await post(new Uint8Array(bytes));
    expect(res.status).toBe(400);
    const body = (await res.json()) as ErrorBody;
    expect(body.error.issues).toEqual([
      expect.objectContaining({ field: "body", message: `is not valid UTF-8 at byte ${at}` }),
    ]);
    // A lone continuation byte and an encoded surrogate in the payload are refused too.
    const head = JSON.stringify(base).slice(0, -1);
    for (const bad of [[0x80], [0xed, 0xa0, 0x80]]) {
      const payload = Buffer.concat([
        Buffer.from(`${head},"payload":{"s":"`),
        Buffer.from(bad),
        Buffer.from('"}}'),
      ]);
      const r = await post(new Uint8Array(payload));
      expect(r.status).toBe(400);
      expect(((await r.json()) as ErrorBody).error.issues?.[0]).toMatchObject({
        field: "body",
        message: `is not valid UTF-8 at byte ${Buffer.byteLength(head) + 17}`,
      });
    }
    expect(await stored()).toBe(before);
    // The same body, well-formed, is stored as sent.
    const ok = await post(JSON.stringify({ ...base, title: "Café ☕ 𝄞" }));
    expect(ok.status).toBe(201);
    expect(((await ok.json()) as { title: string }).title).toBe("Café ☕ 𝄞");
  });

  it("API-7: a JSON number that overflows to Infinity is refused with 400 naming its field; nothing is stored", async () => {
    const before = await stored();
    const head = JSON.stringify(base).slice(0, -1);
    const res = await post(`${head},"payload":1e999999}`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as ErrorBody).error.issues).toEqual([
      expect.objectContaining({ field: "payload", message: expect.stringMatching(/overflows/) }),
    ]);
    const nested = await post(`${head},"payload":{"amounts":[1,-2e400]}}`);
    expect(nested.status).toBe(400);
    expect(((await nested.json()) as ErrorBody).error.issues?.[0]?.field).toBe("payload.amounts.1");
    expect(await stored()).toBe(before);
    const ok = await post(`${head},"payload":{"amounts":[1,1e300]}}`);
    expect(ok.status).toBe(201);
  });
});
