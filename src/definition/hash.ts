/**
 * The content hash of a schedule's definition (API-1 idempotency, DEL-10 re-import): equal
 * hashes mean an idempotent replay, or an unchanged event on re-import. Pure.
 */
import { createHash } from "node:crypto";
import type { ScheduleBody } from "./body.js";

/** JSON with object keys sorted at every depth, so equal values have one text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * A checked body's definition (everything but where it came from: `source`, `externalId`)
 * with absent and default values spelled alike, so an edit that spells out a default (or
 * an import that leaves one out) is not a change. Fields added later (CH-6 template,
 * DEL-13 rate-limit key, DEL-15 quiet hours and priority, DEL-17 catch-up, API-1 title)
 * appear only when set, so schedules without them keep their hash.
 * @param defaultMaxAttempts the configured `maxAttempts` a reminder without one gets.
 */
export function normalisedDefinition(
  body: ScheduleBody,
  defaultMaxAttempts: number,
): Record<string, unknown> {
  const { source: _source, externalId: _externalId, ...definition } = body;
  const normalised: Record<string, unknown> = {
    ...definition,
    rrule: definition.rrule ?? null,
    endsAt: definition.endsAt ?? null,
    expiresAt: definition.expiresAt ?? null,
    dst: { gap: definition.dst?.gap ?? "shift", overlap: definition.dst?.overlap ?? "earlier" },
    payload: definition.payload ?? null,
    reminders: definition.reminders.map((r) => ({
      key: r.key,
      offset: r.offset,
      channel: r.channel,
      target: r.target ?? {},
      delivery: r.delivery ?? null,
      maxAttempts: r.maxAttempts ?? defaultMaxAttempts,
      ...(r.template ? { template: r.template } : {}),
      ...(r.rateLimitKey ? { rateLimitKey: r.rateLimitKey } : {}),
      ...(r.quietHours ? { quietHours: r.quietHours } : {}),
      ...(r.priority === "critical" ? { priority: r.priority } : {}),
      // API-13: only hashed when present, so reminders without one keep their hash.
      ...(r.category ? { category: r.category } : {}),
      // DEL-19: only hashed when present, so reminders without one keep their hash.
      ...(r.digest ? { digest: r.digest } : {}),
    })),
  };
  if (!definition.catchUp) delete normalised.catchUp;
  if (!definition.title) delete normalised.title;
  return normalised;
}

/**
 * SHA-256 (hex) of a checked body's {@link normalisedDefinition}: the idempotency hash of
 * a create (API-1) and the "unchanged event" test of a re-import (DEL-10).
 * @param defaultMaxAttempts the configured `maxAttempts` (default 5).
 */
export function definitionHash(body: ScheduleBody, defaultMaxAttempts = 5): string {
  return createHash("sha256")
    .update(canonicalJson(normalisedDefinition(body, defaultMaxAttempts)))
    .digest("hex");
}
