/**
 * `punctual rate-limits set|list|remove` (DEL-13), through the running server's API like
 * the other remote commands: readable output by default, `--json` prints the API's JSON.
 */
import { InvalidArgumentError, type Command } from "commander";
import type { RateLimitView } from "../contracts/rate-limits.js";
import { jsonText, table } from "./format.js";
import { clientFor, type RemoteFlags } from "./remote.js";
import type { Io } from "./run.js";

/** Flags of `rate-limits set`. */
export interface RateLimitSetFlags extends RemoteFlags {
  rate: number;
  burst?: number;
  concurrency?: number;
}

const columns = [
  { header: "KEY", cell: (l: RateLimitView) => l.key },
  { header: "PER SECOND", cell: (l: RateLimitView) => l.ratePerSecond },
  { header: "BURST", cell: (l: RateLimitView) => l.burst },
  { header: "CONCURRENCY", cell: (l: RateLimitView) => l.concurrency ?? "-" },
  { header: "TOKENS", cell: (l: RateLimitView) => l.tokens },
];

/** `rate-limits set <key> --rate N [--burst N] [--concurrency N]`. */
export async function rateLimitsSet(key: string, flags: RateLimitSetFlags, io: Io): Promise<void> {
  const body = {
    ratePerSecond: flags.rate,
    ...(flags.burst !== undefined ? { burst: flags.burst } : {}),
    ...(flags.concurrency !== undefined ? { concurrency: flags.concurrency } : {}),
  };
  const reply = await clientFor(flags).request<RateLimitView>(
    "PUT",
    `/v1/rate-limits/${encodeURIComponent(key)}`,
    { body },
  );
  const l = reply.body;
  if (flags.json) return io.out(jsonText(l));
  io.out(
    `Rate limit ${l.key}: ${l.ratePerSecond}/s, burst ${l.burst}` +
      (l.concurrency === null ? "" : `, at most ${l.concurrency} at once`) +
      ". Every process applies it from its next pass.\n",
  );
}

/** `rate-limits list`. */
export async function rateLimitsList(flags: RemoteFlags, io: Io): Promise<void> {
  const page = await clientFor(flags).get<{ items: RateLimitView[] }>("/v1/rate-limits");
  if (flags.json) return io.out(jsonText(page));
  io.out(page.items.length ? table(page.items, columns) : "No rate limits.\n");
}

/** `rate-limits remove <key>`. */
export async function rateLimitsRemove(key: string, flags: RemoteFlags, io: Io): Promise<void> {
  await clientFor(flags).request("DELETE", `/v1/rate-limits/${encodeURIComponent(key)}`);
  if (flags.json) return io.out(jsonText({ removed: key }));
  io.out(`Rate limit ${key} removed: its deliveries are no longer held back.\n`);
}

const positive = (value: string): number => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("must be a number above 0.");
  return n;
};

const count = (value: string): number => {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) {
    throw new InvalidArgumentError("must be an integer of at least 1.");
  }
  return n;
};

/** How program.ts shares its helpers with the commands here. */
export interface CommandKit {
  io: Io;
  remoteOptions: (cmd: Command) => Command;
  example: (lines: string[]) => string;
}

/** Adds `rate-limits set|list|remove` to `program`. */
export function addRateLimitCommands(program: Command, kit: CommandKit): void {
  const { io, remoteOptions, example } = kit;
  const group = program
    .command("rate-limits")
    .description(
      "Rate limits and concurrency caps shared by every process, by key: a channel name or a reminder's rateLimitKey.",
    );
  remoteOptions(
    group
      .command("set")
      .description("Create or change the limit of a key.")
      .argument("<key>", "channel name or rateLimitKey")
      .requiredOption("--rate <perSecond>", "deliveries per second", positive)
      .option(
        "--burst <n>",
        "most at once after a quiet spell (default: the rate, rounded up)",
        count,
      )
      .option("--concurrency <n>", "most claimed or sending at once, across processes", count),
  )
    .addHelpText(
      "after",
      example([
        "punctual rate-limits set email --rate 10",
        "punctual rate-limits set sms-carrier --rate 5 --burst 5 --concurrency 4",
      ]),
    )
    .action((key: string, flags: RateLimitSetFlags) => rateLimitsSet(key, flags, io));
  remoteOptions(group.command("list").description("List the limits with their tokens now."))
    .addHelpText("after", example(["punctual rate-limits list"]))
    .action((flags: RemoteFlags) => rateLimitsList(flags, io));
  remoteOptions(
    group
      .command("remove")
      .description("Remove the limit of a key.")
      .argument("<key>", "channel name or rateLimitKey"),
  )
    .addHelpText("after", example(["punctual rate-limits remove email"]))
    .action((key: string, flags: RemoteFlags) => rateLimitsRemove(key, flags, io));
}
