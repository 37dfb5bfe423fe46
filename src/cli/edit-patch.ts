/**
 * `schedules edit` (API-3, DEL-9): its flags and the PATCH body they make. Only the fields
 * given change. Reminders can be replaced (`--offset`, as `schedules add` makes them),
 * added to (`--add-offset`) or removed (`--remove-reminder`); the policy flags of
 * `schedules add` (policy-flags.ts) set quiet hours and priority on every reminder and
 * change the catch-up bounds. Flags that touch reminders or catch-up read the schedule
 * first and send the edit with `If-Match` of the version read, so an edit made meanwhile
 * is refused (412), never overwritten; reminders sent back as read keep their stored
 * targets and secrets (the API keeps a target sent back redacted).
 */
import type { ScheduleView } from "../contracts/index.js";
import { CliError, EXIT_USAGE } from "./errors.js";
import { reminderPolicy, type PolicyFlags } from "./policy-flags.js";

/** The `schedules edit` flags that build the patch (the rest are `--url`, `--json`, `--if-version`). */
export interface EditPatchFlags extends PolicyFlags {
  dtstart?: string;
  tzid?: string;
  rrule?: string;
  rdate: string[];
  exdate: string[];
  endsAt?: string;
  payload?: string;
  misfire?: "skip" | "latest" | "all";
  /** New title; `""` removes it. */
  title?: string;
  /**
   * Replace the reminders: one per offset (keys from `--key`, else the current reminders'
   * keys in order, then `r1`, `r2`, …).
   */
  offset: string[];
  /** Add reminders: one per offset (keys from `--key`, else the next free `rN`). */
  addOffset: string[];
  /** Keys for the `--offset` or `--add-offset` values, in order. */
  key: string[];
  /** Remove the reminders with these keys. */
  removeReminder: string[];
  /** Channel of new reminders (default: the schedule's first reminder's). */
  channel?: string;
  /** Target URL of new reminders (default: the schedule's first reminder's target). */
  targetUrl?: string;
  /** Webhook secret of new reminders' target. */
  secret?: string;
}

/** Channels whose target is a URL given with `--target-url`. */
const URL_CHANNELS = new Set(["webhook", "slack", "discord"]);

/** Whether the flags change reminders or catch-up, so the current schedule must be read. */
export function editNeedsSchedule(flags: EditPatchFlags): boolean {
  return (
    flags.offset.length > 0 ||
    flags.addOffset.length > 0 ||
    flags.removeReminder.length > 0 ||
    flags.quietHours !== undefined ||
    flags.quietTz !== undefined ||
    flags.quietDays !== undefined ||
    flags.priority !== undefined ||
    flags.catchUpWindowMs !== undefined ||
    flags.catchUpPaceMs !== undefined
  );
}

type Reminder = Record<string, unknown> & { key: string };

/** A reminder as read, as an edit sends it back (the API keeps a redacted target as stored). */
function asInput(r: ScheduleView["reminders"][number]): Reminder {
  return {
    key: r.key,
    offset: r.offset,
    channel: r.channel,
    target: r.target,
    ...(r.delivery ? { delivery: r.delivery } : {}),
    maxAttempts: r.maxAttempts,
    ...(r.template ? { template: r.template } : {}),
    ...(r.rateLimitKey ? { rateLimitKey: r.rateLimitKey } : {}),
    ...(r.quietHours ? { quietHours: r.quietHours } : {}),
    ...(r.priority === "critical" ? { priority: r.priority } : {}),
  };
}

/**
 * Builds the `PATCH /v1/schedules/{id}` body from `schedules edit` flags. `current` is the
 * schedule as read; it is needed (and must be given) when {@link editNeedsSchedule}.
 * @throws CliError (exit 2) naming the flags: `--offset` with `--add-offset` or
 *   `--remove-reminder`, more `--key` than offsets, a removed key the schedule does not
 *   have, an added key it has, every reminder removed, bad `--payload` JSON, policy flags
 *   that cannot be read, or nothing to change.
 */
export function buildEditPatch(
  flags: EditPatchFlags,
  current: ScheduleView | null,
): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  if (flags.dtstart !== undefined) patch.dtstart = flags.dtstart;
  if (flags.tzid !== undefined) patch.tzid = flags.tzid;
  if (flags.rrule !== undefined) patch.rrule = flags.rrule === "" ? null : flags.rrule;
  if (flags.rdate.length) patch.rdate = flags.rdate;
  if (flags.exdate.length) patch.exdate = flags.exdate;
  if (flags.endsAt !== undefined) patch.endsAt = flags.endsAt === "" ? null : flags.endsAt;
  if (flags.misfire !== undefined) patch.misfire = flags.misfire;
  if (flags.title !== undefined) patch.title = flags.title === "" ? null : flags.title;
  if (flags.payload !== undefined) {
    try {
      patch.payload = JSON.parse(flags.payload);
    } catch {
      throw new CliError(`--payload is not valid JSON: ${flags.payload.slice(0, 80)}`, EXIT_USAGE);
    }
  }
  if (editNeedsSchedule(flags)) {
    if (!current) throw new Error("buildEditPatch: these flags need the schedule as read");
    const reminders = editedReminders(flags, current);
    if (reminders) patch.reminders = reminders;
    if (flags.catchUpWindowMs !== undefined || flags.catchUpPaceMs !== undefined) {
      patch.catchUp = {
        ...(current.catchUp ?? {}),
        ...(flags.catchUpWindowMs !== undefined ? { windowMs: flags.catchUpWindowMs } : {}),
        ...(flags.catchUpPaceMs !== undefined ? { paceMs: flags.catchUpPaceMs } : {}),
      };
    }
  } else if (
    flags.key.length > 0 ||
    flags.channel !== undefined ||
    flags.targetUrl !== undefined ||
    flags.secret !== undefined
  ) {
    throw new CliError(
      "--key, --channel, --target-url and --secret describe new reminders: give them with --offset or --add-offset.",
      EXIT_USAGE,
    );
  }
  if (Object.keys(patch).length === 0)
    throw new CliError("Nothing to change: give at least one field flag.", EXIT_USAGE);
  return patch;
}

/** The reminder list the flags ask for, or null when they leave it alone. */
function editedReminders(flags: EditPatchFlags, current: ScheduleView): Reminder[] | null {
  const replace = flags.offset.length > 0;
  if (replace && (flags.addOffset.length > 0 || flags.removeReminder.length > 0)) {
    throw new CliError(
      "--offset replaces every reminder; it cannot be combined with --add-offset or --remove-reminder.",
      EXIT_USAGE,
    );
  }
  const offsets = replace ? flags.offset : flags.addOffset;
  if (flags.key.length > offsets.length) {
    throw new CliError(
      `${flags.key.length} --key values for ${offsets.length} ${replace ? "--offset" : "--add-offset"} values: give one key per offset.`,
      EXIT_USAGE,
    );
  }
  let list: Reminder[] = replace ? [] : current.reminders.map(asInput);
  for (const key of flags.removeReminder) {
    if (!list.some((r) => r.key === key)) {
      throw new CliError(
        `--remove-reminder ${key}: the schedule has no reminder with that key (it has ${current.reminders.map((r) => r.key).join(", ")}).`,
        EXIT_USAGE,
      );
    }
    list = list.filter((r) => r.key !== key);
  }
  if (offsets.length > 0) list.push(...newReminders(flags, offsets, list, current));
  const policyGiven =
    flags.quietHours !== undefined ||
    flags.quietTz !== undefined ||
    flags.quietDays !== undefined ||
    flags.priority !== undefined;
  if (policyGiven) list = list.map((r) => withPolicy(r, flags, current.tzid ?? "UTC"));
  if (list.length === 0) {
    throw new CliError(
      "An edit cannot remove every reminder; cancel the schedule instead (`punctual schedules cancel`).",
      EXIT_USAGE,
    );
  }
  const changed = replace || offsets.length > 0 || flags.removeReminder.length > 0 || policyGiven;
  return changed ? list : null;
}

/** The reminders `--offset` / `--add-offset` make, with the channel and target flags or the first reminder's. */
function newReminders(
  flags: EditPatchFlags,
  offsets: readonly string[],
  kept: readonly Reminder[],
  current: ScheduleView,
): Reminder[] {
  const first = current.reminders[0];
  const channel = flags.channel ?? first?.channel ?? "webhook";
  const sameChannel = first !== undefined && first.channel === channel;
  if (flags.secret !== undefined && channel !== "webhook") {
    throw new CliError(`--secret applies to --channel webhook only (got ${channel}).`, EXIT_USAGE);
  }
  let target: Record<string, unknown> | undefined;
  if (flags.targetUrl !== undefined) {
    target = {
      url: flags.targetUrl,
      ...(flags.secret !== undefined ? { secret: flags.secret } : {}),
    };
  } else if (sameChannel && flags.secret === undefined) {
    // Sent back as read: the API keeps the stored target (and its secret) for this key only,
    // so a new key gets it only when it carries no secret.
    target = first.target;
  } else if (URL_CHANNELS.has(channel)) {
    throw new CliError(`--target-url is required for new ${channel} reminders.`, EXIT_USAGE);
  }
  if (target && JSON.stringify(target).includes("[redacted]")) {
    throw new CliError(
      `the schedule's first reminder's target holds a secret the API does not show: give --target-url (and --secret) for the new reminders.`,
      EXIT_USAGE,
    );
  }
  const used = new Set(kept.map((r) => r.key));
  const replace = flags.offset.length > 0;
  let n = 0;
  const nextKey = (): string => {
    let key: string;
    do key = `r${++n}`;
    while (used.has(key));
    return key;
  };
  return offsets.map((offset, i) => {
    // --offset without --key keeps the keys in order: the reminder at the same place keeps
    // its key (and so its deliveries' keys: a sent one is not sent again) and what it had
    // besides its offset, unless the channel or target flags change it (DEL-9).
    const kept = replace && flags.key[i] === undefined ? current.reminders[i] : undefined;
    if (kept && !used.has(kept.key)) {
      used.add(kept.key);
      const own =
        flags.channel === undefined && flags.targetUrl === undefined && flags.secret === undefined;
      return own
        ? { ...asInput(kept), offset }
        : { ...asInput(kept), offset, channel, ...(target ? { target } : {}) };
    }
    const key = flags.key[i] ?? nextKey();
    if (used.has(key)) {
      throw new CliError(
        `--key ${key}: the schedule already has a reminder with that key; remove it with --remove-reminder ${key} in the same edit, or pick another key.`,
        EXIT_USAGE,
      );
    }
    used.add(key);
    return {
      key,
      offset,
      channel,
      ...(target ? { target } : {}),
      ...(!replace && sameChannel && first?.quietHours ? { quietHours: first.quietHours } : {}),
    };
  });
}

/** `r` with the quiet-hours / priority flags applied (`--quiet-hours off` removes the window). */
function withPolicy(r: Reminder, flags: EditPatchFlags, tzid: string): Reminder {
  const out: Reminder = { ...r };
  if (flags.quietHours?.trim().toLowerCase() === "off") {
    if (flags.quietTz !== undefined || flags.quietDays !== undefined) {
      throw new CliError(
        "--quiet-hours off removes the window: drop --quiet-tz and --quiet-days.",
        EXIT_USAGE,
      );
    }
    delete out.quietHours;
    if (flags.priority === "normal") delete out.priority;
    else if (flags.priority) out.priority = flags.priority;
    return out;
  }
  let policy;
  try {
    policy = reminderPolicy(flags, tzid);
  } catch (err) {
    if (err instanceof CliError) throw new CliError(err.message, EXIT_USAGE);
    throw err;
  }
  if (policy.quietHours) out.quietHours = policy.quietHours;
  if (policy.priority === "normal") delete out.priority;
  else if (policy.priority) out.priority = policy.priority;
  return out;
}
