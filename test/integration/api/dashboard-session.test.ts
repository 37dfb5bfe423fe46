/**
 * The dashboard's session (API-6, API-2, API-7) through the API in process
 * (`app.request()`): logging in keeps the key on the server behind an HttpOnly,
 * SameSite=Strict cookie; the cookie stands for the key on same-origin `/v1` requests
 * only, a write needs the CSRF token, and a tenant key's session sees its own tenant only
 * (also in `GET /v1/overview`). The page at /ui loads nothing from elsewhere (its CSP).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import type { ErrorBody, ScheduleView } from "../../../src/contracts/index.js";
import { DASHBOARD_CSP, registerDashboard } from "../../../src/dashboard/index.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { testPunctual, tickAndDrain, type TestPunctual } from "../../support/punctual.js";

const ROOT = "root-operator-key-for-sessions";
const ORIGIN = "http://localhost";
let t: TestPunctual;
let keyed: Punctual;
let api: PunctualApi;
let open: PunctualApi;
let acmeKey = "";
let acmeSchedule: ScheduleView;
let globexSchedule: ScheduleView;

interface Login {
  cookie: string;
  setCookie: string;
  csrf: string;
}

async function login(app: PunctualApi, key: string, url = `${ORIGIN}/ui/login`): Promise<Login> {
  const res = await app.request(url, {
    method: "POST",
    headers: { "content-type": "application/json", origin: new URL(url).origin },
    body: JSON.stringify({ key }),
  });
  expect(res.status).toBe(200);
  const setCookie = res.headers.get("set-cookie") ?? "";
  const body = (await res.json()) as { csrf: string };
  return { cookie: setCookie.split(";")[0]!, setCookie, csrf: body.csrf };
}

function withCookie(
  app: PunctualApi,
  session: Login,
  method: string,
  path: string,
  headers: Record<string, string> = {},
) {
  return app.request(`${ORIGIN}${path}`, {
    method,
    headers: { cookie: session.cookie, ...headers },
  });
}

const codeOf = async (res: Response) => ((await res.json()) as ErrorBody).error.code;

beforeAll(async () => {
  t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
  keyed = await createPunctual({
    database: t.punctual.db,
    clock: t.clock,
    logger: silentLogger(),
    channels: [t.channel],
    allowPrivateTargets: true,
    webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
    api: { apiKey: ROOT },
  });
  api = createApi(keyed);
  registerDashboard(api);
  open = createApi(t.punctual);
  registerDashboard(open);
  const res = await api.request("/v1/api-keys", {
    method: "POST",
    headers: { authorization: `Bearer ${ROOT}`, "content-type": "application/json" },
    body: JSON.stringify({ tenant: "acme", scopes: ["write"], name: "acme" }),
  });
  acmeKey = ((await res.json()) as { key: string }).key;
  const one = { dtstart: "2027-01-04T08:00:00Z", reminders: [{ key: "r", channel: "test" }] };
  acmeSchedule = (await keyed.createSchedule(one, { tenant: "acme" })).schedule;
  globexSchedule = (await keyed.createSchedule(one, { tenant: "globex" })).schedule;
  await tickAndDrain(t.punctual);
});

afterAll(async () => {
  await keyed?.close(0);
  await t?.close();
});

describe("API-6 dashboard sessions", () => {
  it("API-6: /ui serves the page with a CSP that allows this origin only and forbids framing", async () => {
    const res = await api.request(`${ORIGIN}/ui/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toBe(DASHBOARD_CSP);
    expect(DASHBOARD_CSP).toContain("default-src 'none'");
    expect(DASHBOARD_CSP).toContain("frame-ancestors 'none'");
    const html = await res.text();
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    const js = await api.request(`${ORIGIN}/ui/assets/app.js`);
    expect(js.headers.get("content-type")).toMatch(/^text\/javascript/);
    // No script, style or call reaches another origin (example URLs are placeholders only).
    expect(await js.text()).not.toMatch(/(fetch\(|import\(|from |src=|href=)\s*["'`]https?:/);
    expect((await api.request(`${ORIGIN}/ui/assets/../server.js`)).status).toBe(404);
    expect((await api.request(`${ORIGIN}/ui`)).status).toBe(308);
  });

  it("API-2: login with a wrong key is 401 and sets no cookie; the operator's key gets an HttpOnly SameSite=Strict session that is not the key", async () => {
    const wrong = await api.request(`${ORIGIN}/ui/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key: "not-the-key-at-all" }),
    });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("set-cookie")).toBeNull();
    const s = await login(api, ROOT);
    expect(s.setCookie).toMatch(/^punctual_session=[A-Za-z0-9_-]{43};/);
    expect(s.setCookie).toMatch(/HttpOnly/);
    expect(s.setCookie).toMatch(/SameSite=Strict/);
    expect(s.setCookie).toMatch(/Path=\//);
    expect(s.setCookie).not.toMatch(/Secure/);
    expect(s.setCookie).not.toContain(ROOT);
    // Over TLS the cookie is Secure.
    const tls = await login(api, ROOT, "https://localhost/ui/login");
    expect(tls.setCookie).toMatch(/Secure/);
  });

  it("API-2: without the cookie (or with an unknown one) /v1 needs the key; with it, reads pass", async () => {
    expect((await api.request(`${ORIGIN}/v1/schedules`)).status).toBe(401);
    const fake = await api.request(`${ORIGIN}/v1/schedules`, {
      headers: { cookie: "punctual_session=forged" },
    });
    expect(fake.status).toBe(401);
    const s = await login(api, ROOT);
    const res = await withCookie(api, s, "GET", "/v1/schedules", {
      "sec-fetch-site": "same-origin",
    });
    expect(res.status).toBe(200);
  });

  it("API-7: a write with the cookie needs the CSRF token; from another origin the cookie is refused even with it", async () => {
    const s = await login(api, ROOT);
    const pause = `/v1/schedules/${acmeSchedule.id}/pause`;
    const asAcme = { "punctual-tenant": "acme" };
    const noToken = await withCookie(api, s, "POST", pause, asAcme);
    expect(noToken.status).toBe(403);
    expect(await codeOf(noToken)).toBe("CSRF_TOKEN_INVALID");
    const badToken = await withCookie(api, s, "POST", pause, { ...asAcme, "x-csrf-token": "x" });
    expect(await codeOf(badToken)).toBe("CSRF_TOKEN_INVALID");
    const foreign: Record<string, string>[] = [
      { origin: "http://attacker.example" },
      { origin: "null" },
      { "sec-fetch-site": "cross-site" },
      { "sec-fetch-site": "same-site" },
    ];
    for (const headers of foreign) {
      const res = await withCookie(api, s, "POST", pause, {
        ...asAcme,
        "x-csrf-token": s.csrf,
        ...headers,
      });
      expect(res.status, JSON.stringify(headers)).toBe(403);
      expect(await codeOf(res)).toBe("CROSS_SITE_REQUEST");
    }
    // A cross-site read with the cookie is refused too.
    const read = await withCookie(api, s, "GET", "/v1/schedules", {
      "sec-fetch-site": "cross-site",
    });
    expect(await codeOf(read)).toBe("CROSS_SITE_REQUEST");
    // Its one delivery was sent in beforeAll: the one-off reads finished, not paused.
    expect((await keyed.getSchedule(acmeSchedule.id, { tenant: "acme" })).state).toBe("finished");
    const ok = await withCookie(api, s, "POST", pause, {
      ...asAcme,
      "x-csrf-token": s.csrf,
      origin: ORIGIN,
    });
    expect(ok.status).toBe(200);
    expect((await keyed.getSchedule(acmeSchedule.id, { tenant: "acme" })).state).toBe("paused");
    await keyed.resumeSchedule(acmeSchedule.id, { tenant: "acme" });
  });

  it("API-2: a tenant key's session sees its own tenant only, also in GET /v1/overview", async () => {
    const s = await login(api, acmeKey);
    const session = await withCookie(api, s, "GET", "/ui/session");
    expect(await session.json()).toMatchObject({
      authenticated: true,
      tenant: "acme",
      root: false,
    });
    expect((await withCookie(api, s, "GET", `/v1/schedules/${acmeSchedule.id}`)).status).toBe(200);
    expect((await withCookie(api, s, "GET", `/v1/schedules/${globexSchedule.id}`)).status).toBe(
      404,
    );
    expect((await withCookie(api, s, "GET", "/v1/status")).status).toBe(403);
    const overview = (await (await withCookie(api, s, "GET", "/v1/overview")).json()) as {
      tenant: string;
      perMinute: { sent: number }[];
    };
    expect(overview.tenant).toBe("acme");
    expect(overview.perMinute.reduce((n, m) => n + m.sent, 0)).toBe(1);
    // The header that lets the operator act for a tenant is not for a tenant key.
    const other = await withCookie(api, s, "GET", "/v1/schedules", { "punctual-tenant": "globex" });
    expect(other.status).toBe(403);
  });

  it("API-2: logging out needs the CSRF token and ends the session at once", async () => {
    const s = await login(api, ROOT);
    const refused = await withCookie(api, s, "POST", "/ui/logout");
    expect(await codeOf(refused)).toBe("CSRF_TOKEN_INVALID");
    const out = await withCookie(api, s, "POST", "/ui/logout", { "x-csrf-token": s.csrf });
    expect(out.status).toBe(200);
    expect((await withCookie(api, s, "GET", "/v1/schedules")).status).toBe(401);
  });

  it("API-7: no other origin can log a browser in (login CSRF), with or without a key", async () => {
    for (const app of [api, open]) {
      const res = await app.request(`${ORIGIN}/ui/login`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: "http://attacker.example" },
        body: JSON.stringify({ key: acmeKey }),
      });
      expect(res.status).toBe(403);
      expect(res.headers.get("set-cookie")).toBeNull();
    }
  });

  it("API-6: without a key the page needs no login: the session is the operator of tenant default", async () => {
    const res = await open.request(`${ORIGIN}/ui/session`);
    expect(await res.json()).toMatchObject({
      authenticated: true,
      keyed: false,
      root: true,
      csrf: null,
    });
    const overview = await open.request(`${ORIGIN}/v1/overview`);
    expect(overview.status).toBe(200);
    expect(await overview.json()).toMatchObject({ tenant: "default" });
  });
});
