/**
 * A stored reminder as the API shows it (API-1), with its target's secrets redacted. Pure.
 */
import type { ReminderView } from "../contracts/index.js";
import type { StoredReminderColumns } from "./body.js";

/** Channels whose URL path and query hold the webhook's token. */
const URL_IS_SECRET = new Set(["slack", "discord"]);

/**
 * Hides secrets of a target: any key named like secret, token, password or authorization
 * (a value that is set reads `[redacted]`); and, for Slack and Discord, the path and query
 * of the URL (`https://hooks.slack.com/[redacted]`), which hold the webhook's token.
 * @param channel the reminder's channel name.
 */
export function redactTarget(
  target: Record<string, unknown>,
  channel?: string,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(target ?? {})) {
    out[k] = /secret|token|password|authorization/i.test(k) && v != null ? "[redacted]" : v;
  }
  if (channel && URL_IS_SECRET.has(channel) && typeof out.url === "string") {
    try {
      out.url = `${new URL(out.url).origin}/[redacted]`;
    } catch {
      out.url = "[redacted]";
    }
  }
  return out;
}

/**
 * A stored reminder as the API shows it: target redacted ({@link redactTarget}), the
 * delivery override in its API words, defaults spelled out. A list's row may say that its
 * template or target was too large to list (API-3): the view says so instead.
 */
export function reminderView(
  row: StoredReminderColumns & { template_truncated?: boolean; target_truncated?: boolean },
): ReminderView {
  return {
    ...(row.template_truncated === true ? { templateTruncated: true as const } : {}),
    ...(row.target_truncated === true ? { targetTruncated: true as const } : {}),
    key: row.key,
    offset: row.offset_duration,
    channel: row.channel,
    target: redactTarget(row.target, row.channel),
    delivery:
      row.on_lost_lease === "retry"
        ? "at-least-once"
        : row.on_lost_lease === "in_doubt"
          ? "at-most-once"
          : null,
    maxAttempts: row.max_attempts,
    template: row.template ?? null,
    rateLimitKey: row.rate_limit_key ?? null,
    quietHours: row.quiet_hours ?? null,
    priority: row.priority ?? "normal",
    ...(row.category ? { category: row.category } : {}),
    ...(row.digest ? { digest: row.digest } : {}),
  };
}
