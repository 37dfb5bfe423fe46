/**
 * One-click unsubscribe (API-14; RFC 8058, RFC 2369): e-mail sent to a recipient carries
 * `List-Unsubscribe: <{PUNCTUAL_PUBLIC_URL}/v1/unsubscribe/{token}>` and
 * `List-Unsubscribe-Post: List-Unsubscribe=One-Click`; a `POST` of that URL records the
 * opt-out in the recipient's preferences.
 *
 * The token is the only credential: `u1.<payload>.<signature>`, where `payload` is the
 * base64url of a JSON object `{ t: tenant, r: recipient id, c: category | null, x: expiry
 * (epoch seconds) }` and `signature` the base64url HMAC-SHA256 of `u1.<payload>` under a
 * secret the server keeps in the database (setting `unsubscribe_secret`, generated once,
 * shared by every process). A token that does not verify, is altered, malformed or
 * expired is "not found", the same answer for each, so a caller learns nothing of why.
 *
 * The opt-out is the reminder's category when it has one (`preferences.optOut.categories`),
 * else the whole `email` channel (`preferences.optOut.channels`). Recording it twice changes
 * nothing the second time (same version).
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { NotFoundError, PunctualError } from "../errors/index.js";
import type { Logger } from "../observability/logger.js";
import type { Queryable } from "../store/database.js";
import { initSetting } from "../store/operations.js";
import { optOutRecipient, recipientsById } from "../store/recipients.js";
import type { AppContext } from "./context.js";

/** How long a token stays valid after the message that carries it was sent: 60 days. */
export const UNSUBSCRIBE_TOKEN_TTL_MS = 60 * 24 * 3_600_000;

/** The setting (`punctual_settings`) holding the signing secret. */
export const UNSUBSCRIBE_SECRET_SETTING = "unsubscribe_secret";

const VERSION = "u1";

/** What a token carries. */
export interface UnsubscribeClaims {
  tenant: string;
  recipientId: string;
  /** The reminder's category, or null: the opt-out is of all e-mail. */
  category: string | null;
  /** Expiry, epoch ms (kept to the second). */
  expiresAtMs: number;
}

const payloadSchema = z
  .object({
    t: z.string().min(1).max(64),
    r: z.string().min(1).max(1_000),
    c: z.string().min(1).max(1_000).nullable(),
    x: z.number().int().positive(),
  })
  .strict();

function mac(secret: string, signed: string): Buffer {
  return createHmac("sha256", secret).update(signed).digest();
}

/** A signed token for `claims` (see the module comment for its shape). */
export function signUnsubscribeToken(secret: string, claims: UnsubscribeClaims): string {
  const payload = Buffer.from(
    JSON.stringify({
      t: claims.tenant,
      r: claims.recipientId,
      c: claims.category,
      x: Math.floor(claims.expiresAtMs / 1000),
    }),
    "utf8",
  ).toString("base64url");
  const signed = `${VERSION}.${payload}`;
  return `${signed}.${mac(secret, signed).toString("base64url")}`;
}

/**
 * The claims of `token` when its signature verifies under `secret` and it has not expired
 * at `nowMs`; null otherwise (forged, altered, malformed or expired: one answer for all).
 */
export function verifyUnsubscribeToken(
  secret: string,
  token: string,
  nowMs: number,
): UnsubscribeClaims | null {
  const parts = token.split(".");
  if (parts.length !== 3 || parts[0] !== VERSION) return null;
  const [version, payload, signature] = parts as [string, string, string];
  if (!/^[A-Za-z0-9_-]+$/.test(payload) || !/^[A-Za-z0-9_-]+$/.test(signature)) return null;
  const expected = mac(secret, `${version}.${payload}`);
  const given = Buffer.from(signature, "base64url");
  // Only the canonical spelling: no second token for the same signature.
  if (given.toString("base64url") !== signature) return null;
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
  } catch {
    return null;
  }
  const claims = payloadSchema.safeParse(parsed);
  if (!claims.success) return null;
  const expiresAtMs = claims.data.x * 1000;
  if (nowMs >= expiresAtMs) return null;
  return {
    tenant: claims.data.t,
    recipientId: claims.data.r,
    category: claims.data.c,
    expiresAtMs,
  };
}

/**
 * The unsubscribe signing secret: generated once and kept in the database (setting
 * {@link UNSUBSCRIBE_SECRET_SETTING}), so every process signs and verifies alike.
 * @throws PunctualError `SETTINGS` when the stored value is not a string.
 */
export async function sharedUnsubscribeSecret(db: Queryable, logger: Logger): Promise<string> {
  const fresh = randomBytes(32).toString("base64url");
  const value = await initSetting(db, {
    key: UNSUBSCRIBE_SECRET_SETTING,
    valueJson: JSON.stringify(fresh),
  });
  if (typeof value !== "string" || value.length < 16) {
    throw new PunctualError("SETTINGS", `${UNSUBSCRIBE_SECRET_SETTING} setting is not a string`);
  }
  if (value === fresh) logger.info("generated the unsubscribe link signing secret");
  return value;
}

/**
 * The `List-Unsubscribe` URL of an e-mail to a recipient: `{publicUrl}/v1/unsubscribe/{token}`,
 * valid {@link UNSUBSCRIBE_TOKEN_TTL_MS} from `nowMs`. `publicUrl` without a trailing slash.
 */
export function unsubscribeUrl(
  publicUrl: string,
  secret: string,
  claims: Omit<UnsubscribeClaims, "expiresAtMs">,
  nowMs: number,
): string {
  const token = signUnsubscribeToken(secret, {
    ...claims,
    expiresAtMs: nowMs + UNSUBSCRIBE_TOKEN_TTL_MS,
  });
  return `${publicUrl.replace(/\/+$/, "")}/v1/unsubscribe/${token}`;
}

/**
 * API-14: records the opt-out a token stands for (its category, or all e-mail) in the
 * recipient's preferences; idempotent.
 * @throws NotFoundError for a token that does not verify or has expired, and for a
 *   recipient no longer in the registry (the same message for each).
 */
export async function unsubscribe(
  app: AppContext,
  secret: string,
  token: string,
): Promise<{ recipientId: string; optedOut: { channel: "email" } | { category: string } }> {
  const claims = verifyUnsubscribeToken(secret, token, app.clock.now());
  const notFound = (): NotFoundError => new NotFoundError("unsubscribe", "link");
  if (claims === null) throw notFound();
  const list = claims.category === null ? "channels" : "categories";
  const name = claims.category ?? "email";
  const changed = await optOutRecipient(app.db, {
    now: app.now(),
    tenant: claims.tenant,
    id: claims.recipientId,
    list,
    name,
  });
  if (!changed) {
    const [row] = await recipientsById(app.db, {
      tenant: claims.tenant,
      ids: [claims.recipientId],
    });
    if (row === undefined) throw notFound();
  } else {
    app.logger.info(
      { tenant: claims.tenant, recipientId: claims.recipientId, [list]: [name] },
      "recipient unsubscribed",
    );
  }
  return {
    recipientId: claims.recipientId,
    optedOut: claims.category === null ? { channel: "email" } : { category: claims.category },
  };
}
