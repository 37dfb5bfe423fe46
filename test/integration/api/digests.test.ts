/**
 * DEL-19 through the HTTP API and a real webhook receiver: a reminder's `digest` is
 * validated (400 naming the field and the value, nothing stored), stored and read back; a
 * digest reaches a real HTTP receiver as exactly one signed request per digest whose
 * `webhook-id` is the digest id, with each item once; its template renders `items`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { handlerChannel } from "../../../src/channels/handler.js";
import type { ChannelDelivery } from "../../../src/channels/types.js";
import { TestClock } from "../../../src/clock/index.js";
import type { DeliveryView, ErrorBody, ScheduleView } from "../../../src/contracts/index.js";
import { silentLogger } from "../../../src/observability/logger.js";
import { installTransitionTrigger } from "../../support/transitions.js";
import { startReceiver, type Receiver } from "../../unit/channels/receiver.js";

let clock: TestClock;
let punctual: Punctual;
let app: PunctualApi;
let http: Receiver;
const handled: ChannelDelivery[] = [];

beforeAll(async () => {
  clock = new TestClock("2027-01-04T08:30:00Z");
  http = await startReceiver();
  punctual = await createPunctual({
    dataDir: null,
    clock,
    logger: silentLogger(),
    allowPrivateTargets: true,
    webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
    channels: [
      handlerChannel("plain", () => {}, { idempotent: true }),
      handlerChannel(
        "batched",
        () => {
          throw new Error("the single handler is not called for a digest");
        },
        {
          idempotent: true,
          digest: (d) => {
            handled.push(d);
          },
        },
      ),
    ],
  });
  await installTransitionTrigger(punctual.db);
  app = createApi(punctual);
});

afterAll(async () => {
  await punctual?.close(0);
  await http?.close();
});

function post(path: string, body: unknown) {
  return app.request(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

async function scheduleCount(): Promise<number> {
  return (await punctual.listSchedules({ limit: 500 })).items.length;
}

const at = (time: string) => `2027-01-04T${time}Z`;

describe("DEL-19: digests in the HTTP API", () => {
  it.each([
    {
      name: "windowMs under 1 s",
      digest: { windowMs: 999 },
      field: "reminders.0.digest.windowMs",
      value: 999,
    },
    {
      name: "windowMs over 24 h",
      digest: { windowMs: 86_400_001 },
      field: "reminders.0.digest.windowMs",
      value: 86_400_001,
    },
    {
      name: "windowMs not whole",
      digest: { windowMs: 1500.5 },
      field: "reminders.0.digest.windowMs",
      value: 1500.5,
    },
    {
      name: "maxItems 0",
      digest: { windowMs: 60_000, maxItems: 0 },
      field: "reminders.0.digest.maxItems",
      value: 0,
    },
    {
      name: "maxItems over 1000",
      digest: { windowMs: 60_000, maxItems: 1001 },
      field: "reminders.0.digest.maxItems",
      value: 1001,
    },
    {
      name: "an unknown key",
      digest: { windowMs: 60_000, size: 3 },
      field: "reminders.0.digest",
      value: undefined,
    },
  ])(
    "DEL-19: a digest with $name answers 400 naming the field and the value; nothing is stored",
    async ({ digest, field, value }) => {
      const before = await scheduleCount();
      const res = await post("/v1/schedules", {
        dtstart: at("09:00:00"),
        reminders: [{ channel: "webhook", target: { url: http.url }, digest }],
      });
      expect(res.status).toBe(400);
      const body = (await res.json()) as ErrorBody;
      const issue = body.error.issues?.find((i) => i.field.startsWith(field));
      expect(issue, JSON.stringify(body)).toBeDefined();
      if (value !== undefined) expect(issue!.value).toBe(value);
      else expect(JSON.stringify(issue)).toContain("size");
      expect(await scheduleCount()).toBe(before);
    },
  );

  it("DEL-19 / CH-4: a digest on a handler channel without a digest handler answers 400 naming the field and the channel; with one it is accepted", async () => {
    const before = await scheduleCount();
    const res = await post("/v1/schedules", {
      dtstart: at("09:00:00"),
      reminders: [{ channel: "plain", digest: { windowMs: 60_000 } }],
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as ErrorBody;
    expect(body.error.issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: "reminders.0.digest", value: "plain" }),
      ]),
    );
    expect(await scheduleCount()).toBe(before);
    const ok = await post("/v1/schedules", {
      dtstart: at("09:00:00"),
      reminders: [{ channel: "batched", digest: { windowMs: 60_000, key: "h" } }],
    });
    expect(ok.status).toBe(201);
    expect(((await ok.json()) as ScheduleView).reminders[0]!.digest).toEqual({
      windowMs: 60_000,
      key: "h",
    });
    clock.set(at("09:01:00"));
    await punctual.scheduler.tick();
    await punctual.scheduler.drain();
    expect(handled).toHaveLength(1);
    expect(handled[0]!.digest!.items).toHaveLength(1);
  });

  it("DEL-19 / CH-1 / CH-6: each digest reaches a real receiver as exactly one request, webhook-id = digest id, each item once; its template renders the items", async () => {
    http.requests.length = 0;
    const made: ScheduleView[] = [];
    // Two recipients' worth of reminders by key; the default key (channel + target) for a third.
    for (const [time, key] of [
      ["10:00:00", "ana"],
      ["10:00:30", "ben"],
      ["10:01:00", "ana"],
      ["10:02:00", "ben"],
      ["10:03:00", "ana"],
    ] as const) {
      const res = await post("/v1/schedules", {
        dtstart: at(time),
        title: `${key} ${time}`,
        payload: { n: time },
        reminders: [
          {
            channel: "webhook",
            target: { url: http.url },
            digest: { windowMs: 300_000, key },
            template: { text: "{% for i in items %}[{{ i.title }}]{% endfor %}" },
          },
        ],
      });
      expect(res.status).toBe(201);
      made.push((await res.json()) as ScheduleView);
    }
    clock.set(at("09:30:00"));
    await punctual.scheduler.tick();
    clock.set(at("10:06:00"));
    await punctual.scheduler.tick();
    await punctual.scheduler.drain();
    expect(http.requests).toHaveLength(2);
    const bodies = http.requests.map((r) => JSON.parse(r.body) as Record<string, unknown>);
    for (const [n, r] of http.requests.entries()) {
      expect(r.headers["webhook-id"]).toBe(bodies[n]!.digestId);
      expect(r.headers["webhook-id"]).toMatch(/^dg_/);
    }
    const ana = bodies.find((b) =>
      (b.items as Array<{ title: string }>)[0]!.title.startsWith("ana"),
    )!;
    expect((ana.items as Array<{ title: string }>).map((i) => i.title)).toEqual([
      "ana 10:00:00",
      "ana 10:01:00",
      "ana 10:03:00",
    ]);
    expect((ana.rendered as { text: string }).text).toBe(
      "[ana 10:00:00][ana 10:01:00][ana 10:03:00]",
    );
    // Every member once, in the digest its row names.
    const itemIds = bodies.flatMap((b) =>
      (b.items as Array<{ deliveryId: number }>).map((i) => i.deliveryId),
    );
    expect(new Set(itemIds).size).toBe(itemIds.length);
    expect(itemIds).toHaveLength(5);
    const list = await app.request(`/v1/deliveries?limit=100`);
    const { items } = (await list.json()) as { items: DeliveryView[] };
    for (const s of made) {
      const row = items.find((d) => d.scheduleId === s.id)!;
      expect(row.state).toBe("sent");
      const carrier = bodies.find((b) =>
        (b.items as Array<{ deliveryId: number }>).some((i) => i.deliveryId === row.id),
      )!;
      expect(row.digestId).toBe(carrier.digestId);
    }
  });
});
