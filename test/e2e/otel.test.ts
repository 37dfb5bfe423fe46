/**
 * OPS-15 end to end: `punctual start --otel` as a real process exports over OTLP/HTTP
 * (JSON) to a local receiver — the test's own small OTLP sink on 127.0.0.1 — and one
 * reminder created with a `traceparent` arrives there as one trace: the request, `plan`,
 * `claim`, `send` and `settle`, all under the caller's trace id. Its webhook is answered by
 * a local receiver, which sees the send span's `traceparent`.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { builtPackage, punctualBin } from "../support/built-package.js";
import { startReceiver, type Receiver } from "../unit/channels/receiver.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "punctual-otel-"));
const TRACE = "0af7651916cd43dd8448eb211c80319c";
const CALLER = `00-${TRACE}-b7ad6b7169203331-01`;

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
}

let child: ChildProcess | null = null;
let sink: Server | null = null;
let hook: Receiver | null = null;

afterAll(async () => {
  child?.kill("SIGKILL");
  await new Promise<void>((resolve) => (sink ? sink.close(() => resolve()) : resolve()));
  await hook?.close();
  rmSync(dir, { recursive: true, force: true });
});

function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (key.startsWith("PUNCTUAL_") || key.startsWith("OTEL_") || key === "DATABASE_URL") {
      delete env[key];
    }
  }
  return env;
}

/** Polls `check` every 100 ms until it holds; fails naming `what` after 120 s (a hang guard, not a timing). */
async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`still waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe("OPS-15: punctual start --otel against a real OTLP/HTTP receiver", () => {
  it("OPS-15: one reminder's request, plan, claim, send and settle arrive at the OTLP receiver under one trace id, and the Prometheus instruments as OTLP metrics", async () => {
    const spans: OtlpSpan[] = [];
    const metricNames = new Set<string>();
    const paths: string[] = [];
    sink = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        paths.push(req.url ?? "");
        if (req.url === "/v1/traces") {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
            resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }>;
          };
          for (const rs of body.resourceSpans)
            for (const ss of rs.scopeSpans) spans.push(...ss.spans);
        } else if (req.url === "/v1/metrics") {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
            resourceMetrics: Array<{ scopeMetrics: Array<{ metrics: Array<{ name: string }> }> }>;
          };
          for (const rm of body.resourceMetrics)
            for (const sm of rm.scopeMetrics) for (const m of sm.metrics) metricNames.add(m.name);
        }
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
    await new Promise<void>((resolve) => sink!.listen(0, "127.0.0.1", resolve));
    const otlp = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
    hook = await startReceiver();

    child = spawn(
      process.execPath,
      [
        punctualBin(await builtPackage()),
        "start",
        "--otel",
        "--port",
        "0",
        "--data-dir",
        join(dir, "d"),
      ],
      {
        cwd: root,
        env: {
          ...cleanEnv(),
          OTEL_EXPORTER_OTLP_ENDPOINT: otlp,
          OTEL_BSP_SCHEDULE_DELAY: "100",
          OTEL_METRIC_EXPORT_INTERVAL: "1000",
          PUNCTUAL_ALLOW_PRIVATE_TARGETS: "true",
        },
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    let err = "";
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    await until(() => /listening on (http:\/\/\S+)/.test(err), "the listening line");
    expect(err).toContain(`traces to ${otlp}`);
    const api = /listening on (http:\/\/\S+)/.exec(err)![1]!;

    const res = await fetch(`${api}/v1/schedules`, {
      method: "POST",
      headers: { "content-type": "application/json", traceparent: CALLER },
      body: JSON.stringify({
        dtstart: new Date(Date.now() + 1_000).toISOString(),
        tzid: "UTC",
        reminders: [{ key: "r", offset: "PT0S", channel: "webhook", target: { url: hook.url } }],
      }),
    });
    expect(res.status).toBe(201);

    await until(() => hook!.requests.length > 0, "the webhook");
    expect(hook.requests[0]!.headers.traceparent).toMatch(new RegExp(`^00-${TRACE}-`));
    const names = ["POST /v1/schedules", "plan", "claim webhook", "send webhook", "settle webhook"];
    await until(
      () => names.every((n) => spans.some((s) => s.name === n && s.traceId === TRACE)),
      `spans ${names.join(", ")} (got ${spans.map((s) => s.name).join(", ")})`,
    );
    const send = spans.find((s) => s.name === "send webhook")!;
    expect(hook.requests[0]!.headers.traceparent).toBe(`00-${TRACE}-${send.spanId}-01`);
    expect(paths).toContain("/v1/traces");
    // The Prometheus instruments arrive under their own names.
    await until(
      () => metricNames.has("punctual_attempts_total") && metricNames.has("punctual_due_backlog"),
      `metrics (got ${[...metricNames].join(", ")})`,
    );
  });
});
