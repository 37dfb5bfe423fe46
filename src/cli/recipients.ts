/**
 * `punctual recipients set|show|list|remove|import` (API-10): the recipient registry of
 * the running server, through `/v1/recipients`. `import` reads CSV, NDJSON (`.ndjson`,
 * `.jsonl`) or a JSON array (`.json`), see ./recipient-import.ts. `unsubscribe` (API-14) applies
 * a one-click unsubscribe link (its URL or token), as a mail provider would.
 */
import type { Command } from "commander";
import type {
  BulkRecipientsSummary,
  RecipientPage,
  RecipientView,
} from "../contracts/recipients.js";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "./errors.js";
import { jsonText, keyValues, table, type Column } from "./format.js";
import { importItems } from "./recipient-import.js";
import { clientFor, type RemoteFlags } from "./remote.js";
import type { CommandKit } from "./rate-limits.js";

/** Flags of `recipients set`. */
export interface RecipientSetFlags extends RemoteFlags {
  tzid: string;
  email?: string;
  webhookUrl?: string;
  slackUrl?: string;
  discordUrl?: string;
  attributes?: string;
  optOutChannel?: string[];
  optOutCategory?: string[];
}

const columns: Column<RecipientView>[] = [
  { header: "ID", cell: (r) => r.id },
  { header: "TZID", cell: (r) => r.tzid },
  { header: "TARGETS", cell: (r) => Object.keys(r.targets).join(",") },
  { header: "VERSION", cell: (r) => r.version },
  { header: "UPDATED", cell: (r) => r.updatedAt },
];

const path = (id: string) => `/v1/recipients/${encodeURIComponent(id)}`;
const collect = (value: string, previous: string[] = []) => [...previous, value];

/** The PUT body a `recipients set` builds from its flags. */
export function recipientBodyFromFlags(flags: RecipientSetFlags): Record<string, unknown> {
  const targets = {
    ...(flags.email !== undefined ? { email: { to: flags.email } } : {}),
    ...(flags.webhookUrl !== undefined ? { webhook: { url: flags.webhookUrl } } : {}),
    ...(flags.slackUrl !== undefined ? { slack: { url: flags.slackUrl } } : {}),
    ...(flags.discordUrl !== undefined ? { discord: { url: flags.discordUrl } } : {}),
  };
  let attributes: unknown;
  if (flags.attributes !== undefined) {
    try {
      attributes = JSON.parse(flags.attributes);
    } catch {
      throw new CliError("--attributes must be a JSON object", EXIT_USAGE);
    }
  }
  const optOut = {
    ...(flags.optOutChannel?.length ? { channels: flags.optOutChannel } : {}),
    ...(flags.optOutCategory?.length ? { categories: flags.optOutCategory } : {}),
  };
  return {
    tzid: flags.tzid,
    targets,
    ...(attributes !== undefined ? { attributes } : {}),
    ...(Object.keys(optOut).length ? { preferences: { optOut } } : {}),
  };
}

/** Adds `recipients set|show|list|remove|import` to `program`. */
export function addRecipientCommands(program: Command, kit: CommandKit): void {
  const { io, remoteOptions, example } = kit;
  const group = program
    .command("recipients")
    .description(
      "Recipients: per tenant, the people reminders are for (zone, a target per channel, attributes, opt-outs).",
    );

  remoteOptions(
    group
      .command("set")
      .description("Create or replace a recipient (the whole recipient).")
      .argument("<id>", "recipient id, e.g. alice@example.com")
      .requiredOption("--tzid <zone>", "IANA time zone, e.g. Asia/Tokyo")
      .option("--email <address>", "e-mail target")
      .option("--webhook-url <url>", "webhook target")
      .option("--slack-url <url>", "Slack incoming-webhook target")
      .option("--discord-url <url>", "Discord webhook target")
      .option("--attributes <json>", "attributes, a JSON object")
      .option("--opt-out-channel <channel>", "opt out of a channel (repeatable)", collect)
      .option("--opt-out-category <name>", "opt out of a category (repeatable)", collect),
  )
    .addHelpText(
      "after",
      example([
        "punctual recipients set alice@example.com --tzid Asia/Tokyo --email alice@example.com --opt-out-category digest",
      ]),
    )
    .action(async (id: string, flags: RecipientSetFlags) => {
      const reply = await clientFor(flags).request<RecipientView>("PUT", path(id), {
        body: recipientBodyFromFlags(flags),
      });
      const r = reply.body;
      io.out(
        flags.json
          ? jsonText(r)
          : `Recipient ${r.id} ${reply.status === 201 ? "created" : "saved"} (version ${r.version}).\n`,
      );
    });

  remoteOptions(group.command("show").description("Show one recipient.").argument("<id>")).action(
    async (id: string, flags: RemoteFlags) => {
      const r = await clientFor(flags).get<RecipientView>(path(id));
      io.out(
        flags.json
          ? jsonText(r)
          : keyValues(
              Object.entries(r).map(
                ([k, v]) =>
                  [k, v !== null && typeof v === "object" ? JSON.stringify(v) : v] as const,
              ),
            ),
      );
    },
  );

  remoteOptions(
    group
      .command("list")
      .description("List recipients by id, one page at a time.")
      .option("--search <text>", "ids containing this text")
      .option("--order <order>", "asc or desc", "asc")
      .option("--limit <n>", "page size, 1–1000")
      .option("--cursor <cursor>", "the previous page's nextCursor"),
  )
    .addHelpText("after", example(["punctual recipients list --search example.com"]))
    .action(
      async (
        flags: RemoteFlags & { search?: string; order?: string; limit?: string; cursor?: string },
      ) => {
        const page = await clientFor(flags).get<RecipientPage>("/v1/recipients", {
          q: flags.search,
          order: flags.order,
          limit: flags.limit,
          cursor: flags.cursor,
        });
        if (flags.json) return io.out(jsonText(page));
        io.out(page.items.length ? table(page.items, columns) : "No recipients.\n");
        if (page.nextCursor) io.out(`more: --cursor ${page.nextCursor}\n`);
      },
    );

  remoteOptions(group.command("remove").description("Remove a recipient.").argument("<id>")).action(
    async (id: string, flags: RemoteFlags) => {
      await clientFor(flags).request("DELETE", path(id));
      io.out(flags.json ? jsonText({ id, removed: true }) : `Recipient ${id} removed.\n`);
    },
  );

  remoteOptions(
    group
      .command("of")
      .description("List the recipients of a schedule, one page at a time.")
      .argument("<schedule-id>")
      .option("--limit <n>", "page size, 1–1000")
      .option("--cursor <cursor>", "the previous page's nextCursor"),
  ).action(async (scheduleId: string, flags: RemoteFlags & { limit?: string; cursor?: string }) => {
    const page = await clientFor(flags).get<{
      items: Array<{ id: string; addedAt: string }>;
      nextCursor: string | null;
    }>(`/v1/schedules/${encodeURIComponent(scheduleId)}/recipients`, {
      limit: flags.limit,
      cursor: flags.cursor,
    });
    if (flags.json) return io.out(jsonText(page));
    io.out(
      page.items.length
        ? table(page.items, [
            { header: "ID", cell: (r) => r.id },
            { header: "ADDED", cell: (r) => r.addedAt },
          ])
        : "No recipients.\n",
    );
    if (page.nextCursor) io.out(`more: --cursor ${page.nextCursor}\n`);
  });

  remoteOptions(
    group
      .command("assign")
      .description(
        "Add recipients to a schedule for recipients and remove others, at most 10,000 ids together.",
      )
      .argument("<schedule-id>")
      .option("--add <id>", "a recipient to add (repeatable)", collect)
      .option("--remove <id>", "a recipient to remove (repeatable)", collect),
  ).action(
    async (scheduleId: string, flags: RemoteFlags & { add?: string[]; remove?: string[] }) => {
      if (!flags.add?.length && !flags.remove?.length) {
        throw new CliError("give --add and/or --remove", EXIT_USAGE);
      }
      const reply = await clientFor(flags).request<{
        added: number;
        removed: number;
        cancelled: number;
        recipients: number;
      }>("PUT", `/v1/schedules/${encodeURIComponent(scheduleId)}/recipients`, {
        body: {
          ...(flags.add?.length ? { add: flags.add } : {}),
          ...(flags.remove?.length ? { remove: flags.remove } : {}),
        },
      });
      const r = reply.body;
      io.out(
        flags.json
          ? jsonText(r)
          : `${r.added} added, ${r.removed} removed (${r.cancelled} waiting deliveries cancelled); ${r.recipients} recipients now.\n`,
      );
    },
  );

  remoteOptions(
    group
      .command("unsubscribe")
      .description(
        "Apply a one-click unsubscribe link of an e-mail (its List-Unsubscribe URL or token): the recipient opts out of the reminder's category, or of all e-mail.",
      )
      .argument("<link>", "the URL https://…/v1/unsubscribe/<token>, or the token"),
  )
    .addHelpText(
      "after",
      example([
        "punctual recipients unsubscribe 'https://reminders.example.com/v1/unsubscribe/u1.…'",
      ]),
    )
    .action(async (link: string, flags: RemoteFlags) => {
      const token = unsubscribeToken(link);
      const reply = await clientFor(flags).request<{
        unsubscribed: true;
        optedOut: { channel: string } | { category: string };
      }>("POST", `/v1/unsubscribe/${encodeURIComponent(token)}`, {
        rawBody: {
          text: "List-Unsubscribe=One-Click",
          contentType: "application/x-www-form-urlencoded",
        },
      });
      const what = reply.body.optedOut;
      io.out(
        flags.json
          ? jsonText(reply.body)
          : `Unsubscribed from ${"category" in what ? `category ${what.category}` : `all ${what.channel}`}.\n`,
      );
    });

  remoteOptions(
    group
      .command("import")
      .description(
        "Create or replace many recipients from a CSV (.csv), NDJSON (.ndjson, .jsonl) or JSON array (.json) file, each row with its id; read as a stream and sent 10,000 rows a request. CSV columns: id, tzid, targets.<channel>.<field>, attributes.<name>, preferences (JSON), preferences.optOut.channels and preferences.optOut.categories (values separated by ;). Refused rows are named by their line in the file.",
      )
      .argument("<file>", "rows file"),
  )
    .addHelpText(
      "after",
      example([
        "punctual recipients import people.csv   # id,tzid,targets.email.to,attributes.plan,preferences.optOut.categories",
        "punctual recipients import people.ndjson",
      ]),
    )
    .action(async (file: string, flags: RemoteFlags) => {
      const client = clientFor(flags);
      const total = { created: 0, updated: 0, errors: 0 };
      const refused: Array<{
        line: number;
        id: string | null;
        column: string | null;
        message: string;
      }> = [];
      const results: Array<BulkRecipientsSummary["results"][number] & { line: number }> = [];
      try {
        for await (const item of importItems(file)) {
          if ("error" in item) {
            total.errors++;
            refused.push(item.error);
            results.push({
              index: -1,
              line: item.error.line,
              id: item.error.id,
              status: "error",
              error: {
                code: "VALIDATION_FAILED",
                message: item.error.message,
                ...(item.error.column
                  ? { issues: [{ field: item.error.column, message: item.error.message }] }
                  : {}),
              },
            });
            continue;
          }
          const { chunk } = item;
          const summary = (
            await client.request<BulkRecipientsSummary>("POST", "/v1/recipients:bulk", {
              rawBody: { text: chunk.text, contentType: chunk.contentType },
              timeoutMs: 300_000,
            })
          ).body;
          total.created += summary.created;
          total.updated += summary.updated;
          total.errors += summary.errors;
          for (const r of summary.results) {
            const line = chunk.lines[r.index] ?? r.index + 1;
            results.push({ ...r, line });
            if (r.status === "error") {
              const issue = r.error?.issues?.[0];
              refused.push({
                line,
                id: r.id,
                column: issue?.field ?? null,
                message: issue
                  ? issueText(issue, (row) => chunk.lines[row] ?? row + 1)
                  : (r.error?.message ?? "refused"),
              });
            }
          }
        }
      } catch (err) {
        if (err instanceof CliError) throw err;
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "ENOENT" || code === "EACCES" || code === "EISDIR") {
          throw new CliError(`cannot read ${file}: ${(err as Error).message}`, EXIT_FAILURE);
        }
        if (typeof code === "string" && code.startsWith("CSV_")) {
          throw new CliError(`${file}: ${(err as Error).message}`, EXIT_USAGE);
        }
        throw err;
      }
      if (flags.json) io.out(jsonText({ ...total, results }));
      else {
        io.out(`${total.created} created, ${total.updated} updated, ${total.errors} refused.\n`);
        for (const r of refused.sort((a, b) => a.line - b.line)) {
          io.out(
            `line ${r.line}${r.id ? ` (${r.id})` : ""}${r.column ? `, column ${r.column}` : ""}: ${r.message}\n`,
          );
        }
      }
      if (total.errors > 0) {
        throw new CliError(`${total.errors} row(s) of ${file} were refused`, EXIT_FAILURE);
      }
    });
}

/**
 * The token of a one-click unsubscribe link: the last path segment of a URL ending in
 * `/v1/unsubscribe/<token>`, or the text itself when it is not such a URL.
 * @throws CliError (usage) for an empty link.
 */
export function unsubscribeToken(link: string): string {
  const text = link.trim();
  const m = /\/v1\/unsubscribe\/([^/?#]+)\/?(?:[?#].*)?$/.exec(text);
  const token = m ? decodeURIComponent(m[1]!) : text;
  if (token === "" || token.includes("/")) {
    throw new CliError(
      "give the unsubscribe URL (…/v1/unsubscribe/<token>) or its token",
      EXIT_USAGE,
    );
  }
  return token;
}

/**
 * A refused row's issue as the import prints it: the message with the refused value, and
 * a row of the body it names ("first at row 3") as the file's line.
 */
export function issueText(
  issue: { message: string; value?: unknown },
  lineOf: (row: number) => number,
): string {
  const message = issue.message.replace(
    /\bfirst at row (\d+)\b/,
    (_, row: string) => `first at line ${lineOf(Number(row))}`,
  );
  const value = issue.value;
  if (typeof value !== "string" && typeof value !== "number") return message;
  const shown = String(value).length > 60 ? `${String(value).slice(0, 60)}…` : String(value);
  return message.includes("(got ") ? message : `${message} (got ${JSON.stringify(shown)})`;
}
