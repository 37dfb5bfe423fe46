/**
 * The named error vocabulary of punctual. Every error carries a stable `code` string
 * (safe to match on in scripts and API clients) and, where there is one, a `cause`.
 *
 * Three families (docs/architecture.md, decision 9):
 * - for people: {@link ValidationError}, {@link NotFoundError}, {@link ConflictError};
 * - for channels, to steer delivery: {@link PermanentError}, {@link TransientError},
 *   {@link RateLimitedError};
 * - for infrastructure: {@link SchemaMismatchError}, {@link DataDirLockedError},
 *   {@link ConfigError}, {@link ResourceBusyError}, and {@link isRetryableDatabaseError}.
 */

/** Base class: a message for people and a stable machine-readable `code`. */
export class PunctualError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** One problem with one input field. `field` is a dotted path such as `reminders.0.offset`. */
export interface FieldIssue {
  field: string;
  message: string;
  /** The offending value, when it is short enough to show. */
  value?: unknown;
}

/**
 * Bad input from a person (API body, CLI flag, rule text). Names every bad field.
 * HTTP: 400. Code: `VALIDATION_FAILED`.
 */
export class ValidationError extends PunctualError {
  readonly issues: readonly FieldIssue[];
  constructor(issues: FieldIssue[] | FieldIssue, options?: { cause?: unknown }) {
    const list = Array.isArray(issues) ? issues : [issues];
    super("VALIDATION_FAILED", list.map(formatIssue).join("; "), options);
    this.issues = list;
  }
}

/** Most characters of a refused value a message repeats (the issue keeps all of it). */
const SHOWN_VALUE_CHARS = 120;

function formatIssue(issue: FieldIssue): string {
  if (issue.value === undefined) return `${issue.field}: ${issue.message}`;
  const json = JSON.stringify(issue.value) ?? String(issue.value);
  // A long value is cut with an ellipsis inside its quotes, so the cut is visible.
  const shown =
    json.length <= SHOWN_VALUE_CHARS
      ? json
      : typeof issue.value === "string"
        ? `${json.slice(0, SHOWN_VALUE_CHARS - 2)}…"`
        : `${json.slice(0, SHOWN_VALUE_CHARS - 1)}…`;
  return `${issue.field}: ${issue.message} (got ${shown})`;
}

/** The named thing does not exist (or belongs to another tenant). HTTP: 404. */
export class NotFoundError extends PunctualError {
  constructor(what: string, id: string) {
    super("NOT_FOUND", `${what} ${id} not found`);
  }
}

/**
 * The caller is known but its key's scopes do not allow the action (API-2). HTTP: 403,
 * code `INSUFFICIENT_SCOPE`. Never used for another tenant's objects: those are
 * {@link NotFoundError}, so a key cannot learn that they exist.
 */
export class ForbiddenError extends PunctualError {
  constructor(message: string) {
    super("INSUFFICIENT_SCOPE", message);
  }
}

/**
 * The request conflicts with the current state: a stale version (HTTP 412 with If-Match),
 * an illegal state transition, a duplicate, an Idempotency-Key reused with another body
 * (HTTP 422). Code `STALE_VERSION`, `IDEMPOTENCY_KEY_REUSED` or `CONFLICT`.
 */
export class ConflictError extends PunctualError {
  constructor(
    message: string,
    code: "CONFLICT" | "STALE_VERSION" | "IDEMPOTENCY_KEY_REUSED" = "CONFLICT",
  ) {
    super(code, message);
  }
}

/**
 * A channel failure that no retry can fix (4xx other than 408/429, rejected address,
 * SMTP 5xx). `status` is the receiver's HTTP status or SMTP reply code, recorded in the
 * attempt (DEL-14); null when there was none.
 */
export class PermanentError extends PunctualError {
  readonly status: number | null;
  constructor(message: string, options?: { cause?: unknown; code?: string; status?: number }) {
    super(options?.code ?? "PERMANENT", message, options);
    this.status = options?.status ?? null;
  }
}

/**
 * A channel failure that may pass on retry (5xx, 408, SMTP 4xx, network error, timeout).
 * `maybeDelivered` says the side effect may already have happened (a timeout or a broken
 * connection after the request was sent): such a failure is retried only where the
 * receiver de-duplicates by idempotency key; otherwise the delivery is in doubt (DEL-5).
 * `status` is the receiver's HTTP status or SMTP reply code when it gave one (DEL-14).
 */
export class TransientError extends PunctualError {
  readonly maybeDelivered: boolean;
  readonly status: number | null;
  constructor(
    message: string,
    options?: { cause?: unknown; code?: string; maybeDelivered?: boolean; status?: number },
  ) {
    super(options?.code ?? "TRANSIENT", message, options);
    this.maybeDelivered = options?.maybeDelivered ?? false;
    this.status = options?.status ?? null;
  }
}

/**
 * The channel asked us to slow down (HTTP 429, Retry-After). Retried after `retryAfterMs`
 * without spending an attempt (DEL-13).
 */
export class RateLimitedError extends PunctualError {
  /** Milliseconds to wait before the next try. */
  readonly retryAfterMs: number;
  /** The receiver's status (HTTP 429 or 503), recorded in the attempt (DEL-14); null if none. */
  readonly status: number | null;
  constructor(
    message: string,
    retryAfterMs: number,
    options?: { cause?: unknown; status?: number },
  ) {
    super("RATE_LIMITED", message, options);
    this.retryAfterMs = retryAfterMs;
    this.status = options?.status ?? null;
  }
}

/** The database schema is behind or ahead of this release (OPS-5). */
export class SchemaMismatchError extends PunctualError {
  constructor(message: string) {
    super("SCHEMA_MISMATCH", message);
  }
}

/** Another process holds the embedded data folder. */
export class DataDirLockedError extends PunctualError {
  constructor(message: string) {
    super("DATA_DIR_LOCKED", message);
  }
}

/** Invalid configuration: stops the process at start. */
export class ConfigError extends PunctualError {
  constructor(message: string) {
    super("CONFIG_INVALID", message);
  }
}

/**
 * An operation gave up waiting for a lock another transaction holds (PostgreSQL
 * `lock_timeout`, SQLSTATE 55P03 `lock_not_available`): typically a schedule or its
 * deliveries locked by a worker that stalled inside its transaction. Nothing of the
 * operation was written (its transaction rolled back); trying again later is safe.
 * HTTP: 503 with `Retry-After`, code `RESOURCE_BUSY`.
 */
export class ResourceBusyError extends PunctualError {
  /**
   * The table whose row the operation waited for, as the server named it (e.g.
   * `punctual_schedules`); null when it did not say (a statement queued behind another
   * waiter for the same row, a lock on a whole table).
   */
  readonly relation: string | null;
  /** How long the operation waited before giving up, ms (the lock timeout). */
  readonly waitedMs: number;
  /** When to try again, ms: the same wait rounded up to whole seconds, at least one. */
  readonly retryAfterMs: number;
  constructor(relation: string | null, waitedMs: number, options?: { cause?: unknown }) {
    super(
      "RESOURCE_BUSY",
      `${relation === null ? "a lock it needs" : `a row of ${relation}`} is held by another transaction and was not released within ${waitedMs} ms; nothing was changed, try again later`,
      options,
    );
    this.relation = relation;
    this.waitedMs = waitedMs;
    this.retryAfterMs = Math.max(1_000, Math.ceil(waitedMs / 1_000) * 1_000);
  }
}

/**
 * Whether `err` is PostgreSQL's `lock_not_available` (SQLSTATE 55P03): a statement gave up
 * waiting for a lock (`lock_timeout`, or `NOWAIT`).
 */
export function isLockTimeout(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === "55P03";
}

/** SQLSTATE classes and codes worth retrying: connection loss, serialization, deadlock. */
const RETRYABLE_SQLSTATE = new Set(["40001", "40P01", "55P03", "57P01", "57P02", "57P03"]);
const RETRYABLE_NODE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
]);

/**
 * Whether a database error is worth retrying (OPS-8): connection failures (SQLSTATE class
 * 08, admin shutdown 57P01–57P03, Node socket errors), serialization failures (40001)
 * and deadlocks (40P01). Constraint violations and syntax errors are not.
 */
export function isRetryableDatabaseError(err: unknown): boolean {
  if (!err || typeof err !== "object") return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string") {
    if (code.startsWith("08") || RETRYABLE_SQLSTATE.has(code) || RETRYABLE_NODE_CODES.has(code))
      return true;
  }
  const message = String((err as { message?: unknown }).message ?? "");
  return /Connection terminated|connection is closed|Client has encountered a connection error|timeout exceeded when trying to connect/i.test(
    message,
  );
}

/**
 * Whether `check` accepts `value` (returns without throwing): the yes/no form of a
 * validating parser, for a caller that only asks and reports no error itself.
 */
export function accepts<T>(check: (value: T) => unknown, value: T): boolean {
  try {
    check(value);
    return true;
  } catch {
    return false;
  }
}
