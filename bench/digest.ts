/**
 * `npm run bench:digest`: digests at size, with a worker killed mid-digest (DEL-19).
 *
 * 1,000 recipients (webhook targets at a real HTTP receiver on 127.0.0.1) and 10 one-off
 * schedules for all of them, due 6 s apart over one minute, each with a reminder
 * `digest: { windowMs: 60000 }` (key: the recipient): 10,000 member deliveries that must
 * reach the receiver as 1,000 messages of 10 items, each item once. Two `punctual worker`
 * processes (this checkout, through tsx) send them on PostgreSQL; once the receiver has
 * taken `--kill-after` digests, one worker is killed with SIGKILL (its digests are
 * mid-send: the receiver answers after `--reply-ms`) and a replacement started. The run
 * waits, bounded, for every member to settle, then reads the database and the receiver's
 * log and prints a report:
 *   messages (requests), distinct digest ids, requests that repeated an id (the recovery's
 *   re-send, de-duplicated by webhook-id), items in two digest ids (must be 0), members
 *   missing from every message (must be 0), members sent with the digest id of the message
 *   that carried them, and the time from the last window's end to the last message.
 * Exit 0 when every member is in exactly one digest id and 1,000 ids arrived; else 1.
 *
 *   npm run bench:digest
 *   npm run bench:digest -- --quick          200 recipients
 *   npm run bench:digest -- --recipients 200 --schedules 10 --kill-after 50
 *
 * PostgreSQL: DATABASE_URL (a database it may fill: it creates and drops
 * `punctual_bench_digest` there), else a throwaway cluster from scripts/pg-cluster.mjs.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { cpus, loadavg } from "node:os";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { createPunctual } from "../src/index.js";
// @ts-expect-error -- a plain .mjs helper without types
import { findPgBin, startCluster } from "../scripts/pg-cluster.mjs";
import { flag, hasFlag } from "./lib/harness.js";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const QUICK = hasFlag("quick");
const RECIPIENTS = Number(flag("recipients") ?? (QUICK ? 200 : 1_000));
const SCHEDULES = Number(flag("schedules") ?? 10);
const SPREAD_MS = 60_000;
const WINDOW_MS = 60_000;
const KILL_AFTER = Number(flag("kill-after") ?? Math.floor(RECIPIENTS / 4));
const REPLY_MS = Number(flag("reply-ms") ?? 50);
const SETTLE_S = Number(flag("settle-s") ?? 300);
const SECRET = "whsec_ZGlnZXN0LWJlbmNoLXNlY3JldC1mb3ItcHVuY3R1YWw=";
const NAME = "punctual_bench_digest";

console.log(
  `# digest chaos: ${RECIPIENTS} recipients × ${SCHEDULES} schedules over ${SPREAD_MS / 1000} s, ` +
    `window ${WINDOW_MS / 1000} s, kill -9 after ${KILL_AFTER} messages`,
);
console.log(
  `date ${new Date().toISOString()}, ${cpus().length} cores, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}`,
);

// --- database ------------------------------------------------------------------------------
let url = process.env.DATABASE_URL;
let cluster: { url: string; stop(): void } | null = null;
if (!url) {
  if (!findPgBin()) {
    console.error("PostgreSQL: no DATABASE_URL and no PostgreSQL server binaries; giving up");
    process.exit(2);
  }
  cluster = (await startCluster({})) as { url: string; stop(): void };
  url = cluster.url;
}
const admin = new pg.Client({ connectionString: url });
await admin.connect();
await admin.query(`drop database if exists ${NAME}`);
await admin.query(`create database ${NAME}`);
const dbUrl = new URL(url);
dbUrl.pathname = `/${NAME}`;
const databaseUrl = dbUrl.toString();

// --- receiver ------------------------------------------------------------------------------
interface Receipt {
  id: string;
  items: number[];
  at: number;
}
const receipts: Receipt[] = [];
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
      items?: Array<{ deliveryId: number }>;
    };
    receipts.push({
      id: String(req.headers["webhook-id"]),
      items: (body.items ?? []).map((i) => i.deliveryId),
      at: Date.now(),
    });
    setTimeout(() => res.writeHead(200).end(), REPLY_MS);
  });
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const hook = `http://127.0.0.1:${(server.address() as AddressInfo).port}/digest`;

// --- seed ----------------------------------------------------------------------------------
const p = await createPunctual({
  databaseUrl,
  migrate: true,
  logLevel: "silent",
  allowPrivateTargets: true,
  webhookSecret: SECRET,
});
const db = new pg.Client({ connectionString: databaseUrl });
await db.connect();
await db.query(
  `insert into punctual_recipients (tenant, id, tzid, targets)
   select 'default', 'u-' || g, 'UTC', jsonb_build_object('webhook', jsonb_build_object('url', $2::text))
   from generate_series(1, $1::int) g`,
  [RECIPIENTS, hook],
);
const ids = Array.from({ length: RECIPIENTS }, (_, i) => `u-${i + 1}`);
const firstDue = Date.now() + 30_000;
for (let s = 0; s < SCHEDULES; s++) {
  await p.createSchedule({
    dtstart: new Date(firstDue + Math.floor((s * SPREAD_MS) / SCHEDULES)).toISOString(),
    tzid: "UTC",
    title: `item ${s}`,
    payload: { n: s },
    recipients: ids,
    reminders: [{ key: "r", channel: "webhook", digest: { windowMs: WINDOW_MS } }],
  });
}
const lastWindowEnd = firstDue + WINDOW_MS;
console.log(`seeded; first due in ${((firstDue - Date.now()) / 1000).toFixed(1)} s`);

// --- workers -------------------------------------------------------------------------------
const workers: ChildProcess[] = [];
function startWorker(): ChildProcess {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "src/cli/main.ts", "worker", "--database-url", databaseUrl],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        PUNCTUAL_ALLOW_PRIVATE_TARGETS: "true",
        PUNCTUAL_WEBHOOK_SECRET: SECRET,
        PUNCTUAL_LOG_LEVEL: "error",
        PUNCTUAL_LEASE_MS: "5000",
        PUNCTUAL_LEASE_MARGIN_MS: "1000",
        PUNCTUAL_SEND_TIMEOUT_MS: "3000",
        PUNCTUAL_POLL_MS: "200",
      },
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  workers.push(child);
  return child;
}
const exited = (c: ChildProcess) =>
  c.exitCode !== null || c.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((r) => c.once("exit", () => r()));

const victim = startWorker();
startWorker();
const deadline = Date.now() + (lastWindowEnd - Date.now()) + SETTLE_S * 1000;
while (receipts.length < KILL_AFTER && Date.now() < deadline) {
  await new Promise((r) => setTimeout(r, 20));
}
const inFlightAtKill = receipts.length;
victim.kill("SIGKILL");
await exited(victim);
console.log(`killed a worker (SIGKILL) after ${inFlightAtKill} messages; starting a replacement`);
startWorker();

const settled = async () =>
  (
    await db.query<{ n: number }>(
      `select count(*)::int as n from punctual_deliveries
       where state in ('sent', 'in_doubt', 'dead', 'skipped')`,
    )
  ).rows[0]!.n;
while ((await settled()) < RECIPIENTS * SCHEDULES && Date.now() < deadline) {
  await new Promise((r) => setTimeout(r, 250));
}

// --- report --------------------------------------------------------------------------------
// int8 comes back as text from `pg`: compare ids as numbers.
const rows = (
  await db.query<{ id: string; state: string; digest_id: string | null }>(
    "select id, state, digest_id from punctual_deliveries",
  )
).rows.map((r) => ({ ...r, id: Number(r.id) }));
const itemsById = new Map<string, string>();
let inconsistent = 0;
for (const r of receipts) {
  const items = [...r.items].sort((a, b) => a - b).join(",");
  if (itemsById.has(r.id) && itemsById.get(r.id) !== items) inconsistent++;
  itemsById.set(r.id, items);
}
const digestOf = new Map<number, string>();
let twice = 0;
for (const [id, items] of itemsById) {
  for (const item of items.split(",").filter(Boolean).map(Number)) {
    if (digestOf.has(item) && digestOf.get(item) !== id) twice++;
    digestOf.set(item, id);
  }
}
const missing = rows.filter((r) => !digestOf.has(r.id)).length;
const matching = rows.filter(
  (r) => r.state === "sent" && r.digest_id === digestOf.get(r.id),
).length;
const byState = new Map<string, number>();
for (const r of rows) byState.set(r.state, (byState.get(r.state) ?? 0) + 1);
const repeats = receipts.length - itemsById.size;
const lastAt = Math.max(...receipts.map((r) => r.at));
const report = {
  members: rows.length,
  states: Object.fromEntries(byState),
  messages: receipts.length,
  digestIds: itemsById.size,
  repeatedIds: repeats,
  sameIdOtherItems: inconsistent,
  itemsInTwoDigests: twice,
  membersMissing: missing,
  membersSentWithTheirDigestId: matching,
  itemsPerDigest: itemsById.size ? rows.length / itemsById.size : 0,
  lastMessageAfterLastWindowEndS: Number(((lastAt - lastWindowEnd) / 1000).toFixed(1)),
  loadAverageAfter: loadavg().map((l) => Number(l.toFixed(2))),
};
console.log(JSON.stringify(report, null, 2));
const ok =
  twice === 0 &&
  missing === 0 &&
  inconsistent === 0 &&
  itemsById.size === RECIPIENTS &&
  matching === RECIPIENTS * SCHEDULES;
console.log(ok ? "PASS" : "FAIL");

for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill("SIGTERM");
await Promise.all(workers.map(exited));
await db.end();
await p.close(0);
await admin.query(`drop database if exists ${NAME}`);
await admin.end();
server.close();
cluster?.stop();
process.exit(ok ? 0 : 1);
