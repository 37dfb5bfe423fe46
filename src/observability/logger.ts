/**
 * Structured JSON logs (OPS-2) through pino. Every module takes a {@link Logger} so tests
 * can capture lines; `createLogger` builds the process logger.
 */
import { pino } from "pino";
import type { Logger as PinoLogger, DestinationStream } from "pino";

/** The logger type used across punctual (pino's). */
export type Logger = PinoLogger;

/** Log levels accepted by `PUNCTUAL_LOG_LEVEL`. */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

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
  const logger = pino({ level, formatters: { level: (label) => ({ level: label }) } }, destination);
  return { logger, lines };
}
