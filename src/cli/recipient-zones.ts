/**
 * `punctual schedules zones <id> [--json]` (API-11): the zones of a schedule's recipients,
 * counted, and whether it is floating — `GET /v1/schedules/{id}/recipient-zones`.
 */
import type { Command } from "commander";
import type { RecipientZones } from "../app/recipient-zones.js";
import { jsonText } from "./format.js";
import { clientFor, type RemoteFlags } from "./remote.js";
import type { CommandHelpers, Io } from "./run.js";

/** The readable form: a headline, then one line per zone (count, zone). */
export function recipientZonesText(z: RecipientZones): string {
  if (z.recipients === 0) return `Schedule ${z.scheduleId} has no recipients.\n`;
  const width = Math.max(...z.zones.map((x) => String(x.recipients).length));
  const lines = [
    `Schedule ${z.scheduleId}: ${z.recipients} recipients in ${z.zones.length} zones${z.floating ? " (floating: read in each recipient's zone)" : ""}`,
    ...z.zones.map((x) => `${String(x.recipients).padStart(width)}  ${x.tzid}`),
  ];
  return `${lines.join("\n")}\n`;
}

/** Adds `schedules zones` to the `schedules` command. */
export function addRecipientZonesCommand(
  schedules: Command,
  io: Io,
  helpers: CommandHelpers,
): void {
  helpers
    .remoteOptions(
      schedules
        .command("zones")
        .description("The time zones of a schedule's recipients, counted, most first.")
        .argument("<id>", "schedule id"),
    )
    .addHelpText("after", helpers.example(["punctual schedules zones 0b9f…"]))
    .action(async (id: string, flags: RemoteFlags) => {
      const reply = await clientFor(flags).get<RecipientZones>(
        `/v1/schedules/${encodeURIComponent(id)}/recipient-zones`,
      );
      io.out(flags.json ? jsonText(reply) : recipientZonesText(reply));
    });
}
