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
 * Pacing (virtual scheduling): a claim does not only take the tokens there are now; it
 * may also take tokens that will accrue within a short lookahead, and each row claimed
 * is given its own send instant on the database clock ({@link PacedDelivery.send_at}):
 * the rows the bucket holds tokens for go at once, each further one `1 / rate` seconds
 * after the previous, the `n`-th token's instant. The bucket then owes those future
 * tokens: it is stored with 0 tokens as of the last row's instant (`refilled_at` in the
 * future), so the next claim, in any process, starts its rows `1 / rate` after that one.
 * An older release reads such a bucket as empty until then (its refill counts from
 * `refilled_at`, never backwards), so it never sends inside a slot either. The worker
 * holds each row until its instant and sends it then, so the sent rate follows the
 * schedule rather than when each claim happened to run; a late claim costs nothing up to
 * the lookahead, and a late send (a stalled worker) is late, never early.
 *
 * Every statement takes `$1` = "now" (NULL: the database clock, OPS-9).
 */
import { pinnedOf, type Database, type Queryable } from "./database.js";
import {
  CLAIM_COLUMNS,
  CLAIMED_SELECT,
  claimCtes,
  claimedOf,
  type ClaimedDelivery,
  type ClaimedRow,
} from "./deliveries/claim.js";
import { ADMISSION_PREDICATE, NOW } from "./deliveries/sql.js";
import { columnsOf, execute, firstRow, rows } from "./statement.js";

/**
 * The tokens of bucket `l` now (`$1`, NULL: the database clock): refilled since
 * `refilled_at`, capped at the burst.
 */
export const TOKENS_NOW = (l: string) => `least(${l}.burst::double precision,
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
 * $6 concurrency (NULL: none), $7 most limits the tenant may have (NULL: no cap). A new
 * bucket starts full; a changed one keeps the tokens it has now, capped at the new burst.
 *
 * The cap (DEL-13) is checked in the statement: a new key of a tenant that already has
 * `$7` limits inserts nothing and the statement returns no row (a change of an existing
 * key always applies). Two creates racing at the cap may both pass; the cap bounds the
 * number of limits, it is not a uniqueness rule.
 */
export const UPSERT_RATE_LIMIT_SQL = `
insert into punctual_rate_limits as l
  (tenant, key, rate_per_second, burst, concurrency, tokens, refilled_at, created_at, updated_at)
select $2, $3, $4::double precision, $5::int, $6::int, $5::int, ${NOW}, ${NOW}, ${NOW}
where $7::int is null
   or exists (select 1 from punctual_rate_limits x where x.tenant = $2 and x.key = $3)
   or (select count(*) from punctual_rate_limits x where x.tenant = $2) < $7::int
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
  /** Tokens now (0 while the bucket owes tokens: see the module comment). */
  tokens: number;
  /**
   * The database instant `tokens` is as of: the statement's "now", or the bucket's last
   * refill when another claim that began later refilled it first, or the instant of the
   * last slot it gave out while it owes tokens (in the future). The next token is due
   * `(1 − tokens mod 1) / rate` seconds after it.
   */
  tokens_at: Date;
  /** The statement's "now" (database clock, or the `$1` given). */
  read_at: Date;
  rate_per_second: number;
  concurrency: number | null;
  /** Rows of this limiter claimed right now, by any process. */
  busy: number;
}

/** Result columns of {@link LOCK_BUCKET_SQL}. */
const BUCKET_COLUMNS = columnsOf<Omit<BucketRow, "busy">>()([
  "tokens",
  "tokens_at",
  "read_at",
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
       ${NOW} as read_at, l.rate_per_second, l.concurrency
from punctual_rate_limits l
where l.tenant = $2 and l.key = $3
for update`;

/**
/**
 * DEL-13: the sends of one limiter under way right now, by any process: its held queue rows
 * and its digests that hold a slot (DEL-19: a digest message is one send; it holds the
 * slot from the token it took to its settle). $1 now, $2 limiter (`tenant/key`). Run after
 * {@link LOCK_BUCKET_SQL} in the same transaction: a new statement takes a new snapshot
 * (READ COMMITTED), so it sees every claim committed by whoever held the lock before;
 * counted in the lock's own statement, a claim committed while this one waited for the
 * lock was missed and the cap was held per process, not across them. The queue's index
 * serves the rows (a held row was due when it was claimed, so it lies among the due rows,
 * `run_at` up to now), `punctual_digests_slots` the digests.
 */
export const COUNT_BUSY_SQL = `
select ((select count(*) from punctual_queue q
         where q.run_at <= ${NOW} and q.lease_owner is not null and q.limiter = $2)
      + (select count(*) from punctual_digests g
         where g.state = 'claimed' and g.holds_slot and g.limiter = $2))::int as busy`;

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
 * The row-level work is the main claim's (`CLAIM_SQL` in deliveries/claim.ts: same admission,
 * same order, same lease and fencing token, same result columns), restricted to one
 * limiter; it walks the same index and skips rows of other limiters. The bucket loses one
 * token per row claimed: `k` rows against `x` tokens as of `a` (the later of now and
 * `refilled_at`) leave `x − k` tokens as of `a` when `k ≤ x`, else 0 tokens as of
 * `a + (k − x) / rate` seconds, the instant of the last row's slot (see the module
 * comment; {@link paceSlots} gives each row its instant by the same arithmetic).
 */
export const CLAIM_LIMITED_SQL = `
with ${claimCtes("$3", "$4", "$5", { only: "$8" })},
spent as (
  update punctual_rate_limits l
  set tokens = greatest(0, ${TOKENS_NOW("l")} - (select count(*) from claimed)),
      refilled_at = greatest(l.refilled_at, ${NOW})
        + make_interval(secs => greatest(0, (select count(*) from claimed) - ${TOKENS_NOW("l")})
                                 / l.rate_per_second)
  where l.tenant = $6 and l.key = $7
  returning l.key
)${CLAIMED_SELECT}`;

/**
 * DEL-13: the limiters that have due rows now, found by walking the claim index
 * (`punctual_deliveries_claimable`, in claim order, the main claim's admission) over at
 * most `$5` due rows of limited keys. $1 now, $2 channel names, $3 limiters with a limit,
 * $4 limiters to leave out (those the caller already tries: keys its buckets held back),
 * $5 most rows to walk. Returns each limiter once, the one with the oldest due row first.
 *
 * Why: the limited claim locks one bucket per key it tries; trying every key with a limit
 * made a claim cost one transaction per limit, idle or not (12,000 idle limits of one
 * tenant made another tenant's deliveries up to a minute late). With this walk a claim
 * tries only the keys of the due rows it reads, and reads at most `$5` of them beyond the
 * rows of other keys ahead of them: its cost does not depend on how many idle limits
 * exist. `= any` over the arrays is hashed by the planner for a constant array, so the
 * per-row check does not grow with them either.
 */
export const DUE_LIMITERS_SQL = `
select x.limiter
from (
  select q.limiter, q.run_at, q.id
  from punctual_queue q
  where ${ADMISSION_PREDICATE}
    and coalesce(q.channel = any($2::text[]), false)
    and coalesce(q.limiter = any($3::text[]), false)
    and not coalesce(q.limiter = any($4::text[]), false)
  order by q.run_at, q.id
  limit $5
) x
group by x.limiter
order by min(x.run_at), min(x.id)`;

/** What {@link DUE_LIMITERS_SQL} returns. */
interface DueLimiterRow {
  limiter: string;
}

/** Result columns of {@link DUE_LIMITERS_SQL}. */
export const DUE_LIMITERS_COLUMNS = columnsOf<DueLimiterRow>()(["limiter"]);

/** Parameters of {@link dueLimiters}. */
export interface DueLimitersParams {
  now: Date | null;
  channels: readonly string[];
  /** Limiters (`tenant/key`) with a limit. */
  limited: readonly string[];
  /** Limiters to leave out. */
  skip: readonly string[];
  /** Most due rows to read. */
  rows: number;
}

/** DEL-13: runs {@link DUE_LIMITERS_SQL}: limiters with due rows, oldest first. */
export async function dueLimiters(db: Database, p: DueLimitersParams): Promise<string[]> {
  if (p.limited.length === 0) return [];
  const found = await rows<DueLimiterRow>(pinnedOf(db), DUE_LIMITERS_SQL, [
    p.now,
    p.channels,
    p.limited,
    p.skip,
    p.rows,
  ]);
  return found.map((r) => r.limiter);
}

/**
 * How far ahead of its send instant a row may be claimed, ms (capped at a quarter of the
 * lease, so a row waiting for its slot still has most of its lease when it goes). 600 ms:
 * a claim that runs up to ~400 ms late (the wake-up asks {@link PACE_WAKE_EARLY_MS}
 * before the next slot) still finds its rows' slots ahead of it, and at most
 * `0.6 × rate` rows of a key wait in a worker for their slot.
 */
export const PACE_LOOKAHEAD_MS = 600;

/**
 * How long before a limited key's next slot a worker held back asks again, ms: the claim
 * then takes the slots of about `(LOOKAHEAD − WAKE_EARLY) × rate + 1` rows (3 at 10/s),
 * and may run up to this late before a slot is lost.
 */
export const PACE_WAKE_EARLY_MS = 400;

/** A row claimed under a rate limit, with its slot. */
export interface PacedDelivery extends ClaimedDelivery {
  /**
   * DEL-13: the instant this row may be sent, database clock: never before it, and as
   * soon after it as the worker can.
   */
  send_at: Date;
}

/**
 * DEL-13: the send instants of `k` rows claimed against `bucket`, epoch ms (database
 * clock): row `i` (0-based) goes at `tokens_at + max(0, i + 1 − tokens) / rate` s, so the
 * rows the bucket holds tokens for go at once (the burst) and each further one at the
 * instant its token accrues. Pure; the same arithmetic as {@link CLAIM_LIMITED_SQL}'s
 * update of the bucket.
 */
export function paceSlots(
  bucket: Pick<BucketRow, "tokens" | "tokens_at" | "rate_per_second">,
  k: number,
): number[] {
  const at = new Date(bucket.tokens_at).getTime();
  const tokens = Number(bucket.tokens);
  const rate = Number(bucket.rate_per_second);
  return Array.from(
    { length: k },
    (_, i) => at + (Math.max(0, i + 1 - tokens - 1e-9) / rate) * 1000,
  );
}

/**
 * DEL-13: how many rows `bucket` admits now: those whose slot ({@link paceSlots}) falls
 * within `lookaheadMs` of the bucket's read. Never negative.
 */
export function paceAllowance(
  bucket: Pick<BucketRow, "tokens" | "tokens_at" | "read_at" | "rate_per_second">,
  lookaheadMs: number,
): number {
  const ahead =
    new Date(bucket.read_at).getTime() + lookaheadMs - new Date(bucket.tokens_at).getTime();
  const n = Number(bucket.tokens) + (Math.max(0, ahead) / 1000) * Number(bucket.rate_per_second);
  return Math.max(0, Math.floor(n + 1e-9));
}

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
  /** Most limits the tenant may have (a new key past it is refused); null or absent: no cap. */
  maxPerTenant?: number | null;
}

/**
 * DEL-13: runs {@link UPSERT_RATE_LIMIT_SQL}. Returns null when the key is new and the
 * tenant already has `maxPerTenant` limits (nothing was written).
 */
export async function upsertRateLimit(
  db: Queryable,
  now: Date | null,
  p: RateLimitInput,
): Promise<RateLimitRow | null> {
  return firstRow<RateLimitRow>(db, UPSERT_RATE_LIMIT_SQL, [
    now,
    p.tenant,
    p.key,
    p.ratePerSecond,
    p.burst,
    p.concurrency,
    p.maxPerTenant ?? null,
  ]);
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
  /**
   * How far ahead of their slot rows may be claimed, ms (default: {@link PACE_LOOKAHEAD_MS}
   * capped at a quarter of the lease; 0: only the tokens there are now).
   */
  lookaheadMs?: number;
}

/** What {@link claimLimited} did. */
export interface LimitedClaim {
  /** The rows claimed, each with its send instant, in slot order. */
  rows: PacedDelivery[];
  /** The bucket as locked (null: the limit was removed meanwhile). */
  bucket: BucketRow | null;
  /** How many rows the tokens (with the lookahead) and the cap allowed. */
  allowed: number;
  /** How many rows the tokens alone allowed, with the lookahead. */
  byTokens: number;
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
    if (!locked) return { rows: [], bucket: null, allowed: 0, byTokens: 0 };
    const busy =
      locked.concurrency === null
        ? 0
        : ((await firstRow<BusyRow>(tx, COUNT_BUSY_SQL, [p.now, limiter]))?.busy ?? 0);
    const bucket: BucketRow = { ...locked, busy };
    const cap = bucket.concurrency === null ? p.limit : bucket.concurrency - bucket.busy;
    const lookaheadMs = p.lookaheadMs ?? Math.min(PACE_LOOKAHEAD_MS, Math.floor(p.leaseMs / 4));
    const byTokens = paceAllowance(bucket, lookaheadMs);
    const allowed = Math.max(0, Math.min(p.limit, byTokens, cap));
    if (allowed === 0) return { rows: [], bucket, allowed, byTokens };
    const claimed = await rows<ClaimedRow>(tx, CLAIM_LIMITED_SQL, [
      p.now,
      p.owner,
      p.leaseMs,
      allowed,
      p.channels,
      p.tenant,
      p.key,
      limiter,
    ]);
    const slots = paceSlots(bucket, claimed.length);
    const paced = claimed.map((row, i) => ({
      ...claimedOf(row),
      send_at: new Date(slots[i] as number),
    }));
    return { rows: paced, bucket, allowed, byTokens };
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
