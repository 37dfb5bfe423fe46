/**
 * HTTP API, operations (API-2, OPS-3, OPS-4): bearer authentication, liveness and
 * readiness, metrics and status, in process through `app.request()`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { TestClock } from "../../../src/clock/index.js";
import type { ErrorBody } from "../../../src/contracts/index.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { installTransitionTrigger } from "../../support/transitions.js";

const API_KEY = "test-key-0123456789abcdef";

let clock: TestClock;
let open: Punctual;
let secured: Punctual;
let openApp: PunctualApi;
let securedApp: PunctualApi;

beforeAll(async () => {
  clock = new TestClock("2027-01-04T08:00:00Z");
  open = await createPunctual({ dataDir: null, clock, logger: silentLogger() });
  // The delivery state machine, checked here too (test/support/transitions.ts).
  await installTransitionTrigger(open.db);
  // A second facade with an API key over the same database.
  secured = await createPunctual({
    database: open.db,
    clock,
    logger: silentLogger(),
    api: { apiKey: API_KEY },
  });
  openApp = createApi(open);
  securedApp = createApi(secured);
});

afterAll(async () => {
  await secured?.close(0);
  await open?.close(0);
});

/** Lets the loop's own tick (started by `start()`) run, without sleeping on real time. */
async function untilReady(p: Punctual): Promise<void> {
  for (let i = 0; i < 1_000; i++) {
    if ((await p.health()).ready) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error("never became ready");
}

describe("API-2 bearer authentication", () => {
  it("API-2: without the key /v1/* and /metrics answer 401; /healthz and /readyz stay open", async () => {
    const res = await securedApp.request("/v1/schedules");
    expect(res.status).toBe(401);
    expect(((await res.json()) as ErrorBody).error.code).toBe("UNAUTHORIZED");
    expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect((await securedApp.request("/metrics")).status).toBe(401);
    expect((await securedApp.request("/healthz")).status).toBe(200);
    expect([200, 503]).toContain((await securedApp.request("/readyz")).status);
  });

  it("API-2: a wrong key is 401, the right one 200", async () => {
    const wrong = await securedApp.request("/v1/schedules", {
      headers: { authorization: `Bearer ${API_KEY}x` },
    });
    expect(wrong.status).toBe(401);
    const right = await securedApp.request("/v1/schedules", {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(right.status).toBe(200);
    const metrics = await securedApp.request("/metrics", {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(metrics.status).toBe(200);
  });

  it("API-2: without a configured key the API is open", async () => {
    expect((await openApp.request("/v1/schedules")).status).toBe(200);
  });
});

describe("OPS-4 liveness and readiness", () => {
  it("OPS-4: /healthz is 200 while the process lives; /readyz is 503 before the first pass and 200 after", async () => {
    const live = await openApp.request("/healthz");
    expect(live.status).toBe(200);
    expect(await live.json()).toEqual({ status: "ok" });

    const before = await openApp.request("/readyz");
    expect(before.status).toBe(503);
    const beforeBody = (await before.json()) as { status: string; checks: { heartbeat: boolean } };
    expect(beforeBody.status).toBe("not_ready");
    expect(beforeBody.checks.heartbeat).toBe(false);

    await open.start();
    await untilReady(open);
    const after = await openApp.request("/readyz");
    expect(after.status).toBe(200);
    expect(await after.json()).toMatchObject({
      status: "ready",
      checks: { database: true, schema: true, heartbeat: true },
    });
    await open.scheduler.stop(0);
    expect((await openApp.request("/readyz")).status).toBe(503);
  });
});

describe("OPS-3 metrics and status", () => {
  it("OPS-3: /metrics is Prometheus text with the backlog and the last pass", async () => {
    // The readiness test stopped the scheduler, and a stopped one refuses tick(): run a
    // pass through start() instead.
    await open.scheduler.start();
    await untilReady(open);
    await open.scheduler.stop(0);
    const res = await openApp.request("/metrics");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toContain("punctual_due_backlog");
    expect(text).toContain("punctual_scheduler_last_pass_timestamp_seconds");
  });

  it("OPS-3: GET /v1/status reports instances, schedules and delivery counts", async () => {
    await openApp.request("/v1/schedules", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ dtstart: "2027-02-01T09:00:00Z", reminders: [{ channel: "log" }] }),
    });
    const res = await openApp.request("/v1/status");
    expect(res.status).toBe(200);
    const status = (await res.json()) as {
      database: { engine: string };
      instances: Array<{ id: string }>;
      schedules: Record<string, number>;
      deliveries: Record<string, unknown>;
    };
    expect(status.database.engine).toBe("pglite");
    expect(status.instances.length).toBeGreaterThanOrEqual(1);
    expect(status.schedules.active).toBeGreaterThanOrEqual(1);
    expect(status.deliveries).toMatchObject({
      dueBacklog: expect.any(Number),
      inDoubt: 0,
      dead: 0,
    });
  });
});

describe("CH-1 default signing secret", () => {
  it("CH-1: the generated secret is kept in the database, shared by every process, and readable with the key", async () => {
    const local = createApi(open, { localToken: "local-token-for-the-cli" });
    const res = await local.request("/v1/webhook-secret", {
      headers: { authorization: "Bearer local-token-for-the-cli" },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { secret: string; source: string };
    expect(body.source).toBe("generated");
    expect(body.secret).toMatch(/^whsec_[A-Za-z0-9+/=]{20,}$/);
    // The second facade on the same database signs with the same secret.
    expect(secured.webhookSecret.secret).toBe(body.secret);
    expect((await securedApp.request("/v1/webhook-secret")).status).toBe(401);
    const keyed = await securedApp.request("/v1/webhook-secret", {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(((await keyed.json()) as { secret: string }).secret).toBe(body.secret);
  });
});
