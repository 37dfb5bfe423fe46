/**
 * HTTP API, safe by default (API-7): the Host check against DNS rebinding, cross-site
 * writes refused without a key, iCalendar imports only as `text/calendar`, the webhook
 * secret only with a key or the local token, every input text checked before the
 * database (a 400 naming the field, never a 500), no secret in any log line; and the
 * API bits of the strict posture (unknown query parameters named, trailing slashes 404).
 */
import { request as httpRequest } from "node:http";
import { createConnection, createServer, type AddressInfo, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, serveApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { TestClock } from "../../../src/clock/index.js";
import type { ErrorBody } from "../../../src/contracts/index.js";
import { pino } from "pino";
import { silentLogger } from "../../../src/observability/logger.js";
import type { Database, Queryable } from "../../../src/store/database.js";
import { openTestDatabase } from "../../support/db.js";

const API_KEY = "web-safety-key-0123456789";
const LOCAL_TOKEN = "local-token-0123456789abcdef";

let clock: TestClock;
let open: Punctual;
let keyed: Punctual;
let openApp: PunctualApi;
let keyedApp: PunctualApi;

beforeAll(async () => {
  clock = new TestClock("2027-01-04T08:00:00Z");
  open = await createPunctual({ dataDir: null, clock, logger: silentLogger() });
  keyed = await createPunctual({
    database: open.db,
    clock,
    logger: silentLogger(),
    api: { apiKey: API_KEY },
  });
  openApp = createApi(open, { localToken: LOCAL_TOKEN });
  keyedApp = createApi(keyed);
});

afterAll(async () => {
  await keyed?.close(0);
  await open?.close(0);
});

const oneOff = { dtstart: "2027-02-01T09:00:00Z", reminders: [{ channel: "log" }] };

function post(headers: Record<string, string> = {}, body: unknown = oneOff) {
  return {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  };
}

async function errorOf(res: Response): Promise<ErrorBody["error"]> {
  return ((await res.json()) as ErrorBody).error;
}

async function fieldsOf(res: Response): Promise<string[]> {
  return ((await errorOf(res)).issues ?? []).map((i) => i.field);
}

async function scheduleCount(): Promise<number> {
  return (await open.listSchedules({ limit: 1000 })).items.length;
}

/** A raw HTTP/1.1 request to a served API with the Host header chosen by the test. */
function requestWithHost(
  port: number,
  host: string,
  path = "/v1/schedules",
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: "127.0.0.1", port, path, method: "GET", headers: { host } },
      (res) => {
        let body = "";
        res.on("data", (d: Buffer) => (body += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** Sends `GET <target>` in absolute form on a raw socket; the status and body. */
function absoluteForm(
  port: number,
  target: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    let text = "";
    socket.on("data", (d: Buffer) => (text += d.toString()));
    socket.on("error", reject);
    socket.on("end", () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, body: text.slice(text.indexOf("\r\n\r\n") + 4) });
    });
    const lines = Object.entries({ ...headers, connection: "close" }).map(
      ([k, v]) => `${k}: ${v}\r\n`,
    );
    socket.write(`GET ${target} HTTP/1.1\r\n${lines.join("")}\r\n`);
  });
}

describe("API-7 Host check (DNS rebinding)", () => {
  it("API-7: without a key, a Host that is not a loopback name or the listen address is 403 HOST_NOT_ALLOWED", async () => {
    const rebound = await openApp.request("http://rebind.attacker.example:8080/v1/schedules");
    expect(rebound.status).toBe(403);
    const error = await errorOf(rebound);
    expect(error.code).toBe("HOST_NOT_ALLOWED");
    expect(error.message).toContain("rebind.attacker.example:8080");
    expect(error.message).toContain("PUNCTUAL_ALLOWED_HOSTS");
    // Probes are covered too: a rebinding page reads nothing at all.
    expect((await openApp.request("http://rebind.attacker.example/readyz")).status).toBe(403);
    for (const host of ["localhost", "127.0.0.1:8080", "[::1]:8080", "LOCALHOST"]) {
      expect((await openApp.request(`http://${host}/v1/schedules`)).status).toBe(200);
    }
  });

  it("API-7 / API-2: an absolute-form request target (GET http://host/v1/…) is routed, authenticated and Host-checked by its own authority, never past them", async () => {
    const open = await serveApi(openApp, { host: "127.0.0.1", port: 0 });
    const keyedServed = await serveApi(keyedApp, { host: "127.0.0.1", port: 0 });
    try {
      // The authority of the target is the host judged (RFC 9112 §3.2.2), whatever Host says.
      const rebound = await absoluteForm(
        open.port,
        `http://rebind.attacker.example:${open.port}/v1/schedules`,
        { host: `127.0.0.1:${open.port}` },
      );
      expect(rebound.status).toBe(403);
      expect(rebound.body).toContain("HOST_NOT_ALLOWED");
      const own = await absoluteForm(open.port, `http://127.0.0.1:${open.port}/v1/schedules`, {
        host: `127.0.0.1:${open.port}`,
      });
      expect(own.status).toBe(200);
      // Neither a userinfo that spells the own address nor a foreign port gets past it,
      // and a malformed Host beside an absolute target is still refused with a body.
      for (const target of [
        `http://127.0.0.1:${open.port}@rebind.attacker.example/v1/schedules`,
        `http://127.0.0.1:${open.port === 1 ? 2 : 1}/v1/schedules`,
        `http://rebind.attacker.example:${open.port}/healthz`,
      ]) {
        const refused = await absoluteForm(open.port, target, { host: `127.0.0.1:${open.port}` });
        expect([400, 403], target).toContain(refused.status);
        expect(refused.body, target).not.toContain('"items"');
      }
      const badHost = await absoluteForm(open.port, `http://127.0.0.1:${open.port}/v1/schedules`, {
        host: "bad host",
      });
      expect(badHost.status).toBe(400);
      expect(badHost.body).toContain("BAD_HOST");
      // With a key: no key is 401 and a wrong one too, as in origin form.
      const target = `http://127.0.0.1:${keyedServed.port}/v1/schedules`;
      const host = { host: `127.0.0.1:${keyedServed.port}` };
      expect((await absoluteForm(keyedServed.port, target, host)).status).toBe(401);
      expect(
        (await absoluteForm(keyedServed.port, target, { ...host, authorization: "Bearer nope" }))
          .status,
      ).toBe(401);
      expect(
        (
          await absoluteForm(keyedServed.port, target, {
            ...host,
            authorization: `Bearer ${API_KEY}`,
          })
        ).status,
      ).toBe(200);
    } finally {
      await open.close(0);
      await keyedServed.close(0);
    }
  });

  it("API-7: on a real socket the loopback names must carry the port the request arrived on", async () => {
    const served = await serveApi(openApp, { host: "127.0.0.1", port: 0 });
    try {
      const port = served.port;
      expect((await requestWithHost(port, `127.0.0.1:${port}`)).status).toBe(200);
      expect((await requestWithHost(port, `localhost:${port}`)).status).toBe(200);
      const otherPort = await requestWithHost(port, `localhost:${port === 1 ? 2 : 1}`);
      expect(otherPort.status).toBe(403);
      expect(otherPort.body).toContain(`on port ${port}`);
      const rebound = await requestWithHost(port, `rebind.attacker.example:${port}`);
      expect(rebound.status).toBe(403);
      expect(JSON.parse(rebound.body)).toMatchObject({ error: { code: "HOST_NOT_ALLOWED" } });
    } finally {
      await served.close(0);
    }
  });

  it("API-7: a Host name is case-insensitive (LOCALHOST is localhost); a malformed Host is 400 BAD_HOST with a body", async () => {
    const served = await serveApi(openApp, { host: "127.0.0.1", port: 0 });
    try {
      const port = served.port;
      expect((await requestWithHost(port, `LOCALHOST:${port}`)).status).toBe(200);
      const rebound = await requestWithHost(port, `Rebind.Attacker.Example:${port}`);
      expect(rebound.status).toBe(403);
      const malformed = await requestWithHost(port, `local host:${port}`);
      expect(malformed.status).toBe(400);
      expect(JSON.parse(malformed.body)).toMatchObject({ error: { code: "BAD_HOST" } });
    } finally {
      await served.close(0);
    }
  });

  it("API-7: with a key the Host is not checked, unless api.allowedHosts lists names", async () => {
    const auth = { headers: { authorization: `Bearer ${API_KEY}` } };
    expect((await keyedApp.request("http://punctual.example.com/v1/schedules", auth)).status).toBe(
      200,
    );
    const listing = await createPunctual({
      database: open.db,
      clock,
      logger: silentLogger(),
      api: { apiKey: API_KEY, allowedHosts: ["punctual.example.com", "tunnel.example:9000"] },
    });
    try {
      const app = createApi(listing);
      const at = (host: string) => app.request(`http://${host}/v1/schedules`, auth);
      expect((await at("punctual.example.com")).status).toBe(200);
      expect((await at("punctual.example.com:8443")).status).toBe(200);
      expect((await at("tunnel.example:9000")).status).toBe(200);
      expect((await at("tunnel.example:9001")).status).toBe(403);
      expect((await at("other.example.com")).status).toBe(403);
      expect((await at("localhost")).status).toBe(200);
    } finally {
      await listing.close(0);
    }
  });

  it("API-7: api.allowedHosts rejects a malformed entry at start", async () => {
    await expect(
      createPunctual({ dataDir: null, logger: silentLogger(), api: { allowedHosts: ["a b"] } }),
    ).rejects.toThrow(/allowedHosts/);
  });
});

describe("API-7 cross-site writes without a key", () => {
  it("API-7: a write with a foreign Origin, Origin null or Sec-Fetch-Site cross-site/same-site is 403 CROSS_SITE_REQUEST and changes nothing", async () => {
    const before = await scheduleCount();
    for (const headers of [
      { origin: "https://attacker.example" },
      { origin: "http://localhost:3000" },
      { origin: "null" },
      { "sec-fetch-site": "cross-site" },
      { "sec-fetch-site": "same-site" },
    ] as Array<Record<string, string>>) {
      const res = await openApp.request("/v1/schedules", post(headers));
      expect(res.status, JSON.stringify(headers)).toBe(403);
      const error = await errorOf(res);
      expect(error.code).toBe("CROSS_SITE_REQUEST");
      expect(error.message).toContain("POST /v1/schedules");
    }
    const del = await openApp.request("/v1/schedules/0b9f2c3e-0000-4000-8000-000000000000", {
      method: "DELETE",
      headers: { "sec-fetch-site": "cross-site" },
    });
    expect(del.status).toBe(403);
    expect(await scheduleCount()).toBe(before);
  });

  it("API-7: same-origin pages, curl and the CLI (no Origin, no Sec-Fetch-Site) still write; reads are not refused", async () => {
    const before = await scheduleCount();
    const same = await openApp.request(
      "http://localhost:8080/v1/schedules",
      post({ origin: "http://localhost:8080", "sec-fetch-site": "same-origin" }),
    );
    expect(same.status).toBe(201);
    const cli = await openApp.request("/v1/schedules", post());
    expect(cli.status).toBe(201);
    expect(await scheduleCount()).toBe(before + 2);
    const read = await openApp.request("/v1/schedules", {
      headers: { origin: "https://attacker.example", "sec-fetch-site": "cross-site" },
    });
    expect(read.status).toBe(200);
  });

  it("API-7: with a key, a write with a foreign Origin is authenticated by the key, not refused", async () => {
    const res = await keyedApp.request(
      "/v1/schedules",
      post({ origin: "https://dashboard.example", authorization: `Bearer ${API_KEY}` }),
    );
    expect(res.status).toBe(201);
  });
});

describe("API-7 iCalendar import only as text/calendar", () => {
  const ics = [
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "PRODID:-//punctual//test//EN",
    "BEGIN:VEVENT",
    "UID:web-safety@punctual.test",
    "DTSTAMP:20270101T000000Z",
    "DTSTART:20270201T090000Z",
    "END:VEVENT",
    "END:VCALENDAR",
    "",
  ].join("\r\n");
  const path = "/v1/imports?source=web-safety&remind=-PT15M&channel=log";

  it("API-7: text/plain, a form type or no Content-Type (what a page sends without a preflight) is 415 and imports nothing", async () => {
    const before = await scheduleCount();
    for (const type of [
      "text/plain",
      "text/plain; charset=utf-8",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      undefined,
    ]) {
      const res = await openApp.request(path, {
        method: "POST",
        headers: type === undefined ? {} : { "content-type": type },
        body: type === undefined ? new Blob([ics]) : ics,
      });
      expect(res.status, String(type)).toBe(415);
      const error = await errorOf(res);
      expect(error.code).toBe("UNSUPPORTED_MEDIA_TYPE");
      expect(error.message).toContain("text/calendar");
    }
    expect(await scheduleCount()).toBe(before);
    const ok = await openApp.request(path, {
      method: "POST",
      headers: { "content-type": "text/calendar; charset=utf-8" },
      body: ics,
    });
    expect(ok.status).toBe(200);
  });
});

describe("API-7 webhook secret only with a key or the local token", () => {
  it("API-7: without a key the secret route is 403 SECRET_NEEDS_KEY unless the local token is presented", async () => {
    const none = await openApp.request("/v1/webhook-secret");
    expect(none.status).toBe(403);
    const error = await errorOf(none);
    expect(error.code).toBe("SECRET_NEEDS_KEY");
    expect(error.message).toContain("punctual webhook-secret");
    const wrong = await openApp.request("/v1/webhook-secret", {
      headers: { authorization: `Bearer ${LOCAL_TOKEN}x` },
    });
    expect(wrong.status).toBe(403);
    // An API embedded without a local token has no way in without a key.
    expect((await createApi(open).request("/v1/webhook-secret")).status).toBe(403);
    const right = await openApp.request("/v1/webhook-secret", {
      headers: { authorization: `Bearer ${LOCAL_TOKEN}` },
    });
    expect(right.status).toBe(200);
    expect(((await right.json()) as { secret: string }).secret).toBe(open.webhookSecret.secret);
  });

  it("API-7: with a key the key opens it and the local token does not", async () => {
    const app = createApi(keyed, { localToken: LOCAL_TOKEN });
    const token = await app.request("/v1/webhook-secret", {
      headers: { authorization: `Bearer ${LOCAL_TOKEN}` },
    });
    expect(token.status).toBe(401);
    const key = await app.request("/v1/webhook-secret", {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(key.status).toBe(200);
  });
});

describe("API-7 every input text checked before the database", () => {
  const ics = (uid: string) =>
    [
      "BEGIN:VCALENDAR",
      "VERSION:2.0",
      "PRODID:-//punctual//test//EN",
      "BEGIN:VEVENT",
      `UID:${uid}`,
      "DTSTAMP:20270101T000000Z",
      "DTSTART:20270201T090000Z",
      "END:VEVENT",
      "END:VCALENDAR",
      "",
    ].join("\r\n");
  const calendar = (query: string, body = ics("text@punctual.test")) =>
    openApp.request(`/v1/imports?${query}`, {
      method: "POST",
      headers: { "content-type": "text/calendar" },
      body,
    });
  const webhook = (target: Record<string, unknown>) => ({
    ...oneOff,
    reminders: [{ channel: "webhook", target: { url: "https://example.com/h", ...target } }],
  });

  it.each([
    ["a NUL in target.secret", webhook({ secret: "whsec_a\u0000b" }), "reminders.0.target"],
    ["a lone surrogate in target.secret", webhook({ secret: "\ud800" }), "reminders.0.target"],
    ["a NUL in target.url", webhook({ url: "https://example.com/\u0000" }), "reminders.0.target"],
    ["a lone surrogate in the payload", { ...oneOff, payload: { note: "\udc00" } }, "payload"],
  ])("API-7: %s in a create body is 400 naming the field", async (_what, body, field) => {
    const res = await openApp.request("/v1/schedules", post({}, body));
    expect(res.status).toBe(400);
    expect(await fieldsOf(res)).toContain(field);
  });

  it("API-7: a NUL in a PATCH body's target.secret is 400 naming the field", async () => {
    const created = await openApp.request("/v1/schedules", post());
    const { id } = (await created.json()) as { id: string };
    const res = await openApp.request(`/v1/schedules/${id}`, {
      method: "PATCH",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        reminders: [
          { channel: "webhook", target: { url: "https://example.com/h", secret: "a\u0000" } },
        ],
      }),
    });
    expect(res.status).toBe(400);
    expect(await fieldsOf(res)).toContain("reminders.0.target");
  });

  it.each([
    ["source", "source=s%00x&remind=-PT15M&channel=log"],
    ["target", "source=s1&remind=-PT15M&target=https%3A%2F%2Fexample.com%2F%00"],
    ["remind", "source=s2&remind=-PT15M%00&channel=log"],
    ["tzid", "source=s3&remind=-PT15M&channel=log&tzid=UTC%00"],
  ])("API-7: a NUL in the import parameter %s is 400 naming it", async (field, query) => {
    const res = await calendar(query);
    expect(res.status).toBe(400);
    expect(await fieldsOf(res)).toContain(field);
  });

  it("API-7: a NUL in a calendar's UID does not reach the database: the event is skipped or the file refused, never a 500", async () => {
    const res = await calendar("source=nul-uid&remind=-PT15M&channel=log", ics("a\u0000b@x"));
    expect([200, 400]).toContain(res.status);
    if (res.status === 200) {
      const summary = (await res.json()) as { created: number; skipped: unknown[] };
      expect(summary.created).toBe(0);
      expect(summary.skipped).toHaveLength(1);
      expect(JSON.stringify(summary.skipped)).toMatch(/NUL/);
    }
  });

  it.each([
    ["/v1/schedules?cursor=a%00", "cursor"],
    ["/v1/schedules?state=active%00", "state"],
    ["/v1/deliveries?scheduleId=%00", "scheduleId"],
    ["/v1/schedules?co%00lour=1", "(query)"],
    ["/v1/schedules/%00", "path"],
    ["/v1/deliveries/1%00", "path"],
  ])("API-7: GET %s is 400 naming %s", async (url, field) => {
    const res = await openApp.request(url);
    expect(res.status).toBe(400);
    expect(await fieldsOf(res)).toContain(field);
  });

  it("API-7: a NUL in Idempotency-Key or If-Match is refused by the HTTP parser with 400 before any route runs", async () => {
    const served = await serveApi(openApp, { host: "127.0.0.1", port: 0 });
    try {
      for (const header of ["Idempotency-Key", "If-Match"]) {
        const status = await new Promise<string>((resolve, reject) => {
          const socket: Socket = createConnection(served.port, "127.0.0.1");
          let reply = "";
          socket.on("data", (d: Buffer) => (reply += d.toString("latin1")));
          socket.on("close", () => resolve(reply.split("\r\n")[0] ?? ""));
          socket.on("error", reject);
          socket.end(
            Buffer.concat([
              Buffer.from(
                `POST /v1/schedules HTTP/1.1\r\nHost: 127.0.0.1:${served.port}\r\nConnection: close\r\n${header}: a`,
              ),
              Buffer.from([0]),
              Buffer.from("\r\nContent-Length: 2\r\n\r\n{}"),
            ]),
          );
        });
        expect(status, header).toBe("HTTP/1.1 400 Bad Request");
      }
    } finally {
      await served.close(0);
    }
  });
});

/**
 * A database where the statement storing `text` fails the way PGlite and node-postgres
 * fail: the error carries the statement's `params` (here, the reminder target with its
 * secret) and a `detail` quoting the failing row.
 */
function storingFails(db: Database, text: string): Database {
  const wrap = (q: Queryable): Queryable => ({
    query(sql, params) {
      if (/^\s*insert/i.test(sql) && JSON.stringify(params ?? []).includes(text)) {
        const err = Object.assign(
          new Error('new row for relation "punctual_schedules" violates check constraint'),
          {
            code: "23514",
            detail: `Failing row contains (${JSON.stringify(params)})`,
            query: sql,
            params,
          },
        );
        return Promise.reject(err);
      }
      return q.query(sql, params);
    },
  });
  return {
    get engine() {
      return db.engine;
    },
    get description() {
      return db.description;
    },
    ...wrap(db),
    transaction: (fn) => db.transaction((tx) => fn(wrap(tx))),
    listen: db.listen.bind(db),
    close: db.close.bind(db),
  } as Database;
}

describe("API-7 no secret in any log line", () => {
  it("API-7: after failing requests and a failing send, the captured log holds neither the planted target secret nor the Authorization value", async () => {
    const SECRET = "whsec_cGxhbnRlZC1zZWNyZXQtdmFsdWUtMDEyMzQ1";
    const AUTH = "Bearer planted-authorization-value-0123456789";
    // A plain pino logger, as a library user would bring: punctual adds its redaction.
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino(
      { level: "trace" },
      {
        write(chunk: string) {
          for (const line of chunk.split("\n")) if (line.trim()) lines.push(JSON.parse(line));
        },
      },
    );
    const handle = await openTestDatabase();
    // A port that refuses connections: bound, then closed.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const testClock = new TestClock("2027-01-04T08:00:00Z");
    const healthy = await createPunctual({
      database: handle.db,
      clock: testClock,
      logger,
      allowPrivateTargets: true,
      scheduler: { maxAttempts: 1 },
    });
    const failing = await createPunctual({
      database: storingFails(handle.db, SECRET),
      clock: testClock,
      logger,
      allowPrivateTargets: true,
      api: { apiKey: API_KEY },
    });
    try {
      const target = { url: `http://127.0.0.1:${deadPort}/hook`, secret: SECRET };
      const body = {
        dtstart: "2027-01-04T08:00:00Z",
        reminders: [{ channel: "webhook", target }],
      };
      // A 500: the insert fails with an error quoting the row and the parameters.
      const failed = await createApi(failing).request(
        "/v1/schedules",
        post({ authorization: `Bearer ${API_KEY}` }, body),
      );
      expect(failed.status).toBe(500);
      // A wrong key, a bad body, a refused Host: each presents the planted Authorization.
      const api = createApi(failing);
      expect(
        (await api.request("/v1/schedules", { headers: { authorization: AUTH } })).status,
      ).toBe(401);
      const bad = await createApi(healthy).request(
        "/v1/schedules",
        post({ authorization: AUTH }, { ...body, colour: SECRET }),
      );
      expect(bad.status).toBe(400);
      // A failing send: the webhook target refuses the connection.
      const created = await createApi(healthy).request(
        "/v1/schedules",
        post({ authorization: AUTH }, body),
      );
      expect(created.status).toBe(201);
      await healthy.scheduler.tick();
      await healthy.scheduler.drain();
      const deliveries = (await healthy.listDeliveries({ limit: 10 })).items;
      expect(deliveries[0]?.state).toBe("dead");

      const text = lines.map((line) => JSON.stringify(line)).join("\n");
      expect(lines.some((l) => l.level === 50 && l.msg === "request failed")).toBe(true);
      expect(text).toContain("23514");
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain("planted-authorization-value");
      expect(text).not.toContain(API_KEY);
    } finally {
      await failing.close(0);
      await healthy.close(0);
      await handle.close();
    }
  });
});

describe("API-7 strict posture of the HTTP API", () => {
  it("API-7: an unknown query parameter is named, not reported as (body)", async () => {
    const schedules = await openApp.request("/v1/schedules?colour=blue&limit=5");
    expect(schedules.status).toBe(400);
    expect(await errorOf(schedules)).toMatchObject({
      issues: [{ field: "colour", message: "unknown query parameter" }],
    });
    const deliveries = await openApp.request("/v1/deliveries?stat=dead&sort=id");
    expect(await fieldsOf(deliveries)).toEqual(["stat", "sort"]);
  });

  it("API-7: a query parameter given twice is 400 naming it (not a NaN from the schema)", async () => {
    const twice = await openApp.request("/v1/schedules?limit=1&limit=2");
    expect(twice.status).toBe(400);
    expect(await errorOf(twice)).toMatchObject({
      issues: [{ field: "limit", message: "given 2 times; give it once" }],
    });
    expect(
      JSON.stringify(await errorOf(await openApp.request("/v1/deliveries?state=dead&state=sent"))),
    ).not.toContain("NaN");
  });

  it("API-5 API-7: remind may repeat on an import (one reminder each)", async () => {
    const ics = [
      "BEGIN:VCALENDAR",
      "VERSION:2.0",
      "PRODID:-//test//EN",
      "BEGIN:VEVENT",
      "UID:twice@test",
      "DTSTAMP:20270101T000000Z",
      "DTSTART:20270301T090000Z",
      "END:VEVENT",
      "END:VCALENDAR",
      "",
    ].join("\r\n");
    const res = await openApp.request(
      "/v1/imports?source=remind-twice&remind=-PT15M&remind=-PT1H&channel=log",
      { method: "POST", headers: { "content-type": "text/calendar" }, body: ics },
    );
    expect(res.status).toBe(200);
    const { items } = await open.listSchedules({ limit: 1000 });
    const imported = items.find((s) => s.source === "remind-twice");
    expect(imported?.reminders.map((r) => r.offset).sort()).toEqual(["-PT15M", "-PT1H"]);
  });

  it("API-7: a trailing slash is 404 (with a hint), never 405; another method on a known path is still 405", async () => {
    for (const [method, path, hint] of [
      ["GET", "/metrics/", "/metrics"],
      ["GET", "/healthz/", "/healthz"],
      ["GET", "/v1/schedules/", "/v1/schedules"],
      ["POST", "/v1/schedules/", "/v1/schedules"],
      ["GET", "/v1/deliveries/12/", "/v1/deliveries/12"],
    ] as const) {
      const res = await openApp.request(path, { method });
      expect(res.status, `${method} ${path}`).toBe(404);
      const error = await errorOf(res);
      expect(error.code).toBe("NOT_FOUND");
      expect(error.message).toContain(`did you mean ${hint}?`);
    }
    const del = await openApp.request("/metrics", { method: "DELETE" });
    expect(del.status).toBe(405);
    expect(del.headers.get("allow")).toBe("GET");
  });
});
