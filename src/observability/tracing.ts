/**
 * OpenTelemetry traces (OPS-15), through `@opentelemetry/api` only: without an SDK
 * registered in the process every call here is a no-op that costs a pointer comparison
 * ({@link tracingEnabled}), so the hot path pays nothing. With one (`punctual start --otel`,
 * or the user's own setup loaded with `node --import`), one reminder is one trace:
 *
 * - the API request that created the schedule (a server span, child of the caller's W3C
 *   `traceparent` when it sent one); its span context is stored with the schedule as a
 *   `traceparent` string;
 * - `plan` (planning the schedule's deliveries), then per delivery `claim <channel>`,
 *   `send <channel>` and `settle <channel>`, all children of the stored context, so they
 *   share the request's trace id however long after it they run and in whichever process.
 *
 * Names and attributes follow the OpenTelemetry messaging semantic conventions
 * (`messaging.system = "punctual"`, `messaging.operation.name`, `messaging.operation.type`,
 * `messaging.destination.name` = the channel, `messaging.message.id` = the delivery key),
 * plus `punctual.*` attributes (attempt, outcome, schedule id).
 */
import {
  context,
  propagation,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Span,
  type SpanContext,
  type Tracer,
} from "@opentelemetry/api";

/** The instrumentation scope's name (what a backend shows as the library). */
export const TRACER_NAME = "punctual";

/** `messaging.system` of every span punctual makes. */
export const MESSAGING_SYSTEM = "punctual";

/** The no-op provider the API falls back to while no SDK is registered. */
const NOOP_PROVIDER = new ProxyTracerProvider().getDelegate();

/**
 * True when an SDK's tracer provider is registered globally (spans may be recorded).
 * Cheap: read it per batch or per request, not once at start-up (an SDK may be set later).
 */
export function tracingEnabled(): boolean {
  const provider = trace.getTracerProvider();
  const delegate =
    provider instanceof ProxyTracerProvider ? provider.getDelegate() : (provider ?? NOOP_PROVIDER);
  return delegate !== NOOP_PROVIDER;
}

/** punctual's tracer (looked up each time: the global provider may change, e.g. in tests). */
export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * The W3C `traceparent` (Trace Context §3.2, version 00) of a span context, or null when
 * it is not valid (the no-op span's all-zero ids).
 */
export function traceParentOf(spanContext: SpanContext | undefined): string | null {
  if (!spanContext || !trace.isSpanContextValid(spanContext)) return null;
  const flags = (spanContext.traceFlags & TraceFlags.SAMPLED).toString(16).padStart(2, "0");
  return `00-${spanContext.traceId}-${spanContext.spanId}-${flags}`;
}

/** The `traceparent` of the span active in the current context, or null (none, or no SDK). */
export function activeTraceParent(): string | null {
  return traceParentOf(trace.getActiveSpan()?.spanContext());
}

/**
 * A context whose parent is the span a stored `traceparent` names (a remote parent), or
 * the root context when `traceParent` is null or malformed (W3C Trace Context: a
 * malformed header is ignored, never an error).
 */
export function contextOfTraceParent(traceParent: string | null | undefined): Context {
  if (!traceParent) return ROOT_CONTEXT;
  const m = TRACEPARENT.exec(traceParent);
  if (!m) return ROOT_CONTEXT;
  const spanContext: SpanContext = {
    traceId: m[1]!,
    spanId: m[2]!,
    traceFlags: Number.parseInt(m[3]!, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  };
  if (!trace.isSpanContextValid(spanContext)) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, spanContext);
}

/**
 * The parent of a span about a stored object: the active span's context when there is one
 * (work done inside a request), else the context its stored `traceParent` names.
 */
export function activeOr(traceParent: string | null | undefined): Context {
  const active = trace.getActiveSpan();
  if (active && trace.isSpanContextValid(active.spanContext())) return context.active();
  return contextOfTraceParent(traceParent);
}

/** Extracts the caller's trace context from request headers with the global propagator. */
export function contextOfHeaders(get: (name: string) => string | undefined): Context {
  return propagation.extract(ROOT_CONTEXT, null, {
    keys: () => ["traceparent", "tracestate"],
    get: (_carrier, key) => get(key),
  });
}

/** Runs `fn` with `span` active (so spans started inside, and stored `traceparent`s, are its children). */
export function withSpan<T>(span: Span, fn: () => T): T {
  return context.with(trace.setSpan(context.active(), span), fn);
}

/** Ends a span with an error status naming `message` (no exception event: messages may hold secrets). */
export function endWithError(span: Span, message: string, endTime?: number): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.end(endTime);
}

/** Attributes every delivery span carries (messaging semantic conventions). */
export function messagingAttributes(
  operation: "plan" | "claim" | "send" | "settle",
  fields: { channel?: string; deliveryKey?: string; scheduleId?: string; attempt?: number },
): Attributes {
  const type =
    operation === "plan"
      ? "create"
      : operation === "claim"
        ? "receive"
        : operation === "send"
          ? "send"
          : "settle";
  const attributes: Attributes = {
    "messaging.system": MESSAGING_SYSTEM,
    "messaging.operation.name": operation,
    "messaging.operation.type": type,
  };
  if (fields.channel !== undefined) attributes["messaging.destination.name"] = fields.channel;
  if (fields.deliveryKey !== undefined) attributes["messaging.message.id"] = fields.deliveryKey;
  if (fields.scheduleId !== undefined) attributes["punctual.schedule.id"] = fields.scheduleId;
  if (fields.attempt !== undefined) attributes["punctual.attempt"] = fields.attempt;
  return attributes;
}

/** Span kinds used (re-exported so callers need not import the API). */
export { SpanKind };
export type { Span, Context };
