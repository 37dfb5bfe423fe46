/**
 * Standard Webhooks signing (https://www.standardwebhooks.com/): the signed content is
 * `"{webhook-id}.{webhook-timestamp}.{body}"`, signed with HMAC-SHA256, sent as
 * `webhook-signature: v1,<base64>`. Secrets look like `whsec_<base64 key bytes>`.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

/** The prefix of a Standard Webhooks secret; the rest is the key, base64-encoded. */
export const WEBHOOK_SECRET_PREFIX = "whsec_";

/** Default tolerance of {@link verifyWebhook} between the timestamp and now: 5 minutes. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/**
 * The HMAC key bytes of a secret: for `whsec_<base64>`, the base64-decoded rest; for any
 * other string, its UTF-8 bytes.
 */
export function webhookSecretKey(secret: string): Buffer {
  return secret.startsWith(WEBHOOK_SECRET_PREFIX)
    ? Buffer.from(secret.slice(WEBHOOK_SECRET_PREFIX.length), "base64")
    : Buffer.from(secret, "utf8");
}

/**
 * Signs one webhook request.
 *
 * @param secret `whsec_<base64>` (or any other string, used as UTF-8 key bytes).
 * @param id the `webhook-id` header value (punctual sends the delivery key).
 * @param timestampSeconds the `webhook-timestamp` header value, Unix seconds.
 * @param body the exact request body text.
 * @returns the `webhook-signature` header value, `v1,<base64 HMAC-SHA256>`.
 */
export function signWebhook(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: string,
): string {
  const mac = createHmac("sha256", webhookSecretKey(secret))
    .update(`${id}.${timestampSeconds}.${body}`, "utf8")
    .digest("base64");
  return `v1,${mac}`;
}

/** Request headers as Node (`IncomingHttpHeaders`), fetch (`Headers`) or a plain record give them. */
export type WebhookHeaders =
  { get(name: string): string | null } | Record<string, string | string[] | undefined>;

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === "function") {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Verifies a received webhook, as a receiver should: recomputes the signature over
 * `webhook-id`, `webhook-timestamp` and the raw body, compares it in constant time with
 * each `v1,` entry of `webhook-signature` (space-separated, so keys can be rotated), and
 * refuses timestamps further than `toleranceSeconds` from now (replay protection).
 *
 * @param secret the shared secret (`whsec_<base64>` or a plain string).
 * @param headers the request headers (names case-insensitive).
 * @param body the raw body text, exactly as received (do not re-serialize parsed JSON).
 * @param options `toleranceSeconds` (default 300); `nowSeconds` (default the system clock).
 * @returns true when a signature matches and the timestamp is fresh; false otherwise.
 *   Never throws for malformed input.
 */
export function verifyWebhook(
  secret: string,
  headers: WebhookHeaders,
  body: string,
  options: { toleranceSeconds?: number; nowSeconds?: number } = {},
): boolean {
  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!id || !timestamp || !signatures || !/^\d{1,15}$/.test(timestamp)) return false;
  const ts = Number(timestamp);
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - ts) > (options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) return false;
  const expected = Buffer.from(signWebhook(secret, id, ts, body).slice(3), "base64");
  for (const entry of signatures.split(" ")) {
    const [version, value] = entry.split(",", 2);
    if (version !== "v1" || !value) continue;
    const given = Buffer.from(value, "base64");
    if (given.length === expected.length && timingSafeEqual(given, expected)) return true;
  }
  return false;
}
