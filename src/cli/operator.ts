/**
 * Operator commands (API-3, API-9), through the running server's HTTP API:
 * `schedules trigger`, `schedules backfill`, `schedules purge`, `schedules upsert`, and the
 * filtered forms of `deliveries redrive` / `deliveries resolve` (a dry run unless `--yes`).
 */
import { readFileSync } from "node:fs";
import type { DeliveryView, ScheduleView } from "../contracts/index.js";
import { clientFor, type RemoteFlags } from "./remote.js";
import { CliError, EXIT_FAILURE } from "./errors.js";
import { jsonText, keyValues, table, type Column } from "./format.js";
import type { Io } from "./run.js";

const sampleColumns: Column<DeliveryView>[] = [
  { header: "ID", cell: (d) => d.id },
  { header: "STATE", cell: (d) => d.state },
  { header: "REASON", cell: (d) => d.reason },
  { header: "DUE", cell: (d) => d.dueAt },
  { header: "SCHEDULE", cell: (d) => d.scheduleId },
  { header: "CHANNEL", cell: (d) => d.channel },
  { header: "KEY", cell: (d) => d.deliveryKey },
];

/** `schedules trigger <id>`: one extra delivery now (API-9). */
export async function schedulesTrigger(
  id: string,
  flags: RemoteFlags & { reminder?: string; idempotencyKey?: string },
  io: Io,
): Promise<void> {
  const reply = await clientFor(flags).request<{
    triggerId: string;
    created: boolean;
    deliveries: DeliveryView[];
  }>("POST", `/v1/schedules/${encodeURIComponent(id)}/trigger`, {
    body: flags.reminder ? { reminderKey: flags.reminder } : {},
    ...(flags.idempotencyKey ? { headers: { "idempotency-key": flags.idempotencyKey } } : {}),
  });
  const r = reply.body;
  if (flags.json) return io.out(jsonText(r));
  io.out(
    r.created
      ? `Triggered schedule ${id} (trigger ${r.triggerId}): ${r.deliveries.length} deliver${r.deliveries.length === 1 ? "y" : "ies"} due now.\n`
      : `Trigger ${r.triggerId} was already used: nothing new was created.\n`,
  );
  io.out(table(r.deliveries, sampleColumns));
}

interface BackfillReply {
  dryRun: boolean;
  created: number;
  existing: number;
  existingByState: Record<string, number>;
  items: Array<{
    deliveryKey: string;
    reminderKey: string;
    occurrenceAt: string;
    dueAt: string;
    existing: string | null;
  }>;
}

/** `schedules backfill <id> --from --to [--dry-run]` (API-9). */
export async function schedulesBackfill(
  id: string,
  flags: RemoteFlags & { from: string; to: string; dryRun?: boolean; reminder?: string },
  io: Io,
): Promise<void> {
  const r = await clientFor(flags).post<BackfillReply>(
    `/v1/schedules/${encodeURIComponent(id)}/backfill`,
    {
      from: flags.from,
      to: flags.to,
      dryRun: Boolean(flags.dryRun),
      ...(flags.reminder ? { reminderKey: flags.reminder } : {}),
    },
  );
  if (flags.json) return io.out(jsonText(r));
  const kept = Object.entries(r.existingByState)
    .map(([state, n]) => `${state} ${n}`)
    .join(", ");
  io.out(
    `${r.dryRun ? "Dry run: would create" : "Created"} ${r.created} deliver${r.created === 1 ? "y" : "ies"}; ${r.existing} occurrence${r.existing === 1 ? "" : "s"} already had one${kept ? ` (${kept})` : ""}, kept.\n`,
  );
  io.out(
    table(r.items, [
      { header: "OCCURRENCE", cell: (i) => i.occurrenceAt },
      { header: "REMINDER", cell: (i) => i.reminderKey },
      { header: "DUE", cell: (i) => i.dueAt },
      {
        header: "EXISTING",
        cell: (i) => i.existing ?? (r.dryRun ? "(would create)" : "(created)"),
      },
    ]),
  );
}

/** Filter flags of the bulk `deliveries redrive` / `resolve`. */
export interface BulkFlags extends RemoteFlags {
  state?: "dead" | "in_doubt";
  reason?: string;
  channel?: string;
  scheduleId?: string;
  source?: string;
  from?: string;
  to?: string;
  limit?: number;
  yes?: boolean;
  outcome?: "sent" | "dead";
}

interface BulkReply {
  dryRun: boolean;
  count: number;
  remaining: number;
  sample: DeliveryView[];
}

/**
 * `deliveries redrive|resolve` without an id: every delivery the filters match. A dry
 * run (count and sample) unless `--yes`.
 */
export async function deliveriesBulk(
  action: "redrive" | "resolve",
  flags: BulkFlags,
  io: Io,
): Promise<void> {
  if (action === "resolve" && !flags.outcome) {
    throw new CliError("deliveries resolve needs --outcome sent|dead.", EXIT_FAILURE);
  }
  const body = {
    ...(flags.outcome ? { outcome: flags.outcome } : {}),
    ...(flags.state ? { state: flags.state } : {}),
    ...(flags.reason ? { reason: flags.reason } : {}),
    ...(flags.channel ? { channel: flags.channel } : {}),
    ...(flags.scheduleId ? { scheduleId: flags.scheduleId } : {}),
    ...(flags.source ? { source: flags.source } : {}),
    ...(flags.from ? { from: flags.from } : {}),
    ...(flags.to ? { to: flags.to } : {}),
    ...(flags.limit ? { limit: flags.limit } : {}),
    dryRun: !flags.yes,
  };
  const r = await clientFor(flags).post<BulkReply>(`/v1/deliveries/${action}`, body);
  if (flags.json) return io.out(jsonText(r));
  const verb = action === "redrive" ? "redriven" : `resolved as ${flags.outcome}`;
  if (r.dryRun) {
    io.out(
      `Dry run: ${r.count} deliver${r.count === 1 ? "y" : "ies"} would be ${verb}${r.count > r.sample.length ? ` (first ${r.sample.length} shown)` : ""}. Run again with --yes to do it.\n`,
    );
  } else {
    io.out(
      `${r.count} deliver${r.count === 1 ? "y" : "ies"} ${verb}${action === "redrive" ? ", each with its delivery key" : ""}.${r.remaining > 0 ? ` ${r.remaining} more match: run again.` : ""}\n`,
    );
  }
  io.out(table(r.sample, sampleColumns));
}

/** `schedules purge <id> --yes`: hard delete (API-9). */
export async function schedulesPurge(
  id: string,
  flags: RemoteFlags & { yes?: boolean },
  io: Io,
): Promise<void> {
  if (!flags.yes) {
    throw new CliError(
      `schedules purge deletes schedule ${id} with its deliveries and attempts for good; add --yes to do it (punctual schedules cancel keeps it).`,
      EXIT_FAILURE,
    );
  }
  const r = await clientFor(flags).request<{
    id: string;
    purged: { schedules: number; deliveries: number; attempts: number };
  }>("DELETE", `/v1/schedules/${encodeURIComponent(id)}`, { query: { purge: "true" } });
  if (flags.json) return io.out(jsonText(r.body));
  const p = r.body.purged;
  io.out(
    `Schedule ${id} purged: ${p.deliveries} deliver${p.deliveries === 1 ? "y" : "ies"} and ${p.attempts} attempt${p.attempts === 1 ? "" : "s"} deleted.\n`,
  );
}

/** Flags of {@link schedulesUpsert}. */
export type UpsertFlags = RemoteFlags & {
  file: string;
  /** DEL-18: the body's `debounce.windowMs`. */
  debounceWindowMs?: number;
  /** DEL-18: the body's `debounce.maxDelayMs`; default six windows. */
  debounceMaxDelayMs?: number;
};

/**
 * `schedules upsert|put <source> <external-id> --file body.json [--debounce-window-ms ms
 * [--debounce-max-delay-ms ms]]` (API-9, DEL-18).
 * @throws CliError an unreadable or non-JSON file; `--debounce-max-delay-ms` without
 *   `--debounce-window-ms`.
 */
export async function schedulesUpsert(
  source: string,
  externalId: string,
  flags: UpsertFlags,
  io: Io,
): Promise<void> {
  let body: unknown;
  try {
    body = JSON.parse(
      flags.file === "-" ? readFileSync(0, "utf8") : readFileSync(flags.file, "utf8"),
    );
  } catch (err) {
    throw new CliError(
      `--file ${flags.file}: not a readable JSON file (${err instanceof Error ? err.message : String(err)}).`,
      EXIT_FAILURE,
    );
  }
  if (flags.debounceMaxDelayMs !== undefined && flags.debounceWindowMs === undefined) {
    throw new CliError("--debounce-max-delay-ms needs --debounce-window-ms.", EXIT_FAILURE);
  }
  if (flags.debounceWindowMs !== undefined && typeof body === "object" && body !== null) {
    // DEL-18: the flags set the body's `debounce`.
    body = {
      ...body,
      debounce: {
        windowMs: flags.debounceWindowMs,
        maxDelayMs: flags.debounceMaxDelayMs ?? flags.debounceWindowMs * 6,
      },
    };
  }
  const r = await clientFor(flags).request<ScheduleView & { changed: boolean }>(
    "PUT",
    `/v1/schedules/by-external-id/${encodeURIComponent(source)}/${encodeURIComponent(externalId)}`,
    { body },
  );
  if (flags.json) return io.out(jsonText(r.body));
  const s = r.body;
  const what = r.status === 201 ? "created" : s.changed ? "updated" : "unchanged";
  io.out(
    keyValues([
      ["schedule", `${s.id} (${what})`],
      ["external id", `${source}/${externalId}`],
      ["version", s.version],
      ["state", s.state],
    ]),
  );
}
