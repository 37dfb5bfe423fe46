/**
 * DEL-13 / CH-7: request and response shapes of rate limits and circuits, shared by the
 * API, the CLI and the library.
 */
import { z } from "zod";

/**
 * A rate-limit key: 1–64 letters, digits, `_ . : -` (no `/`: delivery rows name their
 * limiter `tenant/key`).
 */
export const rateLimitKeySchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/, "must be 1–64 letters, digits, _ . : -");

/** Smallest `ratePerSecond` of a limit (DEL-13). */
export const MIN_RATE_PER_SECOND = 0.001;

/** `PUT /v1/rate-limits/{key}` body. */
export const rateLimitInputSchema = z
  .object({
    /**
     * Tokens added per second (deliveries per second at steady state), 0.001 (one per
     * ~17 minutes) to 100,000: a rate below would make the refill time overflow.
     */
    ratePerSecond: z.number().min(MIN_RATE_PER_SECOND).max(100_000),
    /** Most deliveries claimed at once after a quiet spell; default `max(1, ceil(ratePerSecond))`. */
    burst: z.number().int().min(1).max(1_000_000).optional(),
    /** Most deliveries of this key claimed or sending at once across processes; null or absent: no cap. */
    concurrency: z.number().int().min(1).max(100_000).nullable().optional(),
  })
  .strict();

export type RateLimitInput = z.input<typeof rateLimitInputSchema>;

/** A limit as the API returns it. */
export interface RateLimitView {
  key: string;
  /** Tokens added per second. */
  ratePerSecond: number;
  /** Bucket size. */
  burst: number;
  /** Cap on deliveries claimed at once across processes; null: none. */
  concurrency: number | null;
  /** Tokens in the bucket now (database clock), rounded to 3 decimals. */
  tokens: number;
  createdAt: string;
  updatedAt: string;
}

/** CH-7: the circuit of one target host as the API returns it. */
export interface CircuitView {
  /** The tenant whose deliveries the circuit counts (CH-7: one circuit per tenant and host). */
  tenant: string;
  host: string;
  state: "closed" | "open" | "half_open";
  /** Transient failures in a row. */
  failures: number;
  /** Backoff of the current opening, ms; null while closed. */
  backoffMs: number | null;
  /** When the next probe may go (open) or the probe's turn lapses (half_open). */
  retryAt: string | null;
  openedAt: string | null;
  updatedAt: string;
}
