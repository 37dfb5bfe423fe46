/**
 * `punctual kinds set|list|remove|apply` (DEL-11): the reminder-kind registry of the
 * running server, through `/v1/reminder-kinds`.
 */
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import type { ReminderKindView } from "../contracts/kinds.js";
import { CliError, EXIT_FAILURE } from "./errors.js";
import { jsonText, keyValues, table, type Column } from "./format.js";
import { clientFor, type RemoteFlags } from "./remote.js";
import type { CommandHelpers, Io } from "./run.js";

/** Flags of `kinds set`. */
export interface KindSetFlags extends RemoteFlags {
  channel: string;
  offset?: string;
  targetUrl?: string;
  secret?: string;
  subject?: string;
  text?: string;
  html?: string;
  seriesOnly?: boolean;
  disabled?: boolean;
}

const kindColumns: Column<ReminderKindView>[] = [
  { header: "KEY", cell: (k) => k.key },
  { header: "CHANNEL", cell: (k) => k.channel },
  { header: "OFFSET", cell: (k) => k.offset },
  { header: "SERIES-ONLY", cell: (k) => (k.seriesOnly ? "yes" : "no") },
  { header: "ENABLED", cell: (k) => (k.enabled ? "yes" : "no") },
  { header: "VERSION", cell: (k) => k.version },
];

/** The PUT body a `kinds set` builds from its flags. */
export function kindBodyFromFlags(flags: KindSetFlags): Record<string, unknown> {
  const template = {
    ...(flags.subject !== undefined ? { subject: flags.subject } : {}),
    ...(flags.text !== undefined ? { text: flags.text } : {}),
    ...(flags.html !== undefined ? { html: flags.html } : {}),
  };
  return {
    channel: flags.channel,
    ...(flags.offset !== undefined ? { offset: flags.offset } : {}),
    ...(flags.targetUrl !== undefined
      ? { target: { url: flags.targetUrl, ...(flags.secret ? { secret: flags.secret } : {}) } }
      : {}),
    ...(Object.keys(template).length ? { template } : {}),
    seriesOnly: flags.seriesOnly === true,
    enabled: flags.disabled !== true,
  };
}

async function put(flags: RemoteFlags, key: string, body: unknown): Promise<ReminderKindView> {
  return (
    await clientFor(flags).request<ReminderKindView>(
      "PUT",
      `/v1/reminder-kinds/${encodeURIComponent(key)}`,
      { body },
    )
  ).body;
}

/**
 * Adds the `kinds` commands to `program`. `remoteOptions` adds `--url` and `--json`;
 * `example` formats the help's examples (both from program.ts).
 */
export function addKindsCommands(program: Command, io: Io, helpers: CommandHelpers): void {
  const { remoteOptions, example } = helpers;
  const kinds = program
    .command("kinds")
    .description(
      "Reminder kinds: named reminder shapes (channel, offset, target, template) that a reminder can name with `kind` instead of repeating them.",
    );

  remoteOptions(
    kinds
      .command("set")
      .description(
        "Create or replace a kind. Reminders written afterwards that name it copy its fields; reminders already written keep theirs.",
      )
      .argument("<key>", "kind key, e.g. day-before")
      .requiredOption(
        "--channel <channel>",
        "delivery channel: webhook, log, email, slack, discord",
      )
      .option("--offset <duration>", "default offset, ISO 8601 (default PT0S)")
      .option("--target-url <url>", "receiver URL (webhook, Slack, Discord)")
      .option("--secret <whsec>", "webhook signing secret of that target")
      .option("--subject <liquid>", "template: subject (e-mail)")
      .option("--text <liquid>", "template: text body")
      .option("--html <liquid>", "template: HTML body (e-mail)")
      .option("--series-only", "refuse the kind on one-off schedules", false)
      .option("--disabled", "keep the kind but refuse it to new reminders", false),
  )
    .addHelpText(
      "after",
      example([
        "punctual kinds set day-before --channel webhook --offset -P1D --target-url https://example.com/hooks/punctual",
        "punctual kinds set weekly-digest --channel log --series-only",
      ]),
    )
    .action(async (key: string, flags: KindSetFlags) => {
      const kind = await put(flags, key, kindBodyFromFlags(flags));
      io.out(flags.json ? jsonText(kind) : `Kind ${kind.key} is at version ${kind.version}.\n`);
    });

  remoteOptions(
    kinds
      .command("apply")
      .description(
        "Set every kind of a JSON file: an array of { key, channel, offset?, target?, template?, seriesOnly?, enabled? } (the `reminderKinds` option's form).",
      )
      .argument("<file>", "JSON file, e.g. examples/reminder-kinds.json"),
  )
    .addHelpText("after", example(["punctual kinds apply examples/reminder-kinds.json"]))
    .action(async (file: string, flags: RemoteFlags) => {
      let entries: unknown;
      try {
        entries = JSON.parse(readFileSync(file, "utf8"));
      } catch (err) {
        throw new CliError(`Cannot read ${file}: ${(err as Error).message}`, EXIT_FAILURE);
      }
      if (!Array.isArray(entries)) {
        throw new CliError(`${file}: expected a JSON array of kinds`, EXIT_FAILURE);
      }
      const done: ReminderKindView[] = [];
      for (const [i, entry] of entries.entries()) {
        const { key, ...body } = (entry ?? {}) as { key?: unknown };
        if (typeof key !== "string") {
          throw new CliError(`${file}: entry ${i} has no "key"`, EXIT_FAILURE);
        }
        done.push(await put(flags, key, body));
      }
      io.out(flags.json ? jsonText(done) : table(done, kindColumns));
    });

  remoteOptions(kinds.command("list").description("List the kinds, by key."))
    .addHelpText("after", example(["punctual kinds list"]))
    .action(async (flags: RemoteFlags) => {
      const page = await clientFor(flags).get<{ items: ReminderKindView[] }>("/v1/reminder-kinds");
      io.out(flags.json ? jsonText(page) : table(page.items, kindColumns));
    });

  remoteOptions(
    kinds.command("show").description("Show one kind.").argument("<key>", "kind key"),
  ).action(async (key: string, flags: RemoteFlags) => {
    const kind = await clientFor(flags).get<ReminderKindView>(
      `/v1/reminder-kinds/${encodeURIComponent(key)}`,
    );
    io.out(
      flags.json
        ? jsonText(kind)
        : keyValues(
            Object.entries(kind).map(
              ([k, v]) => [k, v !== null && typeof v === "object" ? JSON.stringify(v) : v] as const,
            ),
          ),
    );
  });

  remoteOptions(
    kinds
      .command("remove")
      .description("Remove a kind; reminders written from it keep their fields and keep sending.")
      .argument("<key>", "kind key"),
  )
    .addHelpText("after", example(["punctual kinds remove day-before"]))
    .action(async (key: string, flags: RemoteFlags) => {
      await clientFor(flags).request("DELETE", `/v1/reminder-kinds/${encodeURIComponent(key)}`);
      io.out(flags.json ? jsonText({ key, removed: true }) : `Kind ${key} removed.\n`);
    });
}
