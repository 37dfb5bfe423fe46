/**
 * Dashboard sessions in the database (API-6, API-2): only a SHA-256 of the session id is
 * stored; the expiry slides with use; revoking or deleting the tenant key ends its
 * sessions; logout deletes the row; the retention pass deletes expired rows; and two
 * punctual instances on one PostgreSQL database (separate pools, as two `punctual start`
 * processes behind a load balancer) serve each other's sessions.
 */
import { createHash } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { MAX_SESSIONS_PER_KEY, SESSION_IDLE_MS } from "../../../src/app/sessions.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { itIfPostgres, openTestDatabase } from "../../support/db.js";
import { testPunctual, type TestPunctual } from "../../support/punctual.js";

const ROOT = "root-operator-key-for-db-sessions";
const ORIGIN = "http://localhost";
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

interface Login {
  id: string;
  cookie: string;
  csrf: string;
}

async function login(app: PunctualApi, key: string): Promise<Login> {
  const res = await app.request(`${ORIGIN}/ui/login`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: ORIGIN },
    body: JSON.stringify({ key }),
  });
  expect(res.status).toBe(200);
  const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0]!;
  const body = (await res.json()) as { csrf: string };
  return { id: cookie.slice(cookie.indexOf("=") + 1), cookie, csrf: body.csrf };
}

const get = (app: PunctualApi, s: Login, path: string) =>
  app.request(`${ORIGIN}${path}`, { headers: { cookie: s.cookie } });

const post = (app: PunctualApi, s: Login, path: string, headers: Record<string, string> = {}) =>
  app.request(`${ORIGIN}${path}`, { method: "POST", headers: { cookie: s.cookie, ...headers } });

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

async function sessionRows(p: Punctual) {
  return (
    await p.db.query<{
      id_hash: string;
      api_key_id: string | null;
      operator_key_hash: string | null;
    }>("select id_hash, api_key_id, operator_key_hash from punctual_sessions order by created_at")
  ).rows;
}

/** A keyed punctual on the test database (test clock), its API, and a tenant key. */
async function keyedApi(): Promise<{
  t: TestPunctual;
  p: Punctual;
  api: PunctualApi;
  key: string;
  keyId: string;
}> {
  const t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
  const p = await createPunctual({
    database: t.punctual.db,
    clock: t.clock,
    logger: silentLogger(),
    channels: [t.channel],
    allowPrivateTargets: true,
    webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
    api: { apiKey: ROOT },
    scheduler: { retentionEveryMs: 1_000 },
  });
  cleanups.push(async () => {
    await p.close(0);
    await t.close();
  });
  const api = createApi(p);
  const created = await p.createApiKey(
    { tenant: "acme", scopes: ["write"], name: "acme" },
    { tenant: "default" },
  );
  return { t, p, api, key: created.key, keyId: created.id };
}

describe("API-6 dashboard sessions in the database", () => {
  it("API-6: the table holds only a SHA-256 of the session id, never the id or the key", async () => {
    const { p, api, key, keyId } = await keyedApi();
    const root = await login(api, ROOT);
    const tenant = await login(api, key);
    const rows = await sessionRows(p);
    expect(rows).toEqual([
      { id_hash: sha256(root.id), api_key_id: null, operator_key_hash: sha256(ROOT) },
      { id_hash: sha256(tenant.id), api_key_id: keyId, operator_key_hash: null },
    ]);
    const dump = JSON.stringify((await p.db.query("select * from punctual_sessions")).rows);
    for (const secret of [root.id, tenant.id, ROOT, key]) expect(dump).not.toContain(secret);
    expect((await get(api, tenant, "/v1/schedules")).status).toBe(200);
  });

  it("API-6: the expiry slides: a session used within the idle limit stays, one idle longer ends", async () => {
    const { t, api } = await keyedApi();
    const s = await login(api, ROOT);
    // Used twice, each time just before the limit: 2 × 11 h is past a fixed 12 h end.
    for (let i = 0; i < 2; i++) {
      t.clock.advance(SESSION_IDLE_MS - 3_600_000);
      expect((await get(api, s, "/v1/schedules")).status).toBe(200);
    }
    t.clock.advance(SESSION_IDLE_MS + 60_000);
    expect((await get(api, s, "/v1/schedules")).status).toBe(401);
    expect(await (await get(api, s, "/ui/session")).json()).toMatchObject({ authenticated: false });
  });

  it("API-6: revoking the tenant key ends its sessions at once and deletes them; the operator's stay", async () => {
    const { p, api, key, keyId } = await keyedApi();
    const tenant = await login(api, key);
    const root = await login(api, ROOT);
    expect((await get(api, tenant, "/v1/schedules")).status).toBe(200);
    await p.revokeApiKey(keyId, { tenant: null });
    expect((await get(api, tenant, "/v1/schedules")).status).toBe(401);
    expect((await sessionRows(p)).map((r) => r.id_hash)).toEqual([sha256(root.id)]);
    expect((await get(api, root, "/v1/schedules")).status).toBe(200);
  });

  it("API-6: a session whose key is revoked is refused even while its row is still there", async () => {
    const { p, api, key, keyId } = await keyedApi();
    const tenant = await login(api, key);
    // Revoked behind the application's back (the row of the session is not deleted).
    await p.db.query("update punctual_api_keys set revoked_at = now() where id = $1", [keyId]);
    expect(await sessionRows(p)).toHaveLength(1);
    expect((await get(api, tenant, "/v1/schedules")).status).toBe(401);
  });

  it("API-6: deleting the key deletes its sessions", async () => {
    const { p, api, key, keyId } = await keyedApi();
    const tenant = await login(api, key);
    await p.db.query("delete from punctual_api_keys where id = $1", [keyId]);
    expect(await sessionRows(p)).toHaveLength(0);
    expect((await get(api, tenant, "/v1/schedules")).status).toBe(401);
  });

  it("API-6: logout deletes the row; a new login replaces the browser's old session", async () => {
    const { p, api } = await keyedApi();
    const first = await login(api, ROOT);
    const again = await api.request(`${ORIGIN}/ui/login`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: ORIGIN, cookie: first.cookie },
      body: JSON.stringify({ key: ROOT }),
    });
    expect(again.status).toBe(200);
    const second = (again.headers.get("set-cookie") ?? "").split(";")[0]!;
    expect(second).not.toBe(first.cookie);
    expect(await sessionRows(p)).toHaveLength(1);
    const s: Login = { id: second.slice(second.indexOf("=") + 1), cookie: second, csrf: "" };
    s.csrf = ((await (await get(api, s, "/ui/session")).json()) as { csrf: string }).csrf;
    expect((await post(api, s, "/ui/logout", { "x-csrf-token": s.csrf })).status).toBe(200);
    expect(await sessionRows(p)).toHaveLength(0);
  });

  it("API-6: the retention pass deletes expired sessions and keeps live ones", async () => {
    const { t, p, api } = await keyedApi();
    await login(api, ROOT);
    t.clock.advance(SESSION_IDLE_MS - 60_000);
    const live = await login(api, ROOT);
    t.clock.advance(120_000);
    await p.scheduler.tick();
    expect((await sessionRows(p)).map((r) => r.id_hash)).toEqual([sha256(live.id)]);
  });

  it("API-6: many logins with one key keep at most MAX_SESSIONS_PER_KEY sessions of it, the least recently used ended first; another key's stay", async () => {
    const { t, p, api, key } = await keyedApi();
    const tenant = await login(api, key);
    const first = await login(api, ROOT);
    t.clock.advance(120_000);
    const used = await login(api, ROOT);
    t.clock.advance(120_000);
    // `first` is used now: `used` (untouched since its login) is the least recently used.
    expect((await get(api, first, "/v1/schedules")).status).toBe(200);
    const later: Login[] = [];
    for (let i = 0; i < MAX_SESSIONS_PER_KEY - 1; i++) {
      t.clock.advance(1_000);
      later.push(await login(api, ROOT));
    }
    const rows = await sessionRows(p);
    expect(rows.filter((r) => r.operator_key_hash !== null)).toHaveLength(MAX_SESSIONS_PER_KEY);
    expect((await get(api, used, "/v1/schedules")).status).toBe(401);
    expect((await get(api, first, "/v1/schedules")).status).toBe(200);
    expect((await get(api, later.at(-1)!, "/v1/schedules")).status).toBe(200);
    // The tenant key's session is not the operator's to evict.
    expect(rows.filter((r) => r.api_key_id !== null)).toHaveLength(1);
    expect((await get(api, tenant, "/v1/schedules")).status).toBe(200);
    for (let i = 0; i < MAX_SESSIONS_PER_KEY + 5; i++) await login(api, key);
    expect((await sessionRows(p)).filter((r) => r.api_key_id !== null)).toHaveLength(
      MAX_SESSIONS_PER_KEY,
    );
  });

  it("API-6: a session of the operator's key ends when that key changes", async () => {
    const { t, api } = await keyedApi();
    const s = await login(api, ROOT);
    const other = await createPunctual({
      database: t.punctual.db,
      clock: t.clock,
      logger: silentLogger(),
      channels: [t.channel],
      allowPrivateTargets: true,
      webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
      api: { apiKey: "a-new-operator-key-after-rotation" },
    });
    cleanups.push(() => other.close(0));
    expect((await get(createApi(other), s, "/v1/schedules")).status).toBe(401);
    expect((await get(api, s, "/v1/schedules")).status).toBe(200);
  });
});

describe("API-6 sessions across processes", () => {
  /** Two punctual instances, each with its own pool to one PostgreSQL database. */
  async function twoProcesses(): Promise<[Punctual, Punctual]> {
    const handle = await openTestDatabase();
    const open = () =>
      createPunctual({
        databaseUrl: handle.url!,
        logger: silentLogger(),
        allowPrivateTargets: true,
        webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
        api: { apiKey: ROOT },
      });
    const a = await open();
    const b = await open();
    cleanups.push(async () => {
      await a.close(0);
      await b.close(0);
      await handle.close();
    });
    return [a, b];
  }

  itIfPostgres(
    "API-6: a login on one process is valid on the other; revoke and logout on one are seen by the other",
    async () => {
      const [a, b] = await twoProcesses();
      expect(a.db).not.toBe(b.db);
      const apiA = createApi(a);
      const apiB = createApi(b);
      const created = await a.createApiKey(
        { tenant: "acme", scopes: ["write"], name: "acme" },
        { tenant: "default" },
      );
      const tenant = await login(apiA, created.key);
      const session = await get(apiB, tenant, "/ui/session");
      expect(await session.json()).toMatchObject({
        authenticated: true,
        tenant: "acme",
        root: false,
        csrf: tenant.csrf,
      });
      // A write on B with the CSRF token A handed out.
      const write = await apiB.request(`${ORIGIN}/v1/schedules`, {
        method: "POST",
        headers: {
          cookie: tenant.cookie,
          "x-csrf-token": tenant.csrf,
          origin: ORIGIN,
          "content-type": "application/json",
        },
        body: JSON.stringify({
          dtstart: "2030-01-01T09:00:00Z",
          reminders: [{ key: "r", channel: "log" }],
        }),
      });
      expect(write.status).toBe(201);
      await b.revokeApiKey(created.id, { tenant: null });
      expect((await get(apiA, tenant, "/v1/schedules")).status).toBe(401);

      const root = await login(apiB, ROOT);
      expect((await get(apiA, root, "/v1/schedules")).status).toBe(200);
      expect((await post(apiA, root, "/ui/logout", { "x-csrf-token": root.csrf })).status).toBe(
        200,
      );
      expect((await get(apiB, root, "/v1/schedules")).status).toBe(401);
    },
  );
});
