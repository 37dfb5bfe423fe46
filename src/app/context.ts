/**
 * What every application operation works with: the wired parts of a running punctual
 * (configuration, store, clock, logs, metrics, channels, scheduler) and the two actions
 * they share ("now" for SQL, waking the schedulers). Built once by `Punctual`; the
 * operation modules (schedules, deliveries, health) take it as their first argument.
 */
import type { Channel } from "../channels/types.js";
import type { ChannelRegistry } from "../channels/index.js";
import type { PlanDeps } from "../scheduler/plan.js";
import type { Punctual } from "./punctual.js";

/** Tenant used when the API runs without keys. */
export const DEFAULT_TENANT = "default";

/** API-2: the tenant a call acts in: the one of `ctx`, else {@link DEFAULT_TENANT}. */
export function tenantOf(ctx: Pick<CallContext, "tenant">): string {
  return ctx.tenant ?? DEFAULT_TENANT;
}

/** Who is calling: every query is scoped to a tenant (API-2). */
export interface CallContext {
  tenant?: string;
  /**
   * OPS-16: who acts, recorded with operator actions (redrive, resolve): `operator`,
   * `api-key:<id>`, `dashboard:<tenant>`; default `library` (a call in the process).
   */
  actor?: string;
}

/**
 * The parts of a running punctual that the operations use: those the {@link Punctual}
 * exposes (its `db` here: the operations' runner, which gives up waiting for a lock a
 * stalled transaction holds, `lockTimeoutMs`), and the two shared actions.
 */
export interface AppContext extends Pick<
  Punctual,
  "config" | "db" | "clock" | "logger" | "metrics" | "channels" | "scheduler"
> {
  /** "Now" for SQL: the pinned instant of a test clock, or null for the database clock (OPS-9). */
  now(): Date | null;
  /** Wakes this process's scheduler and, on PostgreSQL, every other one (NOTIFY). */
  wake(): void;
}

/** The channels by name, as the planner and the scheduler take them. */
export function channelMap(channels: ChannelRegistry): ReadonlyMap<string, Channel> {
  return new Map(channels.names().map((n) => [n, channels.get(n)]));
}

/** What planning inside an operation's transaction needs (DEL-7, DEL-9). */
export function planDeps(app: AppContext): Omit<PlanDeps, "db"> {
  return {
    clock: app.clock,
    logger: app.logger,
    metrics: app.metrics,
    options: app.config.scheduler,
    channels: channelMap(app.channels),
  };
}
