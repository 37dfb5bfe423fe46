/**
 * The `punctual` command line (API-3), built with commander: every command, its flags
 * with defaults and environment variables, and an example in its `--help`.
 */
import { Command, InvalidArgumentError, Option } from "commander";
import { VERSION } from "../app/punctual.js";
import {
  DELIVERY_STATE_VALUES,
  isInstantInRange,
  SCHEDULE_VIEW_STATE_VALUES,
} from "../contracts/index.js";
import { MAX_PREVIEW_COUNT } from "../recurrence/index.js";
import { ENV_VARS } from "../config/env.js";
import { LOG_LEVELS } from "../observability/logger.js";
import { apiKeysCreate, apiKeysList, apiKeysRevoke } from "./api-keys.js";
import { addInspectCommands } from "./circuits.js";
import { addCompletionCommand } from "./completion.js";
import { DRY_RUN_DAYS, runImport, type ImportFlags } from "./calendar.js";
import { EXIT_FAILURE } from "./errors.js";
import { runImportEvery, signalWait } from "./import-every.js";
import { addKindsCommands } from "./kinds.js";
import { addDeliveryExplainCommand, addExplainCommand } from "./explain.js";
import { addRecipientZonesCommand } from "./recipient-zones.js";
import { runPreview, runValidate, type PreviewFlags } from "./local.js";
import { addPolicyOptions, integer } from "./policy-flags.js";
import { addScheduleEditCommand } from "./schedule-edit.js";
import { addRateLimitCommands } from "./rate-limits.js";
import { addTenantSecretCommands } from "./tenant-secret.js";
import { addRecipientCommands } from "./recipients.js";
import {
  deliveriesBulk,
  schedulesBackfill,
  schedulesPurge,
  schedulesTrigger,
  schedulesUpsert,
  type BulkFlags,
  type UpsertFlags,
} from "./operator.js";
import {
  deliveriesAct,
  deliveriesList,
  deliveriesShow,
  healthcheckHttp,
  importShow,
  importsList,
  instancesList,
  schedulesAdd,
  schedulesList,
  schedulesShow,
  schedulesTransition,
  status,
  webhookSecret,
  type AddFlags,
  type DeliveriesListFlags,
  type PageFlags,
  type RemoteFlags,
} from "./remote.js";
import {
  healthcheckDatabase,
  runMigrate,
  runStart,
  runWorker,
  type DatabaseFlags,
  type Io,
  type StartFlags,
  type WorkerFlags,
} from "./run.js";
import { DEFAULT_METRICS_PORT } from "../api/probes.js";

/** Default server URL of the remote commands. */
export const DEFAULT_URL = "http://127.0.0.1:8080";

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** A port, or `off`: the worker's `--metrics-port`. */
const portOrOff = (value: string): number | "off" =>
  value.trim().toLowerCase() === "off" ? "off" : integer(0, 65_535)(value);

/**
 * An instant flag: `2027-01-01T00:00:00Z`, one with an offset (`…+01:00`), or a date
 * `2027-01-01` (midnight UTC). A local time without a zone is refused as ambiguous.
 * @returns epoch milliseconds.
 */
const instant = (value: string): number => {
  const text = value.trim();
  const ms = Date.parse(text);
  if (
    !/^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2}))?$/i.test(
      text,
    ) ||
    !Number.isFinite(ms)
  ) {
    throw new InvalidArgumentError(
      "must be an ISO 8601 instant with Z or an offset (2027-01-01T00:00:00Z), or a date (midnight UTC).",
    );
  }
  if (!isInstantInRange(ms)) {
    throw new InvalidArgumentError(`must be in the years 0001 to 9999 (UTC) (got "${text}").`);
  }
  return ms;
};

/**
 * Environment variables whose configuration path starts with one of `prefixes`
 * (`scheduler.`: lease, prefetch, concurrency, …; `email.`: SMTP), one per line.
 */
const envHelp = (...prefixes: string[]): string =>
  ENV_VARS.filter((v) => prefixes.some((p) => v.path.startsWith(p)))
    .map((v) => `  ${v.name.padEnd(36)} ${v.help}\n`)
    .join("");
const example = (lines: string[]) => `\nExample:\n${lines.map((l) => `  $ ${l}`).join("\n")}\n`;

/** `--otel` of the commands that run the scheduler (`start`, `worker`). */
const otelOption = (): Option =>
  new Option(
    "--otel",
    "export OpenTelemetry traces and metrics over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT",
  );

/** Flags of commands that open the database. */
function databaseOptions(cmd: Command, withMigrate: boolean): Command {
  cmd
    .addOption(
      new Option("--data-dir <path>", "embedded (PGlite) data folder, used without --database-url")
        .env("PUNCTUAL_DATA_DIR")
        .default("./punctual-data"),
    )
    .option(
      "--take-over-lock",
      "take over the data folder's lock left by another host (a re-created container) once 60 s stale (also PUNCTUAL_TAKE_OVER_LOCK=true)",
    )
    .option(
      "--allow-shared-data-dir",
      "open a data folder that other users may read (refused by default; also PUNCTUAL_ALLOW_SHARED_DATA_DIR=true)",
    )
    .addOption(
      new Option(
        "--database-url <url>",
        "PostgreSQL URL (postgres://user:pass@host:5432/db); embedded database when absent",
      ).env("DATABASE_URL"),
    );
  if (withMigrate) {
    cmd.option(
      "--migrate",
      "apply pending migrations at start (PostgreSQL; embedded always migrates)",
      false,
    );
  }
  return cmd.addOption(
    new Option("--log-level <level>", "JSON log level on stdout")
      .choices(LOG_LEVELS)
      .env("PUNCTUAL_LOG_LEVEL")
      .default("info"),
  );
}

/** Flags of commands that talk to the running server. */
/** `--cursor`'s help, the same on every paged list (API-3). */
const CURSOR_HELP = "next page, from the previous page's output";
/** `--all`'s help, the same on every paged list (API-3). */
const ALL_HELP = "every page, following the cursor to the end (with --json: JSON Lines)";

/** `--order asc|desc` of a paged list, with `help` saying which is the default (API-3). */
function orderOption(help: string): Option {
  return new Option("--order <order>", help).choices(["asc", "desc"]);
}

/**
 * {@link remoteOptions} of a list read in keyset pages (API-3): `--order` (`orderHelp`),
 * `--limit` (1–1000, default 100), `--cursor` and `--all`.
 */
function pagedRemoteOptions(cmd: Command, orderHelp: string): Command {
  return remoteOptions(
    cmd
      .addOption(orderOption(orderHelp))
      .option("--limit <n>", "page size (1–1000)", integer(1, 1_000), 100)
      .option("--cursor <cursor>", CURSOR_HELP)
      .option("--all", ALL_HELP),
  );
}

function remoteOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option("--url <url>", "URL of the running punctual server")
        .env("PUNCTUAL_URL")
        .default(DEFAULT_URL),
    )
    .option("--json", "print the API's JSON instead of a table", false)
    .addHelpText(
      "after",
      "\nEnvironment:\n  PUNCTUAL_API_KEY  sent as `Authorization: Bearer <key>` when set (the operator's key or a tenant's)\n" +
        "  PUNCTUAL_TENANT   the tenant the operator's key acts for (sent as Punctual-Tenant; default: default)\n",
    );
}

/** Builds the `punctual` program. `io` receives everything the commands print. */
export function buildProgram(io: Io): Command {
  const program = new Command("punctual")
    .description(
      "Durable reminder scheduler: RFC 5545 recurrence in real time zones, delivered exactly once in effect.",
    )
    .version(VERSION)
    .exitOverride()
    .showHelpAfterError("(run with --help for usage)")
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .addHelpText(
      "after",
      example([
        "punctual start",
        "punctual schedules add --dtstart 2027-01-04T09:00:00 --tzid Europe/Berlin --rrule FREQ=WEEKLY --perpetual --offset -PT15M --channel log",
        "punctual preview --dtstart 2027-01-04T09:00:00 --tzid Europe/Berlin --rrule FREQ=DAILY --count 5",
        "punctual import work.ics --remind -PT15M --channel log",
      ]),
    );

  // --- processes ---------------------------------------------------------------------

  databaseOptions(
    program
      .command("start")
      .description(
        "Run the HTTP API and the scheduler (embedded database by default). Stops cleanly on SIGTERM/SIGINT.",
      )
      .addOption(
        new Option("--port <port>", "HTTP port; 0 picks a free one (the startup line shows it)")
          .env("PUNCTUAL_PORT")
          .default(8080)
          .argParser(integer(0, 65_535)),
      )
      .addOption(
        new Option(
          "--host <host>",
          "address to listen on; a non-loopback one needs PUNCTUAL_API_KEY",
        )
          .env("PUNCTUAL_HOST")
          .default("127.0.0.1"),
      )
      .addOption(otelOption()),
    true,
  )
    .addHelpText(
      "after",
      "\nEnvironment:\n" +
        "  PUNCTUAL_API_KEY                     bearer token required on /v1/* and /metrics (16+ characters)\n" +
        "  PUNCTUAL_WEBHOOK_SECRET              default webhook signing secret (whsec_…)\n" +
        "  PUNCTUAL_ALLOW_PRIVATE_TARGETS=true  allow webhook targets on private/loopback addresses\n" +
        envHelp(
          "api.allowedHosts",
          "api.requestTimeoutMs",
          "api.headersTimeoutMs",
          "lockTimeoutMs",
          "email.",
          "scheduler.",
        ) +
        example([
          "punctual start",
          "PUNCTUAL_API_KEY=$(openssl rand -hex 24) punctual start --host 0.0.0.0 --port 8080",
          "DATABASE_URL=postgres://punctual@db:5432/punctual punctual start --migrate",
        ]),
    )
    .action((flags: StartFlags) => runStart(flags, io));

  databaseOptions(
    program
      .command("worker")
      .description(
        "Run the scheduler without the API, as an extra process against PostgreSQL; serves /metrics, /healthz and /readyz on --metrics-port. Stops cleanly on SIGTERM/SIGINT.",
      )
      .addOption(
        new Option(
          "--metrics-port <port>",
          "port of /metrics, /healthz and /readyz; 0 picks a free one (the startup line shows it); off serves none",
        )
          .env("PUNCTUAL_METRICS_PORT")
          .default(DEFAULT_METRICS_PORT)
          .argParser(portOrOff),
      )
      .addOption(
        new Option(
          "--metrics-host <host>",
          "address of the metrics port (loopback by default; 0.0.0.0 for a scraper in another container)",
        )
          .env("PUNCTUAL_METRICS_HOST")
          .default("127.0.0.1"),
      )
      .addOption(otelOption()),
    true,
  )
    .addHelpText(
      "after",
      "\nEmbedded mode allows one process per data folder: extra workers need --database-url.\n" +
        "\nEnvironment:\n" +
        "  PUNCTUAL_API_KEY                     bearer token required on /metrics when set\n" +
        envHelp("api.allowedHosts", "email.", "scheduler.") +
        example([
          "DATABASE_URL=postgres://punctual@db:5432/punctual punctual worker",
          "punctual worker --database-url postgres://punctual@db:5432/punctual --metrics-port 9465",
          "curl -s http://127.0.0.1:9464/metrics | grep punctual_deliveries_total",
        ]),
    )
    .action((flags: WorkerFlags, cmd: Command) =>
      runWorker(
        { ...flags, metricsPortDefaulted: cmd.getOptionValueSource("metricsPort") === "default" },
        io,
      ),
    );

  databaseOptions(
    program
      .command("migrate")
      .description(
        "Apply pending database migrations (safe to run from several processes at once).",
      )
      .option("--json", "print { database, applied, version } as JSON", false)
      .option(
        "--force",
        "apply a migration that older releases cannot read even while scheduler instances " +
          "ticked within the last minute (only once you know they are stopped)",
        false,
      ),
    false,
  )
    .addHelpText(
      "after",
      example([
        "DATABASE_URL=postgres://punctual@db:5432/punctual punctual migrate",
        "punctual migrate --data-dir ./punctual-data",
      ]),
    )
    .action((flags: DatabaseFlags & { json: boolean; force: boolean }) => runMigrate(flags, io));

  program
    .command("healthcheck")
    .description(
      "Exit 0 when healthy, 1 when the scheduler heartbeat is stale or the server unreachable.",
    )
    .addOption(
      new Option("--url <url>", "server whose /readyz is checked")
        .env("PUNCTUAL_URL")
        .default(DEFAULT_URL),
    )
    .addOption(
      new Option(
        "--database-url <url>",
        "check heartbeats in PostgreSQL instead of /readyz (for workers run with --metrics-port off)",
      ).env("DATABASE_URL"),
    )
    .addOption(
      new Option("--max-age-ms <ms>", "with --database-url: heartbeat older than this is stale")
        .default(60_000)
        .argParser(integer(1, 86_400_000)),
    )
    .option("--this-host", "with --database-url: only count instances on this host", false)
    .option("--json", "print the details as JSON", false)
    .addHelpText(
      "after",
      example([
        "punctual healthcheck --url http://127.0.0.1:8080",
        "DATABASE_URL=postgres://punctual@db:5432/punctual punctual healthcheck --this-host --max-age-ms 30000",
      ]),
    )
    .action(
      async (
        flags: {
          url: string;
          databaseUrl?: string;
          maxAgeMs: number;
          thisHost: boolean;
          json: boolean;
        },
        cmd: Command,
      ) => {
        // An explicit --url wins over a DATABASE_URL that merely sits in the environment;
        // an explicit --database-url wins over everything.
        const useDatabase =
          flags.databaseUrl !== undefined &&
          (cmd.getOptionValueSource("databaseUrl") === "cli" ||
            cmd.getOptionValueSource("url") !== "cli");
        process.exitCode = useDatabase
          ? await healthcheckDatabase({ ...flags, databaseUrl: flags.databaseUrl! }, io)
          : await healthcheckHttp(flags, io);
      },
    );

  remoteOptions(
    program
      .command("status")
      .description("Readiness, scheduler instances, due backlog, in-doubt and dead counts."),
  )
    .addHelpText("after", example(["punctual status", "punctual status --json"]))
    .action((flags: RemoteFlags) => status(flags, io));

  pagedRemoteOptions(
    program
      .command("instances")
      .description(
        "List every stored scheduler instance by start (status shows at most 100). Needs the operator's key.",
      )
      .addOption(
        new Option("--state <state>", "only running or stopped ones").choices([
          "running",
          "stopped",
        ]),
      )
      .option("--role <role>", "only this role (start, worker)"),
    "asc (oldest start first, the default) or desc",
  )
    .addHelpText(
      "after",
      example(["punctual instances --state running", "punctual instances --all --json"]),
    )
    .action((flags: RemoteFlags & PageFlags & { state?: string; role?: string }) =>
      instancesList(flags, io),
    );

  pagedRemoteOptions(
    program
      .command("imports")
      .argument(
        "[id]",
        "show this import: its status, progress per chunk, skipped events and warnings",
      )
      .description(
        "List the calendar imports (status and what each did), by id; with an ID, show that one.",
      )
      .option("--source <name>", "only this calendar's")
      .option("--from <instant>", "only those written at or after this ISO 8601 instant")
      .option("--to <instant>", "only those written before this ISO 8601 instant"),
    "asc (oldest first, the default) or desc",
  )
    .addHelpText(
      "after",
      example([
        "punctual imports --source team --order desc",
        "punctual imports --all --json",
        "punctual imports 7",
      ]),
    )
    .action(
      (
        id: string | undefined,
        flags: RemoteFlags & PageFlags & { source?: string; from?: string; to?: string },
      ) => (id === undefined ? importsList(flags, io) : importShow(id, flags, io)),
    );

  remoteOptions(
    program
      .command("webhook-secret")
      .description(
        "Print the default webhook signing secret (whsec_…) the server signs with, to verify webhook-signature headers. " +
          "Without PUNCTUAL_API_KEY it works only on the server's machine: it presents the local token `start` wrote in the data folder.",
      )
      .addOption(
        new Option(
          "--data-dir <path>",
          "data folder of the running `punctual start` (holds its local token)",
        )
          .env("PUNCTUAL_DATA_DIR")
          .default("./punctual-data"),
      ),
  )
    .addHelpText(
      "after",
      example([
        "punctual webhook-secret",
        "punctual webhook-secret --data-dir /var/lib/punctual --json",
      ]),
    )
    .action((flags: RemoteFlags & { dataDir: string }) => webhookSecret(flags, io));

  // --- recurrence (local, no server) ---------------------------------------------------

  program
    .command("preview")
    .description(
      "Print the next occurrences of a rule, computed locally with the scheduler's code.",
    )
    .requiredOption(
      "--dtstart <datetime>",
      "first occurrence: 2027-01-04T09:00:00 (local), 2027-01-04, or an instant with Z",
    )
    .option("--tzid <zone>", "IANA time zone the local times are read in", "UTC")
    .option("--rrule <rule>", "RFC 5545 RRULE, e.g. FREQ=WEEKLY;BYDAY=MO,WE")
    .option("--rdate <datetime>", "extra occurrence (repeatable)", collect, [])
    .option("--exdate <datetime>", "excluded occurrence (repeatable)", collect, [])
    .option("--after <datetime>", "only occurrences at or after this (instant or local time)")
    .option("--before <datetime>", "only occurrences before this (instant or local time)")
    .option(
      "--count <n>",
      `at most this many (1–${MAX_PREVIEW_COUNT})`,
      integer(1, MAX_PREVIEW_COUNT),
      10,
    )
    .addOption(
      new Option(
        "--dst-gap <policy>",
        "a local time the spring-forward change skips: shift (forward by the gap) or skip the occurrence (RFC 5545 §3.3.5); default shift",
      ).choices(["shift", "skip"]),
    )
    .addOption(
      new Option(
        "--dst-overlap <policy>",
        "a local time the fall-back change repeats: the earlier or the later instant; default earlier",
      ).choices(["earlier", "later"]),
    )
    .option("--json", "print the array [{ instant, local }]", false)
    .addHelpText(
      "after",
      example([
        'punctual preview --dtstart 2027-03-01T09:00:00 --tzid Europe/Berlin --rrule "FREQ=WEEKLY;BYDAY=MO" --count 5',
        "punctual preview --dtstart 2027-03-26T02:30:00 --tzid Europe/Berlin --rrule FREQ=DAILY --count 4 --dst-gap skip",
        "punctual preview --dtstart 2027-01-31 --rrule FREQ=MONTHLY --after 2027-06-01 --json",
      ]),
    )
    .action((flags: PreviewFlags) => runPreview(flags, io));

  program
    .command("validate")
    .description('Check a rule strictly: prints "valid", or names the bad part and exits 1.')
    .requiredOption("--rrule <rule>", "RFC 5545 RRULE to check")
    .option("--dtstart <datetime>", "DTSTART to check it with (default: now, in UTC)")
    .option("--tzid <zone>", "IANA time zone", "UTC")
    .option("--json", "print { valid, issues? } as JSON", false)
    .addHelpText(
      "after",
      example(['punctual validate --rrule "FREQ=MONTHLY;BYMONTHDAY=31;COUNT=12"']),
    )
    .action((flags: { rrule: string; dtstart?: string; tzid: string; json: boolean }) =>
      runValidate(flags, io),
    );

  // --- calendars -------------------------------------------------------------------------

  program
    .command("import")
    .description(
      "Import an iCalendar file: each event UID becomes a schedule on the running server; importing the file again updates what changed and cancels events gone from it. With --dry-run, prints the deliveries it would produce, computed locally with no server.",
    )
    .argument("<file>", "the .ics file")
    .option(
      "--source <name>",
      "calendar id the schedules belong to; import the same calendar under the same name (default: the file name without extension)",
    )
    .option(
      "--remind <offset>",
      "reminder offset for every event, ISO 8601: -PT15M, -P1D (repeatable)",
      collect,
      [],
    )
    .option("--use-alarms", "turn the events' VALARMs into reminders", false)
    .addOption(
      new Option("--channel <channel>", "delivery channel of every reminder")
        .choices(["webhook", "log"])
        .default("webhook"),
    )
    .option("--target <url>", "webhook URL of every reminder (with --channel webhook)")
    .option(
      "--tzid <zone>",
      "IANA zone of floating times and all-day dates when the file names none (X-WR-TIMEZONE); default UTC",
    )
    .option("--dry-run", "store nothing, need no server: print the deliveries it would plan", false)
    .option(
      "--every <period>",
      'import again every period (e.g. "15m", "1h") until stopped, printing each summary; <file> may be an http(s) URL',
    )
    .option(
      "--from <instant>",
      "with --dry-run: window start, inclusive, as the scheduler's clock (default: now)",
      instant,
    )
    .option(
      "--to <instant>",
      `with --dry-run: window end, exclusive (default: --from + ${DRY_RUN_DAYS} days)`,
      instant,
    )
    .option(
      "--json",
      "print JSON: the import summary, or with --dry-run exactly the array [{ uid, recurrenceId, occurrenceAt, dueAt, reminderKey }] (summary on stderr)",
      false,
    )
    .addOption(
      new Option("--url <url>", "URL of the running punctual server")
        .env("PUNCTUAL_URL")
        .default(DEFAULT_URL),
    )
    .addHelpText(
      "after",
      "\nA large file shows its progress on stderr. Events that cannot be imported are listed with\n" +
        "their UID, line and reason; the rest imports (exit 0). An unreadable or non-iCalendar file\n" +
        "exits 1.\n" +
        "\nEnvironment:\n  PUNCTUAL_API_KEY  sent as `Authorization: Bearer <key>` when set\n" +
        example([
          "punctual import work.ics --remind -PT15M --target https://example.com/hooks/punctual",
          "punctual import shifts.ics --source shifts --use-alarms --channel log --tzid Europe/Berlin",
          "punctual import work.ics --remind -PT15M --dry-run --from 2027-01-01T00:00:00Z --to 2027-02-01T00:00:00Z --json",
          "punctual import https://calendar.example.com/team.ics --every 15m --remind -PT15M --channel log",
        ]),
    )
    .action(async (file: string, flags: ImportFlags & { every?: string }) => {
      const env = { errIsTTY: process.stderr.isTTY === true, now: () => Date.now() };
      if (flags.every === undefined) return runImport(file, flags, io, env);
      const every = flags.every;
      const failed = await runImportEvery(file, { ...flags, every }, io, {
        ...env,
        wait: signalWait(),
      });
      if (failed > 0) process.exitCode = EXIT_FAILURE;
    });

  // --- schedules (through the API) -----------------------------------------------------

  const schedules = program
    .command("schedules")
    .description(
      "Create, list, show, edit, cancel, pause and resume schedules through the running server.",
    );

  const scheduleAdd = remoteOptions(
    schedules
      .command("add")
      .description("Create a schedule with one reminder per --offset.")
      .requiredOption(
        "--dtstart <datetime>",
        "2027-01-04T09:00:00 (local in --tzid), 2027-01-04, or an instant with Z",
      )
      .option("--tzid <zone>", "IANA time zone", "UTC")
      .option("--rrule <rule>", "RFC 5545 RRULE, e.g. FREQ=DAILY;COUNT=10")
      .addOption(
        new Option("--rdate <datetime>", "extra occurrence (repeatable)")
          .argParser(collect)
          .default([], "none"),
      )
      .addOption(
        new Option("--exdate <datetime>", "excluded occurrence (repeatable)")
          .argParser(collect)
          .default([], "none"),
      )
      .option("--ends-at <instant>", "end of an unbounded series (ISO instant)")
      .addOption(
        new Option(
          "--offset <duration>",
          "reminder offset from each occurrence, ISO 8601 (repeatable)",
        )
          .argParser(collect)
          .default([], "PT0S"),
      )
      .addOption(
        new Option("--key <key>", "reminder key for the matching --offset (repeatable)")
          .argParser(collect)
          .default([], "r1, r2, …"),
      )
      .addOption(
        new Option("--channel <channel>", "delivery channel")
          .choices(["webhook", "log", "slack", "discord", "email"])
          .default("webhook"),
      )
      .option(
        "--target-url <url>",
        "receiver URL: the webhook's, or a Slack / Discord incoming-webhook URL",
      )
      .addOption(
        new Option("--to <address>", "e-mail recipient, with --channel email (repeatable)")
          .argParser(collect)
          .default([]),
      )
      .option("--subject <text>", "e-mail subject, with --channel email (a template)")
      .option("--secret <whsec>", "webhook signing secret for this target (default: the server's)")
      .option("--payload <json>", "JSON passed to every delivery")
      .option("--idempotency-key <key>", "retrying with the same key creates one schedule")
      .addOption(
        new Option(
          "--misfire <policy>",
          "missed occurrences: skip, latest or all (default skip)",
        ).choices(["skip", "latest", "all"]),
      )
      .option("--perpetual", "an unbounded series that is never capped", false)
      .option("--title <text>", "what you call the schedule, shown in lists (1–500 characters)"),
  )
    .addHelpText(
      "after",
      example([
        'punctual schedules add --dtstart 2027-01-04T09:00:00 --tzid Europe/Berlin --rrule "FREQ=WEEKLY;BYDAY=MO" --perpetual --offset -PT15M --target-url https://example.com/hooks/punctual',
        'punctual schedules add --dtstart 2027-01-04T21:00:00Z --rrule "FREQ=DAILY;COUNT=30" --channel log --quiet-hours 22:00-07:00 --quiet-tz Europe/Berlin',
        "punctual schedules add --dtstart 2027-03-01T09:00:00Z --channel log --payload '{\"user\":42}'",
        'punctual schedules add --dtstart 2027-03-01T09:00:00Z --offset -P1D --channel email --to ana@example.com --subject "Due tomorrow"',
      ]),
    )
    .action((flags: AddFlags) => schedulesAdd(flags, io));
  addPolicyOptions(scheduleAdd);

  pagedRemoteOptions(
    schedules
      .command("list")
      .description("List schedules, oldest first.")
      .addOption(
        new Option(
          "--state <state>",
          "only this state (`active` leaves out finished one-offs; `finished`: nothing left to send)",
        ).choices(SCHEDULE_VIEW_STATE_VALUES),
      )
      .option(
        "--source <name>",
        "only this source's (an import's calendar name, an upsert's system)",
      )
      .option("--search <text>", "only titles or external ids containing this (any case)"),
    "asc (oldest first, the default) or desc",
  )
    .addHelpText(
      "after",
      example([
        "punctual schedules list --state active",
        "punctual schedules list --search standup --order desc",
        "punctual schedules list --source team --all --json",
      ]),
    )
    .action(
      (flags: RemoteFlags & PageFlags & { state?: string; source?: string; search?: string }) =>
        schedulesList(flags, io),
    );

  remoteOptions(
    schedules
      .command("show")
      .description("Show a schedule and its reminders.")
      .argument("<id>", "schedule id"),
  )
    .addHelpText("after", example(["punctual schedules show 0b9f…"]))
    .action((id: string, flags: RemoteFlags) => schedulesShow(id, flags, io));

  addScheduleEditCommand(schedules, { io, remoteOptions, example });
  addExplainCommand(schedules, io, { remoteOptions, example });
  addRecipientZonesCommand(schedules, io, { remoteOptions, example });

  for (const [action, text] of [
    ["cancel", "Cancel a schedule and every waiting delivery."],
    ["pause", "Pause a schedule: nothing is sent until it resumes."],
    ["resume", "Resume a paused schedule; missed occurrences follow its misfire policy."],
  ] as const) {
    remoteOptions(schedules.command(action).description(text).argument("<id>", "schedule id"))
      .addHelpText("after", example([`punctual schedules ${action} 0b9f…`]))
      .action((id: string, flags: RemoteFlags) => schedulesTransition(action, id, flags, io));
  }
  addScheduleOperatorCommands(schedules, io);

  // --- reminder kinds (through the API, DEL-11) ---------------------------------------

  addKindsCommands(program, io, { remoteOptions, example });

  // --- deliveries (through the API) ----------------------------------------------------

  const deliveries = program
    .command("deliveries")
    .description("List, inspect, redrive and resolve deliveries through the running server.");
  addDeliveryExplainCommand(deliveries, io, { remoteOptions, example });

  remoteOptions(
    deliveries
      .command("list")
      .description("List deliveries by id.")
      .option("--schedule-id <id>", "only this schedule's")
      .addOption(new Option("--state <state>", "only this state").choices(DELIVERY_STATE_VALUES))
      .option("--source <source>", "only the deliveries of schedules from this source")
      .option("--channel <channel>", "only the deliveries through this channel")
      .option("--due-from <instant>", "only those due at or after this ISO 8601 instant")
      .option("--due-to <instant>", "only those due before this ISO 8601 instant")
      .addOption(
        new Option(
          "--order <order>",
          "asc (oldest first, the default) or desc; oldest and newest also work",
        ).choices(["asc", "desc", "oldest", "newest"]),
      )
      .option("--limit <n>", "page size (1–1000)", integer(1, 1_000), 100)
      .option("--cursor <cursor>", CURSOR_HELP)
      .option("--all", ALL_HELP)
      .option(
        "--after <id>",
        "older form of --cursor: the deliveries past this id in the listing order",
        integer(0, Number.MAX_SAFE_INTEGER),
      ),
  )
    .addHelpText(
      "after",
      example([
        "punctual deliveries list --state dead --order desc",
        "punctual deliveries list --source team-calendar --due-from 2027-01-01T00:00:00Z",
        "punctual deliveries list --state dead --all --json",
      ]),
    )
    .action((flags: DeliveriesListFlags) => deliveriesList(flags, io));

  remoteOptions(
    deliveries
      .command("show")
      .description("Show a delivery with its attempts.")
      .argument("<id>", "delivery id"),
  )
    .addHelpText("after", example(["punctual deliveries show 42"]))
    .action((id: string, flags: RemoteFlags) => deliveriesShow(id, flags, io));

  remoteOptions(
    bulkFilterOptions(
      deliveries
        .command("redrive")
        .description(
          "Send a dead or in-doubt delivery again, with the same delivery key; without an id, every one the filters match (a dry run unless --yes).",
        )
        .argument("[id]", "delivery id"),
    ),
  )
    .addHelpText(
      "after",
      example([
        "punctual deliveries redrive 42",
        "punctual deliveries redrive --state dead --reason SEND_FAILED --channel webhook",
        "punctual deliveries redrive --state dead --reason SEND_FAILED --channel webhook --yes",
      ]),
    )
    .action((id: string | undefined, flags: BulkFlags) =>
      id === undefined ? deliveriesBulk("redrive", flags, io) : deliveriesAct(id, flags, io),
    );

  remoteOptions(
    bulkFilterOptions(
      deliveries
        .command("resolve")
        .description(
          "Settle an in-doubt delivery after checking the receiver: sent or dead; without an id, every in-doubt delivery or open dead letter the filters match (a dry run unless --yes).",
        )
        .argument("[id]", "delivery id")
        .addOption(
          new Option("--outcome <outcome>", "what happened")
            .choices(["sent", "dead"])
            .makeOptionMandatory(),
        ),
    ),
  )
    .addHelpText(
      "after",
      example([
        "punctual deliveries resolve 42 --outcome sent",
        "punctual deliveries resolve --state in_doubt --channel email --outcome sent --yes",
      ]),
    )
    .action((id: string | undefined, flags: BulkFlags & { outcome: "sent" | "dead" }) =>
      id === undefined ? deliveriesBulk("resolve", flags, io) : deliveriesAct(id, flags, io),
    );

  addRateLimitCommands(program, { io, remoteOptions, example });
  addTenantSecretCommands(program, { io, remoteOptions, example });
  addRecipientCommands(program, { io, remoteOptions, example });
  addInspectCommands(program, { io, remoteOptions, example });
  addCompletionCommand(program, { io, example });

  // --- api keys (API-2) ---------------------------------------------------------------

  const apiKeys = program
    .command("api-keys")
    .description(
      "Tenant API keys: create (shown once, stored as a hash), list, revoke. Needs the operator's key or a tenant key with the admin scope.",
    );

  remoteOptions(
    apiKeys
      .command("create")
      .description("Create a key for a tenant and print it (this once).")
      .option("--tenant <name>", "the key's tenant (default: the caller's)")
      .requiredOption("--scopes <list>", "comma-separated: read, write, admin")
      .requiredOption("--name <text>", "what the key is for (shown in lists)"),
  )
    .addHelpText(
      "after",
      example(['punctual api-keys create --tenant acme --scopes read,write --name "acme backend"']),
    )
    .action((flags: RemoteFlags & { tenant?: string; scopes: string; name: string }) =>
      apiKeysCreate(flags, io),
    );

  pagedRemoteOptions(
    apiKeys
      .command("list")
      .description("List keys (never the keys themselves): a tenant key sees its own tenant's.")
      .option("--tenant <name>", "only this tenant's keys (operator's key)")
      .option("--revoked", "include revoked keys", false),
    "asc (oldest first, the default) or desc",
  )
    .addHelpText(
      "after",
      example(["punctual api-keys list --tenant acme", "punctual api-keys list --all --json"]),
    )
    .action((flags: RemoteFlags & PageFlags & { tenant?: string; revoked?: boolean }) =>
      apiKeysList(flags, io),
    );

  remoteOptions(
    apiKeys
      .command("revoke")
      .description("Revoke a key at once: the next request with it is 401.")
      .argument("<id>", "key id (from `api-keys list`)"),
  )
    .addHelpText("after", example(["punctual api-keys revoke 3f1c…"]))
    .action((id: string, flags: RemoteFlags) => apiKeysRevoke(id, flags, io));

  return program;
}

/** Filters of the bulk `deliveries redrive` / `resolve` (API-9). */
function bulkFilterOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option("--state <state>", "only this state (default: both)").choices([
        "dead",
        "in_doubt",
      ]),
    )
    .option("--reason <reason>", "only this reason (SEND_FAILED, PERMANENT, LEASE_EXPIRED …)")
    .option("--channel <channel>", "only this channel")
    .option("--schedule-id <id>", "only this schedule's")
    .option("--source <name>", "only schedules of this source (an import's calendar name)")
    .option("--from <instant>", "only deliveries due at or after this instant")
    .option("--to <instant>", "only deliveries due before this instant")
    .option("--limit <n>", "most deliveries changed per call (1–10000)", integer(1, 10_000))
    .option("--yes", "do it (without: a dry run that counts and shows a sample)", false);
}

/** `schedules trigger|backfill|purge|upsert` (API-9). */
function addScheduleOperatorCommands(schedules: Command, io: Io): void {
  remoteOptions(
    schedules
      .command("trigger")
      .description(
        "Send a schedule once more now, with its own delivery key; scheduled deliveries are left alone.",
      )
      .argument("<id>", "schedule id")
      .option("--reminder <key>", "only this reminder (default: every one)")
      .option("--idempotency-key <key>", "retrying with the same key triggers once"),
  )
    .addHelpText("after", example(["punctual schedules trigger 0b9f…"]))
    .action((id: string, flags: RemoteFlags & { reminder?: string; idempotencyKey?: string }) =>
      schedulesTrigger(id, flags, io),
    );

  remoteOptions(
    schedules
      .command("backfill")
      .description(
        "Plan the occurrences of a past range [--from, --to) that have no delivery yet; never a second one for a sent occurrence.",
      )
      .argument("<id>", "schedule id")
      .requiredOption("--from <instant>", "start of the range (ISO instant, inclusive)")
      .requiredOption(
        "--to <instant>",
        "end of the range (ISO instant, exclusive, not in the future)",
      )
      .option("--reminder <key>", "only this reminder (default: every one)")
      .option("--dry-run", "list what would be created, change nothing", false),
  )
    .addHelpText(
      "after",
      example([
        "punctual schedules backfill 0b9f… --from 2027-01-01T00:00:00Z --to 2027-01-04T00:00:00Z --dry-run",
      ]),
    )
    .action(
      (
        id: string,
        flags: RemoteFlags & { from: string; to: string; dryRun?: boolean; reminder?: string },
      ) => schedulesBackfill(id, flags, io),
    );

  remoteOptions(
    schedules
      .command("purge")
      .description(
        "Delete a schedule for good with its deliveries and attempts (data-protection requests).",
      )
      .argument("<id>", "schedule id")
      .option("--yes", "do it (required)", false),
  )
    .addHelpText("after", example(["punctual schedules purge 0b9f… --yes"]))
    .action((id: string, flags: RemoteFlags & { yes?: boolean }) => schedulesPurge(id, flags, io));

  remoteOptions(
    schedules
      .command("upsert")
      .alias("put")
      .description(
        "Create or update the schedule with your own id (source and external id) from a JSON body (PUT /v1/schedules/by-external-id/…; alias: put).",
      )
      .argument("<source>", "your system's name for the records")
      .argument("<external-id>", "your id of the record")
      .requiredOption("--file <path>", "the schedule as JSON, as for a create (- reads stdin)")
      .option(
        "--debounce-window-ms <ms>",
        "debounce a one-off: each upsert moves its due time to now + this window, ms",
        integer(100, 86_400_000),
      )
      .option(
        "--debounce-max-delay-ms <ms>",
        "with --debounce-window-ms: never later than the burst's first upsert + this, ms (default: 6 × the window)",
        integer(100, 604_800_000),
      ),
  )
    .addHelpText(
      "after",
      example([
        "punctual schedules upsert crm meeting-7 --file meeting-7.json",
        "punctual schedules put crm ticket-7 --file notify.json --debounce-window-ms 10000 --debounce-max-delay-ms 60000",
      ]),
    )
    .action((source: string, externalId: string, flags: UpsertFlags) =>
      schedulesUpsert(source, externalId, flags, io),
    );
}
