/**
 * Commands that work through the running server's HTTP API: `schedules …`,
 * `deliveries …`, `status`, and the HTTP form of `healthcheck`. Readable output by
 * default; `--json` prints the API's JSON unchanged.
 */
import { resolve } from "node:path";
import type {
  ImportRunView,
  ImportView,
  AttemptView,
  CreateScheduleInput,
  DeliveryView,
  ScheduleView,
} from "../contracts/index.js";
import type { CircuitView } from "../contracts/rate-limits.js";
import { ApiClient } from "./client.js";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "./errors.js";
import { cellText, jsonText, keyValues, table, type Column } from "./format.js";
import { localTokenPath, readLocalToken } from "./local-token.js";
import { reminderPolicy, schedulePolicy, type PolicyFlags } from "./policy-flags.js";
import { buildEditPatch, editNeedsSchedule, type EditPatchFlags } from "./edit-patch.js";
import type { Io } from "./run.js";

/** Flags every remote command takes. */
export interface RemoteFlags {
  url: string;
  json?: boolean;
}

/**
 * A client for `--url`, authenticated with PUNCTUAL_API_KEY when set (the operator's key
 * or a tenant's), acting for the tenant PUNCTUAL_TENANT names when set (operator's key only).
 */
export function clientFor(flags: RemoteFlags, env = process.env): ApiClient {
  return new ApiClient({
    url: flags.url,
    apiKey: env.PUNCTUAL_API_KEY,
    tenant: env.PUNCTUAL_TENANT,
  });
}

const scheduleColumns: Column<ScheduleView>[] = [
  { header: "ID", cell: (s) => s.id },
  { header: "STATE", cell: (s) => s.state },
  {
    header: "TITLE",
    cell: (s) => (s.title && s.title.length > 40 ? `${s.title.slice(0, 39)}…` : s.title),
  },
  { header: "SOURCE", cell: (s) => s.source },
  { header: "DTSTART", cell: (s) => s.dtstartLocal ?? s.dtstart },
  { header: "TZID", cell: (s) => s.tzid },
  { header: "RRULE", cell: (s) => s.rrule },
  { header: "REMINDERS", cell: (s) => s.reminders.map((r) => `${r.key}@${r.offset}`).join(",") },
  { header: "CREATED", cell: (s) => s.createdAt },
];

const deliveryColumns: Column<DeliveryView>[] = [
  { header: "ID", cell: (d) => d.id },
  { header: "STATE", cell: (d) => d.state },
  { header: "DUE", cell: (d) => d.dueAt },
  { header: "DEFERRED", cell: (d) => d.deferredUntil },
  { header: "SCHEDULE", cell: (d) => d.scheduleId },
  { header: "REMINDER", cell: (d) => d.reminderKey },
  { header: "CHANNEL", cell: (d) => d.channel },
  { header: "ATTEMPT", cell: (d) => `${d.attempt}/${d.maxAttempts}` },
  { header: "REASON", cell: (d) => d.reason ?? d.lastError },
];

/** A schedule as a key–value block plus its reminders. */
export function scheduleText(s: ScheduleView): string {
  return (
    keyValues([
      ["id", s.id],
      ["title", s.title],
      ["source", s.source === null ? null : `${s.source} / ${cellText(s.externalId)}`],
      ["state", s.invalidReason ? `${s.state} (${s.invalidReason})` : s.state],
      ["version", s.version],
      [
        "dtstart",
        s.dtstartLocal === null
          ? s.dtstart
          : `${s.dtstartLocal} ${s.tzid}${s.dtstart === s.dtstartLocal ? "" : ` (given as ${s.dtstart})`}`,
      ],
      ["tzid", s.tzid],
      ["rrule", s.rrule],
      ["rdate", s.rdate.join(", ")],
      ["exdate", s.exdate.join(", ")],
      ["endsAt", s.endsAt],
      ["expiresAt", s.expiresAt],
      ["dst", `gap ${s.dst.gap}, overlap ${s.dst.overlap}`],
      ["misfire", `${s.misfire} (grace ${s.graceMs} ms)`],
      [
        "catchUp",
        s.catchUp
          ? `window ${s.catchUp.windowMs ?? "none"} ms, pace ${s.catchUp.paceMs ?? 0} ms`
          : null,
      ],
      ["perpetual", s.perpetual],
      ["payload", s.payload],
      ["createdAt", s.createdAt],
      ["updatedAt", s.updatedAt],
      ["cancelledAt", s.cancelledAt],
    ]) +
    "reminders:\n" +
    table(
      s.reminders,
      [
        { header: "KEY", cell: (r) => r.key },
        { header: "OFFSET", cell: (r) => r.offset },
        { header: "CHANNEL", cell: (r) => r.channel },
        { header: "TARGET", cell: (r) => r.target },
        { header: "DELIVERY", cell: (r) => r.delivery ?? "channel default" },
        { header: "MAX ATTEMPTS", cell: (r) => r.maxAttempts },
        {
          header: "QUIET HOURS",
          cell: (r) =>
            r.quietHours
              ? `${r.quietHours.start}-${r.quietHours.end} ${r.quietHours.tzid}` +
                (r.quietHours.days ? ` ${r.quietHours.days.join(",")}` : "") +
                (r.priority === "critical" ? " (bypassed: critical)" : "")
              : r.priority === "critical"
                ? "critical"
                : null,
        },
      ],
      "  ",
    )
  );
}

/**
 * `punctual deliveries show` as text: one field a line, the attempts counted per round
 * ("1 of 3, round 2 (0 failed)" after a redrive, DEL-12), then the attempt history.
 */
export function deliveryText(d: DeliveryView & { attempts?: AttemptView[] }): string {
  const text = keyValues([
    ["id", d.id],
    ["deliveryKey", d.deliveryKey],
    ["state", d.state],
    ["scheduleId", d.scheduleId],
    ["reminderKey", d.reminderKey],
    ["channel", d.channel],
    ["occurrenceAt", d.occurrenceAt],
    ["dueAt", d.dueAt],
    ["runAt", d.runAt],
    [
      "attempt",
      `${d.attempt} of ${d.maxAttempts}` +
        (d.round > 1 ? `, round ${d.round}` : "") +
        ` (${d.failures} failed` +
        (d.deferrals ? `, ${d.deferrals} deferred by Retry-After)` : ")"),
    ],
    ["late", d.late],
    ["deferredUntil", d.deferredUntil ? `${d.deferredUntil} (${d.deferredReason})` : null],
    ["lease", d.leaseOwner ? `${d.leaseOwner} until ${cellText(d.leaseExpiresAt)}` : null],
    ["sentAt", d.sentAt],
    ["finishedAt", d.finishedAt],
    ["reason", d.reason],
    ["lastError", d.lastError],
  ]);
  if (!d.attempts) return text;
  return (
    text +
    "attempts:\n" +
    table(
      d.attempts,
      [
        { header: "#", cell: (a) => a.attempt },
        { header: "STARTED", cell: (a) => a.startedAt },
        { header: "ENDED", cell: (a) => a.endedAt },
        { header: "OUTCOME", cell: (a) => a.outcome },
        { header: "STATUS", cell: (a) => a.status },
        { header: "WORKER", cell: (a) => a.worker },
        { header: "ERROR", cell: (a) => a.error },
      ],
      "  ",
    )
  );
}

/** `schedules add` flags. */
export interface AddFlags extends RemoteFlags, PolicyFlags {
  dtstart: string;
  tzid: string;
  rrule?: string;
  rdate: string[];
  exdate: string[];
  endsAt?: string;
  offset: string[];
  key: string[];
  channel: string;
  targetUrl?: string;
  secret?: string;
  /** E-mail recipients (`--to`, repeatable), with `--channel email`. */
  to?: string[];
  /** E-mail subject (`--subject`), with `--channel email`. */
  subject?: string;
  payload?: string;
  idempotencyKey?: string;
  misfire?: "skip" | "latest" | "all";
  perpetual?: boolean;
  /** What you call the schedule, shown in lists. */
  title?: string;
}

/** Channels whose target is a URL given with `--target-url` (webhook, Slack, Discord). */
const URL_CHANNELS = new Set(["webhook", "slack", "discord"]);

/**
 * Builds the `POST /v1/schedules` body from `schedules add` flags.
 * @throws CliError naming the flag: bad `--payload` JSON, more `--key` than `--offset`,
 *   no `--target-url` for a URL channel, `--secret` with a channel other than webhook,
 *   no `--to` with `--channel email`, `--to` / `--subject` with another channel.
 */
export function createBodyFromFlags(flags: AddFlags): CreateScheduleInput {
  let payload: unknown;
  if (flags.payload !== undefined) {
    try {
      payload = JSON.parse(flags.payload);
    } catch {
      throw new CliError(`--payload is not valid JSON: ${flags.payload.slice(0, 80)}`, EXIT_USAGE);
    }
  }
  if (flags.key.length > flags.offset.length) {
    throw new CliError(
      `${flags.key.length} --key values for ${flags.offset.length} --offset values: give one key per offset.`,
      EXIT_USAGE,
    );
  }
  const offsets = flags.offset.length > 0 ? flags.offset : ["PT0S"];
  if (URL_CHANNELS.has(flags.channel) && flags.targetUrl === undefined) {
    throw new CliError(`--target-url is required with --channel ${flags.channel}.`, EXIT_USAGE);
  }
  const to = flags.to ?? [];
  if (flags.channel === "email" && to.length === 0) {
    throw new CliError("--to is required with --channel email (repeatable).", EXIT_USAGE);
  }
  if (flags.channel !== "email" && (to.length > 0 || flags.subject !== undefined)) {
    throw new CliError(
      `--to and --subject apply to --channel email only (got ${flags.channel}).`,
      EXIT_USAGE,
    );
  }
  if (flags.secret !== undefined && flags.channel !== "webhook") {
    throw new CliError(
      `--secret applies to --channel webhook only (got ${flags.channel}).`,
      EXIT_USAGE,
    );
  }
  const policy = reminderPolicy(flags, flags.tzid);
  const target = URL_CHANNELS.has(flags.channel)
    ? {
        url: flags.targetUrl,
        ...(flags.secret !== undefined ? { secret: flags.secret } : {}),
      }
    : flags.channel === "email"
      ? {
          to: to.length === 1 ? to[0] : to,
          ...(flags.subject !== undefined ? { subject: flags.subject } : {}),
        }
      : undefined;
  return {
    dtstart: flags.dtstart,
    tzid: flags.tzid,
    ...(flags.rrule ? { rrule: flags.rrule } : {}),
    ...(flags.rdate.length ? { rdate: flags.rdate } : {}),
    ...(flags.exdate.length ? { exdate: flags.exdate } : {}),
    ...(flags.endsAt ? { endsAt: flags.endsAt } : {}),
    ...(flags.misfire ? { misfire: flags.misfire } : {}),
    ...(flags.perpetual ? { perpetual: true } : {}),
    ...(payload !== undefined ? { payload } : {}),
    ...(flags.title !== undefined ? { title: flags.title } : {}),
    ...schedulePolicy(flags),
    reminders: offsets.map((offset, i) => ({
      key: flags.key[i] ?? `r${i + 1}`,
      offset,
      channel: flags.channel,
      ...(target ? { target } : {}),
      ...policy,
    })),
  };
}

/** `schedules add`. */
export async function schedulesAdd(flags: AddFlags, io: Io): Promise<void> {
  const client = clientFor(flags);
  const reply = await client.request<ScheduleView & { warnings?: string[] }>(
    "POST",
    "/v1/schedules",
    {
      body: createBodyFromFlags(flags),
      ...(flags.idempotencyKey ? { headers: { "Idempotency-Key": flags.idempotencyKey } } : {}),
    },
  );
  const s = reply.body;
  if (flags.json) return io.out(jsonText(s));
  const replayed = reply.headers.get("idempotent-replayed") === "true";
  io.out(
    replayed
      ? `Schedule ${s.id} already existed for this Idempotency-Key; nothing new was created.\n`
      : `Created schedule ${s.id}.\n`,
  );
  for (const warning of s.warnings ?? []) io.err(`warning: ${warning}\n`);
  io.out(scheduleText(s));
}

/** `schedules edit` flags: only the fields given are changed (see schedule-edit.ts). */
export interface EditFlags extends RemoteFlags, EditPatchFlags {
  ifVersion?: number;
}

/**
 * `schedules edit <id>`: PATCH with If-Match (DEL-9). Flags that change reminders or
 * catch-up read the schedule first and send If-Match of the version read (or of
 * `--if-version`), so a concurrent edit is refused rather than overwritten.
 */
export async function schedulesEdit(id: string, flags: EditFlags, io: Io): Promise<void> {
  const client = clientFor(flags);
  const path = `/v1/schedules/${encodeURIComponent(id)}`;
  let current: ScheduleView | null = null;
  if (editNeedsSchedule(flags)) current = await client.get<ScheduleView>(path);
  const patch = buildEditPatch(flags, current);
  const ifVersion = flags.ifVersion ?? current?.version;
  const reply = await client.request<
    ScheduleView & {
      realigned: { deleted: number; moved: number; created: number };
      warnings?: string[];
    }
  >("PATCH", path, {
    body: patch,
    ...(ifVersion !== undefined ? { headers: { "If-Match": `"${ifVersion}"` } } : {}),
  });
  const s = reply.body;
  if (flags.json) return io.out(jsonText(s));
  io.out(
    `Schedule ${s.id} is at version ${s.version}; waiting deliveries: ${s.realigned.deleted} removed, ${s.realigned.created} added, ${s.realigned.moved} moved.\n`,
  );
  for (const warning of s.warnings ?? []) io.err(`warning: ${warning}\n`);
}

/** Paging flags of a list command (API-3). */
export interface PageFlags {
  limit?: number;
  cursor?: string;
  order?: string;
  /** Follow `nextCursor` to the end, printing each page as it arrives. */
  all?: boolean;
}

/**
 * Prints one page of a list endpoint, or with `--all` every page, following `nextCursor`
 * and printing as it goes: one table (its header once), or with `--json` one JSON object
 * per line (JSON Lines). Without `--all`, `--json` prints the page as the API answers it.
 */
export async function printPages<T>(
  flags: RemoteFlags & PageFlags,
  io: Io,
  path: string,
  query: Record<string, string | number | undefined>,
  columns: Parameters<typeof table<T>>[1],
): Promise<void> {
  const client = clientFor(flags);
  let cursor = flags.cursor;
  for (let first = true; ; first = false) {
    const page = await client.get<{ items: T[]; nextCursor: string | null }>(path, {
      ...query,
      limit: flags.limit,
      order: flags.order,
      cursor,
    });
    if (!flags.all) {
      if (flags.json) return io.out(jsonText(page));
      io.out(table(page.items, columns));
      if (page.nextCursor) io.out(`more: --cursor ${page.nextCursor}\n`);
      return;
    }
    if (flags.json) {
      for (const item of page.items) io.out(`${JSON.stringify(item)}\n`);
    } else if (first || page.items.length > 0) {
      const text = table(page.items, columns);
      io.out(first ? text : text.slice(text.indexOf("\n") + 1));
    }
    if (!page.nextCursor) return;
    cursor = page.nextCursor;
  }
}

/** `schedules list`. */
export async function schedulesList(
  flags: RemoteFlags & PageFlags & { state?: string; source?: string; search?: string },
  io: Io,
): Promise<void> {
  await printPages<ScheduleView>(
    flags,
    io,
    "/v1/schedules",
    { state: flags.state, source: flags.source, q: flags.search },
    scheduleColumns,
  );
}

/** `instances`: every stored scheduler instance, paged (API-3). */
export async function instancesList(
  flags: RemoteFlags & PageFlags & { state?: string; role?: string },
  io: Io,
): Promise<void> {
  await printPages<StatusBody["instances"][number] & { startedAt: string }>(
    flags,
    io,
    "/v1/instances",
    { state: flags.state, role: flags.role },
    [
      { header: "INSTANCE", cell: (i) => i.id },
      { header: "HOST", cell: (i) => i.host },
      { header: "PID", cell: (i) => i.pid },
      { header: "ROLE", cell: (i) => i.role },
      { header: "STATE", cell: instanceState },
      { header: "VERSION", cell: (i) => i.version },
      { header: "STARTED", cell: (i) => i.startedAt },
      { header: "LAST PASS", cell: (i) => i.lastPassAt },
      { header: "STOPPED", cell: (i) => i.stoppedAt },
    ],
  );
}

/** `imports`: the calendar imports written, paged (API-3). */
export async function importsList(
  flags: RemoteFlags & PageFlags & { source?: string; from?: string; to?: string },
  io: Io,
): Promise<void> {
  await printPages<ImportRunView>(
    flags,
    io,
    "/v1/imports",
    { source: flags.source, importedFrom: flags.from, importedTo: flags.to },
    [
      { header: "ID", cell: (i) => i.id },
      { header: "SOURCE", cell: (i) => i.source },
      { header: "STATUS", cell: (i) => i.status },
      { header: "IMPORTED", cell: (i) => i.importedAt },
      { header: "EVENTS", cell: (i) => i.events },
      { header: "CREATED", cell: (i) => i.created },
      { header: "UPDATED", cell: (i) => i.updated },
      { header: "UNCHANGED", cell: (i) => i.unchanged },
      { header: "CANCELLED", cell: (i) => i.cancelled },
      { header: "SKIPPED", cell: (i) => i.skipped },
    ],
  );
}

/**
 * `imports ID`: one import, its status and progress per chunk, and once read its skipped
 * events and warnings (API-5).
 */
export async function importShow(id: string, flags: RemoteFlags, io: Io): Promise<void> {
  const v = await clientFor(flags).get<ImportView>(`/v1/imports/${encodeURIComponent(id)}`);
  if (flags.json) return io.out(jsonText(v));
  const p = v.progress;
  let text =
    `import ${v.id} of source "${v.source}": ${v.status}` +
    (v.error === null ? "" : ` (${v.error})`) +
    `\n  started ${v.startedAt ?? "-"}, ${v.status === "running" ? "running" : `ended ${v.importedAt}`}\n` +
    `  ${v.events} events read; chunk ${p.chunksDone}/${p.chunksTotal}, ` +
    `${p.changesDone}/${p.changesTotal} changes written\n` +
    `  ${v.created} created, ${v.updated} updated, ${v.unchanged} unchanged, ` +
    `${v.cancelled} cancelled, ${v.skipped} skipped, ${v.warnings} warnings\n`;
  for (const e of v.details?.skipped ?? []) {
    text += `  skipped ${e.uid ?? "(no UID)"} (line ${e.line ?? "?"}): ${e.reason}\n`;
  }
  for (const w of v.details?.warnings ?? []) text += `  warning: ${w}\n`;
  io.out(text);
}

/** `schedules show <id>`. */
export async function schedulesShow(id: string, flags: RemoteFlags, io: Io): Promise<void> {
  const s = await clientFor(flags).get<ScheduleView>(`/v1/schedules/${encodeURIComponent(id)}`);
  io.out(flags.json ? jsonText(s) : scheduleText(s));
}

/** `schedules cancel|pause|resume <id>`. */
export async function schedulesTransition(
  action: "cancel" | "pause" | "resume",
  id: string,
  flags: RemoteFlags,
  io: Io,
): Promise<void> {
  const client = clientFor(flags);
  const path = `/v1/schedules/${encodeURIComponent(id)}`;
  const s =
    action === "cancel"
      ? await client.delete<ScheduleView & { cancelledDeliveries: number }>(path)
      : await client.post<ScheduleView>(`${path}/${action}`);
  if (flags.json) return io.out(jsonText(s));
  if ("cancelledDeliveries" in s) {
    io.out(
      `Schedule ${s.id} is ${s.state}; ${s.cancelledDeliveries} waiting deliver${s.cancelledDeliveries === 1 ? "y" : "ies"} cancelled.\n`,
    );
  } else {
    io.out(`Schedule ${s.id} is ${s.state}.\n`);
  }
}

/** The flags of `deliveries list`: the filters and the page. */
export type DeliveriesListFlags = RemoteFlags &
  PageFlags & {
    scheduleId?: string;
    state?: string;
    source?: string;
    channel?: string;
    dueFrom?: string;
    dueTo?: string;
    after?: number;
  };

/** `deliveries list`. */
export async function deliveriesList(flags: DeliveriesListFlags, io: Io): Promise<void> {
  await printPages<DeliveryView>(
    flags,
    io,
    "/v1/deliveries",
    {
      scheduleId: flags.scheduleId,
      state: flags.state,
      source: flags.source,
      channel: flags.channel,
      dueFrom: flags.dueFrom,
      dueTo: flags.dueTo,
      after: flags.after,
    },
    deliveryColumns,
  );
}

/** `deliveries show <id>`: the delivery and its attempts. */
export async function deliveriesShow(id: string, flags: RemoteFlags, io: Io): Promise<void> {
  const d = await clientFor(flags).get<DeliveryView & { attempts: AttemptView[] }>(
    `/v1/deliveries/${encodeURIComponent(id)}`,
  );
  io.out(flags.json ? jsonText(d) : deliveryText(d));
}

/** `deliveries redrive <id>` and `deliveries resolve <id> --outcome sent|dead`. */
export async function deliveriesAct(
  id: string,
  flags: RemoteFlags & { outcome?: "sent" | "dead" },
  io: Io,
): Promise<void> {
  const client = clientFor(flags);
  const path = `/v1/deliveries/${encodeURIComponent(id)}`;
  const d = flags.outcome
    ? await client.post<DeliveryView>(`${path}/resolve`, { outcome: flags.outcome })
    : await client.post<DeliveryView>(`${path}/redrive`);
  if (flags.json) return io.out(jsonText(d));
  io.out(
    flags.outcome
      ? `Delivery ${d.id} resolved as ${d.state}.\n`
      : `Delivery ${d.id} is ${d.state} again and will be sent with the same key (${d.deliveryKey}).\n`,
  );
}

interface StatusBody {
  /** CH-7 (absent from servers before it). */
  circuits?: CircuitView[];
  version: string;
  database: { engine: string; description: string };
  ready: boolean;
  checks: { database: boolean; schema: boolean; heartbeat: boolean };
  lastPassAt: string | null;
  settingsVersion?: number | null;
  /** How many instances the window holds (absent from older servers). */
  instancesTotal?: number;
  instances: Array<{
    id: string;
    role: string;
    host: string;
    pid: number;
    version: string;
    lastPassAt: string | null;
    lastTickAt?: string | null;
    lastTickMs: number | null;
    stoppedAt: string | null;
    stale?: boolean;
    settingsVersion?: number | null;
  }>;
  schedules: Record<string, number>;
  deliveries: {
    dueBacklog: number;
    overdue: number;
    claimed: number;
    inDoubt: number;
    dead: number;
    oldestDueAt: string | null;
  };
}

/** An instance's state column: `stopped`, `STALE` (no tick within the heartbeat limit) or `running`. */
function instanceState(i: StatusBody["instances"][number]): string {
  if (i.stoppedAt) return "stopped";
  return i.stale ? "STALE" : "running";
}

/** A pass duration in ms as it is: one decimal under 10 ms (a fast pass is not `0`). */
function tickMs(ms: number | null): string | null {
  if (ms === null) return null;
  return ms < 10 ? ms.toFixed(1) : String(Math.round(ms));
}

/** `punctual status`: a summary of `GET /v1/status`. */
export async function status(flags: RemoteFlags, io: Io): Promise<void> {
  const s = await clientFor(flags).get<StatusBody>("/v1/status");
  if (flags.json) return io.out(jsonText(s));
  const ok = (b: boolean) => (b ? "ok" : "FAILING");
  const d = s.deliveries;
  io.out(
    keyValues([
      ["server", `punctual ${s.version} at ${flags.url}`],
      ["database", `${s.database.description} (${s.database.engine})`],
      [
        "ready",
        `${s.ready ? "yes" : "NO"} (database ${ok(s.checks.database)}, schema ${ok(s.checks.schema)}, heartbeat ${ok(s.checks.heartbeat)})`,
      ],
      ["last pass", s.lastPassAt],
      ["settings", s.settingsVersion == null ? null : `version ${s.settingsVersion}`],
      [
        "schedules",
        Object.entries(s.schedules)
          .map(([state, n]) => `${state} ${n}`)
          .join(", ") || "none",
      ],
      [
        "deliveries",
        `due backlog ${d.dueBacklog}, overdue ${d.overdue}, claimed ${d.claimed}, in doubt ${d.inDoubt}, dead ${d.dead}`,
      ],
      ["oldest due", d.oldestDueAt],
    ]) +
      (s.instancesTotal !== undefined && s.instancesTotal > s.instances.length
        ? `instances (${s.instances.length} of ${s.instancesTotal}; all: punctual instances):\n`
        : "instances:\n"),
  );
  io.out(
    table(
      s.instances,
      [
        { header: "INSTANCE", cell: (i) => i.id },
        { header: "ROLE", cell: (i) => i.role },
        { header: "STATE", cell: instanceState },
        { header: "VERSION", cell: (i) => i.version },
        { header: "SETTINGS", cell: (i) => i.settingsVersion ?? null },
        { header: "LAST PASS", cell: (i) => i.lastPassAt },
        { header: "TICK MS", cell: (i) => tickMs(i.lastTickMs) },
        { header: "STOPPED", cell: (i) => i.stoppedAt },
      ],
      "  ",
    ),
  );
  const circuits = s.circuits ?? [];
  if (circuits.length > 0) {
    io.out("circuits:\n");
    io.out(
      table(
        circuits,
        [
          { header: "TENANT", cell: (c) => c.tenant },
          { header: "HOST", cell: (c) => c.host },
          { header: "STATE", cell: (c) => c.state },
          { header: "FAILURES", cell: (c) => c.failures },
          { header: "NEXT PROBE", cell: (c) => c.retryAt },
        ],
        "  ",
      ),
    );
  }
  if (s.instances.some((i) => i.stale)) {
    io.out(
      "Stale instances started no tick for longer than the heartbeat limit (killed or hung); retention prunes them after PUNCTUAL_INSTANCE_PRUNE_AFTER_MS.\n",
    );
  }
  if (d.inDoubt > 0 || d.dead > 0) {
    io.out(
      "Inspect with `punctual deliveries list --state in_doubt` (or dead); redrive or resolve each.\n",
    );
  }
}

/**
 * `punctual healthcheck` over HTTP: exit 0 when `/readyz` says ready, 1 when not
 * ready or unreachable.
 * @returns the exit code.
 */
export async function healthcheckHttp(flags: RemoteFlags, io: Io): Promise<number> {
  let reply;
  try {
    reply = await new ApiClient({ url: flags.url, timeoutMs: 10_000 }).request<{
      status: string;
      detail?: string[];
      lastPassAt?: string | null;
    }>("GET", "/readyz", { allowError: true });
  } catch (err) {
    io.err(`unhealthy: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT_FAILURE;
  }
  if (flags.json) io.out(jsonText(reply.body));
  if (reply.status === 200) {
    if (!flags.json) io.out(`healthy: ready (last pass ${cellText(reply.body.lastPassAt)})\n`);
    return 0;
  }
  const detail = typeof reply.body === "object" ? (reply.body.detail ?? []).join("; ") : "";
  io.err(`unhealthy: /readyz answered ${reply.status}${detail ? `: ${detail}` : ""}\n`);
  return EXIT_FAILURE;
}

/**
 * `punctual webhook-secret`: the default signing secret of the running server (API-7).
 * With PUNCTUAL_API_KEY set the key authenticates, from anywhere. Without it, the local
 * token that `punctual start` wrote in its data folder (`--data-dir`) does: so only a
 * user of the server's machine who can read that folder gets the secret.
 * @throws CliError when there is neither a key nor a token file.
 */
export async function webhookSecret(
  flags: RemoteFlags & { dataDir: string },
  io: Io,
  env = process.env,
): Promise<void> {
  let client = clientFor(flags, env);
  if (!env.PUNCTUAL_API_KEY) {
    const token = await readLocalToken(flags.dataDir);
    if (token === null) {
      throw new CliError(
        `No PUNCTUAL_API_KEY and no local token in ${resolve(localTokenPath(flags.dataDir))}. ` +
          "Run this on the machine where `punctual start` runs, with its --data-dir / PUNCTUAL_DATA_DIR " +
          "(a relative folder is read from the current directory, as `start` made it from its own), " +
          "or set PUNCTUAL_API_KEY to the server's key.",
        EXIT_FAILURE,
      );
    }
    client = new ApiClient({ url: flags.url, apiKey: token });
  }
  const s = await client.get<{ secret: string; source: string }>("/v1/webhook-secret");
  if (flags.json) return io.out(jsonText(s));
  io.out(`${s.secret}\n`);
  io.err(
    s.source === "generated"
      ? "(generated once and kept in the database; set PUNCTUAL_WEBHOOK_SECRET to choose your own)\n"
      : "(from PUNCTUAL_WEBHOOK_SECRET)\n",
  );
}
