/**
 * `punctual schedules explain <id> [--from --to] [--json]` (OPS-16): why each occurrence
 * of a schedule did or did not fire, as a readable timeline — one block per entry: its due
 * time, reminder, verdict and reason, then its events, oldest first. Follows `nextCursor`
 * to the end of the window (at most 366 days).
 */
import type { Command } from "commander";
import type {
  DeliveryExplanation,
  ExplainEntry,
  ExplainEvent,
  ScheduleExplanation,
} from "../contracts/explain.js";
import { jsonText } from "./format.js";
import { clientFor, type RemoteFlags } from "./remote.js";
import type { CommandHelpers, Io } from "./run.js";

/** Flags of `schedules explain`. */
export interface ExplainFlags extends RemoteFlags {
  from?: string;
  to?: string;
}

/** Most pages one command reads (10 × 1,000 entries: more than 366 days of an hourly rule). */
const MAX_PAGES = 10;

/** `schedules explain <id>`: every entry of the window, the JSON pages joined with `--json`. */
export async function schedulesExplain(id: string, flags: ExplainFlags, io: Io): Promise<void> {
  const client = clientFor(flags);
  const path = `/v1/schedules/${encodeURIComponent(id)}/explain`;
  let cursor: string | undefined;
  let first: ScheduleExplanation | null = null;
  const entries: ExplainEntry[] = [];
  let more = false;
  for (let page = 0; page < MAX_PAGES; page++) {
    const reply = await client.get<ScheduleExplanation>(path, {
      from: flags.from,
      to: flags.to,
      cursor,
    });
    first ??= reply;
    entries.push(...reply.entries);
    if (reply.nextCursor === null) {
      more = false;
      break;
    }
    cursor = reply.nextCursor;
    more = true;
  }
  if (first === null) return;
  if (flags.json) {
    return io.out(jsonText({ ...first, entries, nextCursor: more ? (cursor ?? null) : null }));
  }
  io.out(explanationText({ ...first, entries }, more));
}

/** The readable timeline of an explanation. */
export function explanationText(x: ScheduleExplanation, more = false): string {
  const lines = [
    `Schedule ${x.scheduleId} (${x.state}), due ${x.from} … ${x.to}: ${x.entries.length} entr${x.entries.length === 1 ? "y" : "ies"}`,
  ];
  if (!x.complete) lines.push("  (the rule does not parse: only recorded deliveries are listed)");
  for (const e of x.entries) lines.push(entryText(e).trimEnd());
  if (more) lines.push("… more entries: narrow --from/--to, or use the API's nextCursor");
  return `${lines.join("\n")}\n`;
}

/** One event as a line: when, what, and its details. */
export function eventText(ev: ExplainEvent): string {
  const parts: string[] = [ev.at, ev.type];
  if (ev.attempt !== undefined) parts.push(`#${ev.attempt}`);
  if (ev.outcome !== undefined) parts.push(ev.outcome);
  if (ev.status !== undefined) parts.push(`status ${ev.status}`);
  if (ev.reason !== undefined) parts.push(ev.reason);
  if (ev.until !== undefined) parts.push(`until ${ev.until}`);
  if (ev.leaseExpiresAt !== undefined) parts.push(`lease until ${ev.leaseExpiresAt}`);
  // DEL-19: the digest of a member, and its item count when it was formed.
  if (ev.digestId !== undefined) parts.push(`digest ${ev.digestId}`);
  if (ev.items !== undefined) parts.push(`(${ev.items} item${ev.items === 1 ? "" : "s"})`);
  if (ev.by !== undefined) parts.push(`by ${ev.by}`);
  if (ev.settled === false) parts.push("(lease lost, not settled)");
  if (ev.error !== undefined) parts.push(`: ${ev.error}`);
  return parts.join(" ");
}

/** `deliveries explain <id>`: one delivery's verdict and timeline. */
export async function deliveriesExplain(id: string, flags: RemoteFlags, io: Io): Promise<void> {
  const reply = await clientFor(flags).get<DeliveryExplanation>(
    `/v1/deliveries/${encodeURIComponent(id)}/explain`,
  );
  if (flags.json) return io.out(jsonText(reply));
  io.out(entryText(reply.entry, `schedule ${reply.scheduleId}`));
}

/** One entry: a headline, then its events. */
export function entryText(e: ExplainEntry, prefix = ""): string {
  const who = e.recipientId === undefined ? "" : ` → ${e.recipientId}`;
  const id = e.deliveryId === null ? "" : ` #${e.deliveryId}`;
  const triggered = e.triggered ? " (triggered)" : "";
  const lines = [
    `${prefix ? `${prefix}  ` : ""}${e.dueAt}  ${e.reminderKey}${who}  ${e.verdict.toUpperCase()}${e.reason ? ` ${e.reason}` : ""}${id}${triggered}`,
    ...e.events.map((ev) => `    ${eventText(ev)}`),
  ];
  return `${lines.join("\n")}\n`;
}

/** Adds `deliveries explain` to the `deliveries` command. */
export function addDeliveryExplainCommand(
  deliveries: Command,
  io: Io,
  helpers: CommandHelpers,
): void {
  helpers
    .remoteOptions(
      deliveries
        .command("explain")
        .description("One delivery's verdict, reason and timeline.")
        .argument("<id>", "delivery id"),
    )
    .addHelpText("after", helpers.example(["punctual deliveries explain 42"]))
    .action((id: string, flags: RemoteFlags) => deliveriesExplain(id, flags, io));
}

/** Adds `schedules explain` to the `schedules` command. */
export function addExplainCommand(schedules: Command, io: Io, helpers: CommandHelpers): void {
  helpers
    .remoteOptions(
      schedules
        .command("explain")
        .description(
          "Why each occurrence did or did not fire: verdict, reason and timeline per reminder.",
        )
        .argument("<id>", "schedule id")
        .option("--from <instant>", "window start on the due time (default: 7 days ago)")
        .option("--to <instant>", "window end on the due time (default: 1 day ahead; ≤ 366 days)"),
    )
    .addHelpText(
      "after",
      helpers.example([
        "punctual schedules explain 0b9f…",
        "punctual schedules explain 0b9f… --from 2027-01-01T00:00:00Z --to 2027-02-01T00:00:00Z --json",
      ]),
    )
    .action((id: string, flags: ExplainFlags) => schedulesExplain(id, flags, io));
}
