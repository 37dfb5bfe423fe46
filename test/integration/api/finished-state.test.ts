/**
 * A schedule whose deliveries are all final shows `state: "finished"` (API-1, API-3):
 * a one-off once sent, in the API's show and list and the CLI; not while a delivery still
 * waits, and not for a series with occurrences left; the list's `state` filter agrees.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createApi } from "../../../src/api/server.js";
import { scheduleText } from "../../../src/cli/remote.js";
import type { ScheduleView } from "../../../src/contracts/index.js";
import { testPunctual, tickAndDrain, type TestPunctual } from "../../support/punctual.js";

let t: TestPunctual | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

describe("API-1 finished schedules", () => {
  it("API-1 API-3: a one-off reads active until its delivery is sent, then finished in show, list and the CLI", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const api = createApi(t.punctual);
    const one = await t.punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      reminders: [{ key: "r", channel: "test" }],
    });
    const series = await t.punctual.createSchedule({
      dtstart: "2027-01-04T08:00:00Z",
      rrule: "FREQ=DAILY;COUNT=3",
      reminders: [{ key: "r", channel: "test" }],
    });
    const show = async (id: string) =>
      (await (await api.request(`/v1/schedules/${id}`)).json()) as ScheduleView;
    expect((await show(one.schedule.id)).state).toBe("active");
    await tickAndDrain(t.punctual);
    const done = await show(one.schedule.id);
    expect(done.state).toBe("finished");
    expect(scheduleText(done)).toMatch(/state:\s+finished/);
    // Explain speaks of the schedule as its view does (OPS-16).
    const explained = await t.punctual.explainSchedule(one.schedule.id, {
      from: "2027-01-04T00:00:00Z",
      to: "2027-01-05T00:00:00Z",
    });
    expect(explained.state).toBe("finished");
    expect((await show(series.schedule.id)).state).toBe("active");
    const list = (await (await api.request("/v1/schedules")).json()) as { items: ScheduleView[] };
    expect(Object.fromEntries(list.items.map((s) => [s.id, s.state]))).toEqual({
      [one.schedule.id]: "finished",
      [series.schedule.id]: "active",
    });
    // The list's state filter speaks the view's states: `active` leaves the finished
    // one-off out, `finished` finds it (and the CLI's --state takes both).
    const ids = async (state: string) =>
      (
        (await (await api.request(`/v1/schedules?state=${state}&total=true`)).json()) as {
          items: ScheduleView[];
          total?: number;
        }
      ).items.map((s) => s.id);
    expect(await ids("active")).toEqual([series.schedule.id]);
    expect(await ids("finished")).toEqual([one.schedule.id]);
    const counted = (await (
      await api.request("/v1/schedules?state=finished&total=true")
    ).json()) as {
      total: { value: number; exact: boolean };
    };
    expect(counted.total).toEqual({ value: 1, exact: true });
  });

  it("API-1: a one-off due beyond the planning horizon, or with a reminder not planned yet, reads active", async () => {
    t = await testPunctual({ start: "2027-01-04T08:00:00Z" });
    const api = createApi(t.punctual);
    const later = await t.punctual.createSchedule({
      dtstart: "2027-09-01T08:00:00Z",
      reminders: [{ key: "r", channel: "test" }],
    });
    // One reminder due now (sent by the pass below), one months later (not planned yet).
    const split = await t.punctual.createSchedule({
      dtstart: "2027-09-01T08:00:00Z",
      reminders: [
        { key: "early", offset: "-P240D", channel: "test" },
        { key: "on-time", channel: "test" },
      ],
    });
    await tickAndDrain(t.punctual);
    const show = async (id: string) =>
      (await (await api.request(`/v1/schedules/${id}`)).json()) as ScheduleView;
    const sent = await t.punctual.listDeliveries({ scheduleId: split.schedule.id });
    expect(sent.items.map((d) => [d.reminderKey, d.state])).toEqual([["early", "sent"]]);
    expect((await show(later.schedule.id)).state).toBe("active");
    expect((await show(split.schedule.id)).state).toBe("active");
  });
});
