/** Response schemas of the rate limits (DEL-13) and circuits (CH-7), for the OpenAPI document. */
import { z } from "zod";

/** A rate limit as returned by the API. */
export const rateLimitViewSchema = z
  .object({
    key: z.string(),
    ratePerSecond: z.number().describe("Tokens added per second"),
    burst: z
      .number()
      .int()
      .describe("Bucket size: most deliveries claimed at once after a quiet spell"),
    concurrency: z
      .number()
      .int()
      .nullable()
      .describe("Most deliveries of this key claimed or sending at once across processes"),
    tokens: z.number().describe("Tokens in the bucket now (database clock)"),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: "RateLimit" });

/** A circuit as returned by the API. */
export const circuitViewSchema = z
  .object({
    tenant: z.string().describe("The tenant whose deliveries the circuit counts"),
    host: z.string(),
    state: z.enum(["closed", "open", "half_open"]),
    failures: z.number().int().describe("Transient failures in a row"),
    backoffMs: z.number().int().nullable(),
    retryAt: z.string().nullable().describe("Next probe (open) or end of the probe's turn"),
    openedAt: z.string().nullable(),
    updatedAt: z.string(),
  })
  .meta({ id: "Circuit" });
