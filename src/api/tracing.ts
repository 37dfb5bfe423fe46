/**
 * OPS-15: the server span of each API request, when an OpenTelemetry SDK is registered
 * (`src/observability/tracing.ts`). The caller's W3C `traceparent` header, when present,
 * is the span's parent; the span is active while the handler runs, so a schedule created
 * by the request stores its context and the reminder's later spans join the same trace.
 *
 * Attributes follow the HTTP semantic conventions: `http.request.method`, `http.route`,
 * `url.path`, `http.response.status_code`; a 5xx answer sets the error status. The span
 * is named `METHOD route` (e.g. `POST /v1/schedules`), never with ids from the path.
 */
import type { MiddlewareHandler } from "hono";
import { routePath } from "hono/route";
import {
  contextOfHeaders,
  endWithError,
  SpanKind,
  tracer,
  tracingEnabled,
  withSpan,
} from "../observability/tracing.js";

/** The request-span middleware: a pass-through while no SDK is registered. */
export function requestSpans(): MiddlewareHandler {
  return async (c, next) => {
    if (!tracingEnabled()) return next();
    const parent = contextOfHeaders((name) => c.req.header(name));
    const span = tracer().startSpan(
      `${c.req.method}`,
      {
        kind: SpanKind.SERVER,
        attributes: { "http.request.method": c.req.method, "url.path": c.req.path },
      },
      parent,
    );
    try {
      await withSpan(span, () => next());
    } finally {
      const route = routePath(c, -1);
      if (route && route !== "*" && route !== "/*") {
        span.updateName(`${c.req.method} ${route}`);
        span.setAttribute("http.route", route);
      }
      const status = c.res.status;
      span.setAttribute("http.response.status_code", status);
      if (status >= 500) endWithError(span, `HTTP ${status}`);
      else span.end();
    }
  };
}
