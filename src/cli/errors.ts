/**
 * Exit codes and error reporting of the `punctual` command.
 *
 * | Exit | Meaning                                                                  |
 * | ---- | ------------------------------------------------------------------------ |
 * | 0    | success                                                                  |
 * | 1    | the operation failed (API error, invalid rule, unhealthy, unreachable)   |
 * | 2    | cannot start: configuration, schema mismatch, data folder locked, usage |
 *
 * Errors people can act on print one paragraph, never a stack trace.
 */
import type { ErrorBody } from "../contracts/index.js";
import {
  ConfigError,
  DataDirLockedError,
  ResourceBusyError,
  SchemaMismatchError,
  ValidationError,
  type FieldIssue,
} from "../errors/index.js";

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_STARTUP = 2;
/** Bad usage: flags that contradict each other or a value that cannot be read (same code as a failed start). */
export const EXIT_USAGE = 2;

/** An error with a message meant for the terminal and an exit code. */
export class CliError extends Error {
  readonly exitCode: number;
  readonly issues: readonly FieldIssue[];
  constructor(
    message: string,
    exitCode: number = EXIT_FAILURE,
    issues: readonly FieldIssue[] = [],
  ) {
    super(message);
    this.name = "CliError";
    this.exitCode = exitCode;
    this.issues = issues;
  }
}

/**
 * The error of a file that cannot be read, in one line: `cannot read FILE: no such file`
 * (or `it is a folder`, `permission denied`, the system's message), exit 1.
 */
export function unreadableFile(file: string, err: unknown): CliError {
  const code = (err as NodeJS.ErrnoException).code;
  const why =
    code === "ENOENT"
      ? "no such file"
      : code === "EISDIR"
        ? "it is a folder"
        : code === "EACCES" || code === "EPERM"
          ? "permission denied"
          : err instanceof Error
            ? err.message
            : String(err);
  return new CliError(`cannot read ${file}: ${why}`, EXIT_FAILURE);
}

/** The API answered with an error body (`{ error: { code, message, issues? } }`). */
export class ApiError extends Error {
  readonly status: number;
  readonly body: ErrorBody;
  constructor(status: number, body: ErrorBody) {
    super(body.error.message);
    this.name = "ApiError";
    this.status = status;
    this.body = body;
  }
}

/** What to do about a lock that was not granted in time (RESOURCE_BUSY). */
const BUSY_HINT =
  "punctual: another transaction (perhaps a stalled worker) holds that lock; run the command again in a few seconds";

/** Where a configuration key comes from on the command line, for error messages. */
const CONFIG_SOURCES: Record<string, string> = {
  databaseUrl: "--database-url / DATABASE_URL",
  dataDir: "--data-dir / PUNCTUAL_DATA_DIR",
  takeOverLock: "--take-over-lock / PUNCTUAL_TAKE_OVER_LOCK",
  logLevel: "--log-level / PUNCTUAL_LOG_LEVEL",
  webhookSecret: "PUNCTUAL_WEBHOOK_SECRET",
  allowPrivateTargets: "PUNCTUAL_ALLOW_PRIVATE_TARGETS",
  "email.smtpUrl": "PUNCTUAL_SMTP_URL",
  "email.from": "PUNCTUAL_SMTP_FROM",
  "email.domain": "PUNCTUAL_SMTP_DOMAIN",
  "api.host": "--host / PUNCTUAL_HOST",
  "api.port": "--port / PUNCTUAL_PORT",
  "api.apiKey": "PUNCTUAL_API_KEY",
  lockTimeoutMs: "PUNCTUAL_LOCK_TIMEOUT_MS",
};

/** Adds the flag or variable name after each configuration key the message mentions. */
function withSources(message: string): string {
  return message.replace(/^(\s*)([A-Za-z.]+):/gm, (whole, indent: string, key: string) =>
    CONFIG_SOURCES[key] ? `${indent}${key} (${CONFIG_SOURCES[key]}):` : whole,
  );
}

/** Formats one field issue as a line. */
export function formatIssue(issue: FieldIssue): string {
  const got =
    issue.value === undefined ? "" : ` (got ${JSON.stringify(issue.value)?.slice(0, 120)})`;
  return `${issue.field}: ${issue.message}${got}`;
}

/**
 * Prints an error for people on stderr and returns the exit code to use.
 * Stack traces only for unexpected errors, and only with PUNCTUAL_DEBUG=1.
 */
export function reportError(err: unknown, write: (text: string) => void): number {
  if (err instanceof CliError) {
    write(`punctual: ${err.message}\n`);
    for (const issue of err.issues) write(`  - ${formatIssue(issue)}\n`);
    return err.exitCode;
  }
  if (err instanceof ApiError) {
    const { code, message, issues } = err.body.error;
    if (issues && issues.length > 0) {
      write(`punctual: the server refused the request (${err.status} ${code}):\n`);
      for (const issue of issues) write(`  - ${formatIssue(issue)}\n`);
    } else {
      write(`punctual: ${message} (${err.status} ${code})\n`);
    }
    // The server speaks of its HTTP header; on the command line the key is a variable.
    if (err.status === 401) {
      write(
        "punctual: set PUNCTUAL_API_KEY to the server's key (or a tenant's); the CLI sends it for you.\n",
      );
    }
    if (code === "RESOURCE_BUSY") write(`${BUSY_HINT}\n`);
    return EXIT_FAILURE;
  }
  if (err instanceof ResourceBusyError) {
    write(`punctual: ${err.message}\n${BUSY_HINT}\n`);
    return EXIT_FAILURE;
  }
  if (err instanceof ConfigError) {
    write(`punctual: ${withSources(err.message)}\n`);
    return EXIT_STARTUP;
  }
  if (err instanceof SchemaMismatchError) {
    write(`punctual: ${err.message}\n`);
    return EXIT_STARTUP;
  }
  if (err instanceof DataDirLockedError) {
    write(`punctual: ${err.message}\n`);
    return EXIT_STARTUP;
  }
  if (err instanceof ValidationError) {
    write("punctual: invalid input\n");
    for (const issue of err.issues) write(`  - ${formatIssue(issue)}\n`);
    return EXIT_FAILURE;
  }
  const message = err instanceof Error ? err.message : String(err);
  write(`punctual: ${message}\n`);
  if (process.env.PUNCTUAL_DEBUG === "1" && err instanceof Error && err.stack) {
    write(`${err.stack}\n`);
  }
  return EXIT_FAILURE;
}
