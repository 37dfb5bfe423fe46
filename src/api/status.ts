/**
 * `GET /v1/status`: what `punctual status` shows — the scheduler instances seen in the
 * last hour with their heartbeats (a running one whose ticks stopped for longer than
 * `heartbeatStaleMs` is marked stale; retention prunes it after `instancePruneAfterMs`),
 * the settings version each runs on (at most 100 of them, running first, with the count of
 * the window; `GET /v1/instances` pages every stored one), schedules by state, and the delivery gauges (due
 * backlog, overdue, claimed, in doubt, dead: the one count of `store/deliveries/counts.ts`,
 * the one `/metrics` and `GET /v1/overview` show). Read-only; uses the store's named queries.
 */
import type { Punctual } from "../app/punctual.js";
import { VERSION } from "../app/punctual.js";
import { readSettingsVersion } from "../store/observe.js";
import { countDeliveries } from "../store/deliveries/index.js";
import {
  countSchedulesByState,
  listInstancePage,
  statusInstances,
  type InstanceRow,
} from "../store/operations.js";
import { listInstancesQuerySchema } from "../contracts/index.js";
import { cursorPart, decodeCursor, encodeCursor, type CursorScope } from "../app/cursor.js";
import { parseInput } from "../app/input.js";
import { STATUS_INSTANCE_LIMIT, type StatusView } from "./schemas.js";

/** Instances stopped longer ago than this are left out of the status. */
const INSTANCE_WINDOW_MS = 3_600_000;
/** A delivery more than this late is "overdue" (OPS-3). */
const OVERDUE_MS = 15 * 60_000;

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);
const num = (v: number | string | null | undefined): number => Number(v ?? 0);

type InstanceView = StatusView["instances"][number];

/** An instance row as the API shows it; `stale` judged at `dbNow` (ms) against `staleMs`. */
function instanceView(r: InstanceRow, dbNow: number, staleMs: number): InstanceView {
  return {
    id: r.id,
    host: r.host,
    pid: Number(r.pid),
    version: r.version,
    role: r.role,
    startedAt: r.started_at.toISOString(),
    lastPassAt: iso(r.last_pass_at),
    lastTickAt: iso(r.last_tick_at),
    lastTickMs: r.last_tick_ms === null ? null : Number(r.last_tick_ms),
    stoppedAt: iso(r.stopped_at),
    stale:
      r.stopped_at === null &&
      dbNow - (r.last_tick_at ?? r.last_pass_at ?? r.started_at).getTime() > staleMs,
    settingsVersion: r.settings_version === null ? null : Number(r.settings_version),
  };
}

/** "Now" on the database clock as this process estimates it (OPS-9), ms. */
function dbNowMs(punctual: Punctual): number {
  return punctual.clock.sqlNow()?.getTime() ?? punctual.clock.now() + punctual.scheduler.skewMs;
}

/**
 * `GET /v1/instances` (API-3, OPS-3): one keyset page of every stored instance by
 * (started_at, id), `order` `asc` (oldest start first, the default) or `desc`, filtered by
 * `state` (`running`, `stopped`) and `role`.
 * @throws ValidationError a bad query field, or a `cursor` of another order or filter set.
 */
export async function readInstancePage(
  punctual: Punctual,
  query: unknown,
): Promise<{ items: InstanceView[]; nextCursor: string | null }> {
  const q = parseInput(listInstancesQuerySchema, query);
  const scope: CursorScope = { list: "instances", order: q.order, state: q.state, role: q.role };
  const [afterStartedAt, afterId] =
    q.cursor === undefined
      ? [null, null]
      : (decodeCursor(q.cursor, scope, [cursorPart.instant, cursorPart.text]) as [string, string]);
  const rows = await listInstancePage(punctual.db, {
    state: q.state ?? null,
    role: q.role ?? null,
    afterStartedAt,
    afterId,
    limit: q.limit,
    order: q.order,
  });
  const dbNow = dbNowMs(punctual);
  const staleMs = punctual.config.scheduler.heartbeatStaleMs;
  const last = rows.length === q.limit ? rows[rows.length - 1] : undefined;
  return {
    items: rows.map((r) => instanceView(r, dbNow, staleMs)),
    nextCursor: last ? encodeCursor([last.started_at_cursor, last.id], scope) : null,
  };
}

/** Collects the status of the cluster as this process's database sees it. */
export async function readStatus(punctual: Punctual): Promise<StatusView> {
  const now = punctual.clock.sqlNow();
  const [health, instances, g, counts, circuits, settings] = await Promise.all([
    punctual.health(),
    statusInstances(punctual.db, {
      now,
      windowMs: INSTANCE_WINDOW_MS,
      limit: STATUS_INSTANCE_LIMIT,
    }),
    countDeliveries(punctual.db, { now, overdueMs: OVERDUE_MS }),
    countSchedulesByState(punctual.db),
    punctual.listCircuits({}, { everyTenant: true }),
    readSettingsVersion(punctual.db),
  ]);
  // Ages on the database clock as this process estimates it (OPS-9).
  const dbNow = dbNowMs(punctual);
  const staleMs = punctual.config.scheduler.heartbeatStaleMs;
  return {
    version: VERSION,
    database: { engine: punctual.db.engine, description: punctual.db.description },
    ready: health.ready,
    checks: health.checks,
    lastPassAt: health.lastPassAt,
    settingsVersion: settings ? settings.version : null,
    instances: instances.map((r) => instanceView(r, dbNow, staleMs)),
    instancesTotal: instances.length === 0 ? 0 : num(instances[0]!.window_total),
    schedules: Object.fromEntries(counts.map((r) => [r.state, num(r.count)])),
    deliveries: {
      dueBacklog: g.due_backlog,
      overdue: g.overdue,
      claimed: g.claimed,
      inDoubt: g.in_doubt,
      dead: g.dead,
      oldestDueAt: iso(g.oldest_due_at),
    },
    circuits,
  };
}
