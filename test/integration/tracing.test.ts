/**
 * OpenTelemetry traces (OPS-15) on the test engine: with an SDK registered in the process
 * (an in-memory exporter), one reminder created over HTTP is one trace — the request's
 * server span, `plan`, then `claim`, `send` and `settle` of its delivery — under the
 * caller's trace id, and the webhook carries the send span's `traceparent`. Without an
 * SDK nothing is stored or sent.
 */
import { context, propagation, trace } from "@opentelemetry/api";
import {
  InMemorySpanExporter,
  NodeTracerProvider,
  SimpleSpanProcessor,
  type ReadableSpan,
} from "@opentelemetry/sdk-trace-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createApi } from "../../src/api/server.js";
import type { ScheduleView } from "../../src/contracts/index.js";
import { contextOfTraceParent, traceParentOf } from "../../src/observability/tracing.js";
import { testPunctual, tickAndDrain, type TestPunctual } from "../support/punctual.js";
import { startReceiver, type Receiver } from "../unit/channels/receiver.js";

const T0 = "2027-01-04T08:00:00Z";
const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";
const CALLER = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;

let t: TestPunctual | null = null;
let http: Receiver;

beforeAll(async () => {
  http = await startReceiver();
});
afterEach(async () => {
  await t?.close();
  t = null;
  http.requests.length = 0;
});
afterAll(async () => {
  await http.close();
});

/** Creates a one-off webhook reminder due at T0 over HTTP, with the caller's traceparent. */
async function createOverHttp(p: TestPunctual): Promise<ScheduleView> {
  const res = await createApi(p.punctual).request("/v1/schedules", {
    method: "POST",
    headers: { "content-type": "application/json", traceparent: CALLER },
    body: JSON.stringify({
      dtstart: T0,
      tzid: "Europe/Berlin",
      reminders: [{ key: "r", offset: "PT0S", channel: "webhook", target: { url: http.url } }],
    }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as ScheduleView;
}

async function storedTraceParent(p: TestPunctual, id: string): Promise<string | null> {
  const { rows } = await p.punctual.db.query<{ trace_parent: string | null }>(
    "select trace_parent from punctual_schedules where id = $1",
    [id],
  );
  return rows[0]?.trace_parent ?? null;
}

describe("OPS-15: without an OpenTelemetry SDK", () => {
  it("OPS-15: no trace context is stored with the schedule, and the webhook has no traceparent", async () => {
    t = await testPunctual({ start: T0 });
    const schedule = await createOverHttp(t);
    await tickAndDrain(t.punctual);
    expect(http.requests).toHaveLength(1);
    expect(http.requests[0]!.headers.traceparent).toBeUndefined();
    expect(await storedTraceParent(t, schedule.id)).toBeNull();
  });
});

describe("OPS-15: with an OpenTelemetry SDK in the process", () => {
  const exporter = new InMemorySpanExporter();
  let provider: NodeTracerProvider;

  beforeAll(() => {
    provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    provider.register();
  });
  afterEach(() => exporter.reset());
  afterAll(async () => {
    await provider.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  });

  const named = (spans: ReadableSpan[], name: string) => {
    const found = spans.filter((s) => s.name === name);
    expect(found, `spans named ${name}: ${spans.map((s) => s.name).join(", ")}`).toHaveLength(1);
    return found[0]!;
  };
  const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;

  it("OPS-15: one reminder is one trace under the caller's trace id: request → plan → claim → send → settle; the webhook carries the send span's traceparent", async () => {
    t = await testPunctual({ start: T0 });
    const schedule = await createOverHttp(t);
    await tickAndDrain(t.punctual);
    const spans = exporter.getFinishedSpans();

    const request = named(spans, "POST /v1/schedules");
    const plan = named(spans, "plan");
    const claim = named(spans, "claim webhook");
    const send = named(spans, "send webhook");
    const settle = named(spans, "settle webhook");
    for (const s of [request, plan, claim, send, settle]) {
      expect(s.spanContext().traceId).toBe(CALLER_TRACE);
    }
    expect(parentOf(request)).toBe(CALLER_SPAN);
    expect(parentOf(plan)).toBe(request.spanContext().spanId);
    // The delivery's spans are children of the request span stored with the schedule.
    expect(await storedTraceParent(t, schedule.id)).toBe(traceParentOf(request.spanContext()));
    for (const s of [claim, send, settle]) expect(parentOf(s)).toBe(request.spanContext().spanId);

    expect(request.attributes["http.route"]).toBe("/v1/schedules");
    expect(request.attributes["http.response.status_code"]).toBe(201);
    expect(send.attributes).toMatchObject({
      "messaging.system": "punctual",
      "messaging.operation.name": "send",
      "messaging.destination.name": "webhook",
      "messaging.message.id": http.requests[0]!.headers["webhook-id"],
      "punctual.attempt": 1,
      "punctual.outcome": "sent",
      "http.response.status_code": 200,
    });
    expect(settle.attributes).toMatchObject({
      "punctual.state": "sent",
      "punctual.recorded": true,
    });
    expect(plan.attributes["punctual.deliveries.planned"]).toBe(1);

    expect(http.requests).toHaveLength(1);
    expect(http.requests[0]!.headers.traceparent).toBe(traceParentOf(send.spanContext()));
  });

  it("OPS-15: the request that edits a schedule is a server span of its caller's trace; the schedule keeps the creating request's context", async () => {
    t = await testPunctual({ start: T0 });
    const schedule = await createOverHttp(t);
    exporter.reset();
    const editTrace = "5ce0e9a56015fec5aadfa328ae398115";
    const res = await createApi(t.punctual).request(`/v1/schedules/${schedule.id}`, {
      method: "PATCH",
      headers: {
        "content-type": "application/json",
        traceparent: `00-${editTrace}-${CALLER_SPAN}-01`,
      },
      body: JSON.stringify({ dtstart: "2027-01-04T09:00:00Z" }),
    });
    expect(res.status).toBe(200);
    const spans = exporter.getFinishedSpans();
    const edit = named(spans, "PATCH /v1/schedules/:id");
    expect(edit.spanContext().traceId).toBe(editTrace);
    expect(parentOf(edit)).toBe(CALLER_SPAN);
    expect(edit.attributes["http.response.status_code"]).toBe(200);
    // The stored context stays the creating request's: later spans join that trace.
    expect(await storedTraceParent(t, schedule.id)).not.toContain(editTrace);
  });

  it("OPS-15: a failed send ends its span with an error status and the outcome", async () => {
    t = await testPunctual({ start: T0 });
    http.respond = (_req, res) => res.writeHead(500).end("down");
    await createOverHttp(t);
    await tickAndDrain(t.punctual);
    const send = named(exporter.getFinishedSpans(), "send webhook");
    expect(send.status.code).toBe(2); // SpanStatusCode.ERROR
    expect(send.attributes["punctual.outcome"]).toBe("transient");
    expect(send.attributes["punctual.next_state"]).toBe("retry");
    expect(send.attributes["http.response.status_code"]).toBe(500);
    http.respond = (_req, res) => res.writeHead(200).end();
  });

  it("OPS-15: a malformed or all-zero stored traceparent starts a new trace instead of failing", () => {
    for (const bad of [
      "",
      "garbage",
      `00-${"0".repeat(32)}-${CALLER_SPAN}-01`,
      `01-${CALLER_TRACE}`,
    ]) {
      expect(trace.getSpanContext(contextOfTraceParent(bad))).toBeUndefined();
    }
    expect(trace.getSpanContext(contextOfTraceParent(CALLER))?.traceId).toBe(CALLER_TRACE);
  });
});
