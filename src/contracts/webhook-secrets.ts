/**
 * CH-1 / API-2: request and response shapes of a tenant's own webhook signing secret,
 * shared by the API and the library.
 */
import { z } from "zod";

/** Fewest key bytes of a tenant's secret (the generated ones have 32). */
export const MIN_WEBHOOK_SECRET_BYTES = 24;

/** Longest overlap of a rotation, seconds (30 days). */
export const MAX_WEBHOOK_SECRET_OVERLAP_SECONDS = 30 * 86_400;

/** Overlap of a rotation when none is given, seconds (24 hours). */
export const DEFAULT_WEBHOOK_SECRET_OVERLAP_SECONDS = 86_400;

/** A Standard Webhooks secret: `whsec_` and the key bytes in base64. */
export const webhookSecretTextSchema = z
  .string()
  .max(200)
  .regex(/^whsec_[A-Za-z0-9+/]+={0,2}$/, "must be whsec_ followed by the key bytes in base64")
  .refine(
    (s) => Buffer.from(s.slice("whsec_".length), "base64").length >= MIN_WEBHOOK_SECRET_BYTES,
    `must hold at least ${MIN_WEBHOOK_SECRET_BYTES} key bytes`,
  );

/** `POST /v1/tenant-webhook-secret` body: set or rotate the caller's tenant's secret. */
export const rotateTenantWebhookSecretSchema = z
  .object({
    /** The new secret; absent: a fresh random one (32 bytes). */
    secret: webhookSecretTextSchema.optional(),
    /**
     * How long the secret that signed until now still signs beside the new one, seconds:
     * the tenant's old secret, or the operator's default secret on a tenant's first one.
     */
    overlapSeconds: z
      .number()
      .int()
      .min(0)
      .max(MAX_WEBHOOK_SECRET_OVERLAP_SECONDS)
      .default(DEFAULT_WEBHOOK_SECRET_OVERLAP_SECONDS),
  })
  .strict();

export type RotateTenantWebhookSecretInput = z.input<typeof rotateTenantWebhookSecretSchema>;

/** A tenant's own signing secret as the API returns it. */
export interface TenantWebhookSecretView {
  tenant: string;
  /** The secret that signs the tenant's webhooks (targets with their own `secret` aside). */
  secret: string;
  /** Until when the secret it replaced still signs beside it (ISO 8601), or null. */
  overlapUntil: string | null;
}
