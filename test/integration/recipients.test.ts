/**
 * API-10 the recipient registry over HTTP, on the engine of this run (npm test runs the
 * file on PGlite and on PostgreSQL): upsert, read, list pages in both orders with `q`,
 * delete, bulk upserts as a JSON array and as NDJSON with one result per row, bad input
 * named per field with nothing stored, and tenant isolation (another tenant's recipient
 * is "not found"). Private webhook targets are refused here (no allowPrivateTargets), so
 * the webhook channel's SSRF check is the one that answers.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../src/api/server.js";
import { createPunctual, type Punctual } from "../../src/app/punctual.js";
import { TestClock } from "../../src/clock/index.js";
import type { ErrorBody } from "../../src/contracts/index.js";
import type {
  BulkRecipientsSummary,
  RecipientPage,
  RecipientView,
} from "../../src/contracts/recipients.js";
import { silentLogger } from "../../src/observability/logger.js";
import { openTestDatabase, type TestDatabase } from "../support/db.js";

const ROOT = "root-operator-key-0123456789";
let t: TestDatabase;
let punctual: Punctual;
let api: PunctualApi;
const keys: Record<"a" | "b" | "aRead", string> = { a: "", b: "", aRead: "" };

function call(key: string, method: string, path: string, body?: unknown, contentType?: string) {
  const text =
    body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
  return api.request(path, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(text === undefined ? {} : { "content-type": contentType ?? "application/json" }),
    },
    ...(text === undefined ? {} : { body: text }),
  });
}

async function issues(res: Response): Promise<Array<{ field: string; value?: unknown }>> {
  expect(res.status).toBe(400);
  const body = (await res.json()) as ErrorBody;
  return (body.error.issues ?? []).map((i) => ({
    field: i.field,
    ...(i.value === undefined ? {} : { value: i.value }),
  }));
}

const ALICE = {
  tzid: "Asia/Tokyo",
  targets: {
    email: { to: "alice@example.com" },
    webhook: { url: "https://hooks.example.com/alice", secret: "s3cret-value" },
    slack: { url: "https://hooks.slack.com/services/T000/B000/XXXX" },
    discord: { url: "https://discord.com/api/webhooks/1/abc" },
  },
  attributes: { name: "Alice", plan: "pro" },
  preferences: { optOut: { channels: ["email"], categories: ["digest"] } },
};

beforeAll(async () => {
  t = await openTestDatabase();
  punctual = await createPunctual({
    database: t.db,
    clock: new TestClock("2027-01-04T08:00:00Z"),
    logger: silentLogger(),
    webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
    email: { smtpUrl: "smtp://127.0.0.1:2525", from: "reminders@example.com" },
    api: { apiKey: ROOT },
  });
  api = createApi(punctual);
  for (const [name, tenant, scopes] of [
    ["a", "acme", ["write"]],
    ["b", "globex", ["write"]],
    ["aRead", "acme", ["read"]],
  ] as const) {
    const res = await call(ROOT, "POST", "/v1/api-keys", { tenant, scopes, name });
    expect(res.status).toBe(201);
    keys[name] = ((await res.json()) as { key: string }).key;
  }
});

afterAll(async () => {
  await punctual?.close(0);
  await t?.close();
});

describe("API-10 PUT, GET, DELETE /v1/recipients/{id}", () => {
  it("API-10: PUT creates (201), a changed PUT replaces (200, version 2), an equal PUT changes nothing", async () => {
    const created = await call(keys.a, "PUT", "/v1/recipients/alice@example.com", ALICE);
    expect(created.status).toBe(201);
    const view = (await created.json()) as RecipientView;
    expect(view).toMatchObject({
      id: "alice@example.com",
      tzid: "Asia/Tokyo",
      attributes: { name: "Alice", plan: "pro" },
      preferences: ALICE.preferences,
      version: 1,
      createdAt: "2027-01-04T08:00:00.000Z",
      updatedAt: "2027-01-04T08:00:00.000Z",
    });
    // Secrets are redacted in views: the webhook's secret, the Slack and Discord URL paths.
    expect(view.targets).toEqual({
      email: { to: "alice@example.com" },
      webhook: { url: "https://hooks.example.com/alice", secret: "[redacted]" },
      slack: { url: "https://hooks.slack.com/[redacted]" },
      discord: { url: "https://discord.com/[redacted]" },
    });

    const same = await call(keys.a, "PUT", "/v1/recipients/alice@example.com", ALICE);
    expect(same.status).toBe(200);
    expect(((await same.json()) as RecipientView).version).toBe(1);

    const changed = await call(keys.a, "PUT", "/v1/recipients/alice@example.com", {
      tzid: "europe/lisbon",
      attributes: { name: "Alice" },
    });
    expect(changed.status).toBe(200);
    const replaced = (await changed.json()) as RecipientView;
    // The whole recipient is replaced; the zone is kept in its canonical spelling.
    expect(replaced).toMatchObject({
      tzid: "Europe/Lisbon",
      targets: {},
      attributes: { name: "Alice" },
      preferences: {},
      version: 2,
      createdAt: "2027-01-04T08:00:00.000Z",
    });

    const read = await call(keys.aRead, "GET", "/v1/recipients/alice%40example.com");
    expect(read.status).toBe(200);
    expect(await read.json()).toEqual(replaced);
  });

  it("API-10: DELETE removes (204); GET and DELETE of an unknown id are 404", async () => {
    expect((await call(keys.a, "PUT", "/v1/recipients/bob", { tzid: "UTC" })).status).toBe(201);
    expect((await call(keys.a, "DELETE", "/v1/recipients/bob")).status).toBe(204);
    expect((await call(keys.a, "GET", "/v1/recipients/bob")).status).toBe(404);
    const again = await call(keys.a, "DELETE", "/v1/recipients/bob");
    expect(again.status).toBe(404);
    expect(((await again.json()) as ErrorBody).error.code).toBe("NOT_FOUND");
    expect((await call(keys.a, "GET", "/v1/recipients/no%20such%20id")).status).toBe(404);
  });

  it("API-10: a read key lists and reads but cannot write (API-2 scopes)", async () => {
    expect((await call(keys.aRead, "PUT", "/v1/recipients/x", { tzid: "UTC" })).status).toBe(403);
    expect((await call(keys.aRead, "DELETE", "/v1/recipients/alice@example.com")).status).toBe(403);
    const bulk = await call(keys.aRead, "POST", "/v1/recipients:bulk", [{ id: "x", tzid: "UTC" }]);
    expect(bulk.status).toBe(403);
    expect((await call(keys.aRead, "GET", "/v1/recipients")).status).toBe(200);
  });
});

describe("API-10 bad input: 400 naming the field and value, nothing stored", () => {
  const refused = async (id: string, body: unknown) => {
    const res = await call(keys.a, "PUT", `/v1/recipients/${encodeURIComponent(id)}`, body);
    const found = await issues(res);
    expect((await call(keys.a, "GET", `/v1/recipients/${encodeURIComponent(id)}`)).status).toBe(
      404,
    );
    return found;
  };

  it("API-10: an unknown or fixed-offset zone names tzid", async () => {
    expect(await refused("z1", { tzid: "Mars/Olympus" })).toEqual([
      { field: "tzid", value: "Mars/Olympus" },
    ]);
    expect(await refused("z2", { tzid: "+09:00" })).toEqual([{ field: "tzid", value: "+09:00" }]);
    expect((await refused("z3", {})).map((i) => i.field)).toEqual(["tzid"]);
  });

  it("API-10: each target fails its own channel's validation under targets.<channel>", async () => {
    expect(
      await refused("t1", { tzid: "UTC", targets: { email: { to: "not-an-address" } } }),
    ).toEqual([{ field: "targets.email.to", value: "not-an-address" }]);
    // CH-1: the webhook channel's SSRF check refuses a loopback or private target.
    expect(
      await refused("t2", { tzid: "UTC", targets: { webhook: { url: "http://127.0.0.1/hook" } } }),
    ).toEqual([{ field: "targets.webhook.url", value: "http://127.0.0.1/hook" }]);
    expect(
      await refused("t3", { tzid: "UTC", targets: { webhook: { url: "ftp://example.com/x" } } }),
    ).toEqual([{ field: "targets.webhook.url", value: "ftp://example.com/x" }]);
    // CH-3: a Slack or Discord URL is a credential: named, never echoed back.
    expect(
      await refused("t4", { tzid: "UTC", targets: { slack: { url: "http://10.0.0.1/x" } } }),
    ).toEqual([{ field: "targets.slack.url" }]);
    expect(await refused("t5", { tzid: "UTC", targets: { discord: { hook: "x" } } })).toEqual([
      { field: "targets.discord.hook" },
      { field: "targets.discord.url" },
    ]);
    expect(await refused("t6", { tzid: "UTC", targets: { pager: { number: "1" } } })).toEqual([
      { field: "targets.pager", value: "pager" },
    ]);
  });

  it("API-10: id, attributes, preferences and unknown fields are checked against their limits", async () => {
    expect(await refused("-leading-dash", { tzid: "UTC" })).toEqual([
      { field: "id", value: "-leading-dash" },
    ]);
    expect((await refused("a".repeat(201), { tzid: "UTC" })).map((i) => i.field)).toEqual(["id"]);
    const big = { blob: "x".repeat(16_384) };
    expect((await refused("p1", { tzid: "UTC", attributes: big })).map((i) => i.field)).toEqual([
      "attributes",
    ]);
    const eleven = Array.from({ length: 11 }, (_, i) => `c${i}`);
    expect(
      (await refused("p2", { tzid: "UTC", preferences: { optOut: { categories: eleven } } })).map(
        (i) => i.field,
      ),
    ).toEqual(["preferences.optOut.categories"]);
    expect(
      await refused("p3", { tzid: "UTC", preferences: { optOut: { channels: ["pager"] } } }),
    ).toEqual([{ field: "preferences.optOut.channels.0", value: "pager" }]);
    expect(
      (await refused("p4", { tzid: "UTC", preferences: { marketing: false } })).map((i) => i.field),
    ).toEqual(["preferences"]);
    expect(
      await refused("p5", {
        tzid: "UTC",
        preferences: { quietHours: { start: "22:00", end: "22:00" } },
      }),
    ).toEqual([{ field: "preferences.quietHours.end", value: "22:00" }]);
    expect(
      await refused("p6", {
        tzid: "UTC",
        preferences: { quietHours: { tzid: "Nowhere/City", start: "22:00", end: "07:00" } },
      }),
    ).toEqual([{ field: "preferences.quietHours.tzid", value: "Nowhere/City" }]);
    expect((await refused("p7", { tzid: "UTC", nickname: "x" })).map((i) => i.field)).toEqual([
      "(body)",
    ]);
  });

  it("API-10: a quiet window in the recipient's own zone is stored as given", async () => {
    const quiet = { start: "22:00", end: "07:00", days: ["MO", "TU"] };
    const res = await call(keys.a, "PUT", "/v1/recipients/quiet", {
      tzid: "Asia/Tokyo",
      preferences: { quietHours: quiet },
    });
    expect(res.status).toBe(201);
    expect(((await res.json()) as RecipientView).preferences).toEqual({ quietHours: quiet });
  });
});

describe("API-10 GET /v1/recipients pages", () => {
  it("API-10: pages by id in both orders with cursors, q filters, a cursor of another q is a 400", async () => {
    const rows = Array.from({ length: 7 }, (_, i) => ({ id: `page-${i}`, tzid: "UTC" }));
    const bulk = await call(keys.b, "POST", "/v1/recipients:bulk", rows);
    expect(bulk.status).toBe(200);
    expect((await call(keys.b, "PUT", "/v1/recipients/zz-other", { tzid: "UTC" })).status).toBe(
      201,
    );

    const walk = async (query: string): Promise<string[]> => {
      const ids: string[] = [];
      let cursor: string | null = null;
      for (let n = 0; n < 10; n++) {
        const res = await call(
          keys.b,
          "GET",
          `/v1/recipients?${query}${cursor ? `&cursor=${cursor}` : ""}`,
        );
        expect(res.status).toBe(200);
        const page = (await res.json()) as RecipientPage;
        expect(page.items.length).toBeLessThanOrEqual(3);
        ids.push(...page.items.map((r) => r.id));
        cursor = page.nextCursor;
        if (cursor === null) return ids;
      }
      throw new Error("too many pages");
    };
    const asc = rows.map((r) => r.id);
    expect(await walk("limit=3&q=PAGE")).toEqual(asc);
    expect(await walk("limit=3&q=page&order=desc")).toEqual([...asc].reverse());
    expect(await walk("limit=3")).toEqual([...asc, "zz-other"]);

    // A last page that is exactly full says so: no cursor to an empty page.
    const full = (await (
      await call(keys.b, "GET", "/v1/recipients?limit=8")
    ).json()) as RecipientPage;
    expect(full.items).toHaveLength(8);
    expect(full.nextCursor).toBeNull();

    const first = (await (
      await call(keys.b, "GET", "/v1/recipients?limit=2&q=page")
    ).json()) as RecipientPage;
    const wrong = await call(keys.b, "GET", `/v1/recipients?limit=2&cursor=${first.nextCursor}`);
    expect((await issues(wrong)).map((i) => i.field)).toEqual(["cursor"]);
    expect(
      (await issues(await call(keys.b, "GET", "/v1/recipients?limit=0"))).map((i) => i.field),
    ).toEqual(["limit"]);
  });
});

describe("API-10 POST /v1/recipients:bulk", () => {
  it("API-10: a JSON array: per-row results, a bad row does not stop the good ones", async () => {
    expect((await call(keys.a, "PUT", "/v1/recipients/bulk-1", { tzid: "UTC" })).status).toBe(201);
    const res = await call(keys.a, "POST", "/v1/recipients:bulk", [
      { id: "bulk-1", tzid: "Asia/Tokyo" },
      { id: "bulk-2", tzid: "Asia/Tokyo", targets: { email: { to: "b2@example.com" } } },
      { id: "bulk-3", tzid: "Mars/Olympus" },
      "not an object",
      { tzid: "UTC" },
      { id: "bulk-2", tzid: "UTC" },
    ]);
    expect(res.status).toBe(200);
    const summary = (await res.json()) as BulkRecipientsSummary;
    expect({ ...summary, results: undefined }).toEqual({
      created: 1,
      updated: 1,
      errors: 4,
      results: undefined,
    });
    expect(summary.results.map((r) => [r.index, r.id, r.status])).toEqual([
      [0, "bulk-1", "updated"],
      [1, "bulk-2", "created"],
      [2, "bulk-3", "error"],
      [3, null, "error"],
      [4, null, "error"],
      [5, "bulk-2", "error"],
    ]);
    expect(summary.results[2]!.error?.issues).toEqual([
      expect.objectContaining({ field: "tzid", value: "Mars/Olympus" }),
    ]);
    expect(summary.results[4]!.error?.issues?.map((i) => i.field)).toEqual(["id"]);
    expect(summary.results[5]!.error?.issues?.map((i) => i.field)).toEqual(["id"]);

    expect((await punctual.getRecipient("bulk-1", { tenant: "acme" })).tzid).toBe("Asia/Tokyo");
    expect((await punctual.getRecipient("bulk-2", { tenant: "acme" })).tzid).toBe("Asia/Tokyo");
    await expect(punctual.getRecipient("bulk-3", { tenant: "acme" })).rejects.toThrow(/not found/);
  });

  it("API-10: NDJSON: blank lines skipped, a line that is not JSON is an error row", async () => {
    const ndjson = [
      JSON.stringify({ id: "nd-1", tzid: "UTC", attributes: { n: 1 } }),
      "",
      "{not json",
      JSON.stringify({ id: "nd-2", tzid: "Europe/Berlin" }),
      "",
    ].join("\n");
    const res = await call(keys.a, "POST", "/v1/recipients:bulk", ndjson, "application/x-ndjson");
    expect(res.status).toBe(200);
    const summary = (await res.json()) as BulkRecipientsSummary;
    expect(summary.results.map((r) => [r.index, r.id, r.status])).toEqual([
      [0, "nd-1", "created"],
      [1, null, "error"],
      [2, "nd-2", "created"],
    ]);
    expect(summary.results[1]!.error?.message).toMatch(/line 3 is not JSON/);
    // Run twice, nothing changes: every row is "updated" and keeps version 1.
    const again = (await (
      await call(keys.a, "POST", "/v1/recipients:bulk", ndjson, "application/x-ndjson")
    ).json()) as BulkRecipientsSummary;
    expect(again).toMatchObject({ created: 0, updated: 2, errors: 1 });
    expect((await punctual.getRecipient("nd-1", { tenant: "acme" })).version).toBe(1);
  });

  it("API-10: more than 10,000 rows is a 400 and stores nothing; other media types are 415", async () => {
    const rows = Array.from({ length: 10_001 }, (_, i) => ({ id: `many-${i}`, tzid: "UTC" }));
    const res = await call(keys.a, "POST", "/v1/recipients:bulk", rows);
    expect(await issues(res)).toEqual([{ field: "(body)", value: 10_001 }]);
    const ndjson = rows.map((r) => JSON.stringify(r)).join("\n");
    const nd = await call(keys.a, "POST", "/v1/recipients:bulk", ndjson, "application/x-ndjson");
    expect(await issues(nd)).toEqual([{ field: "(body)", value: 10_001 }]);
    const page = await punctual.listRecipients({ q: "many-" }, { tenant: "acme" });
    expect(page.items).toEqual([]);

    expect(
      (await issues(await call(keys.a, "POST", "/v1/recipients:bulk", { id: "x" }))).map(
        (i) => i.field,
      ),
    ).toEqual(["(body)"]);
    const text = await call(keys.a, "POST", "/v1/recipients:bulk", "id,tzid", "text/csv");
    expect(text.status).toBe(415);
  });

  it("API-7: a JSON body that does not parse is 400 INVALID_JSON with the parser's position, not a 500", async () => {
    const res = await call(keys.a, "POST", "/v1/recipients:bulk", '[{"id": "j-1",}]');
    expect(res.status).toBe(400);
    const body = (await res.json()) as ErrorBody;
    expect(body.error.code).toBe("INVALID_JSON");
    expect(body.error.message).toMatch(/not valid JSON \(at character \d+\)/);
    const page = await punctual.listRecipients({ q: "j-1" }, { tenant: "acme" });
    expect(page.items).toEqual([]);
  });

  it("API-10: 10,000 rows in one body are accepted (past the 1 MiB limit of other routes)", async () => {
    const rows = Array.from({ length: 10_000 }, (_, i) => ({
      id: `max-${String(i).padStart(5, "0")}`,
      tzid: "UTC",
      attributes: { note: "n".repeat(100) },
    }));
    const body = JSON.stringify(rows);
    expect(body.length).toBeGreaterThan(1_048_576);
    const res = await call(keys.b, "POST", "/v1/recipients:bulk", body);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ created: 10_000, updated: 0, errors: 0 });
    const big = await call(keys.b, "PUT", "/v1/recipients/too-big", body);
    expect(big.status).toBe(413);
  });
});

describe("API-10 tenant isolation (API-2)", () => {
  it("API-10: another tenant's recipient is not found for GET, DELETE and lists; a PUT makes the tenant's own", async () => {
    expect((await call(keys.a, "PUT", "/v1/recipients/shared-id", { tzid: "UTC" })).status).toBe(
      201,
    );
    expect((await call(keys.b, "GET", "/v1/recipients/shared-id")).status).toBe(404);
    expect((await call(keys.b, "DELETE", "/v1/recipients/shared-id")).status).toBe(404);
    const listed = (await (
      await call(keys.b, "GET", "/v1/recipients?q=shared")
    ).json()) as RecipientPage;
    expect(listed.items).toEqual([]);
    // The same id in tenant b is b's own recipient; a's is untouched.
    expect(
      (await call(keys.b, "PUT", "/v1/recipients/shared-id", { tzid: "Asia/Tokyo" })).status,
    ).toBe(201);
    const a = (await (
      await call(keys.a, "GET", "/v1/recipients/shared-id")
    ).json()) as RecipientView;
    expect(a).toMatchObject({ tzid: "UTC", version: 1 });
    const bulk = (await (
      await call(keys.b, "POST", "/v1/recipients:bulk", [{ id: "shared-id", tzid: "UTC" }])
    ).json()) as BulkRecipientsSummary;
    expect(bulk.results[0]!.status).toBe("updated");
    expect(
      ((await (await call(keys.a, "GET", "/v1/recipients/shared-id")).json()) as RecipientView)
        .version,
    ).toBe(1);
  });

  it("API-10: the OpenAPI document lists the recipient routes", async () => {
    const doc = (await (await api.request("/openapi.json")).json()) as {
      paths: Record<string, Record<string, unknown>>;
      components: { schemas: Record<string, unknown> };
    };
    expect(Object.keys(doc.paths["/v1/recipients/{id}"]!).sort()).toEqual(["delete", "get", "put"]);
    expect(Object.keys(doc.paths["/v1/recipients"]!)).toEqual(["get"]);
    expect(Object.keys(doc.paths["/v1/recipients:bulk"]!)).toEqual(["post"]);
    expect(doc.components.schemas).toHaveProperty("RecipientRow");
  });
});
