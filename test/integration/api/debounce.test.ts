/**
 * DEL-18: debounced upserts — `PUT /v1/schedules/by-external-id/{source}/{externalId}`
 * with `debounce: { windowMs, maxDelayMs }` moves the one-off's due time to now + window
 * at each upsert, never past the burst's first upsert + maxDelay, and a burst sends once.
 * On the engine of this run (PGlite or PostgreSQL), driven by the test clock.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createApi } from "../../../src/api/server.js";
import { testPunctual, tickAndDrain, type TestPunctual } from "../../support/punctual.js";

let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

const PATH = "/v1/schedules/by-external-id/crm/ticket-7";

function body(debounce: unknown, extra: Record<string, unknown> = {}) {
  return JSON.stringify({
    reminders: [{ key: "now", offset: "PT0S", channel: "test" }],
    payload: { ticket: 7 },
    debounce,
    ...extra,
  });
}

async function put(api: ReturnType<typeof createApi>, text: string, path = PATH) {
  return api.request(path, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: text,
  });
}

describe("debounced upserts (DEL-18)", () => {
  it("API-9 DEL-18: the one-part path upserts in the source `api`, the same schedule as the two-part path's", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const api = createApi(t.punctual);
    const debounce = { windowMs: 10_000, maxDelayMs: 60_000 };
    const first = await put(api, body(debounce), "/v1/schedules/by-external-id/order-42");
    expect(first.status).toBe(201);
    const created = (await first.json()) as { id: string; source: string; externalId: string };
    expect([created.source, created.externalId]).toEqual(["api", "order-42"]);
    t.clock.set("2027-01-04T08:00:05Z");
    const again = await put(api, body(debounce), "/v1/schedules/by-external-id/api/order-42");
    expect(again.status).toBe(200);
    expect(((await again.json()) as { id: string }).id).toBe(created.id);
    t.clock.set("2027-01-04T08:00:16Z");
    await tickAndDrain(t.punctual);
    await tickAndDrain(t.punctual);
    expect(t.channel.sends).toHaveLength(1);
  });

  it("DEL-18: each upsert within the window moves the due time to now + window; the burst sends exactly once", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const api = createApi(t.punctual);
    const debounce = { windowMs: 10_000, maxDelayMs: 60_000 };
    const first = await put(api, body(debounce));
    expect(first.status).toBe(201);
    const created = (await first.json()) as { id: string; dtstart: string };
    expect(Date.parse(created.dtstart)).toBe(Date.parse("2027-01-04T08:00:10Z"));
    for (const at of ["08:00:05", "08:00:09"]) {
      t.clock.set(`2027-01-04T${at}Z`);
      await tickAndDrain(t.punctual);
      expect((await put(api, body(debounce))).status).toBe(200);
    }
    // Without the moves it would have been sent at 08:00:10.
    t.clock.set("2027-01-04T08:00:18Z");
    await tickAndDrain(t.punctual);
    expect(t.channel.sends).toHaveLength(0);
    t.clock.set("2027-01-04T08:00:19Z");
    await tickAndDrain(t.punctual);
    await tickAndDrain(t.punctual);
    expect(t.channel.sends).toHaveLength(1);
    expect(t.channel.sends[0]!.delivery.occurrenceAt.toISOString()).toBe(
      "2027-01-04T08:00:19.000Z",
    );
    const schedule = await t.punctual.getSchedule(created.id);
    expect(Date.parse(schedule.dtstart)).toBe(Date.parse("2027-01-04T08:00:19Z"));
    // An upsert after the send starts the next burst: one more send, once.
    t.clock.set("2027-01-04T08:01:00Z");
    expect((await put(api, body(debounce))).status).toBe(200);
    t.clock.set("2027-01-04T08:01:10Z");
    await tickAndDrain(t.punctual);
    await tickAndDrain(t.punctual);
    expect(t.channel.sends).toHaveLength(2);
    const rows = await t.punctual.listDeliveries({ scheduleId: created.id });
    expect(rows.items.map((d) => `${d.state} ${d.occurrenceAt}`).sort()).toEqual([
      "sent 2027-01-04T08:00:19.000Z",
      "sent 2027-01-04T08:01:10.000Z",
    ]);
  });

  it("DEL-18: a burst that keeps coming is sent at its first upsert + maxDelay, once", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const api = createApi(t.punctual);
    const debounce = { windowMs: 10_000, maxDelayMs: 30_000 };
    expect((await put(api, body(debounce))).status).toBe(201);
    // An upsert every 5 s: the window alone would never close.
    for (let s = 5; s <= 40; s += 5) {
      t.clock.set(new Date(Date.parse("2027-01-04T08:00:00Z") + s * 1000).toISOString());
      await tickAndDrain(t.punctual);
      const res = await put(api, body(debounce));
      expect(res.status).toBe(200);
      if (s === 30) expect(t.channel.sends).toHaveLength(1);
    }
    await tickAndDrain(t.punctual);
    // Sent once at 08:00:30 (first upsert + maxDelay); the upsert at 30 s, after the
    // send, began the next burst, still waiting.
    expect(t.channel.sends.map((s) => s.delivery.occurrenceAt.toISOString())).toEqual([
      "2027-01-04T08:00:30.000Z",
    ]);
  });

  it("DEL-18: debounce on a recurring schedule, and bad windows, are 400s naming the field; nothing is stored", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const api = createApi(t.punctual);
    const recurring = await put(
      api,
      body(
        { windowMs: 10_000, maxDelayMs: 60_000 },
        { dtstart: "2027-01-05T08:00:00Z", rrule: "FREQ=DAILY" },
      ),
    );
    expect(recurring.status).toBe(400);
    const text = JSON.stringify(await recurring.json());
    expect(text).toContain('"debounce"');
    expect(text).toContain("FREQ=DAILY");
    const short = await put(api, body({ windowMs: 10_000, maxDelayMs: 5_000 }));
    expect(short.status).toBe(400);
    expect(JSON.stringify(await short.json())).toContain("maxDelayMs");
    const tiny = await put(api, body({ windowMs: 1, maxDelayMs: 5_000 }));
    expect(tiny.status).toBe(400);
    expect(JSON.stringify(await tiny.json())).toContain("windowMs");
    expect((await t.punctual.listSchedules({})).items).toHaveLength(0);
  });
});
