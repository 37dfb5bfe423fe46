/**
 * A tenant's own webhook signing secret (CH-1, API-2): it signs that tenant's webhooks and
 * no other's; a rotation overlaps (one `v1,` signature per secret) and then ends; removing
 * it brings the default back; the routes need the `admin` scope and see the caller's
 * tenant only. On the engine of this run (npm test runs the file on PGlite and on
 * PostgreSQL).
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../src/api/server.js";
import { verifyWebhook } from "../../src/channels/webhook-signature.js";
import type { ErrorBody } from "../../src/contracts/index.js";
import type { TenantWebhookSecretView } from "../../src/contracts/webhook-secrets.js";
import { testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

const T0 = "2027-01-04T08:00:00Z";
/** The default secret testPunctual configures. */
const DEFAULT = "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs";
const OWN = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;

let t: TestPunctual;
let app: PunctualApi;
const got: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
let url = "";
const server = createServer((req, res) => {
  let body = "";
  req.on("data", (c: Buffer) => (body += c.toString()));
  req.on("end", () => {
    got.push({ headers: req.headers, body });
    res.writeHead(200).end("{}");
  });
});

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  t = await testPunctual({ start: T0 });
  app = createApi(t.punctual);
});

afterAll(async () => {
  await t?.close();
  await new Promise((resolve) => server.close(resolve));
});

function call(method: string, path: string, tenant: string, body?: unknown, key?: string) {
  return app.request(path, {
    method,
    headers: {
      "content-type": "application/json",
      ...(key ? { authorization: `Bearer ${key}` } : { "punctual-tenant": tenant }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** Sends one webhook of `tenant` now and returns what the receiver got. */
async function sendOne(tenant: string, target: Record<string, unknown> = { url }) {
  const res = await call("POST", "/v1/schedules", tenant, {
    dtstart: new Date(t.clock.now()).toISOString(),
    tzid: "UTC",
    reminders: [{ key: "r", offset: "PT0S", channel: "webhook", target }],
  });
  expect(res.status).toBe(201);
  const before = got.length;
  await tickAndDrain(t.punctual);
  await tickAndDrain(t.punctual);
  expect(got.length).toBe(before + 1);
  const one = got.at(-1)!;
  const nowSeconds = Math.floor(t.clock.now() / 1000);
  return {
    signatures: String(one.headers["webhook-signature"]).split(" ").length,
    verifies: (secret: string) => verifyWebhook(secret, one.headers, one.body, { nowSeconds }),
  };
}

describe("CH-1 API-2: a tenant's own webhook signing secret", () => {
  it("CH-1 API-2: a tenant's own secret signs its webhooks and no other tenant's", async () => {
    const set = await call("POST", "/v1/tenant-webhook-secret", "acme", {
      secret: OWN,
      overlapSeconds: 0,
    });
    expect(set.status).toBe(200);
    expect(await set.json()).toEqual({ tenant: "acme", secret: OWN, overlapUntil: null });
    const acme = await sendOne("acme");
    expect(acme.signatures).toBe(1);
    expect(acme.verifies(OWN)).toBe(true);
    expect(acme.verifies(DEFAULT)).toBe(false);
    const beta = await sendOne("beta");
    expect(beta.verifies(DEFAULT)).toBe(true);
    expect(beta.verifies(OWN)).toBe(false);
    // A target's own secret still wins over the tenant's.
    const targetSecret = `whsec_${Buffer.alloc(32, 9).toString("base64")}`;
    const own = await sendOne("acme", { url, secret: targetSecret });
    expect(own.verifies(targetSecret)).toBe(true);
    expect(own.verifies(OWN)).toBe(false);
  });

  it("CH-1 API-2: a rotation signs with the old and the new secret during the overlap, then with the new one only; a first secret overlaps with the default", async () => {
    const first = (await (
      await call("POST", "/v1/tenant-webhook-secret", "gamma", { overlapSeconds: 3_600 })
    ).json()) as TenantWebhookSecretView;
    expect(first.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(first.overlapUntil).toBe(new Date(t.clock.now() + 3_600_000).toISOString());
    const during = await sendOne("gamma");
    expect(during.signatures).toBe(2);
    expect(during.verifies(first.secret)).toBe(true);
    expect(during.verifies(DEFAULT)).toBe(true);

    const res = await call("POST", "/v1/tenant-webhook-secret", "gamma", { overlapSeconds: 600 });
    const second = (await res.json()) as TenantWebhookSecretView;
    expect(second.secret).not.toBe(first.secret);
    const rotating = await sendOne("gamma");
    expect(rotating.signatures).toBe(2);
    expect(rotating.verifies(second.secret)).toBe(true);
    expect(rotating.verifies(first.secret)).toBe(true);
    expect(rotating.verifies(DEFAULT)).toBe(false);

    t.clock.advance(601_000);
    const after = await sendOne("gamma");
    expect(after.signatures).toBe(1);
    expect(after.verifies(second.secret)).toBe(true);
    expect(after.verifies(first.secret)).toBe(false);
    const read = await call("GET", "/v1/tenant-webhook-secret", "gamma");
    expect(await read.json()).toEqual({
      tenant: "gamma",
      secret: second.secret,
      overlapUntil: null,
    });
  });

  it("CH-1 API-2: removing a tenant's secret brings the default back; reading or removing none is 404", async () => {
    await call("POST", "/v1/tenant-webhook-secret", "delta", { secret: OWN, overlapSeconds: 0 });
    expect((await call("DELETE", "/v1/tenant-webhook-secret", "delta")).status).toBe(204);
    const back = await sendOne("delta");
    expect(back.verifies(DEFAULT)).toBe(true);
    expect(back.verifies(OWN)).toBe(false);
    expect((await call("GET", "/v1/tenant-webhook-secret", "delta")).status).toBe(404);
    expect((await call("DELETE", "/v1/tenant-webhook-secret", "delta")).status).toBe(404);
  });

  it("CH-1 API-2: a bad secret or overlap is 400 naming the field, and nothing is stored", async () => {
    for (const [body, field] of [
      [{ secret: "not-a-secret" }, "secret"],
      [{ secret: `whsec_${Buffer.alloc(8).toString("base64")}` }, "secret"],
      [{ overlapSeconds: -1 }, "overlapSeconds"],
      [{ overlapSeconds: 31 * 86_400 }, "overlapSeconds"],
    ] as const) {
      const res = await call("POST", "/v1/tenant-webhook-secret", "epsilon", body);
      expect(res.status).toBe(400);
      const error = ((await res.json()) as ErrorBody).error;
      expect(error.issues?.map((i) => i.field)).toContain(field);
    }
    expect((await call("GET", "/v1/tenant-webhook-secret", "epsilon")).status).toBe(404);
  });

  it("API-2: the routes need the admin scope, and a tenant key sees its own tenant's secret only", async () => {
    const writer = await t.punctual.createApiKey(
      { tenant: "acme", scopes: ["write"], name: "w" },
      { tenant: "default" },
    );
    const admin = await t.punctual.createApiKey(
      { tenant: "zeta", scopes: ["admin"], name: "a" },
      { tenant: "default" },
    );
    expect((await call("GET", "/v1/tenant-webhook-secret", "", undefined, writer.key)).status).toBe(
      403,
    );
    expect((await call("POST", "/v1/tenant-webhook-secret", "", {}, writer.key)).status).toBe(403);
    expect((await call("GET", "/v1/tenant-webhook-secret", "", undefined, admin.key)).status).toBe(
      404,
    );
    const set = await call(
      "POST",
      "/v1/tenant-webhook-secret",
      "",
      { overlapSeconds: 0 },
      admin.key,
    );
    expect(((await set.json()) as TenantWebhookSecretView).tenant).toBe("zeta");
    // acme's secret (set above) stays acme's.
    const acme = (await (
      await call("GET", "/v1/tenant-webhook-secret", "acme")
    ).json()) as TenantWebhookSecretView;
    expect(acme.secret).toBe(OWN);
  });
});
