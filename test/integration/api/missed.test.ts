/**
 * OPS-13 / API-9: a schedule's missed occurrences in `GET /v1/schedules/{id}` (what the
 * rule called for in the last 7 days beside what was sent, skipped with its reason) and
 * the `punctual_missed_occurrences_total` counter, on the engine of this run (PGlite or
 * PostgreSQL), driven by the test clock.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createApi } from "../../../src/api/server.js";
import { missedSummary } from "../../../src/app/missed.js";
import { MISSED_MAX_OCCURRENCES } from "../../../src/contracts/missed.js";
import type { ScheduleView } from "../../../src/contracts/index.js";
import type { MissedOccurrencesView } from "../../../src/contracts/missed.js";
import { testPunctual, tickAndDrain, type TestPunctual } from "../../support/punctual.js";

const T0 = "2027-01-04T08:00:00Z";
const DAY = 86_400_000;
let t: TestPunctual | null = null;

afterEach(async () => {
  await t?.close();
  t = null;
});

type ScheduleRead = ScheduleView & { missed: MissedOccurrencesView };

/** A daily series at 08:00 UTC from T0, two reminders (at the time and 10 minutes before). */
const daily = {
  dtstart: T0,
  tzid: "UTC",
  rrule: "FREQ=DAILY;COUNT=30",
  graceMs: 60_000,
  reminders: [
    { key: "now", offset: "PT0S", channel: "test" },
    { key: "early", offset: "-PT10M", channel: "test" },
  ],
};

function missedCounter(body: string, reason: string): number {
  const line = body
    .split("\n")
    .find((l) => l.startsWith(`punctual_missed_occurrences_total{reason="${reason}"}`));
  return line ? Number(line.split(" ").pop()) : 0;
}

describe("missed occurrences of a schedule (OPS-13)", () => {
  it("OPS-13: GET /v1/schedules/{id} counts what the rule called for beside what was sent and what was skipped, with the reason; the counter counts each skip once", async () => {
    t = await testPunctual({ start: "2027-01-04T07:00:00Z" });
    const api = createApi(t.punctual);
    const { schedule } = await t.punctual.createSchedule(daily);
    t.clock.set("2027-01-04T07:50:00Z");
    await tickAndDrain(t.punctual);
    t.clock.set(T0);
    await tickAndDrain(t.punctual);
    expect(t.channel.sends).toHaveLength(2);
    // Paused over two days, resumed: the misfire policy (skip) records both as missed.
    await t.punctual.pauseSchedule(schedule.id);
    t.clock.advance(2 * DAY + 3_600_000);
    await t.punctual.resumeSchedule(schedule.id);
    await tickAndDrain(t.punctual);
    await tickAndDrain(t.punctual);

    const res = await api.request(`/v1/schedules/${schedule.id}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("etag")).toMatch(/^"\d+"$/);
    const body = (await res.json()) as ScheduleRead;
    expect(body.id).toBe(schedule.id);
    expect(body.missed).toMatchObject({
      from: "2027-01-04T06:50:00.000Z",
      to: "2027-01-06T09:00:00.000Z",
      // 3 occurrences (4th, 5th, 6th) × 2 reminders, all due by now.
      expected: 6,
      complete: true,
      sent: 2,
      skipped: { stale: 4 },
      waiting: 0,
      failed: 0,
      cancelled: 0,
      unrecorded: 0,
    });
    // Newest occurrence first (the order of two reminders of one occurrence is the rows').
    expect(body.missed.items.map((m) => m.occurrenceAt)).toEqual([
      "2027-01-06T08:00:00.000Z",
      "2027-01-06T08:00:00.000Z",
      "2027-01-05T08:00:00.000Z",
      "2027-01-05T08:00:00.000Z",
    ]);
    expect(
      body.missed.items.map((m) => `${m.occurrenceAt} ${m.reminderKey} ${m.reason}`).sort(),
    ).toEqual([
      "2027-01-05T08:00:00.000Z early stale",
      "2027-01-05T08:00:00.000Z now stale",
      "2027-01-06T08:00:00.000Z early stale",
      "2027-01-06T08:00:00.000Z now stale",
    ]);
    // Counted once each where the misfire sweep skipped them, not again on later passes.
    await tickAndDrain(t.punctual);
    const { body: metrics } = await t.punctual.metricsText();
    expect(missedCounter(metrics, "stale")).toBe(4);

    // The library's describe() has the same numbers.
    const d = await t.punctual.schedules.get(schedule.id).describe();
    expect(d.missedSummary).toEqual({ ...body.missed, items: undefined, to: d.missedSummary.to });
  });

  it("OPS-13: an occurrence still waiting is not missed; a reminder due later is not expected yet; triggered sends are not occurrences", async () => {
    t = await testPunctual({ start: "2027-01-04T07:00:00Z" });
    const api = createApi(t.punctual);
    const { schedule } = await t.punctual.createSchedule(daily);
    // The early reminder (07:50) fails and waits to be retried; the other (08:00) is not due.
    t.clock.set("2027-01-04T07:50:00Z");
    t.channel.behaviour = () => {
      throw new Error("receiver down");
    };
    await tickAndDrain(t.punctual);
    await t.punctual.triggerSchedule(schedule.id, {}, { triggerId: "extra" });
    t.clock.set("2027-01-04T07:50:30Z");
    const body = (await (await api.request(`/v1/schedules/${schedule.id}`)).json()) as ScheduleRead;
    expect(body.missed).toMatchObject({
      expected: 1,
      sent: 0,
      waiting: 1,
      unrecorded: 0,
      items: [],
    });
    expect(body.missed.skipped).toEqual({});
  });

  it("OPS-13, API-2: the counts are scoped by tenant: another tenant's schedule is 404 and counts nothing", async () => {
    t = await testPunctual({ start: "2027-01-04T07:00:00Z" });
    const { schedule } = await t.punctual.createSchedule(daily, { tenant: "acme" });
    t.clock.set("2027-01-04T07:50:00Z");
    await tickAndDrain(t.punctual);
    t.clock.set(T0);
    await tickAndDrain(t.punctual);
    expect(t.channel.sends).toHaveLength(2);
    const own = await missedSummary(t.punctual.db, "acme", schedule, Date.parse(T0));
    expect(own).toMatchObject({ expected: 2, sent: 2 });
    const other = await missedSummary(t.punctual.db, "globex", schedule, Date.parse(T0));
    expect(other).toMatchObject({ sent: 0, unrecorded: 2 });
    await expect(
      t.punctual.schedules.get(schedule.id, { tenant: "globex" }).describe(),
    ).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("OPS-12 OPS-13: fifty reminders of a FREQ=SECONDLY series share the bound of the count (said incomplete), not fifty times it", async () => {
    t = await testPunctual({ start: T0 });
    const api = createApi(t.punctual);
    const { schedule } = await t.punctual.createSchedule({
      dtstart: "2027-01-01T00:00:00Z",
      tzid: "UTC",
      rrule: "FREQ=SECONDLY",
      perpetual: true,
      reminders: Array.from({ length: 50 }, (_, i) => ({
        key: `r${i}`,
        offset: `-PT${i}S`,
        channel: "test",
      })),
    });
    // An hour later: 3,600 occurrences × 50 reminders called for.
    t.clock.advance(3_600_000);
    const res = await api.request(`/v1/schedules/${schedule.id}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as ScheduleRead;
    expect(body.missed.complete).toBe(false);
    expect(body.missed.expected).toBeLessThanOrEqual(MISSED_MAX_OCCURRENCES);
  });

  it("OPS-13: the schedule read is in /openapi.json with its missed occurrences", async () => {
    t = await testPunctual({ start: T0 });
    const doc = (await (await createApi(t.punctual).request("/openapi.json")).json()) as {
      paths: Record<string, { get?: { responses: Record<string, unknown> } }>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    };
    expect(JSON.stringify(doc.paths["/v1/schedules/{id}"]?.get?.responses["200"])).toContain(
      "ScheduleRead",
    );
    expect(Object.keys(doc.components.schemas.ScheduleRead?.properties ?? {})).toContain("missed");
    expect(Object.keys(doc.components.schemas.MissedOccurrences?.properties ?? {})).toEqual(
      expect.arrayContaining(["expected", "sent", "skipped", "unrecorded", "items"]),
    );
  });
});
