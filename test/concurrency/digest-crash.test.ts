/**
 * DEL-19 / DEL-6: a worker process killed with SIGKILL between the claim of its digests and
 * their settle, on PostgreSQL. A second worker recovers them after the lease: the digests
 * of an idempotent reminder are sent again with the same digest id and the same items
 * (the receiver de-duplicates on webhook-id), those of an at-most-once reminder become
 * `in_doubt` with every member and are never sent again. No item is in two digests, none is
 * sent under two ids, none is lost.
 */
import type { ServerResponse } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { hasPostgres } from "../support/db.js";
import { exited, raceSetup, startWorker, until } from "../support/processes.js";
import { startReceiver, type Receiver } from "../unit/channels/receiver.js";

const needs = hasPostgres()
  ? ""
  : " (skipped: needs PostgreSQL — DATABASE_URL or PostgreSQL binaries)";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface DigestBody {
  digestId: string;
  items: Array<{ deliveryId: number; title: string }>;
}

describe("digests across a crash on PostgreSQL", () => {
  it.skipIf(!hasPostgres())(
    `DEL-19 / DEL-6: kill -9 between a digest's claim and its settle: recovered with the same id and items (idempotent) or in doubt with all members (at-most-once); no item twice, in two digests, or lost${needs}`,
    async () => {
      const { lib, url, workers } = await raceSetup(cleanups);
      const http: Receiver = await startReceiver();
      cleanups.push(() => http.close());
      const held: ServerResponse[] = [];
      http.respond = (_req, res) => held.push(res); // the victim is mid-send
      const due = new Date(Date.now() - 2_000).toISOString();
      const groups = ["ana", "ben", "cy"];
      for (const key of groups) {
        for (let i = 0; i < 10; i++) {
          await lib.createSchedule({
            dtstart: due,
            tzid: "UTC",
            title: `${key}-${i}`,
            reminders: [
              {
                key: "r",
                channel: "webhook",
                target: { url: http.url },
                digest: { windowMs: 1_000, key },
                ...(key === "cy" ? { delivery: "at-most-once" } : {}),
              },
            ],
          });
        }
      }
      const leaseEnv = {
        PUNCTUAL_LEASE_MS: "8000",
        PUNCTUAL_LEASE_MARGIN_MS: "1000",
        PUNCTUAL_SEND_TIMEOUT_MS: "6000",
        PUNCTUAL_POLL_MS: "200",
      };
      const victim = startWorker(url, leaseEnv);
      workers.push(victim);
      await until(() => held.length >= 3, "the victim's three digests held open");
      victim.kill("SIGKILL");
      await exited(victim);
      for (const res of held.splice(0)) res.destroy();
      http.respond = (_req, res) => res.writeHead(200).end();
      workers.push(startWorker(url, leaseEnv));
      const states = async () =>
        (
          await lib.db.query<{ title: string; state: string; digest_id: string | null }>(
            `select s.title, d.state, d.digest_id from punctual_deliveries d
             join punctual_schedules s on s.id = d.schedule_id order by s.title`,
          )
        ).rows;
      await until(async () => {
        const rows = await states();
        return (
          rows.length === 30 && rows.every((r) => r.state === "sent" || r.state === "in_doubt")
        );
      }, "every member settled");
      const rows = await states();
      const bodies = http.requests.map((r) => JSON.parse(r.body) as DigestBody);
      for (const [n, r] of http.requests.entries()) {
        expect(r.headers["webhook-id"]).toBe(bodies[n]!.digestId);
      }
      // Items by digest id: every request of one id carries the same items.
      const byId = new Map<string, string>();
      for (const b of bodies) {
        const items = b.items.map((i) => i.title).join(",");
        expect(byId.get(b.digestId) ?? items).toBe(items);
        byId.set(b.digestId, items);
      }
      // No item under two digest ids; each idempotent member sent, in the digest its row names.
      const seen = new Map<string, string>();
      for (const [id, items] of byId) {
        for (const title of items.split(",")) {
          expect(seen.get(title), `${title} in two digests`).toBeUndefined();
          seen.set(title, id);
        }
      }
      for (const r of rows) {
        if (r.title.startsWith("cy")) {
          expect(r.state).toBe("in_doubt");
        } else {
          expect(r.state).toBe("sent");
          expect(seen.get(r.title)).toBe(r.digest_id);
        }
      }
      // The idempotent digests were sent twice (victim, then rescuer) under their one id;
      // the at-most-once one once (the victim's try), never again.
      const counts = new Map<string, number>();
      for (const b of bodies) counts.set(b.digestId, (counts.get(b.digestId) ?? 0) + 1);
      const cyId = rows.find((r) => r.title.startsWith("cy"))!.digest_id!;
      expect(counts.get(cyId)).toBe(1);
      expect([...counts.entries()].filter(([id]) => id !== cyId).map(([, n]) => n)).toEqual([2, 2]);
      expect(seen.size).toBe(30);
      for (const w of workers) w.kill("SIGTERM");
      await Promise.all(workers.map(exited));
    },
  );
});
