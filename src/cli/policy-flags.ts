/**
 * `schedules add` flags for delivery policy: quiet hours and priority of the reminders
 * (DEL-15), catch-up bounds of the schedule (DEL-17). Turned into the API's fields here;
 * the server validates them again and names the field of any problem.
 */
import { InvalidArgumentError, Option, type Command } from "commander";
import type { CreateScheduleInput } from "../contracts/index.js";
import { CliError } from "./errors.js";

/** A commander argument parser: a whole number in [min, max], else a usage error naming the range. */
export const integer =
  (min: number, max: number) =>
  (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`must be an integer from ${min} to ${max}.`);
    }
    return n;
  };

/**
 * Adds the policy flags to `cmd`: `--quiet-hours`, `--quiet-tz`, `--quiet-days`,
 * `--priority` (DEL-15) and `--catch-up-window-ms`, `--catch-up-pace-ms` (DEL-17). One
 * definition for `schedules add` and `schedules edit`; `edit` says what an edit does with
 * them (`forEdit`: applied to every reminder, `--quiet-hours off` removes the window).
 */
export function addPolicyOptions(cmd: Command, forEdit = false): Command {
  const every = forEdit ? " (set on every reminder; off removes it)" : "";
  return cmd
    .option(
      "--quiet-hours <HH:MM-HH:MM>",
      `quiet window of every reminder, e.g. 22:00-07:00: due inside it, sent at its end${every}`,
    )
    .option("--quiet-tz <zone>", "the recipient's IANA zone for --quiet-hours (default: --tzid)")
    .option(
      "--quiet-days <days>",
      "days the quiet window starts on, e.g. MO,TU,WE,TH,FR (default: every day)",
    )
    .addOption(
      new Option("--priority <priority>", "critical: sent on time even in quiet hours").choices([
        "normal",
        "critical",
      ]),
    )
    .addOption(
      new Option(
        "--catch-up-window-ms <ms>",
        "with --misfire all: missed occurrences older than this are skipped as stale",
      ).argParser(integer(0, 31_622_400_000)),
    )
    .addOption(
      new Option(
        "--catch-up-pace-ms <ms>",
        "with --misfire all: catch-up sends of one reminder this far apart, oldest first",
      ).argParser(integer(0, 86_400_000)),
    );
}

/** The policy flags of `schedules add`. */
export interface PolicyFlags {
  /** `HH:MM-HH:MM`, e.g. `22:00-07:00` (crosses midnight when the start is later). */
  quietHours?: string;
  /** The recipient's IANA zone for `--quiet-hours` (default: the schedule's `--tzid`). */
  quietTz?: string;
  /** Comma-separated weekday names the window starts on, e.g. `MO,TU,WE,TH,FR`. */
  quietDays?: string;
  /** `critical` bypasses quiet hours. */
  priority?: "normal" | "critical";
  /** Catch-up window in ms under `--misfire all`. */
  catchUpWindowMs?: number;
  /** Catch-up pacing in ms under `--misfire all`. */
  catchUpPaceMs?: number;
}

type Reminder = CreateScheduleInput["reminders"][number];

/**
 * The reminder fields the flags ask for (the same for every reminder of the command).
 * @throws CliError naming the flag: a malformed `--quiet-hours`, `--quiet-tz` or
 *   `--quiet-days` without `--quiet-hours`.
 */
export function reminderPolicy(flags: PolicyFlags, tzid: string): Partial<Reminder> {
  if (flags.quietHours === undefined) {
    if (flags.quietTz !== undefined || flags.quietDays !== undefined)
      throw new CliError("--quiet-tz and --quiet-days need --quiet-hours (e.g. 22:00-07:00).");
    return flags.priority ? { priority: flags.priority } : {};
  }
  const match = /^(\d{2}:\d{2})-(\d{2}:\d{2})$/.exec(flags.quietHours.trim());
  if (!match) {
    throw new CliError(
      `--quiet-hours must be HH:MM-HH:MM, e.g. 22:00-07:00 (got ${flags.quietHours}).`,
    );
  }
  const days = flags.quietDays
    ?.split(",")
    .map((d) => d.trim().toUpperCase())
    .filter((d) => d.length > 0) as NonNullable<Reminder["quietHours"]>["days"];
  return {
    quietHours: {
      tzid: flags.quietTz ?? tzid,
      start: match[1]!,
      end: match[2]!,
      ...(days && days.length > 0 ? { days } : {}),
    },
    ...(flags.priority ? { priority: flags.priority } : {}),
  };
}

/** The schedule's `catchUp` the flags ask for, or nothing. */
export function schedulePolicy(flags: PolicyFlags): Partial<CreateScheduleInput> {
  if (flags.catchUpWindowMs === undefined && flags.catchUpPaceMs === undefined) return {};
  return {
    catchUp: {
      ...(flags.catchUpWindowMs !== undefined ? { windowMs: flags.catchUpWindowMs } : {}),
      ...(flags.catchUpPaceMs !== undefined ? { paceMs: flags.catchUpPaceMs } : {}),
    },
  };
}
