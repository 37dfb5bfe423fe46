/**
 * DEL-16: a worker that stalls between sending a claim (or a renewal) and processing its
 * reply must not believe it still holds a whole lease. Real worker processes on
 * PostgreSQL: the victim's statement is held inside the database by a trigger (only for
 * the victim's connections, told apart by `application_name`), the victim is frozen with
 * SIGSTOP while it waits for that reply, and a second worker recovers the row once the
 * lease has run out and sends it. When the victim is thawed it reads the reply of a lease
 * that has already ended: it must leave the row alone, so the receiver gets it once.
 */
import type { ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import type { Punctual } from "../../src/app/punctual.js";
import { hasPostgres } from "../support/db.js";
import { exited, raceSetup, startWorker, until } from "../support/processes.js";

const needs = hasPostgres()
  ? ""
  : " (skipped: needs PostgreSQL — DATABASE_URL or PostgreSQL binaries)";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The victim's connections carry this name; the trigger holds only their statements. */
const STALLED_APP = "punctual-stalled";

/** Lease of every worker here, ms: short, so the rescuer takes over soon. */
const LEASE_MS = 2_000;

function withAppName(url: string): string {
  const u = new URL(url);
  u.searchParams.set("application_name", STALLED_APP);
  return u.toString();
}

/**
 * Installs a trigger that holds (pg_sleep, `seconds`) the victim's update of a delivery's
 * queue row (where the claim and the renewals write the lease, migration 0050) when `when`
 * holds for it: the statement's `now()`, and so the lease it grants, is fixed
 * before the hold.
 */
async function holdVictimUpdates(lib: Punctual, when: string, seconds: number): Promise<void> {
  await lib.db.query(`
    create or replace function punctual_test_hold() returns trigger language plpgsql as $$
    begin
      if current_setting('application_name') = '${STALLED_APP}' then
        perform pg_sleep(${seconds});
      end if;
      return new;
    end $$`);
  await lib.db.query(`
    create trigger punctual_test_hold before update on punctual_queue
    for each row when (${when}) execute function punctual_test_hold()`);
  cleanups.push(async () => {
    await lib.db.query("drop trigger if exists punctual_test_hold on punctual_queue");
    await lib.db.query("drop function if exists punctual_test_hold()");
  });
}

/** Resolves once a statement of the victim is held inside the trigger's sleep. */
async function victimHeldInDatabase(lib: Punctual): Promise<void> {
  await until(async () => {
    const { rows } = await lib.db.query<{ n: number }>(
      `select count(*)::int as n from pg_stat_activity
        where application_name = $1 and wait_event = 'PgSleep'`,
      [STALLED_APP],
    );
    return (rows[0]?.n ?? 0) > 0;
  }, "the victim's statement held by the trigger");
}

/** Collects a worker's log lines (JSON on stdout, warn level and up). */
function logLines(child: ChildProcess): string[] {
  const lines: string[] = [];
  let partial = "";
  child.stdout?.on("data", (d: Buffer) => {
    const parts = (partial + d.toString()).split("\n");
    partial = parts.pop() ?? "";
    lines.push(...parts);
  });
  return lines;
}

async function stateOf(lib: Punctual, id: number): Promise<string | undefined> {
  const { rows } = await lib.db.query<{ state: string }>(
    "select state from punctual_delivery_rows where id = $1",
    [id],
  );
  return rows[0]?.state;
}

/** Whether the worker logged that it left `id` unsent for want of lease (DEL-16). */
const leaseLow = (lines: readonly string[], id: number) =>
  lines.some(
    (l) =>
      l.includes("too little lease left") &&
      (l.includes(`"deliveryId":${id}`) ||
        new RegExp(`"deliveryIds":\\[[^\\]]*\\b${id}\\b`).test(l)),
  );

/**
 * Whether the worker's log shows it gave row `id` up unsent: too little lease left when
 * its turn came, or a renewal that no longer found it (recovered elsewhere), or whose
 * lease had run out before the renewal left. Which comes first after a thaw is a race of
 * the worker's own timers; each is a decision not to send.
 */
const gaveUp = (lines: readonly string[], id: number) =>
  leaseLow(lines, id) ||
  lines.some(
    (l) =>
      (l.includes("lease lost before the send finished") ||
        l.includes("lease ran out before its renewal was sent")) &&
      l.includes(`"deliveryId":${id}`),
  );

function thaw(victim: ChildProcess): void {
  if (victim.exitCode === null && victim.signalCode === null) victim.kill("SIGCONT");
}

describe("DEL-16: a worker stalled between a statement and its reply", () => {
  it.skipIf(!hasPostgres())(
    `DEL-16: a worker frozen while its claim is in flight, past the lease, does not send the row that was recovered and sent meanwhile${needs}`,
    async () => {
      const { lib, url, receiver, workers } = await raceSetup(cleanups);
      const env = { PUNCTUAL_LEASE_MS: String(LEASE_MS), PUNCTUAL_POLL_MS: "200" };
      await holdVictimUpdates(lib, "new.lease_owner is not null and old.lease_owner is null", 0.5);
      const { schedule } = await lib.createSchedule({
        dtstart: new Date(Date.now() - 1_000).toISOString(),
        tzid: "UTC",
        reminders: [
          { key: "once", offset: "PT0S", channel: "webhook", target: { url: receiver.url } },
        ],
      });
      const [delivery] = (await lib.listDeliveries({ scheduleId: schedule.id })).items;
      if (!delivery) throw new Error("no delivery planned");

      const victim = startWorker(withAppName(url), env);
      workers.push(victim);
      const victimLog = logLines(victim);
      cleanups.push(() => thaw(victim));
      await victimHeldInDatabase(lib);
      victim.kill("SIGSTOP");

      // The claim commits while the victim is frozen; its lease runs out; the rescuer
      // recovers the row and sends it (attempt 2).
      workers.push(startWorker(url, env));
      await receiver.waitFor(() => receiver.counts.get(delivery.deliveryKey) === 1, "rescue send");
      await until(async () => (await stateOf(lib, delivery.id)) === "sent", "rescue settled");

      thaw(victim);
      await until(
        () => leaseLow(victimLog, delivery.id) || receiver.counts.get(delivery.deliveryKey) !== 1,
        "the thawed victim's decision",
      );
      expect(receiver.counts.get(delivery.deliveryKey)).toBe(1);
      expect(leaseLow(victimLog, delivery.id)).toBe(true);
      await expectCleanStop(workers);
      expect(receiver.counts.get(delivery.deliveryKey)).toBe(1);
    },
  );

  it.skipIf(!hasPostgres())(
    `DEL-16: a worker frozen while its lease renewal is in flight, past the lease, does not send the queued row that was recovered and sent meanwhile${needs}`,
    async () => {
      const { lib, url, receiver, workers } = await raceSetup(cleanups);
      // One send slot: `first` is sent (and held open by the receiver), `second` waits in
      // the victim's queue, claimed in the same batch, renewed with it.
      const env = {
        PUNCTUAL_LEASE_MS: String(LEASE_MS * 2),
        PUNCTUAL_POLL_MS: "200",
        PUNCTUAL_SEND_TIMEOUT_MS: "60000",
      };
      const { schedule } = await lib.createSchedule({
        dtstart: new Date(Date.now() - 1_000).toISOString(),
        tzid: "UTC",
        reminders: ["first", "second"].map((key) => ({
          key,
          offset: "PT0S",
          channel: "webhook",
          target: { url: receiver.url },
        })),
      });
      const items = (await lib.listDeliveries({ scheduleId: schedule.id })).items;
      expect(items).toHaveLength(2);
      let victimRequest: string | null = null;
      receiver.onRequest = (id) => {
        if (victimRequest !== null) return true;
        victimRequest = id; // the victim's first send: held open
        return false;
      };

      const victim = startWorker(withAppName(url), {
        ...env,
        PUNCTUAL_CONCURRENCY: "1",
        PUNCTUAL_PREFETCH: "1",
      });
      workers.push(victim);
      const victimLog = logLines(victim);
      cleanups.push(() => thaw(victim));
      await receiver.waitFor(() => victimRequest !== null, "the victim's first send");
      await until(async () => {
        const { rows } = await lib.db.query<{ n: number }>(
          "select count(*)::int as n from punctual_delivery_rows where schedule_id = $1 and state = 'claimed'",
          [schedule.id],
        );
        return rows[0]?.n === 2;
      }, "both rows claimed by the victim");
      const queued = items.find((d) => d.deliveryKey !== victimRequest);
      if (!queued) throw new Error("no queued row");

      // Hold the victim's next renewal (claimed → claimed with a later expiry), freeze it.
      await holdVictimUpdates(
        lib,
        "old.lease_owner is not null and new.lease_owner is not distinct from old.lease_owner and new.lease_expires_at > old.lease_expires_at",
        0.5,
      );
      await victimHeldInDatabase(lib);
      victim.kill("SIGSTOP");

      workers.push(startWorker(url, env));
      await receiver.waitFor(
        () => receiver.counts.get(queued.deliveryKey) === 1,
        "rescue send of the queued row",
      );
      await until(async () => (await stateOf(lib, queued.id)) === "sent", "rescue settled");

      thaw(victim);
      // The victim's held send is answered now: with the lease it believes it has, it
      // would go on to the queued row.
      for (const res of receiver.held.splice(0)) {
        if (!res.writableEnded && !res.destroyed) res.writeHead(200).end("{}");
      }
      await until(
        () => gaveUp(victimLog, queued.id) || receiver.counts.get(queued.deliveryKey) !== 1,
        "the thawed victim's decision on its queued row",
      );
      expect(receiver.counts.get(queued.deliveryKey)).toBe(1);
      await expectCleanStop(workers);
      expect(receiver.counts.get(queued.deliveryKey)).toBe(1);
    },
  );
});

async function expectCleanStop(workers: ChildProcess[]): Promise<void> {
  for (const w of workers) w.kill("SIGTERM");
  expect(await Promise.all(workers.map(exited))).toEqual(workers.map(() => 0));
}
