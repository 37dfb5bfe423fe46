/**
 * Every process observable (OPS-13) and settings that reach running processes (OPS-11), on
 * the engine of this run: deliveries counted once by final outcome apart from attempts,
 * first-attempt and retry lateness apart, cluster gauges computed by one process under a
 * database lease and served by all from the stored row, the settings version picked up
 * within one tick, a rotated webhook secret signing with both secrets during its overlap,
 * stale instances marked and pruned, and the attempt log's own retention. Time moves only on
 * the test clocks.
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { readStatus } from "../../src/api/status.js";
import { createPunctual, type Punctual } from "../../src/app/punctual.js";
import { verifyWebhook } from "../../src/channels/webhook-signature.js";
import { TestClock } from "../../src/clock/index.js";
import { PermanentError, TransientError } from "../../src/errors/index.js";
import { memoryLogger } from "../../src/observability/logger.js";
import { readStoredGauges } from "../../src/store/observe.js";
import { listInstances } from "../../src/store/operations.js";
import { openTestDatabase } from "../support/db.js";
import { insertSchedule, instants, NOW, plan } from "../support/rows.js";
import {
  deliveries,
  peer,
  testPunctual,
  tickAndDrain,
  type TestPunctual,
} from "../support/punctual.js";

const T0 = "2027-01-04T08:00:00Z";
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function open(
  scheduler: NonNullable<Parameters<typeof testPunctual>[0]>["scheduler"] = {},
): Promise<TestPunctual> {
  const t = await testPunctual({ scheduler });
  cleanups.push(() => t.close());
  return t;
}

function oneOff(dtstart: string, channel = "test", extra: Record<string, unknown> = {}) {
  return {
    dtstart,
    tzid: "UTC",
    reminders: [{ key: "r", offset: "PT0S", channel, ...extra }],
  };
}

/** The value of one sample of the Prometheus text (`name{labels}`), or null when absent. */
async function sample(p: Punctual, series: string): Promise<number | null> {
  const { body } = await p.metricsText();
  const line = body.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.slice(series.length + 1));
}

describe("OPS-13 deliveries by final outcome, attempts apart", () => {
  it("OPS-13: a delivery sent on its second try counts once in punctual_deliveries_total and twice in punctual_attempts_total; its lateness is observed once as a first attempt and once as a retry", async () => {
    const t = await open();
    const { punctual, channel, clock } = t;
    await punctual.createSchedule(oneOff(T0));
    channel.behaviour = (_d, _c, n) => {
      if (n === 1) throw new TransientError("503 from receiver");
      return { messageId: null };
    };
    await tickAndDrain(punctual);
    const [retrying] = await deliveries(punctual);
    expect(retrying).toMatchObject({ state: "retry" });
    expect(await sample(punctual, 'punctual_deliveries_total{channel="test",outcome="sent"}')).toBe(
      null,
    );
    clock.set(retrying!.runAt);
    await tickAndDrain(punctual);
    expect((await deliveries(punctual))[0]).toMatchObject({ state: "sent", attempt: 2 });

    expect(await sample(punctual, 'punctual_deliveries_total{channel="test",outcome="sent"}')).toBe(
      1,
    );
    expect(
      await sample(punctual, 'punctual_attempts_total{channel="test",outcome="transient"}'),
    ).toBe(1);
    expect(await sample(punctual, 'punctual_attempts_total{channel="test",outcome="sent"}')).toBe(
      1,
    );
    expect(await sample(punctual, 'punctual_delivery_lateness_seconds_count{channel="test"}')).toBe(
      1,
    );
    expect(await sample(punctual, 'punctual_retry_lateness_seconds_count{channel="test"}')).toBe(1);
    // Later ticks count nothing again.
    clock.advance(3_600_000);
    await tickAndDrain(punctual);
    expect(await sample(punctual, 'punctual_deliveries_total{channel="test",outcome="sent"}')).toBe(
      1,
    );
  });

  it("OPS-13: a permanent failure counts once as dead, an occurrence the misfire policy skipped once as skipped, a cancelled delivery once as cancelled", async () => {
    const t = await open();
    const { punctual, channel, clock } = t;
    channel.behaviour = () => {
      throw new PermanentError("410 gone");
    };
    await punctual.createSchedule(oneOff(T0));
    await tickAndDrain(punctual);
    expect(await sample(punctual, 'punctual_deliveries_total{channel="test",outcome="dead"}')).toBe(
      1,
    );
    // A daily series planned, then missed while no process ran: the skip policy skips it.
    await punctual.createSchedule({
      dtstart: "2027-01-04T08:30:00Z",
      tzid: "UTC",
      rrule: "FREQ=DAILY;COUNT=3",
      misfire: "skip",
      reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
    });
    await tickAndDrain(punctual);
    clock.advance(3 * 86_400_000);
    await tickAndDrain(punctual);
    const skipped = (await deliveries(punctual)).filter((d) => d.state === "skipped").length;
    expect(skipped).toBeGreaterThan(0);
    expect(
      await sample(punctual, 'punctual_deliveries_total{channel="test",outcome="skipped"}'),
    ).toBe(skipped);

    const later = new Date(clock.now() + 1_800_000).toISOString();
    const { schedule } = await punctual.createSchedule(oneOff(later));
    await tickAndDrain(punctual);
    await punctual.cancelSchedule(schedule.id);
    await punctual.cancelSchedule(schedule.id);
    expect(
      await sample(punctual, 'punctual_deliveries_total{channel="test",outcome="cancelled"}'),
    ).toBe(1);
  });
});

describe("OPS-13 cluster gauges under one lease", () => {
  it("OPS-13: one process computes the gauges per interval and stores them; the other serves the stored row; a scrape runs no count; the survivor takes over once the lease expired", async () => {
    const every = 10_000;
    const t = await open({ gaugesEveryMs: every });
    const other = await peer(t, { start: T0, scheduler: { gaugesEveryMs: every } });
    cleanups.push(() => other.close());
    t.channel.behaviour = () => {
      throw new TransientError("503");
    };
    await t.punctual.createSchedule(oneOff(T0));
    await t.punctual.createSchedule(oneOff(T0));
    // `other` sends nothing: it claims no row while t holds them, and t's sends all fail.
    await tickAndDrain(t.punctual);
    // The tick computed the gauges before its sends; compute again now they failed.
    await t.punctual.scheduler.refreshGauges();
    await other.punctual.scheduler.tick();
    const stored = await readStoredGauges(t.punctual.db, { now: null });
    expect(stored?.computed_by).toBe(t.punctual.scheduler.owner);
    for (const p of [t.punctual, other.punctual]) {
      expect(await sample(p, "punctual_retry_waiting_deliveries")).toBe(2);
      expect(await sample(p, "punctual_due_backlog")).toBe(0);
    }

    // New due rows (no process ticks): no scrape sees them before the next computation.
    await plan(
      t.punctual.db,
      await insertSchedule(t.punctual.db),
      instants(3, NOW.getTime() - 10_000),
    );
    expect(await sample(other.punctual, "punctual_due_backlog")).toBe(0);
    expect(await sample(t.punctual, "punctual_due_backlog")).toBe(0);
    await t.punctual.scheduler.refreshGauges();
    expect(await sample(t.punctual, "punctual_due_backlog")).toBe(3);
    expect(await sample(other.punctual, "punctual_due_backlog")).toBe(0);
    await other.punctual.scheduler.refreshGauges();
    expect(await sample(other.punctual, "punctual_due_backlog")).toBe(3);

    // The holder stops ticking; once its lease ran out, the other process computes.
    other.clock.advance(every + 1_000);
    await other.punctual.scheduler.tick();
    const after = await readStoredGauges(t.punctual.db, { now: null });
    expect(after?.computed_by).toBe(other.punctual.scheduler.owner);
  });

  it("OPS-13: the oldest due age is the age of the oldest row the claim may take, at the computation", async () => {
    const t = await open();
    await t.punctual.scheduler.refreshGauges();
    expect(await sample(t.punctual, "punctual_oldest_due_age_seconds")).toBe(0);
    const id = await insertSchedule(t.punctual.db);
    await plan(t.punctual.db, id, [new Date(NOW.getTime() - 120_000), NOW]);
    await t.punctual.scheduler.refreshGauges();
    expect(await sample(t.punctual, "punctual_due_backlog")).toBe(2);
    expect(await sample(t.punctual, "punctual_oldest_due_age_seconds")).toBe(120);
  });
});

describe("OPS-11 settings reach running processes", () => {
  it("OPS-11: a retry policy stored by one process is applied by another at its next tick, logged with the old and new version, and recorded on its instance row", async () => {
    const t = await open();
    const other = await peer(t, { start: T0 });
    cleanups.push(() => other.close());
    await t.punctual.scheduler.tick();
    const before = t.punctual.scheduler.settings.version;
    expect(before).not.toBeNull();
    expect(t.punctual.scheduler.settings.options.backoffBaseMs).toBe(1_000);

    await other.punctual.setRetryPolicy({ backoffBaseMs: 60_000, backoffCapMs: 120_000 });
    await t.punctual.scheduler.tick();
    const after = t.punctual.scheduler.settings.version;
    expect(after).toBeGreaterThan(before!);
    expect(t.punctual.scheduler.settings.options.backoffBaseMs).toBe(60_000);
    expect(
      t.logs.find((l) => l.msg === `settings changed: version ${before} → ${after}`),
    ).toMatchObject({ from: before, to: after });
    const mine = (await listInstances(t.punctual.db, { now: null, windowMs: 0 })).find(
      (r) => r.id === t.punctual.scheduler.owner,
    );
    expect(Number(mine?.settings_version)).toBe(after);
    const status = await readStatus(t.punctual);
    expect(status.settingsVersion).toBe(after);
    expect(status.instances.find((i) => i.id === t.punctual.scheduler.owner)).toMatchObject({
      settingsVersion: after,
    });

    // The next retry waits by the new policy: 60 s base, jittered down to half.
    t.channel.behaviour = () => {
      throw new TransientError("503");
    };
    await t.punctual.createSchedule(oneOff(T0));
    await tickAndDrain(t.punctual);
    const [row] = await deliveries(t.punctual);
    expect(Date.parse(row!.runAt) - t.clock.now()).toBeGreaterThanOrEqual(30_000);
  });

  it("OPS-11: a tick whose settings read fails is not a successful pass (never running on a stale copy silently)", async () => {
    const t = await open();
    await t.punctual.scheduler.tick();
    await t.punctual.db.query("update punctual_settings set value = $1::jsonb where key = $2", [
      '"not json object"',
      "webhook_secret",
    ]);
    await t.punctual.db.query(
      "insert into punctual_settings (key, value) values ('retry_policy', '{\"backoffBaseMs\": -1}')",
    );
    const report = await t.punctual.scheduler.tick();
    expect(report.failedSweep).toBe("settings");
  });
});

/** A loopback receiver that keeps each request's headers and body. */
async function headerReceiver(): Promise<{
  url: string;
  got: Array<{ headers: IncomingHttpHeaders; body: string }>;
  close(): Promise<void>;
}> {
  const got: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      got.push({ headers: req.headers, body });
      res.writeHead(200).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    got,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe("OPS-11 default webhook secret rotation", () => {
  it("OPS-11: during the overlap a webhook carries a signature by the new and by the old secret; after it, by the new one only", async () => {
    const handle = await openTestDatabase();
    cleanups.push(() => handle.close());
    const clock = new TestClock(T0);
    const punctual = await createPunctual({
      database: handle.db,
      clock,
      logger: memoryLogger("silent").logger,
      allowPrivateTargets: true,
    });
    cleanups.push(() => punctual.close(0));
    const receiver = await headerReceiver();
    cleanups.push(() => receiver.close());
    const old = punctual.webhookSecret.secret;
    await punctual.scheduler.tick();

    const { secret: fresh } = await punctual.rotateWebhookSecret({ overlapMs: 3_600_000 });
    const webhook = { key: "r", offset: "PT0S", channel: "webhook", target: { url: receiver.url } };
    await punctual.createSchedule({ dtstart: T0, tzid: "UTC", reminders: [webhook] });
    await tickAndDrain(punctual);
    expect(receiver.got).toHaveLength(1);
    const during = receiver.got[0]!;
    expect(String(during.headers["webhook-signature"]).split(" ")).toHaveLength(2);
    const nowSeconds = Math.floor(clock.now() / 1000);
    expect(verifyWebhook(fresh, during.headers, during.body, { nowSeconds })).toBe(true);
    expect(verifyWebhook(old, during.headers, during.body, { nowSeconds })).toBe(true);

    clock.advance(3_600_000 + 60_000);
    await punctual.createSchedule({
      dtstart: new Date(clock.now()).toISOString(),
      tzid: "UTC",
      reminders: [webhook],
    });
    await tickAndDrain(punctual);
    expect(receiver.got).toHaveLength(2);
    const later = receiver.got[1]!;
    const laterSeconds = Math.floor(clock.now() / 1000);
    expect(String(later.headers["webhook-signature"]).split(" ")).toHaveLength(1);
    expect(verifyWebhook(fresh, later.headers, later.body, { nowSeconds: laterSeconds })).toBe(
      true,
    );
    expect(verifyWebhook(old, later.headers, later.body, { nowSeconds: laterSeconds })).toBe(false);
  });

  it("OPS-11: a configured secret is not rotated in the database (the configuration wins)", async () => {
    const t = await open();
    await expect(t.punctual.rotateWebhookSecret({ overlapMs: 1_000 })).rejects.toThrow(
      /PUNCTUAL_WEBHOOK_SECRET/,
    );
  });
});

describe("OPS-4 status marks stale instances and prunes them; retention of the attempt log", () => {
  it("OPS-4: an instance whose ticks stopped is marked stale in the status, and retention prunes it once older than instancePruneAfterMs", async () => {
    const t = await open({ instancePruneAfterMs: 120_000, retentionEveryMs: 1_000 });
    const other = await peer(t, { start: T0, scheduler: { retentionEveryMs: 1_000 } });
    cleanups.push(() => other.close());
    await other.punctual.scheduler.tick();
    await t.punctual.scheduler.tick();
    const row = (s: Awaited<ReturnType<typeof readStatus>>) =>
      s.instances.find((i) => i.id === other.punctual.scheduler.owner);
    expect(row(await readStatus(t.punctual))).toMatchObject({ stale: false, stoppedAt: null });

    t.clock.advance(61_000);
    await t.punctual.scheduler.tick();
    const stale = await readStatus(t.punctual);
    expect(row(stale)).toMatchObject({ stale: true });
    expect(stale.instances.find((i) => i.id === t.punctual.scheduler.owner)?.stale).toBe(false);

    t.clock.advance(60_000);
    await t.punctual.scheduler.tick();
    expect(row(await readStatus(t.punctual))).toBeUndefined();
    expect(await sample(t.punctual, "punctual_instances_pruned_total")).toBe(1);
  });

  it("OPS-4: attempt-log rows older than attemptRetentionDays are deleted while their delivery stays", async () => {
    const t = await open({ attemptRetentionDays: 1, retentionEveryMs: 1_000 });
    const { punctual, channel, clock } = t;
    channel.behaviour = () => {
      throw new TransientError("503");
    };
    await punctual.createSchedule(oneOff(T0));
    await tickAndDrain(punctual);
    const count = async () =>
      Number(
        (await punctual.db.query<{ n: string }>("select count(*) as n from punctual_attempts"))
          .rows[0]!.n,
      );
    expect(await count()).toBe(1);
    clock.advance(86_400_000 + 1_000);
    channel.behaviour = () => {
      throw new PermanentError("410");
    };
    await tickAndDrain(punctual);
    // The second attempt (today) stays; the first, a day old, is gone.
    expect(await count()).toBe(1);
    expect(await deliveries(punctual)).toHaveLength(1);
  });
});
