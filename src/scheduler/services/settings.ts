/**
 * Settings that reach running processes (OPS-11).
 *
 * Database-held settings live in `punctual_settings`; a trigger moves the one row of
 * `punctual_settings_version` whenever one changes (migration 0011). Each maintenance tick
 * reads that version (one primary-key read); when it moved, the process reloads the
 * settings it applies, logs `settings changed` with the old and new version, and records
 * the version it now runs on in its `punctual_instances` row, which `punctual status`
 * shows. A process therefore runs on a copy at most one tick old, and never silently on a
 * stale one: a reload that fails fails the tick (the pass is not recorded, readiness goes
 * stale after `heartbeatStaleMs`).
 *
 * Settings applied here:
 * - `retry_policy`: `{ backoffBaseMs?, backoffCapMs? }` (ms), over the configured
 *   defaults; the next retry decision uses them (`maxAttempts` is fixed per reminder when it
 *   is created, so it is not a live setting);
 * - `webhook_secret` (the default signing secret when none is configured) and
 *   `webhook_secret_previous`: `{ secret, until }`; until `until` (ISO time) webhook
 *   requests carry a signature by each, so receivers that still hold the old secret keep
 *   accepting them during the overlap (Standard Webhooks: space-separated `v1,` entries).
 *
 * Other settings tables hook in by calling `punctual_bump_settings_version()` from a row
 * trigger, and by registering a {@link SettingsListener} that reloads what they own.
 */
import { z } from "zod";
import type { SchedulerOptions } from "../../config/index.js";
import type { Logger } from "../../observability/logger.js";
import type { Metrics } from "../../observability/metrics.js";
import type { Database, Queryable } from "../../store/database.js";
import {
  putSetting,
  readSettings,
  readSettingsVersion,
  recordSettingsVersion,
} from "../../store/observe.js";

/** Keys of `punctual_settings` this module reads. */
export const SETTING_KEYS = {
  retryPolicy: "retry_policy",
  webhookSecret: "webhook_secret",
  webhookSecretPrevious: "webhook_secret_previous",
} as const;

const retryPolicySchema = z
  .object({
    backoffBaseMs: z.number().int().min(1).optional(),
    backoffCapMs: z.number().int().min(1).optional(),
  })
  .strict();

/** The `retry_policy` setting: ms, over the configured `backoffBaseMs` / `backoffCapMs`. */
export type RetryPolicySetting = z.infer<typeof retryPolicySchema>;

const previousSecretSchema = z.object({ secret: z.string().min(1), until: z.string().datetime() });

/** Called after a reload with the new version; may reload settings of its own. */
export type SettingsListener = (db: Queryable, version: number) => Promise<void> | void;

/** The secrets a webhook request is signed with (default secret only). */
export interface SigningSecrets {
  current: string;
  /** Older secrets still inside their overlap window. */
  previous: readonly string[];
}

/**
 * The live settings of one process: a mutable copy of the scheduler options that the
 * scheduler's parts read at each decision, and the default webhook secrets.
 */
export class LiveSettings {
  /** The scheduler options with the database-held overrides applied. */
  readonly options: SchedulerOptions;
  readonly #base: SchedulerOptions;
  /** Configured default secret (`PUNCTUAL_WEBHOOK_SECRET`): wins over the database's. */
  readonly #configuredSecret: string | null;
  #secret: string | null;
  #previous: { secret: string; untilMs: number } | null = null;
  #version: number | null = null;
  readonly #listeners: SettingsListener[] = [];

  /**
   * @param options the resolved scheduler options (frozen; copied here).
   * @param webhook `configured`: the configured secret, if any; `initial`: the secret in use now.
   */
  constructor(options: SchedulerOptions, webhook: { configured?: string; initial?: string } = {}) {
    this.#base = options;
    this.options = { ...options };
    this.#configuredSecret = webhook.configured ?? null;
    this.#secret = webhook.configured ?? webhook.initial ?? null;
  }

  /** The settings version this process runs on (null before the first read). */
  get version(): number | null {
    return this.#version;
  }

  /** Registers a reload hook (e.g. a rate-limit table), run on every version change. */
  onChange(listener: SettingsListener): void {
    this.#listeners.push(listener);
  }

  /** Secrets of the default webhook signature at `nowMs` (Unix ms): current, then previous. */
  signingSecrets(nowMs: number): SigningSecrets | null {
    if (this.#secret === null) return null;
    const previous =
      this.#previous && nowMs < this.#previous.untilMs && this.#previous.secret !== this.#secret
        ? [this.#previous.secret]
        : [];
    return { current: this.#secret, previous };
  }

  /**
   * Reads the settings version; when it moved (or on the first call), reloads and applies
   * the settings, runs the listeners, and returns the change. Returns null when nothing
   * changed.
   * @throws the database error, or a ConfigError-like Error naming a malformed setting.
   */
  async refresh(db: Queryable): Promise<{ from: number | null; to: number } | null> {
    const row = await readSettingsVersion(db);
    const version = row?.version ?? 0;
    if (version === this.#version) return null;
    const stored = await readSettings(db, { keys: Object.values(SETTING_KEYS) });
    this.#apply(stored);
    for (const listener of this.#listeners) await listener(db, version);
    const from = this.#version;
    this.#version = version;
    return { from, to: version };
  }

  #apply(stored: Map<string, unknown>): void {
    const retry = stored.get(SETTING_KEYS.retryPolicy);
    const policy =
      retry === undefined ? {} : parseSetting(retryPolicySchema, retry, "retry_policy");
    Object.assign(this.options, {
      backoffBaseMs: policy.backoffBaseMs ?? this.#base.backoffBaseMs,
      backoffCapMs: policy.backoffCapMs ?? this.#base.backoffCapMs,
    });
    if (this.#configuredSecret === null) {
      const secret = stored.get(SETTING_KEYS.webhookSecret);
      if (typeof secret === "string" && secret !== "") this.#secret = secret;
    }
    const previous = stored.get(SETTING_KEYS.webhookSecretPrevious);
    if (previous === undefined || previous === null) {
      this.#previous = null;
    } else {
      const p = parseSetting(previousSecretSchema, previous, "webhook_secret_previous");
      this.#previous = { secret: p.secret, untilMs: Date.parse(p.until) };
    }
  }
}

function parseSetting<T>(schema: z.ZodType<T>, value: unknown, key: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(
      `setting ${key} is malformed: ${issue ? `${issue.path.join(".") || "value"}: ${issue.message}` : "invalid"}`,
    );
  }
  return parsed.data;
}

/** What the settings sweep needs. */
export interface SettingsSweepContext {
  db: Database;
  logger: Logger;
  metrics: Metrics;
  owner: string;
  settings: LiveSettings;
}

/**
 * OPS-11: the settings sweep of one tick (after the heartbeat, so the instance row exists):
 * picks up a changed settings version, logs it, and records it on the instance row.
 */
export async function settingsSweep(ctx: SettingsSweepContext): Promise<void> {
  const change = await ctx.settings.refresh(ctx.db);
  if (!change) return;
  await recordSettingsVersion(ctx.db, { instance: ctx.owner, version: change.to });
  ctx.metrics.settingsVersion.set(change.to);
  if (change.from === null) {
    ctx.logger.debug({ settingsVersion: change.to }, "settings loaded");
    return;
  }
  ctx.metrics.settingsChanges.inc();
  ctx.logger.info(
    { from: change.from, to: change.to },
    `settings changed: version ${change.from} → ${change.to}`,
  );
}

/** Parameters of {@link rotateWebhookSecret}. */
export interface RotateWebhookSecretParams {
  /** The new default secret (`whsec_<base64>`). */
  secret: string;
  /** The secret it replaces; signatures carry it too until `until`. */
  previous: string;
  /** End of the overlap window. */
  until: Date;
}

/**
 * OPS-11: rotates the database-held default webhook secret with an overlap window, in one
 * transaction; every process signs with both secrets within one tick, and with the new one
 * alone once `until` passed.
 */
export async function rotateWebhookSecret(
  db: Database,
  p: RotateWebhookSecretParams,
): Promise<void> {
  await db.transaction(async (tx) => {
    await putSetting(tx, {
      key: SETTING_KEYS.webhookSecretPrevious,
      value: { secret: p.previous, until: p.until.toISOString() },
    });
    await putSetting(tx, { key: SETTING_KEYS.webhookSecret, value: p.secret });
  });
}

/** OPS-11: stores the `retry_policy` setting; every process applies it within one tick. */
export async function setRetryPolicy(db: Queryable, policy: RetryPolicySetting): Promise<void> {
  await putSetting(db, {
    key: SETTING_KEYS.retryPolicy,
    value: parseSetting(retryPolicySchema, policy, "retry_policy"),
  });
}
