/**
 * API-2 tenant isolation: two tenants, each with its own key, try every route on each
 * other's objects (read, list, edit, cancel, pause, resume, trigger, backfill, purge,
 * deliveries, redrive, resolve, bulk actions, imports, upsert, kinds, rate limits, keys)
 * and through the CLI; another tenant's object is 404 (never 403), lists leave it out,
 * and what is refused changes nothing. Scopes and key revocation are checked too.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, serveApi, type PunctualApi, type ServedApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import type { DeliveryView, ErrorBody, ScheduleView } from "../../../src/contracts/index.js";
import { buildProgram } from "../../../src/cli/program.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { testPunctual, tickAndDrain, type TestPunctual } from "../../support/punctual.js";

const ROOT = "root-operator-key-0123456789";
let t: TestPunctual;
let keyed: Punctual;
let api: PunctualApi;
const keys: Record<"a" | "b" | "aRead", string> = { a: "", b: "", aRead: "" };
let scheduleA: ScheduleView;
let deliveryA: DeliveryView;

function call(key: string, method: string, path: string, body?: unknown, headers = {}) {
  return api.request(path, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

async function codeOf(res: Response): Promise<string> {
  return ((await res.json()) as ErrorBody).error.code;
}

const ICS = [
  "BEGIN:VCALENDAR",
  "VERSION:2.0",
  "PRODID:-//tenants//EN",
  "BEGIN:VEVENT",
  "UID:standup@tenants",
  "DTSTAMP:20270101T000000Z",
  "DTSTART:20270201T090000Z",
  "SUMMARY:Stand-up",
  "END:VEVENT",
  "END:VCALENDAR",
  "",
].join("\r\n");

function importAs(key: string, source: string) {
  return api.request(`/v1/imports?source=${source}&remind=-PT15M&channel=log`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "text/calendar" },
    body: ICS,
  });
}

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
  for (const [name, tenant, scopes] of [
    ["a", "acme", ["write", "admin"]],
    ["b", "globex", ["write", "admin"]],
    ["aRead", "acme", ["read"]],
  ] as const) {
    const res = await call(ROOT, "POST", "/v1/api-keys", { tenant, scopes, name });
    expect(res.status).toBe(201);
    keys[name] = ((await res.json()) as { key: string }).key;
  }
  // Tenant A: a one-off due now (sent by the tick), a series, an import.
  const created = await call(keys.a, "POST", "/v1/schedules", {
    dtstart: "2027-01-04T08:00:00Z",
    reminders: [{ key: "r", channel: "test" }],
  });
  expect(created.status).toBe(201);
  scheduleA = (await created.json()) as ScheduleView;
  expect((await importAs(keys.a, "team")).status).toBe(200);
  await tickAndDrain(t.punctual);
  const list = await call(keys.a, "GET", `/v1/deliveries?scheduleId=${scheduleA.id}`);
  const listed = (await list.json()) as { items: DeliveryView[] };
  deliveryA = listed.items[0]!;
  expect(deliveryA.state).toBe("sent");
});

afterAll(async () => {
  await keyed?.close(0);
  await t?.close();
});

describe("API-2 tenant isolation over HTTP", () => {
  it("API-2: every route on another tenant's schedule or delivery is 404, never 403, and changes nothing", async () => {
    const s = `/v1/schedules/${scheduleA.id}`;
    const d = `/v1/deliveries/${deliveryA.id}`;
    const tries: Array<[string, string, unknown?]> = [
      ["GET", s],
      ["PATCH", s, { payload: { stolen: true } }],
      ["POST", `${s}/pause`],
      ["POST", `${s}/resume`],
      ["POST", `${s}/trigger`, {}],
      ["POST", `${s}/backfill`, { from: "2027-01-01T00:00:00Z", to: "2027-01-03T00:00:00Z" }],
      ["DELETE", s],
      ["DELETE", `${s}?purge=true`],
      ["GET", d],
      ["POST", `${d}/redrive`],
      ["POST", `${d}/resolve`, { outcome: "sent" }],
    ];
    for (const [method, path, body] of tries) {
      const res = await call(keys.b, method, path, body);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(await codeOf(res), `${method} ${path}`).toBe("NOT_FOUND");
    }
    // The owner still sees it unchanged (version 1, active, its delivery sent).
    const own = await call(keys.a, "GET", s);
    expect(own.status).toBe(200);
    expect((await own.json()) as ScheduleView).toMatchObject({ version: 1, state: "finished" });
    const ownDelivery = await call(keys.a, "GET", d);
    expect(((await ownDelivery.json()) as DeliveryView).state).toBe("sent");
    // The owner's redrive of a sent delivery is a conflict, not a 404: the 404 above is the tenant wall.
    expect((await call(keys.a, "POST", `${d}/redrive`)).status).toBe(409);
  });

  it("API-2: lists and bulk actions see only the caller's tenant", async () => {
    const schedules = await call(keys.b, "GET", "/v1/schedules");
    expect(((await schedules.json()) as { items: ScheduleView[] }).items).toEqual([]);
    const deliveries = await call(keys.b, "GET", `/v1/deliveries?scheduleId=${scheduleA.id}`);
    expect(((await deliveries.json()) as { items: DeliveryView[] }).items).toEqual([]);
    const all = await call(keys.b, "GET", "/v1/deliveries");
    expect(((await all.json()) as { items: DeliveryView[] }).items).toEqual([]);
    for (const action of ["redrive", "resolve"]) {
      const res = await call(keys.b, "POST", `/v1/deliveries/${action}`, {
        state: "dead",
        scheduleId: scheduleA.id,
        ...(action === "resolve" ? { outcome: "sent" } : {}),
        dryRun: true,
      });
      expect(res.status, action).toBe(200);
      expect(((await res.json()) as { count: number }).count, action).toBe(0);
    }
    const mine = await call(keys.a, "GET", "/v1/schedules");
    expect(((await mine.json()) as { items: ScheduleView[] }).items.length).toBe(2);
  });

  it("API-2: an import or upsert under the same source and ids makes the caller's own schedules and leaves the other tenant's alone", async () => {
    const imported = await importAs(keys.b, "team");
    expect(imported.status).toBe(200);
    expect(await imported.json()).toMatchObject({ created: 1, updated: 0, cancelled: 0 });
    const upsert = await call(keys.b, "PUT", "/v1/schedules/by-external-id/team/standup@tenants", {
      dtstart: "2027-03-01T09:00:00Z",
      reminders: [{ key: "r", channel: "log" }],
    });
    expect(upsert.status).toBe(200); // B's own imported schedule, updated
    const aList = await call(keys.a, "GET", "/v1/schedules");
    const aImported = ((await aList.json()) as { items: ScheduleView[] }).items.find(
      (x) => x.source === "team",
    );
    expect(aImported).toMatchObject({ dtstart: "2027-02-01T09:00:00Z", version: 1 });
    // A's re-import sees nothing of B's and changes nothing of its own.
    expect(await (await importAs(keys.a, "team")).json()).toMatchObject({
      created: 0,
      unchanged: 1,
      cancelled: 0,
    });
  });

  it("API-2: kinds, rate limits and keys are per tenant; status, metrics and the secret need the operator's key", async () => {
    expect(
      (
        await call(keys.a, "PUT", "/v1/reminder-kinds/day-before", {
          channel: "log",
          offset: "-P1D",
        })
      ).status,
    ).toBeLessThan(300);
    expect((await call(keys.b, "GET", "/v1/reminder-kinds/day-before")).status).toBe(404);
    const bKinds = await call(keys.b, "GET", "/v1/reminder-kinds");
    expect(((await bKinds.json()) as { items: unknown[] }).items).toEqual([]);
    expect(
      (await call(keys.a, "PUT", "/v1/rate-limits/log", { ratePerSecond: 5, burst: 5 })).status,
    ).toBe(200);
    const bLimits = await call(keys.b, "GET", "/v1/rate-limits");
    expect(((await bLimits.json()) as { items: unknown[] }).items).toEqual([]);
    expect((await call(keys.b, "DELETE", "/v1/rate-limits/log")).status).toBe(404);

    const aKeys = await call(keys.a, "GET", "/v1/api-keys");
    const listed = ((await aKeys.json()) as { items: Array<{ id: string; tenant: string }> }).items;
    expect(new Set(listed.map((k) => k.tenant))).toEqual(new Set(["acme"]));
    expect((await call(keys.b, "DELETE", `/v1/api-keys/${listed[0]!.id}`)).status).toBe(404);
    const other = await call(keys.a, "POST", "/v1/api-keys", {
      tenant: "globex",
      scopes: ["admin"],
      name: "takeover",
    });
    expect(other.status).toBe(403);

    for (const path of ["/v1/status", "/metrics", "/v1/webhook-secret"]) {
      const res = await call(keys.a, "GET", path);
      expect(res.status, path).toBe(403);
      expect(await codeOf(res), path).toBe("INSUFFICIENT_SCOPE");
      expect((await call(ROOT, "GET", path)).status, path).toBe(200);
    }
    // A tenant key cannot borrow another tenant with the operator's header.
    const borrowed = await call(keys.b, "GET", "/v1/schedules", undefined, {
      "punctual-tenant": "acme",
    });
    expect(borrowed.status).toBe(403);
    // The operator can act for a tenant.
    const asAcme = await call(ROOT, "GET", `/v1/schedules/${scheduleA.id}`, undefined, {
      "punctual-tenant": "acme",
    });
    expect(asAcme.status).toBe(200);
    expect((await call(ROOT, "GET", `/v1/schedules/${scheduleA.id}`)).status).toBe(404);
  });

  it("API-2: GET /v1/circuits (CH-7) answers a tenant key with its own tenant's circuits only; the status lists every tenant's for the operator", async () => {
    await t.punctual.db.query(
      `insert into punctual_tenant_circuits (tenant, host, state, failures, backoff_ms, retry_at, opened_at)
       values ('acme', 'hooks.acme.example', 'open', 5, 30000, now(), now()),
              ('globex', 'hooks.globex.example', 'open', 5, 30000, now(), now())`,
    );
    try {
      const hosts = async (key: string, path = "/v1/circuits") => {
        const res = await call(key, "GET", path);
        expect(res.status, path).toBe(200);
        return ((await res.json()) as { items: Array<{ tenant: string; host: string }> }).items;
      };
      expect(await hosts(keys.aRead)).toEqual([
        expect.objectContaining({ tenant: "acme", host: "hooks.acme.example" }),
      ]);
      expect((await hosts(keys.b)).map((c) => c.host)).toEqual(["hooks.globex.example"]);
      // The operator acts for one tenant too (default `default`: none here).
      expect(await hosts(ROOT)).toEqual([]);
      const status = (await (await call(ROOT, "GET", "/v1/status")).json()) as {
        circuits: Array<{ tenant: string }>;
      };
      expect(status.circuits.map((c) => c.tenant)).toEqual(["acme", "globex"]);
    } finally {
      await t.punctual.db.query("delete from punctual_tenant_circuits");
    }
  });

  it("API-2: a read key reads but cannot write; a revoked key is 401 at once; an unknown key is 401", async () => {
    expect((await call(keys.aRead, "GET", `/v1/schedules/${scheduleA.id}`)).status).toBe(200);
    expect(
      (await call(keys.aRead, "POST", "/v1/preview", { dtstart: "2027-01-04T09:00:00Z" })).status,
    ).toBe(200);
    for (const [method, path, body] of [
      ["POST", `/v1/schedules/${scheduleA.id}/pause`, undefined],
      ["PATCH", `/v1/schedules/${scheduleA.id}`, { payload: 1 }],
      ["GET", "/v1/api-keys", undefined],
    ] as const) {
      const res = await call(keys.aRead, method, path, body);
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(await codeOf(res)).toBe("INSUFFICIENT_SCOPE");
    }
    const victim = await call(ROOT, "POST", "/v1/api-keys", {
      tenant: "acme",
      scopes: ["read"],
      name: "short-lived",
    });
    const { id, key } = (await victim.json()) as { id: string; key: string };
    expect((await call(key, "GET", "/v1/schedules")).status).toBe(200);
    expect((await call(keys.a, "DELETE", `/v1/api-keys/${id}`)).status).toBe(200);
    expect((await call(key, "GET", "/v1/schedules")).status).toBe(401);
    expect((await call("pk_not-a-real-key", "GET", "/v1/schedules")).status).toBe(401);
    // Without an operator key, another token is ignored, but a tenant key is still checked.
    const keyless = createApi(t.punctual);
    const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
    expect((await keyless.request("/v1/schedules", bearer("any-token"))).status).toBe(200);
    expect((await keyless.request("/v1/schedules", bearer(key))).status).toBe(401);
    const asB = await keyless.request("/v1/schedules", bearer(keys.b));
    expect(((await asB.json()) as { items: ScheduleView[] }).items.map((x) => x.id)).not.toContain(
      scheduleA.id,
    );
    // Only the hash is stored: no stored row holds the key.
    const stored = await t.punctual.db.query<{ n: number }>(
      "select count(*)::int as n from punctual_api_keys where key_hash = $1 or prefix = $1",
      [key],
    );
    expect(stored.rows[0]!.n).toBe(0);
  });
});

describe("API-2 tenant isolation through the CLI", () => {
  let served: ServedApi;
  beforeAll(async () => {
    served = await serveApi(api, { host: "127.0.0.1", port: 0 });
  });
  afterAll(async () => {
    await served?.close(0);
  });

  async function cli(key: string, ...args: string[]): Promise<{ out: string; error?: unknown }> {
    let out = "";
    const saved = process.env.PUNCTUAL_API_KEY;
    process.env.PUNCTUAL_API_KEY = key;
    try {
      const program = buildProgram({ out: (s) => (out += s), err: () => undefined });
      program.exitOverride();
      await program.parseAsync(["node", "punctual", ...args, "--url", served.url, "--json"]);
      return { out };
    } catch (error) {
      return { out, error };
    } finally {
      if (saved === undefined) delete process.env.PUNCTUAL_API_KEY;
      else process.env.PUNCTUAL_API_KEY = saved;
    }
  }

  it("API-2: schedules and deliveries commands with another tenant's key find nothing of it", async () => {
    for (const args of [
      ["schedules", "show", scheduleA.id],
      ["schedules", "pause", scheduleA.id],
      ["schedules", "cancel", scheduleA.id],
      ["deliveries", "show", String(deliveryA.id)],
      ["deliveries", "redrive", String(deliveryA.id)],
    ]) {
      const { error } = await cli(keys.b, ...args);
      expect(error, args.join(" ")).toMatchObject({ status: 404 });
    }
    const list = await cli(keys.b, "schedules", "list");
    const listed = JSON.parse(list.out).items as ScheduleView[];
    expect(listed.map((x) => x.id)).not.toContain(scheduleA.id);
    expect(listed.every((x) => x.source === "team")).toBe(true); // its own import only
    const status = await cli(keys.b, "status");
    expect(status.error).toMatchObject({ status: 403 });
    const own = await cli(keys.a, "schedules", "show", scheduleA.id);
    expect(JSON.parse(own.out)).toMatchObject({ id: scheduleA.id, state: "finished" });
    const created = await cli(
      ROOT,
      "api-keys",
      "create",
      "--tenant",
      "initech",
      "--scopes",
      "read",
      "--name",
      "cli",
    );
    expect(JSON.parse(created.out)).toMatchObject({ tenant: "initech", scopes: ["read"] });
    expect(JSON.parse(created.out).key).toMatch(/^pk_/);
  });
});
