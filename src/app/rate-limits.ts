/**
 * DEL-13: rate limits and concurrency caps shared by every process (set, list, remove).
 * Each operation takes the {@link AppContext} of a running punctual and a tenant
 * ({@link CallContext}); a limit of another tenant is not found. A change reaches every
 * scheduler at its next maintenance pass (OPS-11); this process's is woken at once.
 */
import { z } from "zod";
import {
  rateLimitInputSchema,
  rateLimitKeySchema,
  type RateLimitView,
} from "../contracts/rate-limits.js";
import { ConflictError, NotFoundError } from "../errors/index.js";
import {
  deleteRateLimit,
  listRateLimits,
  upsertRateLimit,
  type RateLimitRow,
} from "../store/rate-limits.js";
import { tenantOf, type AppContext, type CallContext } from "./context.js";
import { parseInput } from "./input.js";

/** The API view of a stored limit. */
export function toRateLimitView(row: RateLimitRow): RateLimitView {
  return {
    key: row.key,
    ratePerSecond: Number(row.rate_per_second),
    burst: Number(row.burst),
    concurrency: row.concurrency === null ? null : Number(row.concurrency),
    tokens: Math.round(Number(row.tokens) * 1000) / 1000,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/**
 * Creates or changes the limit of `key`. A new bucket starts full; a changed one keeps its
 * tokens (at most the new burst). @throws ValidationError naming the bad field.
 * @throws ConflictError (409) when `key` is new and the tenant already has
 * `scheduler.maxRateLimitsPerTenant` limits.
 */
export async function setRateLimit(
  app: AppContext,
  key: string,
  input: unknown,
  ctx: CallContext = {},
): Promise<RateLimitView> {
  const k = parseInput(z.object({ key: rateLimitKeySchema }), { key }).key;
  const v = parseInput(rateLimitInputSchema, input);
  const row = await upsertRateLimit(app.db, app.now(), {
    tenant: tenantOf(ctx),
    key: k,
    ratePerSecond: v.ratePerSecond,
    burst: v.burst ?? Math.max(1, Math.ceil(v.ratePerSecond)),
    concurrency: v.concurrency ?? null,
    maxPerTenant: app.config.scheduler.maxRateLimitsPerTenant,
  });
  if (!row) {
    const cap = app.config.scheduler.maxRateLimitsPerTenant;
    throw new ConflictError(
      `key: cannot add rate limit ${JSON.stringify(k)}: this tenant already has the most rate limits allowed (${cap}, PUNCTUAL_MAX_RATE_LIMITS_PER_TENANT); remove one or change an existing key`,
    );
  }
  app.wake();
  return toRateLimitView(row);
}

/** The tenant's limits by key. */
export async function listLimits(app: AppContext, ctx: CallContext = {}): Promise<RateLimitView[]> {
  const rows = await listRateLimits(app.db, app.now(), tenantOf(ctx));
  return rows.map(toRateLimitView);
}

/** Removes the limit of `key`: its deliveries go back to the unlimited claim. @throws NotFoundError */
export async function removeRateLimit(
  app: AppContext,
  key: string,
  ctx: CallContext = {},
): Promise<void> {
  const removed = await deleteRateLimit(app.db, tenantOf(ctx), key);
  if (!removed) throw new NotFoundError("rate limit", key);
  app.wake();
}
