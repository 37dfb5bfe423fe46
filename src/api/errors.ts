/**
 * How errors become HTTP replies. Every 4xx and 5xx body has one shape, the contract's
 * `ErrorBody`: `{ error: { code, message, issues? } }`.
 *
 * | Error                                   | Status | Code                      |
 * | --------------------------------------- | ------ | ------------------------- |
 * | ValidationError (also NUL / lone surrogate in any input text) | 400 | VALIDATION_FAILED (+ issues) |
 * | malformed JSON body                     | 400    | INVALID_JSON              |
 * | missing / wrong bearer token            | 401    | UNAUTHORIZED              |
 * | Host not allowed (DNS rebinding)        | 403    | HOST_NOT_ALLOWED          |
 * | cross-site write without an API key     | 403    | CROSS_SITE_REQUEST        |
 * | webhook secret without key/local token  | 403    | SECRET_NEEDS_KEY          |
 * | key scopes do not allow the route       | 403    | INSUFFICIENT_SCOPE        |
 * | NotFoundError, unknown route            | 404    | NOT_FOUND                 |
 * | known route, other method               | 405    | METHOD_NOT_ALLOWED        |
 * | ConflictError                           | 409    | CONFLICT                  |
 * | ConflictError STALE_VERSION             | 412    | STALE_VERSION             |
 * | body over `api.bodyLimitBytes`          | 413    | PAYLOAD_TOO_LARGE         |
 * | body not JSON (import: not text/calendar) | 415  | UNSUPPORTED_MEDIA_TYPE    |
 * | ConflictError IDEMPOTENCY_KEY_REUSED    | 422    | IDEMPOTENCY_KEY_REUSED    |
 * | anything else                           | 500    | INTERNAL                  |
 * | worker thread busy / too slow / crashed | 503    | WORKERS_BUSY, WORKER_TIMEOUT, WORKER_FAILED |
 * | ResourceBusyError (a lock not granted within `lockTimeoutMs`) | 503 + Retry-After | RESOURCE_BUSY (+ resource: the path) |
 */
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ErrorBody } from "../contracts/index.js";
import {
  ConflictError,
  DataDirLockedError,
  ForbiddenError,
  NotFoundError,
  ResourceBusyError,
  ValidationError,
  type FieldIssue,
} from "../errors/index.js";
import { OffloadUnavailableError } from "../offload/pool.js";

/** A reply to send: status and body. */
export interface ErrorReply {
  status: ContentfulStatusCode;
  body: ErrorBody;
  /** Whether the error is ours (logged at ERROR) rather than the caller's. */
  internal: boolean;
  /** Seconds for a `Retry-After` header, when the caller should try again later. */
  retryAfterSeconds?: number;
}

/** Builds an error body. */
export function errorBody(
  code: string,
  message: string,
  issues?: readonly FieldIssue[],
): ErrorBody {
  return issues && issues.length > 0
    ? { error: { code, message, issues: issues.map((i) => ({ ...i })) } }
    : { error: { code, message } };
}

/**
 * Turns zod issues (from request validation) into field issues named like the
 * contract's fields (`reminders.0.offset`, `limit`, `(body)`), with the offending value
 * when `input` is given. The same function the facade uses.
 */
export { issuesFromZod } from "../app/punctual.js";

/** Maps any thrown value to the reply the API sends. */
export function toErrorReply(err: unknown): ErrorReply {
  if (err instanceof ValidationError) {
    return { status: 400, body: errorBody(err.code, err.message, err.issues), internal: false };
  }
  if (err instanceof NotFoundError) {
    return { status: 404, body: errorBody(err.code, err.message), internal: false };
  }
  if (err instanceof ForbiddenError) {
    return { status: 403, body: errorBody(err.code, err.message), internal: false };
  }
  if (err instanceof ConflictError) {
    const status =
      err.code === "STALE_VERSION" ? 412 : err.code === "IDEMPOTENCY_KEY_REUSED" ? 422 : 409;
    return { status, body: errorBody(err.code, err.message), internal: false };
  }
  if (err instanceof DataDirLockedError) {
    // DEL-1: the data folder was taken over by another process; nothing was written.
    return { status: 503, body: errorBody(err.code, err.message), internal: false };
  }
  if (err instanceof ResourceBusyError) {
    // A stalled transaction holds a lock the request needs: nothing was written, and the
    // server is fine otherwise. Logged at WARN and counted where it was raised. The
    // server's onError adds the request's path as the busy `resource`.
    return {
      status: 503,
      body: errorBody(err.code, err.message),
      internal: false,
      retryAfterSeconds: Math.ceil(err.retryAfterMs / 1_000),
    };
  }
  if (err instanceof OffloadUnavailableError) {
    // OPS-12: a worker thread was busy, too slow or crashed; the server itself is fine.
    return { status: 503, body: errorBody(err.code, err.message), internal: false };
  }
  if (err instanceof HTTPException) {
    if (err.status === 400 && /json/i.test(err.message)) {
      // The parser's position, when it gives one; never its text, which quotes the body.
      const at = /at position (\d+)/.exec(String((err.cause as Error | undefined)?.message));
      const where = at ? ` (at character ${at[1]})` : "";
      return {
        status: 400,
        body: errorBody("INVALID_JSON", `The request body is not valid JSON${where}.`),
        internal: false,
      };
    }
    if (err.status === 413) {
      return {
        status: 413,
        body: errorBody("PAYLOAD_TOO_LARGE", "Request body too large."),
        internal: false,
      };
    }
    if (err.status === 415) {
      return {
        status: 415,
        body: errorBody(
          "UNSUPPORTED_MEDIA_TYPE",
          "Send the body as JSON (Content-Type: application/json).",
        ),
        internal: false,
      };
    }
    const status = err.status as ContentfulStatusCode;
    return {
      status,
      body: errorBody(`HTTP_${status}`, err.message || "Request failed."),
      internal: status >= 500,
    };
  }
  return {
    status: 500,
    body: errorBody("INTERNAL", "Internal error; see the server log."),
    internal: true,
  };
}
