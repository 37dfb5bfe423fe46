/**
 * The `schedules edit` command (API-3, DEL-9): its flags (the policy flags are those of
 * `schedules add`, policy-flags.ts); edit-patch.ts turns them into the PATCH body.
 */
import { InvalidArgumentError, Option, type Command } from "commander";
import { addPolicyOptions } from "./policy-flags.js";
import type { CommandKit } from "./rate-limits.js";
import { schedulesEdit, type EditFlags } from "./remote.js";

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** Adds `schedules edit` to `schedules`. */
export function addScheduleEditCommand(schedules: Command, kit: CommandKit): void {
  const { io, remoteOptions, example } = kit;
  const edit = remoteOptions(
    schedules
      .command("edit")
      .description(
        "Edit a schedule; waiting deliveries follow the new occurrences. Only the fields given change.",
      )
      .argument("<id>", "schedule id")
      .option(
        "--if-version <n>",
        "the version you read (sent as If-Match): refused if it changed since",
        (v: string) => {
          const n = Number(v);
          if (!/^\d+$/.test(v.trim()) || n < 1 || n > 1e9)
            throw new InvalidArgumentError("must be an integer from 1 to 1000000000.");
          return n;
        },
      )
      .option("--dtstart <datetime>", "new DTSTART")
      .option("--tzid <zone>", "new IANA time zone")
      .option("--rrule <rule>", 'new RRULE ("" removes it)')
      .option("--rdate <datetime>", "replace the extra occurrences (repeatable)", collect, [])
      .option("--exdate <datetime>", "replace the excluded occurrences (repeatable)", collect, [])
      .option("--ends-at <instant>", 'new end of an unbounded series ("" removes it)')
      .option("--payload <json>", "new payload")
      .option("--title <text>", 'new title ("" removes it)')
      .addOption(
        new Option("--misfire <policy>", "skip, latest or all").choices(["skip", "latest", "all"]),
      )
      .addOption(
        new Option(
          "--offset <duration>",
          "replace every reminder: one per offset, ISO 8601 (repeatable)",
        )
          .argParser(collect)
          .default([], "none"),
      )
      .addOption(
        new Option(
          "--add-offset <duration>",
          "add a reminder at this offset, keeping the others (repeatable)",
        )
          .argParser(collect)
          .default([], "none"),
      )
      .addOption(
        new Option(
          "--key <key>",
          "key of the matching --offset or --add-offset (repeatable; default r1, r2, … not taken)",
        )
          .argParser(collect)
          .default([], "none"),
      )
      .addOption(
        new Option("--remove-reminder <key>", "remove the reminder with this key (repeatable)")
          .argParser(collect)
          .default([], "none"),
      )
      .addOption(
        new Option(
          "--channel <channel>",
          "channel of new reminders (default: the first reminder's)",
        ).choices(["webhook", "log", "slack", "discord"]),
      )
      .option("--target-url <url>", "target URL of new reminders (default: the first reminder's)")
      .option("--secret <whsec>", "webhook signing secret of new reminders' target"),
  );
  addPolicyOptions(edit, true)
    .addHelpText(
      "after",
      example([
        'punctual schedules edit 0b9f… --if-version 3 --rrule "FREQ=WEEKLY;BYDAY=TU"',
        "punctual schedules edit 0b9f… --add-offset -P1D --key day-before",
        'punctual schedules edit 0b9f… --remove-reminder r1 --title "Weekly sync"',
        "punctual schedules edit 0b9f… --offset -PT15M --offset -PT5M --channel log",
        "punctual schedules edit 0b9f… --quiet-hours 22:00-07:00 --quiet-tz Europe/Berlin",
      ]),
    )
    .action((id: string, flags: EditFlags) => schedulesEdit(id, flags, io));
}
