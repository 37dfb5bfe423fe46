/**
 * A tenant's own webhook signing secret (CH-1, API-2). By default one secret (the
 * configured `PUNCTUAL_WEBHOOK_SECRET` or the generated one) signs every tenant's webhooks,
 * so a receiver of tenant A that holds it could verify, or forge, tenant B's. A tenant may
 * instead have a secret of its own: it then signs that tenant's webhooks, and the default
 * signs only the others'. A target's own `secret` still wins over both.
 *
 * The secret is kept as a database-held setting (key `webhook_secret:tenant:<tenant>`,
 * value `{ secret, previous }`), so a change bumps the settings version and every process
 * signs with it from its next pass (OPS-11), like the default secret's rotation.
 *
 * Rotation: setting a new secret keeps the one that signed until then (the tenant's
 * previous secret, or the default on its first own secret) signing beside it for
 * `overlapSeconds`; each request then carries one `v1,` signature per secret (Standard
 * Webhooks), so receivers switch to the new secret at any time within the overlap.
 */
import { randomBytes } from "node:crypto";
import { z } from "zod";
import {
  rotateTenantWebhookSecretSchema,
  type TenantWebhookSecretView,
} from "../contracts/webhook-secrets.js";
import { NotFoundError } from "../errors/index.js";
import type { Queryable } from "../store/database.js";
import { deleteSetting, putSetting, readSettings, readSettingsPrefixed } from "../store/observe.js";
import { DEFAULT_TENANT, tenantOf, type AppContext, type CallContext } from "./context.js";
import { parseInput } from "./input.js";

/** The settings key prefix of the tenants' own secrets. */
export const TENANT_WEBHOOK_SECRET_PREFIX = "webhook_secret:tenant:";

/** What is stored per tenant. `previous.secret` null: the default secret. */
const storedSchema = z.object({
  secret: z.string().min(1),
  previous: z
    .object({ secret: z.string().min(1).nullable(), until: z.string() })
    .nullable()
    .default(null),
});
type StoredTenantSecret = z.output<typeof storedSchema>;

/** The secrets a request is signed with: `current`, then each of `previous`. */
export interface SecretsToSign {
  current: string;
  previous: readonly string[];
}

/**
 * Every tenant's own secret, in memory, reloaded when the settings version moves (the
 * process registers {@link TenantSigningSecrets.load} as a settings listener).
 */
export class TenantSigningSecrets {
  #byTenant = new Map<string, { secret: string; previous: string | null; untilMs: number }>();

  /** Reads every tenant's secret from the database. A malformed entry is left out. */
  async load(db: Queryable): Promise<void> {
    const stored = await readSettingsPrefixed(db, { prefix: TENANT_WEBHOOK_SECRET_PREFIX });
    const next = new Map<string, { secret: string; previous: string | null; untilMs: number }>();
    for (const [key, value] of stored) {
      const parsed = storedSchema.safeParse(value);
      // Only this module writes these keys; a hand-edited broken one must not stop signing.
      if (!parsed.success) continue;
      const p = parsed.data.previous;
      next.set(key.slice(TENANT_WEBHOOK_SECRET_PREFIX.length), {
        secret: parsed.data.secret,
        previous: p?.secret ?? null,
        untilMs: p ? Date.parse(p.until) : -Infinity,
      });
    }
    this.#byTenant = next;
  }

  /**
   * The secrets that sign a webhook of `tenant` at `nowMs` (Unix ms): the tenant's own
   * (with the one it replaced while the overlap lasts), else `fallback` (the default's).
   */
  signingSecrets(
    tenant: string | undefined,
    nowMs: number,
    fallback: SecretsToSign | null,
  ): SecretsToSign | null {
    const own = this.#byTenant.get(tenant ?? DEFAULT_TENANT);
    if (!own) return fallback;
    if (!(nowMs < own.untilMs)) return { current: own.secret, previous: [] };
    const previous = own.previous ?? fallback?.current ?? null;
    return {
      current: own.secret,
      previous: previous === null || previous === own.secret ? [] : [previous],
    };
  }
}

const keyOf = (tenant: string) => `${TENANT_WEBHOOK_SECRET_PREFIX}${tenant}`;

async function readOwn(app: AppContext, tenant: string): Promise<StoredTenantSecret | null> {
  const value = (await readSettings(app.db, { keys: [keyOf(tenant)] })).get(keyOf(tenant));
  if (value === undefined) return null;
  const parsed = storedSchema.safeParse(value);
  return parsed.success ? parsed.data : null;
}

function view(tenant: string, stored: StoredTenantSecret, nowMs: number): TenantWebhookSecretView {
  const until = stored.previous ? Date.parse(stored.previous.until) : NaN;
  return {
    tenant,
    secret: stored.secret,
    overlapUntil: nowMs < until ? new Date(until).toISOString() : null,
  };
}

/**
 * The caller's tenant's own signing secret.
 * @throws NotFoundError when the tenant has none (the default secret signs its webhooks).
 */
export async function getTenantWebhookSecret(
  app: AppContext,
  ctx: CallContext = {},
): Promise<TenantWebhookSecretView> {
  const tenant = tenantOf(ctx);
  const stored = await readOwn(app, tenant);
  if (!stored) throw new NotFoundError("webhook secret of tenant", tenant);
  return view(tenant, stored, app.clock.now());
}

/**
 * Sets or rotates the caller's tenant's own signing secret (`secret`, default a random
 * 32-byte one); the secret that signed until now signs beside it for `overlapSeconds`.
 * Every process signs with it from its next pass.
 * @throws ValidationError naming `secret` or `overlapSeconds`.
 */
export async function rotateTenantWebhookSecret(
  app: AppContext,
  input: unknown = {},
  ctx: CallContext = {},
): Promise<TenantWebhookSecretView> {
  const tenant = tenantOf(ctx);
  const q = parseInput(rotateTenantWebhookSecretSchema, input ?? {});
  const secret = q.secret ?? `whsec_${randomBytes(32).toString("base64")}`;
  const nowMs = app.clock.now();
  const stored = await readOwn(app, tenant);
  const value: StoredTenantSecret = {
    secret,
    previous:
      q.overlapSeconds > 0
        ? {
            secret: stored?.secret ?? null,
            until: new Date(nowMs + q.overlapSeconds * 1000).toISOString(),
          }
        : null,
  };
  await putSetting(app.db, { key: keyOf(tenant), value });
  app.wake();
  return view(tenant, value, nowMs);
}

/**
 * Removes the caller's tenant's own secret: the default secret signs its webhooks from
 * every process's next pass (no overlap).
 * @throws NotFoundError when the tenant has none.
 */
export async function removeTenantWebhookSecret(
  app: AppContext,
  ctx: CallContext = {},
): Promise<void> {
  const tenant = tenantOf(ctx);
  if ((await deleteSetting(app.db, { key: keyOf(tenant) })) === 0) {
    throw new NotFoundError("webhook secret of tenant", tenant);
  }
  app.wake();
}
