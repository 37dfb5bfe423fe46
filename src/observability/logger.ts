/**
 * Structured JSON logs (OPS-2) through pino. Every module takes a {@link Logger} so tests
 * can capture lines; `createLogger` builds the process logger.
 *
 * Secrets never reach a line (API-7): {@link REDACT_PATHS} are censored by pino's
 * `redact`, and errors go through {@link errorSerializer}, which drops what a database
 * error quotes of the statement's values (`params`, `detail`).
 */
import { pino } from "pino";
import type { Logger as PinoLogger, DestinationStream, LoggerOptions } from "pino";

/** The logger type used across punctual (pino's). */
export type Logger = PinoLogger;

/** Log levels accepted by `PUNCTUAL_LOG_LEVEL`. */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** What a censored value is replaced with. */
export const REDACTED = "[REDACTED]";

/**
 * Fields censored in every log line, at the top level and one level down (pino `redact`
 * paths): bearer tokens (`authorization`, `apiKey`), webhook signing secrets (`secret`,
 * `webhookSecret`, a reminder target's `secret`) and the local API token.
 */
export const REDACT_PATHS: readonly string[] = [
  "authorization",
  "*.authorization",
  "headers.authorization",
  "*.headers.authorization",
  "apiKey",
  "*.apiKey",
  "api.apiKey",
  "secret",
  "*.secret",
  "webhookSecret",
  "*.webhookSecret",
  "localToken",
  "*.localToken",
  "target.secret",
  "*.target.secret",
  "reminders[*].target.secret",
  "*.reminders[*].target.secret",
];

/** Keys of a database error that quote the statement's values (a row, its parameters). */
const VALUE_QUOTING_KEYS = ["params", "parameters", "values"];
const VALUE_QUOTING_TEXT = ["detail"];

/** Removes value-quoting keys from a serialized error and its nested errors (bounded walk). */
function scrubError(value: unknown, depth = 0): void {
  if (depth > 8 || value === null || typeof value !== "object") return;
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (VALUE_QUOTING_KEYS.includes(key)) delete record[key];
    else if (VALUE_QUOTING_TEXT.includes(key) && typeof record[key] === "string")
      record[key] = REDACTED;
    else scrubError(record[key], depth + 1);
  }
}

/**
 * pino's error serializer, minus what an error quotes of stored text: PostgreSQL and
 * PGlite errors carry the statement's `params` (a reminder's target with its secret) and
 * a `detail` that may hold the failing row. Type, message, SQLSTATE `code`, constraint,
 * statement text and stack are kept.
 */
export function errorSerializer(err: unknown): unknown {
  const out = pino.stdSerializers.err(err as Error);
  scrubError(out);
  return out;
}

/** The redaction and serializers every punctual logger uses. */
export const SAFE_LOG_OPTIONS = {
  redact: { paths: [...REDACT_PATHS], censor: REDACTED },
  serializers: { err: errorSerializer },
} satisfies Pick<LoggerOptions, "redact" | "serializers">;

/**
 * A child of `logger` with punctual's redaction and error serializer (API-7), for a
 * logger a library user brought: whatever its own options, punctual's lines never carry
 * a secret.
 */
export function safeLogger(logger: Logger): Logger {
  return logger.child({}, SAFE_LOG_OPTIONS);
}

/**
 * Creates the process logger: JSON lines on stdout (or `destination`), ISO timestamps,
 * `name: "punctual"`.
 */
export function createLogger(
  options: { level?: LogLevel; destination?: DestinationStream } = {},
): Logger {
  return pino(
    {
      name: "punctual",
      level: options.level ?? "info",
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      ...SAFE_LOG_OPTIONS,
    },
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  );
}

/** A logger that writes nothing (tests, library users who bring none). */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

/**
 * A logger that collects parsed lines in memory, for tests that assert what was logged.
 */
export function memoryLogger(level: LogLevel = "trace"): {
  logger: Logger;
  lines: Array<Record<string, unknown> & { level: string; msg?: string }>;
} {
  const lines: Array<Record<string, unknown> & { level: string; msg?: string }> = [];
  const destination: DestinationStream = {
    write(chunk: string) {
      for (const line of chunk.split("\n")) {
        if (line.trim()) lines.push(JSON.parse(line));
      }
    },
  };
  const logger = pino(
    { level, formatters: { level: (label) => ({ level: label }) }, ...SAFE_LOG_OPTIONS },
    destination,
  );
  return { logger, lines };
}

/** Level methods a send writes its lines through: fields first, then the message. */
export interface LineLog {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/**
 * A child of `parent` with `bindings` (pino's `child`), made on the first line written at
 * an enabled level, not up front. A channel logs a send under its delivery key and
 * attempt; a plain send writes only a debug line, so at the default level it writes none,
 * and pino's `child` (bindings serialised, redaction set up: 4–13 µs per call measured on
 * the 2-core benchmark machine, docs/benchmarks.md) was paid per send for nothing. The
 * lines, when written, are the child's, field for field.
 */
export function lazyChild(parent: Logger, bindings: Record<string, unknown>): LineLog {
  return new LazyChild(parent, bindings);
}

class LazyChild implements LineLog {
  readonly #parent: Logger;
  readonly #bindings: Record<string, unknown>;
  #child: Logger | null = null;

  constructor(parent: Logger, bindings: Record<string, unknown>) {
    this.#parent = parent;
    this.#bindings = bindings;
  }

  #write(level: "debug" | "info" | "warn" | "error", fields: object, message: string): void {
    if (!this.#parent.isLevelEnabled(level)) return;
    this.#child ??= this.#parent.child(this.#bindings);
    this.#child[level](fields, message);
  }

  debug(fields: object, message: string): void {
    this.#write("debug", fields, message);
  }

  info(fields: object, message: string): void {
    this.#write("info", fields, message);
  }

  warn(fields: object, message: string): void {
    this.#write("warn", fields, message);
  }

  error(fields: object, message: string): void {
    this.#write("error", fields, message);
  }
}
