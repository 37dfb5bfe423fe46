/**
 * DEL-13: rate limits and concurrency caps shared by every process on one database.
 *
 * One token bucket per (tenant, key) in `punctual_rate_limits` (migration 0010), refilled
 * on the database clock: the row holds `tokens` as of `refilled_at`; the tokens now are
 * `min(burst, tokens + seconds since refilled_at × rate_per_second)`. A delivery row names
 * its limiter in `limiter` (`tenant/key`, written when it is planned; the key is the
 * reminder's `rateLimitKey`, else its channel name).
 *
 * Rows of keys without a limit never come here: the main claim (`CLAIM_SQL`) leaves out
 * the rows of limited keys and is otherwise unchanged. Rows of a limited key are claimed
 * by {@link claimLimited}: in one transaction it locks the bucket row
 * ({@link LOCK_BUCKET_SQL}: `FOR UPDATE`, so two processes never spend the same token),
 * reads the tokens and the rows of that key claimed right now (the concurrency cap counts
 * them across processes), then claims at most that many rows and takes their tokens in
 * one statement ({@link CLAIM_LIMITED_SQL}). The second statement runs on a snapshot taken
 * after the lock was granted, so it sees every claim committed before.
 *
 * Every statement takes `$1` = "now" (NULL: the database clock, OPS-9).
 */
import type { Database, Queryable } from "./database.js";
import { CLAIM_COLUMNS, CLAIMED_SELECT, claimCtes, type ClaimedDelivery } from "./deliveries.js";
import { columnsOf, execute, firstRow, rows } from "./statement.js";

const NOW = "coalesce($1::timestamptz, now())";

/** The tokens of bucket `l` now: refilled since `refilled_at`, capped at the burst. */
const TOKENS_NOW = (l: string) => `least(${l}.burst::double precision,
  ${l}.tokens + greatest(0, extract(epoch from (${NOW} - ${l}.refilled_at))) * ${l}.rate_per_second)`;

/** A limit as stored, with its tokens now. */
export interface RateLimitRow {
  tenant: string;
  key: string;
  /** `tenant/key`: what delivery rows carry in `limiter`. */
  limiter: string;
  /** Tokens added per second. */
  rate_per_second: number;
  /** Most tokens the bucket holds (the largest burst). */
  burst: number;
  /** Most rows of this key claimed at once across processes; null: no cap. */
  concurrency: number | null;
  /** Tokens in the bucket now (database clock). */
  tokens: number;
  created_at: Date;
  updated_at: Date;
}

/** Result columns of the statements returning {@link RateLimitRow}. */
const RATE_LIMIT_COLUMNS = columnsOf<RateLimitRow>()([
  "tenant",
  "key",
  "limiter",
  "rate_per_second",
  "burst",
  "concurrency",
  "tokens",
  "created_at",
  "updated_at",
]);

const LIMIT_SELECT = (
  l: string,
) => `${l}.tenant, ${l}.key, ${l}.tenant || '/' || ${l}.key as limiter,
  ${l}.rate_per_second, ${l}.burst, ${l}.concurrency, ${TOKENS_NOW(l)} as tokens,
  ${l}.created_at, ${l}.updated_at`;

/**
 * Creates or changes a limit. $1 now, $2 tenant, $3 key, $4 rate per second, $5 burst,
 * $6 concurrency (NULL: none). A new bucket starts full; a changed one keeps the tokens it
 * has now, capped at the new burst.
 */
export const UPSERT_RATE_LIMIT_SQL = `
insert into punctual_rate_limits as l
  (tenant, key, rate_per_second, burst, concurrency, tokens, refilled_at, created_at, updated_at)
values ($2, $3, $4::double precision, $5::int, $6::int, $5::int, ${NOW}, ${NOW}, ${NOW})
on conflict (tenant, key) do update
set rate_per_second = excluded.rate_per_second,
    burst = excluded.burst,
    concurrency = excluded.concurrency,
    tokens = least(excluded.burst::double precision, ${TOKENS_NOW("l")}),
    refilled_at = greatest(l.refilled_at, ${NOW}),
    updated_at = ${NOW}
returning ${LIMIT_SELECT("l")}`;

/** The limits of one tenant by key. $1 now, $2 tenant. */
export const LIST_RATE_LIMITS_SQL = `
select ${LIMIT_SELECT("l")} from punctual_rate_limits l where l.tenant = $2 order by l.key`;

/** Every limit of every tenant (what a scheduler reloads each tick, OPS-11). $1 now. */
export const ALL_RATE_LIMITS_SQL = `
select ${LIMIT_SELECT("l")} from punctual_rate_limits l order by l.tenant, l.key`;

/** Removes a limit. $1 tenant, $2 key. Its rows go back to the main claim. */
export const DELETE_RATE_LIMIT_SQL = `delete from punctual_rate_limits where tenant = $1 and key = $2`;

/** What {@link LOCK_BUCKET_SQL} returns. */
export interface BucketRow {
  /** Tokens now. */
  tokens: number;
  /**
   * The database instant `tokens` is as of: the statement's "now", or the bucket's last
   * refill when another claim that began later refilled it first. The next token is due
   * `(1 − tokens mod 1) / rate` seconds after it.
   */
  tokens_at: Date;
  rate_per_second: number;
  concurrency: number | null;
  /** Rows of this limiter claimed right now, by any process. */
  busy: number;
}

/** Result columns of {@link LOCK_BUCKET_SQL}. */
const BUCKET_COLUMNS = columnsOf<Omit<BucketRow, "busy">>()([
  "tokens",
  "tokens_at",
  "rate_per_second",
  "concurrency",
]);

/**
 * Locks one bucket for the rest of the transaction and reads it. $1 now, $2 tenant,
 * $3 key. The locked row is read as it is once the lock is granted (the bucket as the
 * previous holder left it), but anything else this statement read would come from the
 * snapshot taken before it waited: the rows claimed under the bucket are counted by
 * {@link COUNT_BUSY_SQL}, a statement of its own after this one.
 */
export const LOCK_BUCKET_SQL = `
select ${TOKENS_NOW("l")} as tokens, greatest(${NOW}, l.refilled_at) as tokens_at,
       l.rate_per_second, l.concurrency
from punctual_rate_limits l
where l.tenant = $2 and l.key = $3
for update`;

/**
 * DEL-13: the rows of one limiter claimed right now, by any process. $1 limiter
 * (`tenant/key`). Run after {@link LOCK_BUCKET_SQL} in the same transaction: a new
 * statement takes a new snapshot (READ COMMITTED), so it sees every claim committed by
 * whoever held the lock before; counted in the lock's own statement, a claim committed
 * while this one waited for the lock was missed and the cap was held per process, not
 * across them. The lease index serves it (claimed rows only, a few per process).
 */
export const COUNT_BUSY_SQL = `
select count(*)::int as busy from punctual_deliveries d
where d.state = 'claimed' and d.limiter = $1`;

/** What {@link COUNT_BUSY_SQL} returns. */
interface BusyRow {
  busy: number;
}

/** Result columns of {@link COUNT_BUSY_SQL}. */
export const COUNT_BUSY_COLUMNS = columnsOf<BusyRow>()(["busy"]);

/**
 * DEL-2 / DEL-13: claims due rows of one limiter and takes their tokens, in one statement.
 * Run only after {@link LOCK_BUCKET_SQL} in the same transaction. $1 now, $2 lease owner,
 * $3 lease ms, $4 most rows (what the tokens and the cap allow), $5 channel names,
 * $6 tenant, $7 key, $8 limiter.
 *
 * The row-level work is the main claim's (`CLAIM_SQL` in deliveries.ts: same admission,
 * same order, same lease and fencing token, same result columns), restricted to one
 * limiter; it walks the same index and skips rows of other limiters. The bucket loses one
 * token per row claimed, so the tokens spent never exceed what the lock read.
 */
export const CLAIM_LIMITED_SQL = `
with ${claimCtes("$3", "$4", "$5", { only: "$8" })},
spent as (
  update punctual_rate_limits l
  set tokens = greatest(0, ${TOKENS_NOW("l")} - (select count(*) from claimed)),
      refilled_at = greatest(l.refilled_at, ${NOW})
  where l.tenant = $6 and l.key = $7
  returning l.key
)${CLAIMED_SELECT}`;

/** Parameters of {@link upsertRateLimit}. */
export interface RateLimitInput {
  tenant: string;
  key: string;
  /** Tokens per second, > 0. */
  ratePerSecond: number;
  /** Bucket size, ≥ 1. */
  burst: number;
  /** Most rows claimed at once across processes; null: no cap. */
  concurrency: number | null;
}

/** DEL-13: runs {@link UPSERT_RATE_LIMIT_SQL}. */
export async function upsertRateLimit(
  db: Queryable,
  now: Date | null,
  p: RateLimitInput,
): Promise<RateLimitRow> {
  const row = await firstRow<RateLimitRow>(db, UPSERT_RATE_LIMIT_SQL, [
    now,
    p.tenant,
    p.key,
    p.ratePerSecond,
    p.burst,
    p.concurrency,
  ]);
  if (!row) throw new Error("upsert of a rate limit returned no row");
  return row;
}

/** DEL-13: runs {@link LIST_RATE_LIMITS_SQL}. */
export function listRateLimits(
  db: Queryable,
  now: Date | null,
  tenant: string,
): Promise<RateLimitRow[]> {
  return rows<RateLimitRow>(db, LIST_RATE_LIMITS_SQL, [now, tenant]);
}

/** DEL-13 / OPS-11: runs {@link ALL_RATE_LIMITS_SQL}. */
export function allRateLimits(db: Queryable, now: Date | null): Promise<RateLimitRow[]> {
  return rows<RateLimitRow>(db, ALL_RATE_LIMITS_SQL, [now]);
}

/** DEL-13: runs {@link DELETE_RATE_LIMIT_SQL}. Returns whether a limit was removed. */
export async function deleteRateLimit(
  db: Queryable,
  tenant: string,
  key: string,
): Promise<boolean> {
  return (await execute(db, DELETE_RATE_LIMIT_SQL, [tenant, key])) > 0;
}

/** Parameters of {@link claimLimited}. */
export interface LimitedClaimParams {
  now: Date | null;
  owner: string;
  leaseMs: number;
  /** Most rows wanted. */
  limit: number;
  channels: readonly string[];
  tenant: string;
  key: string;
}

/** What {@link claimLimited} did. */
export interface LimitedClaim {
  rows: ClaimedDelivery[];
  /** The bucket as locked (null: the limit was removed meanwhile). */
  bucket: BucketRow | null;
  /** How many rows the tokens and the cap allowed. */
  allowed: number;
}

/**
 * DEL-13: claims up to `limit` due rows of one limiter in one transaction, never more than
 * its tokens and its concurrency cap allow (see the module comment).
 */
export async function claimLimited(db: Database, p: LimitedClaimParams): Promise<LimitedClaim> {
  const limiter = `${p.tenant}/${p.key}`;
  return db.transaction(async (tx) => {
    const locked = await firstRow<Omit<BucketRow, "busy">>(tx, LOCK_BUCKET_SQL, [
      p.now,
      p.tenant,
      p.key,
    ]);
    if (!locked) return { rows: [], bucket: null, allowed: 0 };
    const busy =
      locked.concurrency === null
        ? 0
        : ((await firstRow<BusyRow>(tx, COUNT_BUSY_SQL, [limiter]))?.busy ?? 0);
    const bucket: BucketRow = { ...locked, busy };
    const cap = bucket.concurrency === null ? p.limit : bucket.concurrency - bucket.busy;
    const allowed = Math.max(0, Math.min(p.limit, Math.floor(bucket.tokens + 1e-9), cap));
    if (allowed === 0) return { rows: [], bucket, allowed };
    const claimed = await rows<ClaimedDelivery>(tx, CLAIM_LIMITED_SQL, [
      p.now,
      p.owner,
      p.leaseMs,
      allowed,
      p.channels,
      p.tenant,
      p.key,
      limiter,
    ]);
    return { rows: claimed, bucket, allowed };
  });
}

/** Result columns of {@link UPSERT_RATE_LIMIT_SQL}. */
export const UPSERT_RATE_LIMIT_COLUMNS = RATE_LIMIT_COLUMNS;
/** Result columns of {@link LIST_RATE_LIMITS_SQL}. */
export const LIST_RATE_LIMITS_COLUMNS = RATE_LIMIT_COLUMNS;
/** Result columns of {@link ALL_RATE_LIMITS_SQL}. */
export const ALL_RATE_LIMITS_COLUMNS = RATE_LIMIT_COLUMNS;
/** Result columns of {@link LOCK_BUCKET_SQL}. */
export const LOCK_BUCKET_COLUMNS = BUCKET_COLUMNS;
/** Result columns of {@link CLAIM_LIMITED_SQL}: those of the main claim. */
export const CLAIM_LIMITED_COLUMNS = CLAIM_COLUMNS;
