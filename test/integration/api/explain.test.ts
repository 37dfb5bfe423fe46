/**
 * OPS-16: `GET /v1/schedules/{id}/explain` and `GET /v1/deliveries/{id}/explain` — one
 * entry per expected or recorded occurrence × reminder with its verdict, reason and
 * timeline, on the engine of this run (PGlite or PostgreSQL), driven by the test clock.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createApi } from "../../../src/api/server.js";
import type { ExplainEntry, ScheduleExplanation } from "../../../src/contracts/explain.js";
import { PermanentError } from "../../../src/errors/index.js";
import { testPunctual, tickAndDrain, type TestPunctual } from "../../support/punctual.js";
import { startReceiver, type Receiver } from "../../unit/channels/receiver.js";

let t: TestPunctual | null = null;
let receiver: Receiver | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
  await receiver?.close();
  receiver = null;
});

/** A daily series at 08:00 UTC from 2027-01-04, two reminders (at the time, 10 minutes before). */
const daily = {
  dtstart: "2027-01-04T08:00:00Z",
  tzid: "UTC",
  rrule: "FREQ=DAILY;COUNT=30",
  graceMs: 60_000,
  reminders: [
    { key: "now", offset: "PT0S", channel: "test" },
    { key: "early", offset: "-PT10M", channel: "test" },
  ],
};

type Api = ReturnType<typeof createApi>;

async function explain(api: Api, id: string, query: string): Promise<ScheduleExplanation> {
  const res = await api.request(`/v1/schedules/${id}/explain?${query}`);
  expect(res.status).toBe(200);
  return (await res.json()) as ScheduleExplanation;
}

const brief = (e: ExplainEntry) =>
  `${e.dueAt.slice(5, 16)} ${e.reminderKey} ${e.verdict} ${e.reason}`;

describe("explain (OPS-16)", () => {
  it("OPS-16: each expected occurrence gets a verdict, a reason and its timeline: sent, failed with the attempt's error, skipped stale, not planned while paused and beyond the horizon", async () => {
    t = await testPunctual({ start: "2027-01-04T07:00:00Z" });
    const api = createApi(t.punctual);
    const { schedule } = await t.punctual.createSchedule(daily);
    t.clock.set("2027-01-04T07:50:00Z");
    await tickAndDrain(t.punctual);
    t.clock.set("2027-01-04T08:00:00Z");
    await tickAndDrain(t.punctual);
    // Day 2: the receiver refuses for good.
    t.channel.behaviour = () => {
      throw new PermanentError("410 gone", { status: 410 });
    };
    t.clock.set("2027-01-05T07:50:00Z");
    await tickAndDrain(t.punctual);
    t.clock.set("2027-01-05T08:00:00Z");
    await tickAndDrain(t.punctual);
    t.channel.behaviour = () => ({ messageId: null });
    await t.punctual.pauseSchedule(schedule.id);
    t.clock.set("2027-01-07T09:00:00Z");

    const window = "from=2027-01-03T00:00:00Z&to=2027-01-09T00:00:00Z";
    const paused = await explain(api, schedule.id, window);
    expect(paused).toMatchObject({ scheduleId: schedule.id, state: "paused", complete: true });
    expect(paused.nextCursor).toBeNull();
    expect(paused.entries.map(brief)).toEqual([
      "01-04T07:50 early sent null",
      "01-04T08:00 now sent null",
      "01-05T07:50 early failed PERMANENT",
      "01-05T08:00 now failed PERMANENT",
      "01-06T07:50 early not_planned schedule_paused",
      "01-06T08:00 now not_planned schedule_paused",
      "01-07T07:50 early not_planned schedule_paused",
      "01-07T08:00 now not_planned schedule_paused",
      "01-08T07:50 early not_planned schedule_paused",
      "01-08T08:00 now not_planned schedule_paused",
    ]);
    const failed = paused.entries[2]!;
    expect(failed.events.map((e) => e.type)).toEqual(["planned", "attempt", "failed"]);
    expect(failed.events[1]).toMatchObject({
      attempt: 1,
      outcome: "permanent",
      status: 410,
      error: expect.stringContaining("410 gone") as string,
    });
    expect(typeof failed.events[1]!.by).toBe("string");
    const sent = paused.entries[1]!;
    expect(sent.events.map((e) => e.type)).toEqual(["planned", "attempt", "sent"]);
    // Planning does not record its process: the event says so.
    expect(sent.events[0]).toEqual({ type: "planned", at: expect.any(String), by: "unknown" });

    // Resumed two days late: the misfire policy (skip) skips what it missed as stale;
    // the next day is not planned yet (the horizon is an hour ahead).
    await t.punctual.resumeSchedule(schedule.id);
    await tickAndDrain(t.punctual);
    const resumed = await explain(api, schedule.id, window);
    expect(resumed.entries.slice(4).map(brief)).toEqual([
      "01-06T07:50 early skipped stale",
      "01-06T08:00 now skipped stale",
      "01-07T07:50 early skipped stale",
      "01-07T08:00 now skipped stale",
      "01-08T07:50 early not_planned beyond_planning_horizon",
      "01-08T08:00 now not_planned beyond_planning_horizon",
    ]);
    expect(resumed.entries[4]!.events.map((e) => e.type)).toEqual(["planned", "skipped"]);

    // The operator redrives the dead one: the action and who did it are on its timeline.
    const id = failed.deliveryId!;
    const redrive = await api.request(`/v1/deliveries/${id}/redrive`, { method: "POST" });
    expect(redrive.status).toBe(200);
    await tickAndDrain(t.punctual);
    const one = await api.request(`/v1/deliveries/${id}/explain`);
    expect(one.status).toBe(200);
    const body = (await one.json()) as { scheduleId: string; entry: ExplainEntry };
    expect(body.scheduleId).toBe(schedule.id);
    expect(body.entry).toMatchObject({ verdict: "sent", reason: null, deliveryId: id });
    expect(body.entry.events.map((e) => e.type)).toEqual([
      "planned",
      "attempt",
      "redrive",
      "attempt",
      "sent",
    ]);
    expect(body.entry.events[1]).toMatchObject({ outcome: "permanent", status: 410 });
    expect(body.entry.events[2]).toMatchObject({ type: "redrive", by: "operator" });
    expect((await api.request(`/v1/deliveries/999999/explain`)).status).toBe(404);
  });

  it("OPS-16: not planned before the schedule existed, and past the expansion cap of an unbounded series (REC-5)", async () => {
    t = await testPunctual({
      start: "2027-01-04T07:30:00Z",
      scheduler: { maxExpansionDays: 2 },
    });
    const api = createApi(t.punctual);
    const { schedule } = await t.punctual.createSchedule({
      dtstart: "2027-01-01T08:00:00Z",
      rrule: "FREQ=DAILY",
      reminders: [{ key: "now", offset: "PT0S", channel: "test" }],
    });
    const body = await explain(
      api,
      schedule.id,
      "from=2027-01-01T00:00:00Z&to=2027-01-08T00:00:00Z",
    );
    expect(body.entries.map(brief)).toEqual([
      "01-01T08:00 now not_planned before_schedule_existed",
      "01-02T08:00 now not_planned before_schedule_existed",
      "01-03T08:00 now not_planned before_schedule_existed",
      "01-04T08:00 now pending null",
      "01-05T08:00 now not_planned beyond_planning_horizon",
      "01-06T08:00 now not_planned cap_reached",
      "01-07T08:00 now not_planned cap_reached",
    ]);
  });

  it("OPS-16: pages of `limit` entries join up to the whole window, and a cursor of another window is refused", async () => {
    t = await testPunctual({ start: "2027-01-04T07:00:00Z" });
    const api = createApi(t.punctual);
    const { schedule } = await t.punctual.createSchedule(daily);
    t.clock.set("2027-01-04T08:00:00Z");
    await tickAndDrain(t.punctual);
    const window = "from=2027-01-03T00:00:00Z&to=2027-01-09T00:00:00Z";
    const whole = await explain(api, schedule.id, window);
    expect(whole.entries).toHaveLength(10);
    const paged: ExplainEntry[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await explain(
        api,
        schedule.id,
        `${window}&limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      );
      expect(page.entries.length).toBeLessThanOrEqual(3);
      paged.push(...page.entries);
      cursor = page.nextCursor;
      pages++;
    } while (cursor !== null && pages < 10);
    expect(pages).toBe(4);
    expect(paged).toEqual(whole.entries);
    const first = await explain(api, schedule.id, `${window}&limit=3`);
    const other = await api.request(
      `/v1/schedules/${schedule.id}/explain?from=2027-01-02T00:00:00Z&to=2027-01-09T00:00:00Z&cursor=${first.nextCursor}`,
    );
    expect(other.status).toBe(400);
  });

  it("OPS-16: a triggered send is an entry of its own, marked triggered", async () => {
    t = await testPunctual({ start: "2027-01-04T07:00:00Z" });
    const api = createApi(t.punctual);
    const { schedule } = await t.punctual.createSchedule(daily);
    await t.punctual.triggerSchedule(schedule.id, { reminderKey: "now" });
    await tickAndDrain(t.punctual);
    const body = await explain(
      api,
      schedule.id,
      "from=2027-01-04T06:00:00Z&to=2027-01-04T09:00:00Z",
    );
    expect(
      body.entries.map(
        (e) => `${e.occurrenceAt.slice(11, 16)} ${e.reminderKey} ${e.verdict} ${e.triggered}`,
      ),
    ).toEqual([
      "07:00 now sent true",
      // The occurrence at 08:00: its early reminder is planned, the other is an hour
      // ahead (planning looks one hour ahead by default).
      "08:00 early pending false",
      "08:00 now not_planned false",
    ]);
    expect(body.entries[0]!.events[0]).toMatchObject({ type: "planned", reason: "triggered" });
  });

  it("OPS-16: `from` after `to` and a window over 366 days are 400s naming the field and the value", async () => {
    t = await testPunctual({ start: "2027-01-04T07:00:00Z" });
    const api = createApi(t.punctual);
    const { schedule } = await t.punctual.createSchedule(daily);
    const after = await api.request(
      `/v1/schedules/${schedule.id}/explain?from=2027-02-01T00:00:00Z&to=2027-01-01T00:00:00Z`,
    );
    expect(after.status).toBe(400);
    const afterBody = JSON.stringify(await after.json());
    expect(afterBody).toContain('"from"');
    expect(afterBody).toContain("2027-02-01T00:00:00Z");
    const long = await api.request(
      `/v1/schedules/${schedule.id}/explain?from=2027-01-01T00:00:00Z&to=2028-01-03T00:00:00Z`,
    );
    expect(long.status).toBe(400);
    const longBody = JSON.stringify(await long.json());
    expect(longBody).toContain('"to"');
    expect(longBody).toContain("2028-01-03T00:00:00Z");
    // Exactly 366 days is allowed.
    const edge = await api.request(
      `/v1/schedules/${schedule.id}/explain?from=2027-01-01T00:00:00Z&to=2028-01-02T00:00:00Z`,
    );
    expect(edge.status).toBe(200);
    expect((await api.request(`/v1/schedules/${crypto.randomUUID()}/explain`)).status).toBe(404);
  });

  it("OPS-16: not planned while the schedule is invalid (with its reason) or cancelled", async () => {
    t = await testPunctual({ start: "2027-01-04T07:00:00Z" });
    const api = createApi(t.punctual);
    const { schedule } = await t.punctual.createSchedule(daily);
    const window = "from=2027-01-05T00:00:00Z&to=2027-01-06T00:00:00Z";
    // Corrupt the stored rule behind the API's back; the next planning pass quarantines it.
    await t.punctual.db.query(
      "update punctual_schedules set rrule = 'FREQ=FORTNIGHTLY', planned_until = null where id = $1",
      [schedule.id],
    );
    await tickAndDrain(t.punctual);
    const invalid = await explain(api, schedule.id, window);
    expect(invalid.state).toBe("invalid");
    // Its rule no longer parses: only recorded rows can be listed, none here.
    expect(invalid).toMatchObject({ complete: false, entries: [] });
    const reason = (await t.punctual.getSchedule(schedule.id)).invalidReason!;
    expect(reason).toMatch(/FREQ/);

    // A rule that still parses, stored on a quarantined schedule: each entry names the reason.
    await t.punctual.db.query("update punctual_schedules set rrule = $2 where id = $1", [
      schedule.id,
      daily.rrule,
    ]);
    const named = await explain(api, schedule.id, window);
    expect(named.entries.map(brief)).toEqual([
      `01-05T07:50 early not_planned schedule_invalid: ${reason}`,
      `01-05T08:00 now not_planned schedule_invalid: ${reason}`,
    ]);

    const other = await t.punctual.createSchedule(daily);
    await t.punctual.cancelSchedule(other.schedule.id);
    const cancelled = await explain(api, other.schedule.id, window);
    expect(cancelled.entries.map(brief)).toEqual([
      "01-05T07:50 early not_planned schedule_cancelled",
      "01-05T08:00 now not_planned schedule_cancelled",
    ]);
  });

  it("OPS-16 / DEL-13: a delivery held by an empty rate-limit bucket is deferred RATE_LIMITED until its next token", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const api = createApi(t.punctual);
    // One token, then one more every 1,000 s.
    await t.punctual.setRateLimit("slow", { ratePerSecond: 0.001, burst: 1 });
    const { schedule } = await t.punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      tzid: "UTC",
      reminders: ["a", "b", "c"].map((key) => ({
        key,
        offset: "PT0S",
        channel: "test",
        rateLimitKey: "slow",
      })),
    });
    await tickAndDrain(t.punctual);
    expect(t.channel.sends).toHaveLength(1);
    const body = await explain(
      api,
      schedule.id,
      "from=2027-01-04T07:00:00Z&to=2027-01-04T09:00:00Z",
    );
    expect(body.entries.map((e) => `${e.verdict} ${e.reason}`).sort()).toEqual([
      "deferred RATE_LIMITED",
      "deferred RATE_LIMITED",
      "sent null",
    ]);
    const held = body.entries.find((e) => e.verdict === "deferred")!;
    expect(held.events.at(-1)).toMatchObject({
      type: "deferred",
      reason: "RATE_LIMITED",
      at: "2027-01-04T08:00:00.000Z",
      until: "2027-01-04T08:16:40.000Z",
    });
    // The same entry for the one delivery.
    const one = await api.request(`/v1/deliveries/${held.deliveryId}/explain`);
    expect(((await one.json()) as { entry: ExplainEntry }).entry).toEqual(held);
  });

  it("OPS-16 / CH-7: a delivery held back by its host's open circuit is deferred CIRCUIT_OPEN until the next probe", async () => {
    receiver = await startReceiver();
    const rx = receiver;
    rx.respond = (_req, res) => res.writeHead(503).end();
    t = await testPunctual({
      start: "2027-01-04T08:00:00Z",
      scheduler: { circuitFailures: 1, circuitBackoffMs: 60_000, backoffBaseMs: 1_000 },
    });
    const api = createApi(t.punctual);
    const hook = (dtstart: string) =>
      t!.punctual.createSchedule({
        dtstart,
        tzid: "UTC",
        reminders: [
          {
            key: "w",
            offset: "PT0S",
            channel: "webhook",
            target: { url: rx.url },
            maxAttempts: 10,
          },
        ],
      });
    const first = await hook("2027-01-04T08:00:00Z");
    const second = await hook("2027-01-04T08:00:20Z");
    // The first fails: the circuit opens until 08:01:00.
    await tickAndDrain(t.punctual);
    expect(rx.requests).toHaveLength(1);
    // The second falls due and the first's retry too: the circuit gives both back unsent.
    t.clock.set("2027-01-04T08:00:30Z");
    await tickAndDrain(t.punctual);
    expect(rx.requests).toHaveLength(1);
    const window = "from=2027-01-04T07:00:00Z&to=2027-01-04T09:00:00Z";
    const [fresh] = (await explain(api, second.schedule.id, window)).entries;
    expect(fresh).toMatchObject({ verdict: "deferred", reason: "CIRCUIT_OPEN" });
    expect(fresh!.events.at(-1)).toMatchObject({
      type: "deferred",
      reason: "CIRCUIT_OPEN",
      until: "2027-01-04T08:01:00.000Z",
    });
    const [retried] = (await explain(api, first.schedule.id, window)).entries;
    expect(retried).toMatchObject({ verdict: "deferred", reason: "CIRCUIT_OPEN" });
    expect(retried!.events.map((e) => e.type)).toEqual(["planned", "attempt", "deferred"]);
    expect(retried!.events.at(-1)).toMatchObject({ until: "2027-01-04T08:01:00.000Z" });
  });
});
