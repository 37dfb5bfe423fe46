/**
 * OPS-15: the spans of one delivery (`src/observability/tracing.ts` explains the trace):
 * `claim <channel>`, `send <channel>` and `settle <channel>`, each a child of the context
 * stored with the schedule (`trace_parent`), or a new trace when it has none. Every
 * function here returns at once while no OpenTelemetry SDK is registered; the span state
 * lives on the held row, so nothing outlives the row in this process.
 */
import {
  contextOfTraceParent,
  endWithError,
  messagingAttributes,
  SpanKind,
  traceParentOf,
  tracer,
  tracingEnabled,
  type Context,
  type Span,
} from "../observability/tracing.js";
import type { HeldRow } from "./held.js";

/** The trace state of one held row. */
export interface HeldTrace {
  /** The parent of the row's spans (the stored context, or root). */
  readonly parent: Context;
  /** The send span while the send runs (and until it is ended with the outcome). */
  send: Span | null;
  /** When the settle of the row's outcome was handed over (epoch ms), or null. */
  settleStartedAt: number | null;
}

function attributesOf(held: HeldRow, operation: "claim" | "send" | "settle") {
  return messagingAttributes(operation, {
    channel: held.row.channel,
    deliveryKey: held.row.delivery_key,
    scheduleId: held.row.schedule_id,
    attempt: held.row.attempt - held.row.deferrals,
  });
}

/**
 * Records the claim span of each row of one claim, `roundTripMs` long and ending now
 * (the statement's round trip as the process clock measured it).
 */
export function traceClaimed(rows: readonly HeldRow[], roundTripMs: number): void {
  if (rows.length === 0 || !tracingEnabled()) return;
  const end = Date.now();
  const start = end - Math.max(0, roundTripMs);
  const t = tracer();
  for (const held of rows) {
    const parent = contextOfTraceParent(held.row.trace_parent);
    held.trace = { parent, send: null, settleStartedAt: null };
    const span = t.startSpan(
      `claim ${held.row.channel}`,
      { kind: SpanKind.CONSUMER, startTime: start, attributes: attributesOf(held, "claim") },
      parent,
    );
    span.setAttribute("punctual.lease_expires_at", held.row.lease_expires_at.toISOString());
    span.end(end);
  }
}

/**
 * Starts the send span of `held`; returns its W3C traceparent for the channel to pass on
 * (undefined while not tracing).
 */
export function traceSendStarted(held: HeldRow): string | undefined {
  if (!tracingEnabled()) return undefined;
  held.trace ??= {
    parent: contextOfTraceParent(held.row.trace_parent),
    send: null,
    settleStartedAt: null,
  };
  const span = tracer().startSpan(
    `send ${held.row.channel}`,
    { kind: SpanKind.PRODUCER, attributes: attributesOf(held, "send") },
    held.trace.parent,
  );
  held.trace.send = span;
  return traceParentOf(span.spanContext()) ?? undefined;
}

/** Ends the send span of `held` with the decided outcome (`punctual.outcome`, next state, HTTP status). */
export function traceSendEnded(
  held: HeldRow,
  decision: { outcome: string; state: string; status: number | null; error: string | null },
): void {
  const span = held.trace?.send;
  if (!span) return;
  held.trace!.send = null;
  held.trace!.settleStartedAt = Date.now();
  span.setAttribute("punctual.outcome", decision.outcome);
  span.setAttribute("punctual.next_state", decision.state);
  if (decision.status !== null) span.setAttribute("http.response.status_code", decision.status);
  if (decision.outcome === "sent") span.end();
  else endWithError(span, decision.error?.slice(0, 200) ?? decision.outcome);
}

/**
 * Records the settle span of `held`, from the hand-over of its outcome to now;
 * `recorded` false: the fence found the lease lost (nothing changed).
 */
export function traceSettled(held: HeldRow | undefined, state: string, recorded: boolean): void {
  const trace = held?.trace;
  if (!held || !trace || trace.settleStartedAt === null || !tracingEnabled()) return;
  const span = tracer().startSpan(
    `settle ${held.row.channel}`,
    {
      kind: SpanKind.INTERNAL,
      startTime: trace.settleStartedAt,
      attributes: attributesOf(held, "settle"),
    },
    trace.parent,
  );
  trace.settleStartedAt = null;
  span.setAttribute("punctual.state", state);
  span.setAttribute("punctual.recorded", recorded);
  if (recorded) span.end();
  else endWithError(span, "lease lost: the outcome was not recorded");
}
