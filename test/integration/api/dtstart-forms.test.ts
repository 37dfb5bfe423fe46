/**
 * DTSTART in one form (API-1, API-3, REC-1): whatever form a schedule's `dtstart` was given
 * in (local, `Z`, an offset, basic format), the view's `dtstartLocal` is its wall clock in
 * `tzid` with that zone's offset, in lists and details alike, and the CLI prints that; a
 * `dtstart` whose offset the zone does not have then is accepted (the instant wins, as
 * docs/recurrence.md says) with a warning naming both offsets; docs/recurrence.md quotes
 * the BYMONTHDAY error as the engine words it.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { scheduleText } from "../../../src/cli/remote.js";
import type { ScheduleView } from "../../../src/contracts/index.js";
import { ValidationError } from "../../../src/errors/index.js";
import { validateRule } from "../../../src/recurrence/index.js";
import { testPunctual, type TestPunctual } from "../../support/punctual.js";

let t: TestPunctual;
let api: PunctualApi;

beforeAll(async () => {
  t = await testPunctual({ start: "2027-01-01T08:00:00Z" });
  api = createApi(t.punctual);
});

afterAll(async () => {
  await t?.close();
});

async function create(dtstart: string, tzid = "Europe/Berlin") {
  const res = await api.request("/v1/schedules", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ dtstart, tzid, reminders: [{ key: "r", channel: "test" }] }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as ScheduleView & { warnings?: string[] };
}

describe("API-1 one form of DTSTART", () => {
  it("API-1 REC-1: local, Z and offset forms of one instant read alike in create, show and list", async () => {
    const forms = ["2027-01-04T09:00:00", "2027-01-04T08:00:00Z", "2027-01-04T09:00:00+01:00"];
    const ids: string[] = [];
    for (const dtstart of forms) {
      const created = await create(dtstart);
      expect(created.dtstart).toBe(dtstart);
      expect(created.dtstartLocal).toBe("2027-01-04T09:00:00+01:00");
      expect(created.warnings).toBeUndefined();
      const shown = (await (
        await api.request(`/v1/schedules/${created.id}`)
      ).json()) as ScheduleView;
      expect(shown.dtstartLocal).toBe("2027-01-04T09:00:00+01:00");
      ids.push(created.id);
    }
    const list = (await (await api.request("/v1/schedules")).json()) as { items: ScheduleView[] };
    const listed = list.items.filter((s) => ids.includes(s.id)).map((s) => s.dtstartLocal);
    expect(listed).toEqual(forms.map(() => "2027-01-04T09:00:00+01:00"));
    // Summer time has its own offset; an all-day schedule shows its date.
    expect((await create("2027-07-05T09:00:00")).dtstartLocal).toBe("2027-07-05T09:00:00+02:00");
    expect((await create("2027-07-05T07:00:00Z", "America/New_York")).dtstartLocal).toBe(
      "2027-07-05T03:00:00-04:00",
    );
    expect((await create("2027-01-04")).dtstartLocal).toBe("2027-01-04");
  });

  it("API-3: the CLI's show prints the local form with its zone and the form it was given in", async () => {
    const created = await create("2027-01-04T08:00:00Z");
    const text = scheduleText(created);
    expect(text).toMatch(
      /dtstart:\s+2027-01-04T09:00:00\+01:00 Europe\/Berlin \(given as 2027-01-04T08:00:00Z\)/,
    );
    const local = scheduleText(await create("2027-01-04T09:00:00+01:00"));
    expect(local).toMatch(/dtstart:\s+2027-01-04T09:00:00\+01:00 Europe\/Berlin\n/);
  });

  it("REC-1: an offset the zone does not have then is accepted with a warning naming both offsets", async () => {
    const created = await create("2027-01-04T09:00:00+02:00");
    expect(created.dtstartLocal).toBe("2027-01-04T08:00:00+01:00");
    expect(created.warnings).toHaveLength(1);
    expect(created.warnings![0]).toContain("+02:00");
    expect(created.warnings![0]).toContain("Europe/Berlin is at +01:00");
    expect(created.warnings![0]).toContain("2027-01-04T08:00:00 Europe/Berlin");
    // The offset Berlin has in summer is no slip in summer.
    expect((await create("2027-07-05T09:00:00+02:00")).warnings).toBeUndefined();
  });

  it("REC-3: docs/recurrence.md quotes the BYMONTHDAY error as the engine words it", () => {
    let message = "";
    try {
      validateRule({
        dtstart: "2027-01-04T09:00:00",
        tzid: "UTC",
        rrule: "FREQ=MONTHLY;BYMONTHDAY=32",
      });
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      message = err.message;
    }
    expect(message).toBe('rrule.BYMONTHDAY: must be between -31 and 31 and not 0 (got "32")');
    const doc = readFileSync(new URL("../../../docs/recurrence.md", import.meta.url), "utf8");
    expect(doc.replace(/\s+/g, " ")).toContain(message);
  });
});
