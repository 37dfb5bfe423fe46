/**
 * `punctual import --every 15m FILE|URL` (OPS-7): imports a calendar again and again on a
 * cadence until stopped (Ctrl-C, SIGTERM), printing each import's summary with its time.
 * A failed import is reported on stderr and the loop goes on; each import is the same
 * idempotent `POST /v1/imports` as a single `punctual import`.
 */
import { ValidationError } from "../errors/index.js";
import { parseEvery } from "../scheduler/tasks.js";
import { runImport, type ImportEnv, type ImportFlags } from "./calendar.js";
import { CliError, EXIT_STARTUP } from "./errors.js";
import type { Io } from "./run.js";

/** What the loop needs besides {@link ImportEnv}. */
export interface ImportEveryEnv extends ImportEnv {
  /**
   * Waits `ms` before the next import; resolves `false` when the loop must stop (a
   * signal). The command waits on a timer ended by SIGINT / SIGTERM; tests script it.
   */
  wait(ms: number): Promise<boolean>;
}

/**
 * Runs {@link runImport} every `flags.every` until `env.wait` says stop.
 * @returns the number of imports that failed.
 * @throws CliError (exit 2) when `--every` is not a period, or with `--dry-run`.
 */
export async function runImportEvery(
  file: string,
  flags: ImportFlags & { every: string },
  io: Io,
  env: ImportEveryEnv,
): Promise<number> {
  let periodMs: number;
  try {
    periodMs = parseEvery(flags.every, "--every");
  } catch (err) {
    const why = err instanceof ValidationError ? err.message : String(err);
    throw new CliError(why, EXIT_STARTUP);
  }
  if (flags.dryRun) throw new CliError("--every does not apply with --dry-run", EXIT_STARTUP);
  let failures = 0;
  for (;;) {
    io.err(`${new Date(env.now()).toISOString()} importing ${file}\n`);
    try {
      await runImport(file, flags, io, env);
    } catch (err) {
      failures++;
      io.err(`import failed: ${err instanceof Error ? err.message : String(err)}\n`);
    }
    if (!(await env.wait(periodMs))) return failures;
  }
}

/** The real `wait`: a timer that SIGINT / SIGTERM end early (then the loop stops). */
export function signalWait(): (ms: number) => Promise<boolean> {
  return (ms) =>
    new Promise<boolean>((resolve) => {
      const stop = () => done(false);
      const timer = setTimeout(() => done(true), ms);
      function done(goOn: boolean) {
        clearTimeout(timer);
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
        resolve(goOn);
      }
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
    });
}
