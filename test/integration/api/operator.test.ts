/**
 * Operator actions (API-9) and schedule handles (API-4), through the HTTP API in process
 * (`app.request()`) and the library, on the engine of this run (PGlite or PostgreSQL).
 */
import { afterEach, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import type { DeliveryView, ErrorBody } from "../../../src/contracts/index.js";
import { PermanentError } from "../../../src/errors/index.js";
import {
  deliveries,
  testPunctual,
  tickAndDrain,
  type TestPunctual,
} from "../../support/punctual.js";

const T0 = "2027-01-04T08:00:00Z";
const DAY = 86_400_000;
let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

/** A daily series at 08:00 UTC that began ten days before T0, one reminder on the test channel. */
function daily(extra: Record<string, unknown> = {}) {
  return {
    dtstart: "2026-12-25T08:00:00Z",
    tzid: "UTC",
    rrule: "FREQ=DAILY;COUNT=60",
    reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    ...extra,
  };
}

async function setup(
  options: Parameters<typeof testPunctual>[0] = {},
): Promise<{ t: TestPunctual; api: PunctualApi }> {
  t = await testPunctual({ start: T0, ...options });
  return { t, api: createApi(t.punctual) };
}

function post(
  api: PunctualApi,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  return api.request(path, {
    method: "POST",
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

function put(api: PunctualApi, path: string, body: unknown) {
  return api.request(path, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

interface TriggerReply {
  triggerId: string;
  created: boolean;
  deliveries: DeliveryView[];
}

describe("API-9 trigger now", () => {
  it("API-9: a trigger sends one extra delivery now with its own key; the scheduled ones are left alone", async () => {
    const { t, api } = await setup();
    const { schedule } = await t.punctual.createSchedule(daily());
    const before = await deliveries(t.punctual);
    const res = await post(api, `/v1/schedules/${schedule.id}/trigger`, {});
    expect(res.status).toBe(201);
    const reply = (await res.json()) as TriggerReply;
    expect(reply.created).toBe(true);
    expect(reply.deliveries).toHaveLength(1);
    const triggered = reply.deliveries[0]!;
    expect(triggered).toMatchObject({
      state: "pending",
      reminderKey: "r",
      dueAt: "2027-01-04T08:00:00.000Z",
    });
    expect(before.map((d) => d.deliveryKey)).not.toContain(triggered.deliveryKey);
    // A scheduled occurrence at this very instant keeps its own delivery beside it.
    await tickAndDrain(t.punctual);
    const sentKeys = t.channel.keys();
    expect(sentKeys).toContain(triggered.deliveryKey);
    const after = await deliveries(t.punctual);
    for (const d of before) {
      expect(after.find((a) => a.id === d.id)?.deliveryKey).toBe(d.deliveryKey);
    }
    expect(after).toHaveLength(before.length + 1);
  });

  it("API-9: the same Idempotency-Key triggers once (200 replay, nothing more sent); another key triggers again", async () => {
    const { t, api } = await setup();
    const { schedule } = await t.punctual.createSchedule(daily());
    const path = `/v1/schedules/${schedule.id}/trigger`;
    const first = await post(api, path, undefined, { "idempotency-key": "ticket-42" });
    expect(first.status).toBe(201);
    const replay = await post(api, path, undefined, { "idempotency-key": "ticket-42" });
    expect(replay.status).toBe(200);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    const a = (await first.json()) as TriggerReply;
    const b = (await replay.json()) as TriggerReply;
    expect(b.deliveries.map((d) => d.id)).toEqual(a.deliveries.map((d) => d.id));
    await tickAndDrain(t.punctual);
    expect(t.channel.keys().filter((k) => k === a.deliveries[0]!.deliveryKey)).toHaveLength(1);
    const other = await post(api, path, undefined, { "idempotency-key": "ticket-43" });
    expect(other.status).toBe(201);
    expect(((await other.json()) as TriggerReply).deliveries[0]!.deliveryKey).not.toBe(
      a.deliveries[0]!.deliveryKey,
    );
  });

  it("API-9: an edit's realign keeps a triggered delivery that is still waiting (DEL-9)", async () => {
    const { t, api } = await setup();
    const { schedule } = await t.punctual.createSchedule(daily());
    const reply = (await (
      await post(api, `/v1/schedules/${schedule.id}/trigger`, {})
    ).json()) as TriggerReply;
    await t.punctual.updateSchedule(schedule.id, { rrule: "FREQ=DAILY;COUNT=30;BYHOUR=9" });
    const row = (await deliveries(t.punctual)).find((d) => d.id === reply.deliveries[0]!.id);
    expect(row?.state).toBe("pending");
    await tickAndDrain(t.punctual);
    expect(t.channel.keys()).toContain(reply.deliveries[0]!.deliveryKey);
  });

  it("API-9: a paused schedule is not triggered (409), an unknown reminder is 400 naming reminderKey, an unknown id 404", async () => {
    const { t, api } = await setup();
    const { schedule } = await t.punctual.createSchedule(daily());
    const bad = await post(api, `/v1/schedules/${schedule.id}/trigger`, { reminderKey: "nope" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as ErrorBody).error.issues?.[0]?.field).toBe("reminderKey");
    await t.punctual.pauseSchedule(schedule.id);
    expect((await post(api, `/v1/schedules/${schedule.id}/trigger`, {})).status).toBe(409);
    const missing = "00000000-0000-4000-8000-000000000000";
    expect((await post(api, `/v1/schedules/${missing}/trigger`, {})).status).toBe(404);
  });
});

interface BackfillReply {
  dryRun: boolean;
  created: number;
  existing: number;
  existingByState: Record<string, number>;
  items: Array<{ occurrenceAt: string; existing: string | null; deliveryKey: string }>;
}

describe("API-9 backfill", () => {
  it("API-9: a dry run lists the past occurrences without a delivery and writes nothing; the real run creates them and they are sent late", async () => {
    const { t, api } = await setup();
    const { schedule } = await t.punctual.createSchedule(daily());
    const path = `/v1/schedules/${schedule.id}/backfill`;
    const range = { from: "2027-01-01T00:00:00Z", to: "2027-01-04T00:00:00Z" };
    const before = (await deliveries(t.punctual)).length;
    const dry = (await (await post(api, path, { ...range, dryRun: true })).json()) as BackfillReply;
    expect(dry).toMatchObject({ dryRun: true, created: 3, existing: 0 });
    expect(dry.items.map((i) => i.occurrenceAt)).toEqual([
      "2027-01-01T08:00:00.000Z",
      "2027-01-02T08:00:00.000Z",
      "2027-01-03T08:00:00.000Z",
    ]);
    expect(await deliveries(t.punctual)).toHaveLength(before);
    const res = await post(api, path, range);
    expect(res.status).toBe(200);
    expect(((await res.json()) as BackfillReply).created).toBe(3);
    await tickAndDrain(t.punctual);
    for (const item of dry.items) expect(t.channel.keys()).toContain(item.deliveryKey);
    const late = (await deliveries(t.punctual)).filter((d) =>
      dry.items.some((i) => i.deliveryKey === d.deliveryKey),
    );
    expect(late.map((d) => [d.state, d.late])).toEqual([
      ["sent", true],
      ["sent", true],
      ["sent", true],
    ]);
  });

  it("API-9: backfilling a range again never makes a second delivery for a sent occurrence", async () => {
    const { t, api } = await setup();
    const { schedule } = await t.punctual.createSchedule(daily());
    const path = `/v1/schedules/${schedule.id}/backfill`;
    const range = { from: "2027-01-02T00:00:00Z", to: "2027-01-04T00:00:00Z" };
    await post(api, path, range);
    await tickAndDrain(t.punctual);
    const sends = t.channel.sends.length;
    const again = (await (await post(api, path, range)).json()) as BackfillReply;
    expect(again).toMatchObject({ created: 0, existing: 2, existingByState: { sent: 2 } });
    await tickAndDrain(t.punctual);
    expect(t.channel.sends).toHaveLength(sends);
  });

  it("API-9: out-of-bounds ranges are refused naming the field (future to, past the expansion limit, before retention)", async () => {
    const { t, api } = await setup({ scheduler: { retentionDays: 3_000 } });
    const { schedule } = await t.punctual.createSchedule(daily());
    const path = `/v1/schedules/${schedule.id}/backfill`;
    const field = async (body: unknown) => {
      const res = await post(api, path, body);
      expect(res.status).toBe(400);
      return ((await res.json()) as ErrorBody).error.issues?.[0]?.field;
    };
    expect(await field({ from: "2027-01-01T00:00:00Z", to: "2027-01-05T00:00:00Z" })).toBe("to");
    expect(await field({ from: "2027-01-03T00:00:00Z", to: "2027-01-02T00:00:00Z" })).toBe("to");
    expect(await field({ from: "2025-01-01T00:00:00Z", to: "2026-12-01T00:00:00Z" })).toBe("to");
    await t.close();
    const short = await setup({ scheduler: { retentionDays: 2 } });
    const s2 = await short.t.punctual.createSchedule(daily());
    const res = await post(short.api, `/v1/schedules/${s2.schedule.id}/backfill`, {
      from: "2027-01-01T00:00:00Z",
      to: "2027-01-04T00:00:00Z",
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as ErrorBody).error.issues?.[0]?.field).toBe("from");
    // Within the retention, but a reminder 25 hours ahead makes a delivery due before it.
    const early = await short.t.punctual.createSchedule(
      daily({ reminders: [{ key: "r", offset: "-PT25H", channel: "test" }] }),
    );
    const ahead = await post(short.api, `/v1/schedules/${early.schedule.id}/backfill`, {
      from: "2027-01-02T12:00:00Z",
      to: "2027-01-04T00:00:00Z",
    });
    expect(ahead.status).toBe(400);
    expect(((await ahead.json()) as ErrorBody).error.issues?.[0]?.field).toBe("from");
  });
});

interface BulkReply {
  dryRun: boolean;
  count: number;
  remaining: number;
  sample: DeliveryView[];
}

describe("API-9 bulk redrive and resolve", () => {
  /** Three dead deliveries (PERMANENT) on the test channel, one sent. */
  async function deadLetters(t: TestPunctual) {
    t.channel.behaviour = (d) => {
      if ((d.payload as { ok?: boolean } | null)?.ok) return { messageId: null };
      throw new PermanentError("gone");
    };
    const one = (payload: unknown, source?: string) =>
      t.punctual.createSchedule({
        dtstart: T0,
        tzid: "UTC",
        payload,
        ...(source ? { source, externalId: `x-${Math.random()}` } : {}),
        reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
      });
    await one({ n: 1 }, "crm");
    await one({ n: 2 }, "crm");
    await one({ n: 3 });
    await one({ ok: true });
    await tickAndDrain(t.punctual);
    const rows = await deliveries(t.punctual);
    expect(rows.map((r) => r.state).sort()).toEqual(["dead", "dead", "dead", "sent"]);
    return rows;
  }

  it("API-9: a dry run counts and samples the matching dead letters and changes nothing", async () => {
    const { t, api } = await setup();
    await deadLetters(t);
    const res = await post(api, "/v1/deliveries/redrive", { state: "dead", dryRun: true });
    const reply = (await res.json()) as BulkReply;
    expect(reply).toMatchObject({ dryRun: true, count: 3 });
    expect(reply.sample).toHaveLength(3);
    expect((await deliveries(t.punctual)).filter((d) => d.state === "dead")).toHaveLength(3);
  });

  it("API-9: a redrive by filter (source, reason) sends the matching ones again with the same keys", async () => {
    const { t, api } = await setup();
    const rows = await deadLetters(t);
    t.channel.behaviour = () => ({ messageId: null });
    const res = await post(api, "/v1/deliveries/redrive", {
      state: "dead",
      reason: "PERMANENT",
      source: "crm",
    });
    const reply = (await res.json()) as BulkReply;
    expect(reply).toMatchObject({ dryRun: false, count: 2, remaining: 0 });
    const before = t.channel.sends.length;
    await tickAndDrain(t.punctual);
    const resent = t.channel.sends.slice(before).map((s) => s.delivery.deliveryKey);
    expect(resent.sort()).toEqual(reply.sample.map((d) => d.deliveryKey).sort());
    for (const d of reply.sample) {
      expect(rows.find((r) => r.id === d.id)?.deliveryKey).toBe(d.deliveryKey);
    }
    const after = await deliveries(t.punctual);
    expect(after.filter((d) => d.state === "dead")).toHaveLength(1);
  });

  it("API-9: a limit redrives the lowest ids first and says how many remain", async () => {
    const { t, api } = await setup();
    await deadLetters(t);
    const reply = (await (
      await post(api, "/v1/deliveries/redrive", { limit: 2 })
    ).json()) as BulkReply;
    expect(reply).toMatchObject({ count: 2, remaining: 1 });
  });

  it("API-9: a bulk resolve acknowledges the matching dead letters (reason resolved); a bad filter is 400 naming it", async () => {
    const { t, api } = await setup();
    await deadLetters(t);
    const res = await post(api, "/v1/deliveries/resolve", { outcome: "dead", state: "dead" });
    expect(((await res.json()) as BulkReply).count).toBe(3);
    const rows = await deliveries(t.punctual);
    expect(rows.filter((d) => d.reason === "resolved")).toHaveLength(3);
    const again = (await (
      await post(api, "/v1/deliveries/resolve", { outcome: "dead", dryRun: true })
    ).json()) as BulkReply;
    expect(again.count).toBe(0);
    const bad = await post(api, "/v1/deliveries/redrive", { reason: "NOPE" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as ErrorBody).error.issues?.[0]?.field).toBe("reason");
  });
});

interface UpsertReply {
  id: string;
  version: number;
  changed: boolean;
  rrule: string | null;
  source: string;
  externalId: string;
}

describe("API-9 upsert by external id", () => {
  const path = "/v1/schedules/by-external-id/crm/meeting-7";

  it("API-9: the first PUT creates (201), the same body again changes nothing (200), a new body updates and realigns (200)", async () => {
    const { t, api } = await setup();
    const first = await put(api, path, daily());
    expect(first.status).toBe(201);
    const created = (await first.json()) as UpsertReply;
    expect(created).toMatchObject({ source: "crm", externalId: "meeting-7", changed: true });
    const same = await put(api, path, daily());
    expect(same.status).toBe(200);
    expect((await same.json()) as UpsertReply).toMatchObject({
      id: created.id,
      version: created.version,
      changed: false,
    });
    // Left out, rrule takes its default: the schedule becomes a one-off.
    const { rrule: _rrule, ...oneOff } = daily({ dtstart: "2027-01-04T08:30:00Z" });
    const edited = await put(api, path, oneOff);
    expect(edited.status).toBe(200);
    const reply = (await edited.json()) as UpsertReply;
    expect(reply).toMatchObject({ id: created.id, changed: true, rrule: null });
    expect(reply.version).toBeGreaterThan(created.version);
    const waiting = (await deliveries(t.punctual)).filter((d) => d.state === "pending");
    expect(waiting.map((d) => d.occurrenceAt)).toEqual(["2027-01-04T08:30:00.000Z"]);
  });

  it("API-9: concurrent PUTs of one external id make one schedule", async () => {
    const { t, api } = await setup();
    const replies = await Promise.all(
      Array.from({ length: 4 }, (_, i) => put(api, path, daily({ payload: { i } }))),
    );
    const statuses = replies.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 201]);
    const ids = new Set(
      await Promise.all(replies.map(async (r) => ((await r.json()) as UpsertReply).id)),
    );
    expect(ids.size).toBe(1);
    expect((await t.punctual.listSchedules()).items).toHaveLength(1);
  });

  it("API-9: a cancelled schedule answers 409 until it is purged", async () => {
    const { t, api } = await setup();
    const created = (await (await put(api, path, daily())).json()) as UpsertReply;
    await t.punctual.cancelSchedule(created.id);
    expect((await put(api, path, daily())).status).toBe(409);
    await t.punctual.purgeSchedule(created.id);
    expect((await put(api, path, daily())).status).toBe(201);
  });
});

describe("API-9 purge", () => {
  it("API-9: DELETE ?purge=true deletes the schedule with its deliveries and attempts; without it the schedule is cancelled and kept", async () => {
    const { t, api } = await setup();
    t.channel.behaviour = (_d, _c, n) => {
      if (n === 1) throw new PermanentError("first fails");
      return { messageId: null };
    };
    const kept = await t.punctual.createSchedule(daily());
    const gone = await t.punctual.createSchedule(daily());
    await tickAndDrain(t.punctual);
    const cancel = await api.request(`/v1/schedules/${kept.schedule.id}`, { method: "DELETE" });
    expect(cancel.status).toBe(200);
    expect((await t.punctual.getSchedule(kept.schedule.id)).state).toBe("cancelled");
    const ownRows = (await deliveries(t.punctual)).filter((d) => d.scheduleId === gone.schedule.id);
    const res = await api.request(`/v1/schedules/${gone.schedule.id}?purge=true`, {
      method: "DELETE",
    });
    expect(res.status).toBe(200);
    const reply = (await res.json()) as {
      purged: { schedules: number; deliveries: number; attempts: number };
    };
    expect(reply.purged.schedules).toBe(1);
    expect(reply.purged.deliveries).toBe(ownRows.length);
    expect(reply.purged.attempts).toBeGreaterThanOrEqual(1);
    expect((await api.request(`/v1/schedules/${gone.schedule.id}`)).status).toBe(404);
    expect((await deliveries(t.punctual)).filter((d) => d.scheduleId === gone.schedule.id)).toEqual(
      [],
    );
    for (const d of ownRows) {
      expect((await api.request(`/v1/deliveries/${d.id}`)).status).toBe(404);
    }
    // The other schedule and its history are untouched.
    expect((await t.punctual.getSchedule(kept.schedule.id)).state).toBe("cancelled");
    const again = await api.request(`/v1/schedules/${gone.schedule.id}?purge=true`, {
      method: "DELETE",
    });
    expect(again.status).toBe(404);
  });
});

describe("API-4 schedule handles", () => {
  it("API-4: schedules.get(id).describe() gives the schedule, the next 5 occurrences and the missed ones", async () => {
    const { t } = await setup();
    const { handle } = await t.punctual.schedules.create(daily({ graceMs: 60_000 }));
    let d = await handle.describe();
    expect(d.schedule.id).toBe(handle.id);
    expect(d.next.map((o) => o.occurrenceAt)).toEqual([
      "2027-01-04T08:00:00.000Z",
      "2027-01-05T08:00:00.000Z",
      "2027-01-06T08:00:00.000Z",
      "2027-01-07T08:00:00.000Z",
      "2027-01-08T08:00:00.000Z",
    ]);
    expect(d.next[0]!.reminders).toEqual([{ key: "r", dueAt: "2027-01-04T08:00:00.000Z" }]);
    expect(d.missed).toEqual([]);
    // Paused over three occurrences, resumed: the misfire policy (skip) records them as missed.
    await handle.pause();
    t.clock.advance(2 * DAY + 3_600_000);
    await handle.resume();
    await tickAndDrain(t.punctual);
    d = await handle.describe();
    expect(d.missed.map((m) => [m.occurrenceAt, m.reason])).toEqual([
      ["2027-01-06T08:00:00.000Z", "stale"],
      ["2027-01-05T08:00:00.000Z", "stale"],
      ["2027-01-04T08:00:00.000Z", "stale"],
    ]);
    expect(d.next[0]!.occurrenceAt).toBe("2027-01-07T08:00:00.000Z");
  });

  it("API-4: a handle updates, triggers, cancels and purges its schedule", async () => {
    const { t } = await setup();
    const { handle } = await t.punctual.schedules.create(daily());
    const edited = await handle.update({ payload: { v: 2 } });
    expect(edited.schedule.payload).toEqual({ v: 2 });
    const triggered = await handle.trigger({ triggerId: "t-1" });
    expect(triggered.created).toBe(true);
    expect((await handle.trigger({ triggerId: "t-1" })).created).toBe(false);
    expect((await handle.cancel()).state).toBe("cancelled");
    expect((await handle.purge()).purged.schedules).toBe(1);
    await expect(handle.describe()).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(
      t.punctual.schedules.get(handle.id, { tenant: "other" }).describe(),
    ).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
  });
});

describe("API-9 OpenAPI document", () => {
  it("API-9: the operator routes are in /openapi.json, with the purge parameter of DELETE", async () => {
    const { api } = await setup();
    const doc = (await (await api.request("/openapi.json")).json()) as {
      paths: Record<string, Record<string, { parameters?: Array<{ name: string }> }>>;
    };
    expect(doc.paths["/v1/schedules/{id}/trigger"]).toHaveProperty("post");
    expect(doc.paths["/v1/schedules/{id}/backfill"]).toHaveProperty("post");
    expect(doc.paths["/v1/deliveries/redrive"]).toHaveProperty("post");
    expect(doc.paths["/v1/deliveries/resolve"]).toHaveProperty("post");
    expect(doc.paths["/v1/schedules/by-external-id/{source}/{externalId}"]).toHaveProperty("put");
    const del = doc.paths["/v1/schedules/{id}"]!.delete!;
    expect(del.parameters?.map((p) => p.name)).toContain("purge");
  });
});
