/**
 * API-3: the lists past schedules and deliveries page with the same opaque keyset cursor,
 * through the HTTP API: `GET /v1/api-keys` (by creation), `GET /v1/imports` (the written
 * imports, by id) and `GET /v1/instances` (every stored instance, by start), in both
 * orders and with their filters; a cursor of another order or filter set, or altered, is
 * a 400 naming `cursor`; `GET /v1/status` shows a bounded number of instances with the
 * count of its window. Runs on the engine of this run (PGlite or PostgreSQL).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import type { ErrorBody } from "../../../src/contracts/index.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { testPunctual, type TestPunctual } from "../../support/punctual.js";

const ROOT = "root-operator-key-0123456789";
let t: TestPunctual;
let keyed: Punctual;
let api: PunctualApi;
let acmeAdmin = "";

type Page = { items: Array<{ id: string | number }>; nextCursor: string | null };

function get(path: string, key = ROOT, headers: Record<string, string> = {}) {
  return api.request(path, { headers: { authorization: `Bearer ${key}`, ...headers } });
}

/** Every page of `path` with `query`, following nextCursor; the ids in the order they came. */
async function walk(
  path: string,
  query: Record<string, string>,
  key = ROOT,
): Promise<Array<string | number>> {
  const seen: Array<string | number> = [];
  let cursor: string | null = null;
  for (let page = 0; page < 500; page++) {
    const qs = new URLSearchParams({ ...query, ...(cursor ? { cursor } : {}) });
    const res = await get(`${path}?${qs}`, key);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Page;
    seen.push(...body.items.map((i) => i.id));
    cursor = body.nextCursor;
    if (!cursor) return seen;
  }
  throw new Error("did not end");
}

/** The first page's cursor of `path?query`. */
async function firstCursor(path: string, query: Record<string, string>): Promise<string> {
  const body = (await (await get(`${path}?${new URLSearchParams(query)}`)).json()) as Page;
  expect(body.nextCursor).toEqual(expect.any(String));
  return body.nextCursor!;
}

/** Asserts that `path?query` is a 400 whose issues name `field`. */
async function refused(path: string, query: Record<string, string>, field: string) {
  const res = await get(`${path}?${new URLSearchParams(query)}`);
  expect(res.status).toBe(400);
  const body = (await res.json()) as ErrorBody;
  expect(body.error.issues?.map((i) => i.field)).toContain(field);
}

/** A cursor whose key was changed (its checksum no longer matches). */
function altered(cursor: string): string {
  const decoded = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as {
    k: unknown[];
  };
  const last = decoded.k[decoded.k.length - 1];
  decoded.k[decoded.k.length - 1] =
    typeof last === "number" ? last + 1_000 : "00000000-0000-4000-8000-000000000000";
  return Buffer.from(JSON.stringify(decoded)).toString("base64url");
}

const ics = (uid: string) =>
  [
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "PRODID:-//paging//EN",
    "BEGIN:VEVENT",
    `UID:${uid}`,
    "DTSTAMP:20270101T000000Z",
    "DTSTART:20270201T090000Z",
    "SUMMARY:Stand-up",
    "END:VEVENT",
    "END:VCALENDAR",
    "",
  ].join("\r\n");

function importAs(source: string, uid: string, extra = "", key = ROOT) {
  return api.request(`/v1/imports?source=${source}&remind=-PT15M&channel=log${extra}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "text/calendar" },
    body: ics(uid),
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
  const res = await api.request("/v1/api-keys", {
    method: "POST",
    headers: { authorization: `Bearer ${ROOT}`, "content-type": "application/json" },
    body: JSON.stringify({ tenant: "acme", scopes: ["admin"], name: "acme admin" }),
  });
  acmeAdmin = ((await res.json()) as { key: string }).key;
});

afterAll(async () => {
  await keyed?.close(0);
  await t?.close();
});

describe("GET /v1/api-keys pages", () => {
  it("API-3 API-2: keyset pages by creation in both orders, per tenant, ties on created_at included", async () => {
    for (let i = 0; i < 9; i++) {
      await keyed.createApiKey(
        { tenant: i % 3 === 0 ? "beta" : "acme", scopes: ["read"], name: `key ${i}` },
        { tenant: "default" },
      );
    }
    // Ties on the first sort key: five keys share one creation instant.
    await keyed.db.query(
      `update punctual_api_keys set created_at = '2027-01-04T07:00:00.123456Z'
        where id in (select id from punctual_api_keys order by id limit 5)`,
    );
    const byKey = async (dir: "asc" | "desc", tenant: string | null) =>
      (
        await keyed.db.query<{ id: string }>(
          `select id from punctual_api_keys where ($1::text is null or tenant = $1)
            order by created_at ${dir}, id ${dir}`,
          [tenant],
        )
      ).rows.map((r) => r.id);
    for (const limit of ["1", "2", "4"]) {
      expect(await walk("/v1/api-keys", { limit })).toEqual(await byKey("asc", null));
      expect(await walk("/v1/api-keys", { limit, order: "desc" })).toEqual(
        await byKey("desc", null),
      );
      expect(await walk("/v1/api-keys", { limit, tenant: "acme", order: "desc" })).toEqual(
        await byKey("desc", "acme"),
      );
      // A tenant key pages its own tenant's keys only, whatever it asks.
      expect(await walk("/v1/api-keys", { limit, tenant: "beta" }, acmeAdmin)).toEqual(
        await byKey("asc", "acme"),
      );
    }
    expect((await byKey("asc", "acme")).length).toBe(7);
  });

  it("API-3: a cursor of another order, tenant or revoked filter, or altered, is a 400 naming cursor", async () => {
    const cursor = await firstCursor("/v1/api-keys", { limit: "2" });
    await refused("/v1/api-keys", { cursor, order: "desc" }, "cursor");
    await refused("/v1/api-keys", { cursor, tenant: "acme" }, "cursor");
    await refused("/v1/api-keys", { cursor, revoked: "true" }, "cursor");
    await refused("/v1/api-keys", { cursor: altered(cursor) }, "cursor");
    await refused("/v1/api-keys", { cursor: "nope" }, "cursor");
    await refused("/v1/api-keys", { limit: "1e2" }, "limit");
    const again = (await (await get(`/v1/api-keys?limit=3&cursor=${cursor}`)).json()) as Page;
    expect(again.items).toHaveLength(3);
  });
});

describe("GET /v1/imports pages", () => {
  it("API-3 API-5: each written import is listed once, by id in both orders, filtered by source and time", async () => {
    const at: string[] = [];
    for (const [i, source] of ["team", "team", "ops", "team", "ops", "team"].entries()) {
      t.clock.set(`2027-01-04T${10 + i}:30:00Z`);
      at.push(new Date(t.clock.now()).toISOString());
      expect((await importAs(source, `ev-${i}@paging`)).status).toBe(200);
    }
    // A dry run writes nothing and is not listed; nor is another tenant's import.
    expect((await importAs("team", "dry@paging", "&dryRun=true")).status).toBe(200);
    expect((await importAs("team", "acme@paging", "", acmeAdmin)).status).toBe(200);
    const { rows } = await keyed.db.query<{ id: string; source: string }>(
      `select id, source from punctual_imports where tenant = 'default' order by id`,
    );
    expect(rows).toHaveLength(6);
    const ids = rows.map((r) => Number(r.id));
    const team = rows.filter((r) => r.source === "team").map((r) => Number(r.id));
    for (const limit of ["1", "2", "5"]) {
      expect(await walk("/v1/imports", { limit })).toEqual(ids);
      expect(await walk("/v1/imports", { limit, order: "desc" })).toEqual([...ids].reverse());
      expect(await walk("/v1/imports", { limit, source: "team" })).toEqual(team);
    }
    expect(
      await walk("/v1/imports", { limit: "1", importedFrom: at[2]!, importedTo: at[4]! }),
    ).toEqual(ids.slice(2, 4));
    const first = (await (await get("/v1/imports?limit=1")).json()) as {
      items: Array<Record<string, unknown>>;
    };
    expect(first.items[0]).toMatchObject({
      source: "team",
      importedAt: at[0],
      events: 1,
      created: 1,
      updated: 0,
      unchanged: 0,
      cancelled: 0,
      skipped: 0,
    });
    // The other tenant sees its own import only.
    expect(await walk("/v1/imports", {}, acmeAdmin)).toHaveLength(1);
  });

  it("API-3: a cursor of another order or filter set, an altered one or a bad bound is a 400 naming the field", async () => {
    const cursor = await firstCursor("/v1/imports", { limit: "1", source: "team" });
    await refused("/v1/imports", { cursor }, "cursor");
    await refused("/v1/imports", { cursor, source: "team", order: "desc" }, "cursor");
    await refused("/v1/imports", { cursor: altered(cursor), source: "team" }, "cursor");
    await refused("/v1/imports", { importedFrom: "yesterday" }, "importedFrom");
    await refused(
      "/v1/imports",
      { importedFrom: "2027-01-05T00:00:00Z", importedTo: "2027-01-04T00:00:00Z" },
      "importedTo",
    );
  });
});

describe("GET /v1/instances pages", () => {
  it("API-3 OPS-3: every stored instance by start in both orders, filtered by state and role; status stays bounded", async () => {
    await keyed.db.query(
      `insert into punctual_instances (id, host, pid, version, role, started_at, last_tick_at, stopped_at)
       select 'inst-' || lpad(g::text, 3, '0'), 'host', g, '0.0.0',
              case when g % 4 = 0 then 'start' else 'worker' end,
              -- ties: ten instances per start instant
              '2027-01-04T07:00:00Z'::timestamptz + ((g / 10) * interval '1 second'),
              '2027-01-04T07:59:00Z'::timestamptz,
              -- stopped ten minutes ago: still in the status window (the last hour)
              case when g % 3 = 0 then $1::timestamptz - interval '10 minutes' end
       from generate_series(1, 130) g`,
      [new Date(t.clock.now())],
    );
    const byKey = async (dir: "asc" | "desc", where = "true") =>
      (
        await keyed.db.query<{ id: string }>(
          `select id from punctual_instances where ${where} order by started_at ${dir}, id ${dir}`,
        )
      ).rows.map((r) => r.id);
    for (const limit of ["7", "50"]) {
      expect(await walk("/v1/instances", { limit })).toEqual(await byKey("asc"));
      expect(await walk("/v1/instances", { limit, order: "desc" })).toEqual(await byKey("desc"));
      expect(await walk("/v1/instances", { limit, state: "running", role: "worker" })).toEqual(
        await byKey("asc", "stopped_at is null and role = 'worker'"),
      );
      expect(await walk("/v1/instances", { limit, state: "stopped", order: "desc" })).toEqual(
        await byKey("desc", "stopped_at is not null"),
      );
    }
    // The status answer holds at most 100 instances, running first, and counts its window.
    const status = (await (await get("/v1/status")).json()) as {
      instances: Array<{ id: string; stoppedAt: string | null }>;
      instancesTotal: number;
    };
    const inWindow = await byKey("asc");
    expect(inWindow.length).toBeGreaterThan(100);
    expect(status.instances).toHaveLength(100);
    expect(status.instancesTotal).toBe(inWindow.length);
    const running = await byKey("asc", "stopped_at is null");
    expect(status.instances.filter((i) => i.stoppedAt === null)).toHaveLength(running.length);
  });

  it("API-3 API-2: a cursor of another order or filter set is a 400 naming cursor; a tenant key may not list instances", async () => {
    const cursor = await firstCursor("/v1/instances", { limit: "5", state: "running" });
    await refused("/v1/instances", { cursor }, "cursor");
    await refused("/v1/instances", { cursor, state: "stopped" }, "cursor");
    await refused("/v1/instances", { cursor: altered(cursor), state: "running" }, "cursor");
    await refused("/v1/instances", { state: "sleeping" }, "state");
    expect((await get("/v1/instances", acmeAdmin)).status).toBe(403);
  });
});
