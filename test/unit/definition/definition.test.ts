/**
 * src/definition: a schedule's definition in every shape, pure. The hash and the changes
 * see a default spelled out as equal to one left out; a stored schedule reads back as the
 * body it was created from; an imported one-off expires at its end; secrets are redacted.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createScheduleSchema } from "../../../src/contracts/index.js";
import {
  bodyOfEvent,
  bodyOfStored,
  definitionChanges,
  definitionColumns,
  definitionHash,
  normaliseBody,
  redactTarget,
  reminderColumns,
  ruleInputOfRaw,
  ruleInputOfRow,
  type ScheduleBody,
} from "../../../src/definition/index.js";

const body = (input: Record<string, unknown>): ScheduleBody =>
  normaliseBody(
    createScheduleSchema.parse({
      dtstart: "2027-01-04T09:00:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=WEEKLY;COUNT=4",
      reminders: [
        { key: "r", offset: "-PT15M", channel: "webhook", target: { url: "https://a.example/h" } },
      ],
      ...input,
    }),
  );

describe("definition hash (API-1)", () => {
  it("API-1: a default spelled out hashes as one left out; where it came from does not count", () => {
    const plain = body({});
    const spelled = body({
      dst: { gap: "shift", overlap: "earlier" },
      rrule: "RRULE:FREQ=WEEKLY;COUNT=4",
      source: "cal",
      externalId: "uid-1",
      reminders: [
        {
          key: "r",
          offset: "-PT15M",
          channel: "webhook",
          target: { url: "https://a.example/h" },
          maxAttempts: 5,
        },
      ],
    });
    expect(definitionHash(spelled, 5)).toBe(definitionHash(plain, 5));
    expect(definitionHash(plain, 3)).not.toBe(definitionHash(plain, 5));
    expect(definitionHash(body({ title: "Standup" }), 5)).not.toBe(definitionHash(plain, 5));
  });
});

describe("definition changes (DEL-9)", () => {
  const before = body({});
  it("DEL-9: the same definition is no change", () => {
    expect(definitionChanges(before, body({ dst: { gap: "shift" } }), 5)).toEqual({
      none: true,
      fields: [],
      reminders: { added: [], removed: [], changed: [] },
      realign: false,
    });
  });

  it("DEL-9: a title or payload alone changes the definition but moves no delivery", () => {
    const changes = definitionChanges(before, body({ title: "x", payload: { a: 1 } }), 5);
    expect(changes).toMatchObject({ none: false, fields: ["payload", "title"], realign: false });
  });

  it("DEL-9: a rule, grace or reminder change realigns, naming what changed", () => {
    expect(definitionChanges(before, body({ rrule: "FREQ=DAILY" }), 5)).toMatchObject({
      fields: ["rrule"],
      realign: true,
    });
    expect(definitionChanges(before, body({ graceMs: 1 }), 5).realign).toBe(true);
    const reminders = definitionChanges(
      before,
      body({
        reminders: [
          { key: "r", offset: "-PT5M", channel: "webhook", target: { url: "https://a.example/h" } },
          { key: "s", offset: "PT0S", channel: "log" },
        ],
      }),
      5,
    );
    expect(reminders).toMatchObject({
      fields: [],
      reminders: { added: ["s"], removed: [], changed: ["r"] },
      realign: true,
    });
    expect(
      definitionChanges(
        before,
        body({ reminders: [{ key: "t", offset: "PT0S", channel: "log" }] }),
        5,
      ).reminders,
    ).toEqual({ added: ["t"], removed: ["r"], changed: [] });
  });
});

describe("stored shapes", () => {
  it("API-1 DEL-9: a schedule's columns read back as the body it was created from", () => {
    const created = body({
      endsAt: "2027-06-01T00:00:00.000Z",
      reminders: [
        {
          key: "r",
          offset: "-PT15M",
          channel: "webhook",
          target: { url: "https://a.example/h", secret: "s3cret" },
          delivery: "at-least-once",
          quietHours: { tzid: "Europe/Berlin", start: "22:00", end: "07:00" },
        },
      ],
    });
    const columns = definitionColumns(created);
    const [reminder] = reminderColumns(created.reminders, 5);
    expect(columns).toMatchObject({ recurring: true, dstGap: "shift", payloadJson: "null" });
    expect(reminder).toMatchObject({ onLostLease: "retry", maxAttempts: 5 });
    const readBack = bodyOfStored(
      {
        ...created,
        rrule: columns.rrule,
        endsAt: columns.endsAt,
        expiresAt: columns.expiresAt,
        dst: { gap: columns.dstGap, overlap: columns.dstOverlap },
        catchUp: null,
        payload: JSON.parse(columns.payloadJson),
        title: columns.title ?? null,
      },
      [
        {
          key: reminder!.key,
          offset_duration: reminder!.offset,
          channel: reminder!.channel,
          target: JSON.parse(reminder!.targetJson) as Record<string, unknown>,
          on_lost_lease: reminder!.onLostLease,
          max_attempts: reminder!.maxAttempts,
          template: null,
          rate_limit_key: null,
          quiet_hours: JSON.parse(reminder!.quietHoursJson!) as never,
          priority: null,
        },
      ],
    );
    expect(definitionChanges(created, body(readBack), 5).none).toBe(true);
    expect(
      ruleInputOfRow({
        dtstart: columns.dtstart,
        tzid: columns.tzid,
        rrule: columns.rrule,
        rdate: [...columns.rdate],
        exdate: [...columns.exdate],
        ends_at: new Date(columns.endsAt!),
        dst_gap: columns.dstGap,
        dst_overlap: columns.dstOverlap,
      }),
    ).toEqual({
      dtstart: "2027-01-04T09:00:00",
      tzid: "Europe/Berlin",
      rrule: "FREQ=WEEKLY;COUNT=4",
      rdate: [],
      exdate: [],
      endsAt: "2027-06-01T00:00:00.000Z",
      dst: { gap: "shift", overlap: "earlier" },
    });
  });

  it("CH-1 API-1: a view redacts secret keys and the token in a Slack URL", () => {
    expect(
      redactTarget({ url: "https://hooks.slack.com/services/T/B/x", token: "t" }, "slack"),
    ).toEqual({
      url: "https://hooks.slack.com/[redacted]",
      token: "[redacted]",
    });
    expect(redactTarget({ url: "https://a.example/h", Authorization: null }, "webhook")).toEqual({
      url: "https://a.example/h",
      Authorization: null,
    });
  });

  it("API-1: a raw body's rule fields are read without checking them; no dtstart text, none", () => {
    expect(ruleInputOfRaw({ dtstart: "2027-01-04", rdate: ["2027-01-05", 7], tzid: 3 })).toEqual({
      dtstart: "2027-01-04",
      tzid: "UTC",
      rrule: null,
      rdate: ["2027-01-05"],
      exdate: [],
      endsAt: null,
    });
    expect(ruleInputOfRaw({ dtstart: 5 })).toBeNull();
    expect(ruleInputOfRaw([])).toBeNull();
  });
});

describe("imported events (REC-6)", () => {
  const event = (end: string, extra: Record<string, unknown> = {}) => ({
    dtstart: "2027-01-04T09:00:00",
    tzid: "Europe/Berlin",
    rrule: null as string | null,
    rdate: [] as string[],
    payload: { end },
    ...extra,
  });
  it("REC-6: an imported one-off expires at its end; a zero-length one a second after its start", () => {
    expect(bodyOfEvent(event("2027-01-04T09:30:00Z")).expiresAt).toBe("2027-01-04T09:30:00.000Z");
    expect(bodyOfEvent(event("2027-01-05")).expiresAt).toBe("2027-01-04T23:00:00.000Z");
    expect(bodyOfEvent(event("2027-01-04T08:00:00Z")).expiresAt).toBe("2027-01-04T08:00:01.000Z");
  });
  it("REC-6: a series, or an end that does not read, gets no expiry", () => {
    expect(bodyOfEvent(event("2027-01-05", { rrule: "FREQ=DAILY" }))).not.toHaveProperty(
      "expiresAt",
    );
    expect(bodyOfEvent(event("never"))).not.toHaveProperty("expiresAt");
  });
});

describe("purity", () => {
  it("API-1: src/definition does no I/O: it imports no store, network, file or process module", () => {
    const dir = fileURLToPath(new URL("../../../src/definition/", import.meta.url));
    const imports = readdirSync(dir).flatMap((file) =>
      [...readFileSync(join(dir, file), "utf8").matchAll(/from "([^"]+)"/g)].map((m) => m[1]!),
    );
    expect(imports.length).toBeGreaterThan(0);
    const allowed = /^(\.\/|\.\.\/(contracts|recurrence|errors|domain)\/|node:crypto$|zod$)/;
    expect(imports.filter((i) => !allowed.test(i))).toEqual([]);
  });
});
