#!/usr/bin/env node
// The webhook receiver of `npm run chaos` (scripts/chaos.mjs forks it; not a product part).
//
// Listens on 127.0.0.1 (port 0 = any free one) and, for every POST, checks the Standard
// Webhooks signature with node:crypto alone (independent of punctual's own verifier):
// HMAC-SHA256 over "{webhook-id}.{webhook-timestamp}.{raw body}", any `v1,` entry of
// `webhook-signature` may match. A valid request gets 200 after a short random delay (so
// some sends are in flight when a worker is killed); a bad one gets 401.
//
// Each request becomes one JSON line in the log file, written in arrival order:
//   { id, ts, recvMs, ok, dueAt, scheduleId, reminderKey, n, attempt }
// `recvMs` is this process's real clock (Date.now()) when the request's headers arrived;
// `ts` the webhook-timestamp header (Unix s); `n` the reminder's number from its payload.
// It does not de-duplicate: the log keeps every arrival, the orchestrator counts them.
//
// IPC (process.send): sends { type: "listening", port } once; answers { type: "stats" }
// with { type: "stats", requests, lastAt }; on { type: "stop" } closes, flushes the log and
// exits 0.
import { createHmac, timingSafeEqual } from "node:crypto";
import { createWriteStream } from "node:fs";
import { createServer } from "node:http";

const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const secret = arg("--secret", "");
const logPath = arg("--log", "");
const maxDelayMs = Number(arg("--max-delay-ms", "40"));
if (!secret || !logPath) {
  console.error("usage: chaos-receiver.mjs --secret whsec_… --log FILE [--max-delay-ms N]");
  process.exit(2);
}

const key = secret.startsWith("whsec_")
  ? Buffer.from(secret.slice(6), "base64")
  : Buffer.from(secret, "utf8");
const log = createWriteStream(logPath, { flags: "a" });
let requests = 0;
let lastAt = 0;

function verify(id, ts, signatures, body) {
  if (!id || !/^\d{1,15}$/.test(ts ?? "")) return false;
  const expected = createHmac("sha256", key).update(`${id}.${ts}.${body}`, "utf8").digest();
  return (signatures ?? "").split(" ").some((entry) => {
    const [version, value] = entry.split(",", 2);
    const given = Buffer.from(value ?? "", "base64");
    return version === "v1" && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

const server = createServer((req, res) => {
  const recvMs = Date.now();
  requests += 1;
  lastAt = recvMs;
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const id = req.headers["webhook-id"];
    const ts = req.headers["webhook-timestamp"];
    const ok = req.method === "POST" && verify(id, ts, req.headers["webhook-signature"], body);
    let parsed = null;
    try {
      parsed = JSON.parse(body);
    } catch {
      // recorded with nulls below; a body that is not JSON is a defect the report shows
    }
    log.write(
      JSON.stringify({
        id: id ?? null,
        ts: ts === undefined ? null : Number(ts),
        recvMs,
        ok,
        dueAt: parsed?.dueAt ?? null,
        scheduleId: parsed?.scheduleId ?? null,
        reminderKey: parsed?.reminderKey ?? null,
        n: typeof parsed?.payload?.n === "number" ? parsed.payload.n : null,
        attempt: parsed?.attempt ?? null,
      }) + "\n",
    );
    const reply = () => {
      if (res.destroyed) return;
      res.writeHead(ok ? 200 : 401, { "content-type": "text/plain" }).end(ok ? "ok" : "bad");
    };
    const delay = ok && maxDelayMs > 0 ? Math.floor(Math.random() * maxDelayMs) : 0;
    if (delay > 0) setTimeout(reply, delay);
    else reply();
  });
  req.on("error", () => undefined);
});
server.keepAliveTimeout = 5_000;

server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  process.send?.({ type: "listening", port: typeof address === "object" ? address.port : 0 });
});

function stop() {
  server.close();
  server.closeAllConnections?.();
  log.end(() => process.exit(0));
}

process.on("message", (msg) => {
  if (msg?.type === "stats") process.send?.({ type: "stats", requests, lastAt });
  if (msg?.type === "stop") stop();
});
// The orchestrator died: nothing will read the log any more.
process.on("disconnect", stop);
process.on("SIGTERM", stop);
process.on("SIGINT", () => undefined);
