/**
 * Reminder kinds (DEL-11): the registry validated at start and on write, reminders that
 * name a kind, series-only and disabled kinds, copy at write time, the HTTP routes, and
 * the shipped example registry.
 */
import { readFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createApi, serveApi, type PunctualApi } from "../../src/api/server.js";
import { buildProgram } from "../../src/cli/program.js";
import { createPunctual, type Punctual } from "../../src/app/punctual.js";
import { TestClock } from "../../src/clock/index.js";
import type { ReminderKindInput, ReminderKindView } from "../../src/contracts/kinds.js";
import type { ErrorBody } from "../../src/contracts/index.js";
import { ConfigError, ValidationError } from "../../src/errors/index.js";
import { silentLogger } from "../../src/observability/logger.js";
import { openTestDatabase, type TestDatabase } from "../support/db.js";

const EXAMPLE = new URL("../../examples/reminder-kinds.json", import.meta.url);

let handle: TestDatabase;
let punctual: Punctual | null = null;

beforeEach(async () => {
  handle = await openTestDatabase();
});

afterEach(async () => {
  await punctual?.close(0);
  punctual = null;
  await handle.close();
});

function open(reminderKinds?: readonly ReminderKindInput[]): Promise<Punctual> {
  return createPunctual({
    database: handle.db,
    clock: new TestClock("2027-01-04T08:00:00Z"),
    logger: silentLogger(),
    allowPrivateTargets: true,
    webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
    ...(reminderKinds ? { reminderKinds } : {}),
  });
}

const KINDS: ReminderKindInput[] = [
  {
    key: "day-before",
    channel: "webhook",
    offset: "-P1D",
    target: { url: "https://example.com/hook" },
    template: { text: "tomorrow: {{ payload.title }}" },
  },
  { key: "weekly", channel: "log", offset: "-PT5M", seriesOnly: true },
  { key: "old", channel: "log", enabled: false },
];

async function fieldsOf(promise: Promise<unknown>): Promise<string[]> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ValidationError);
  return (err as ValidationError).issues.map((i) => i.field);
}

describe("DEL-11 the registry is validated at start", () => {
  it("DEL-11: a bad entry stops the start with a ConfigError naming the entry and field", async () => {
    const err = await open([
      { key: "a", channel: "log" },
      { key: "a", channel: "log" },
      { key: "b", channel: "pager" },
      { key: "c", channel: "log", offset: "15 minutes" },
      { key: "d", channel: "webhook", target: { url: "ftp://x" } },
      { key: "e", channel: "log", template: { text: "{% if %}" } },
    ]).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as Error).message;
    expect(message).toContain("reminderKinds.1.key: duplicate kind key (also reminderKinds.0)");
    expect(message).toContain("reminderKinds.2.channel: unknown channel");
    expect(message).toContain("reminderKinds.3.offset");
    expect(message).toContain("reminderKinds.4.target");
    expect(message).toContain("reminderKinds.5.template.text");
  });

  it("DEL-11: the option is written to the registry, and a start with the same list keeps each version", async () => {
    punctual = await open(KINDS);
    const first = await punctual.listReminderKinds();
    expect(first.map((k) => [k.key, k.version])).toEqual([
      ["day-before", 1],
      ["old", 1],
      ["weekly", 1],
    ]);
    await punctual.close(0);
    punctual = await open(KINDS);
    expect((await punctual.listReminderKinds()).map((k) => k.version)).toEqual([1, 1, 1]);
  });

  it("DEL-11: the shipped example registry (examples/reminder-kinds.json) is consistent", async () => {
    const example = JSON.parse(readFileSync(EXAMPLE, "utf8")) as ReminderKindInput[];
    expect(example.length).toBeGreaterThan(0);
    punctual = await open(example);
    expect((await punctual.listReminderKinds()).map((k) => k.key).sort()).toEqual(
      example.map((k) => k.key).sort(),
    );
  });
});

describe("DEL-11 reminders that name a kind", () => {
  const base = { dtstart: "2027-01-10T09:00:00", tzid: "Europe/Lisbon", payload: { title: "x" } };

  it("DEL-11: a reminder names a kind instead of repeating its fields; its own fields win", async () => {
    punctual = await open(KINDS);
    const { schedule } = await punctual.createSchedule({
      ...base,
      reminders: [{ kind: "day-before" }, { kind: "day-before", key: "early", offset: "-P2D" }],
    });
    expect(schedule.reminders).toEqual([
      expect.objectContaining({
        key: "day-before",
        offset: "-P1D",
        channel: "webhook",
        template: { text: "tomorrow: {{ payload.title }}" },
      }),
      expect.objectContaining({ key: "early", offset: "-P2D", channel: "webhook" }),
    ]);
  });

  it("DEL-11: a field a reminder sets to null (as a read shows an unset field) leaves the kind's value", async () => {
    punctual = await open(KINDS);
    const { schedule } = await punctual.createSchedule({
      ...base,
      reminders: [{ kind: "day-before", template: null, rateLimitKey: null }],
    });
    expect(schedule.reminders).toEqual([
      expect.objectContaining({
        key: "day-before",
        template: { text: "tomorrow: {{ payload.title }}" },
        rateLimitKey: null,
      }),
    ]);
  });

  it("DEL-11: a series-only kind on a one-off schedule is refused, naming the field", async () => {
    punctual = await open(KINDS);
    expect(
      await fieldsOf(punctual.createSchedule({ ...base, reminders: [{ kind: "weekly" }] })),
    ).toEqual(["reminders.0.kind"]);
    const { schedule } = await punctual.createSchedule({
      ...base,
      rrule: "FREQ=WEEKLY;COUNT=2",
      reminders: [{ kind: "weekly" }],
    });
    expect(schedule.reminders[0]).toMatchObject({ key: "weekly", channel: "log" });
  });

  it("DEL-11: a disabled or unknown kind is refused; other issues of the request are named too", async () => {
    punctual = await open(KINDS);
    expect(
      await fieldsOf(
        punctual.createSchedule({
          ...base,
          tzid: "Mars/Olympus",
          reminders: [{ kind: "old" }, { kind: "nope" }],
        }),
      ),
    ).toEqual(["reminders.0.kind", "reminders.1.kind", "tzid"]);
  });

  it("DEL-11: fields are copied at write time: editing or removing the kind leaves stored reminders alone", async () => {
    punctual = await open(KINDS);
    const { schedule } = await punctual.createSchedule({
      ...base,
      reminders: [{ kind: "day-before" }],
    });
    await punctual.putReminderKind("day-before", { channel: "log", offset: "-PT1H" });
    await punctual.removeReminderKind("day-before").catch(() => undefined);
    const again = await punctual.getSchedule(schedule.id);
    expect(again.reminders[0]).toMatchObject({ offset: "-P1D", channel: "webhook" });
    // An edit that names the kind again reads its current definition (here: removed).
    expect(
      await fieldsOf(punctual.updateSchedule(schedule.id, { reminders: [{ kind: "day-before" }] })),
    ).toEqual(["reminders.0.kind"]);
  });

  it("DEL-11: kinds are per tenant: another tenant's kind is unknown", async () => {
    punctual = await open(KINDS);
    expect(
      await fieldsOf(
        punctual.createSchedule({ ...base, reminders: [{ kind: "day-before" }] }, { tenant: "t2" }),
      ),
    ).toEqual(["reminders.0.kind"]);
  });
});

describe("DEL-11 HTTP routes", () => {
  let app: PunctualApi;
  beforeEach(async () => {
    punctual = await open();
    app = createApi(punctual);
  });

  const send = (method: string, path: string, body?: unknown) =>
    app.request(path, {
      method,
      headers: { "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  it("DEL-11: PUT creates (201) then replaces (200, version + 1); GET lists; DELETE removes (204, then 404)", async () => {
    const created = await send("PUT", "/v1/reminder-kinds/standup", {
      channel: "log",
      offset: "-PT10M",
    });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ key: "standup", version: 1, enabled: true });
    const replaced = await send("PUT", "/v1/reminder-kinds/standup", {
      channel: "log",
      offset: "-PT5M",
    });
    expect(replaced.status).toBe(200);
    expect(((await replaced.json()) as ReminderKindView).version).toBe(2);
    const list = (await (await send("GET", "/v1/reminder-kinds")).json()) as {
      items: ReminderKindView[];
    };
    expect(list.items.map((k) => [k.key, k.offset])).toEqual([["standup", "-PT5M"]]);
    const made = await send("POST", "/v1/schedules", {
      dtstart: "2027-01-10T09:00:00Z",
      reminders: [{ kind: "standup" }],
    });
    expect(made.status).toBe(201);
    expect(await made.json()).toMatchObject({ reminders: [{ key: "standup", offset: "-PT5M" }] });
    expect((await send("DELETE", "/v1/reminder-kinds/standup")).status).toBe(204);
    expect((await send("DELETE", "/v1/reminder-kinds/standup")).status).toBe(404);
    expect((await send("GET", "/v1/reminder-kinds/standup")).status).toBe(404);
  });

  it("DEL-11: the OpenAPI document lists the reminder-kind routes", async () => {
    const doc = (await (await send("GET", "/openapi.json")).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    expect(Object.keys(doc.paths["/v1/reminder-kinds"]!)).toEqual(["get"]);
    expect(Object.keys(doc.paths["/v1/reminder-kinds/{key}"]!).sort()).toEqual([
      "delete",
      "get",
      "put",
    ]);
  });

  it("DEL-11: PUT with an unknown channel or a bad offset answers 400 naming each field", async () => {
    const res = await send("PUT", "/v1/reminder-kinds/x", { channel: "pager", offset: "soon" });
    expect(res.status).toBe(400);
    const body = (await res.json()) as ErrorBody;
    expect(body.error.issues?.map((i) => i.field)).toEqual(["offset"]);
    const res2 = await send("PUT", "/v1/reminder-kinds/x", { channel: "pager" });
    expect(res2.status).toBe(400);
    expect(((await res2.json()) as ErrorBody).error.issues?.map((i) => i.field)).toEqual([
      "channel",
    ]);
  });
});

describe("DEL-11 CLI", () => {
  it("DEL-11: punctual kinds apply|set|list|remove work through the server", async () => {
    punctual = await open();
    const served = await serveApi(createApi(punctual), { host: "127.0.0.1", port: 0 });
    let out = "";
    const cli = (...args: string[]) =>
      buildProgram({ out: (t) => void (out += t), err: () => undefined }).parseAsync([
        "node",
        "punctual",
        ...args,
        "--url",
        served.url,
      ]);
    try {
      await cli("kinds", "apply", EXAMPLE.pathname);
      await cli(
        "kinds",
        "set",
        "standup",
        "--channel",
        "log",
        "--offset",
        "-PT10M",
        "--series-only",
      );
      out = "";
      await cli("kinds", "list");
      expect(out).toMatch(/standup\s+log\s+-PT10M\s+yes\s+yes\s+1/);
      expect(out).toContain("day-before");
      await cli("kinds", "remove", "standup");
      expect((await punctual.listReminderKinds()).map((k) => k.key)).not.toContain("standup");
    } finally {
      await served.close(0);
    }
  });
});
