/**
 * Delivery lists are bounded in bytes (API-3): an error a channel reported is stored cut
 * to MAX_ERROR_CHARS, a list item carries at most LIST_ERROR_MAX_CHARS of it (marked
 * `lastErrorTruncated`), and the single read shows what was stored. On the engine of this
 * run (npm test runs the file on PGlite and on PostgreSQL).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../src/api/server.js";
import {
  LIST_ERROR_MAX_CHARS,
  MAX_ERROR_CHARS,
  type AttemptView,
  type DeliveryView,
} from "../../src/contracts/index.js";
import { PermanentError } from "../../src/errors/index.js";
import { testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual;
let app: PunctualApi;

const T0 = "2027-01-04T08:00:00Z";
/** What the channel reports: 50,000 characters, two-byte ones among them. */
const HUGE = `refused: ${"é".repeat(25_000)}${"x".repeat(25_000)}`;
const SHORT = "refused: 422 unprocessable";

beforeAll(async () => {
  t = await testPunctual({ start: T0 });
  app = createApi(t.punctual);
  t.channel.behaviour = (d) => {
    throw new PermanentError(d.payload === "short" ? SHORT : HUGE, { status: 422 });
  };
  for (let i = 0; i < 30; i++) {
    await t.punctual.createSchedule({
      dtstart: T0,
      tzid: "UTC",
      source: "err-list",
      payload: i === 0 ? "short" : "huge",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
  }
  await tickAndDrain(t.punctual);
  await tickAndDrain(t.punctual);
});

afterAll(async () => {
  await t?.close();
});

describe("API-3: delivery lists are bounded in bytes", () => {
  it("API-3: a long lastError is cut in list items and marked; the page stays small; a short one is listed whole", async () => {
    const res = await app.request("/v1/deliveries?source=err-list&limit=1000");
    expect(res.status).toBe(200);
    const text = await res.text();
    const { items } = JSON.parse(text) as { items: DeliveryView[] };
    expect(items).toHaveLength(30);
    const [short, ...long] = items;
    expect(short).toMatchObject({ state: "dead", lastError: SHORT });
    expect("lastErrorTruncated" in short!).toBe(false);
    for (const item of long) {
      expect(item.state).toBe("dead");
      expect(item.lastError).toBe(HUGE.slice(0, LIST_ERROR_MAX_CHARS));
      expect(item.lastErrorTruncated).toBe(true);
    }
    // Stored: 29 × 2,000 characters (up to 4 KB each). Listed: about 1 KB each.
    expect(Buffer.byteLength(text)).toBeLessThan(30 * 2_048);
  });

  it("API-3: the stored error is cut to its bound, and the single read shows it as stored, attempts too", async () => {
    const { items } = await t.punctual.listDeliveries({ source: "err-list", limit: 2 });
    const res = await app.request(`/v1/deliveries/${items[1]!.id}`);
    expect(res.status).toBe(200);
    const one = (await res.json()) as DeliveryView & { attempts: AttemptView[] };
    expect(one.lastError).toBe(HUGE.slice(0, MAX_ERROR_CHARS));
    expect("lastErrorTruncated" in one).toBe(false);
    expect(one.attempts.map((a) => a.error)).toEqual([one.lastError]);
    const stored = await t.punctual.db.query<{ n: number }>(
      `select max(char_length(last_error))::int as n from punctual_deliveries`,
    );
    expect(stored.rows[0]?.n).toBe(MAX_ERROR_CHARS);
  });
});
