/**
 * `GET /v1/status`: what `punctual status` shows — the scheduler instances seen in the
 * last hour with their heartbeats, schedules by state, and the delivery gauges (due
 * backlog, overdue, claimed, in doubt, dead). Read-only; uses the store's named queries.
 */
import type { Punctual } from "../app/punctual.js";
import { VERSION } from "../app/punctual.js";
import { GAUGES_SQL, LIST_INSTANCES_SQL, SCHEDULE_COUNTS_SQL } from "../store/operations.js";
import type { StatusView } from "./schemas.js";

/** Instances stopped longer ago than this are left out of the status. */
const INSTANCE_WINDOW_MS = 3_600_000;
/** A delivery more than this late is "overdue" (OPS-3). */
const OVERDUE_MS = 15 * 60_000;

interface InstanceRow {
  id: string;
  host: string;
  pid: number;
  version: string;
  role: string;
  started_at: Date;
  last_pass_at: Date | null;
  last_tick_ms: number | null;
  stopped_at: Date | null;
}

interface GaugeRow {
  due_backlog: number | string | null;
  overdue: number | string | null;
  in_doubt: number | string | null;
  dead: number | string | null;
  claimed: number | string | null;
  oldest_due: Date | null;
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);
const num = (v: number | string | null | undefined): number => Number(v ?? 0);

/** Collects the status of the cluster as this process's database sees it. */
export async function readStatus(punctual: Punctual): Promise<StatusView> {
  const now = punctual.clock.sqlNow();
  const [health, instances, gauges, counts] = await Promise.all([
    punctual.health(),
    punctual.db.query<InstanceRow>(LIST_INSTANCES_SQL, [now, INSTANCE_WINDOW_MS]),
    punctual.db.query<GaugeRow>(GAUGES_SQL, [now, OVERDUE_MS]),
    punctual.db.query<{ state: string; count: number | string }>(SCHEDULE_COUNTS_SQL),
  ]);
  const g = gauges.rows[0];
  return {
    version: VERSION,
    database: { engine: punctual.db.engine, description: punctual.db.description },
    ready: health.ready,
    checks: health.checks,
    lastPassAt: health.lastPassAt,
    instances: instances.rows.map((r) => ({
      id: r.id,
      host: r.host,
      pid: Number(r.pid),
      version: r.version,
      role: r.role,
      startedAt: r.started_at.toISOString(),
      lastPassAt: iso(r.last_pass_at),
      lastTickMs: r.last_tick_ms === null ? null : Number(r.last_tick_ms),
      stoppedAt: iso(r.stopped_at),
    })),
    schedules: Object.fromEntries(counts.rows.map((r) => [r.state, num(r.count)])),
    deliveries: {
      dueBacklog: num(g?.due_backlog),
      overdue: num(g?.overdue),
      claimed: num(g?.claimed),
      inDoubt: num(g?.in_doubt),
      dead: num(g?.dead),
      oldestDueAt: iso(g?.oldest_due ?? null),
    },
  };
}
