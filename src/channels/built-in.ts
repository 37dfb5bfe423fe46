/**
 * The channels every punctual has (CH-1 … CH-6): webhook, log, Slack, Discord and, when
 * an SMTP server is configured, e-mail; and how the ones that hold connections close.
 */
import { createDiscordChannel, createSlackChannel, type ChatChannelOptions } from "./chat.js";
import { createEmailChannel, type EmailChannelOptions } from "./email.js";
import { createLogChannel, type LogChannelOptions } from "./log.js";
import type { Channel } from "./types.js";
import { createWebhookChannel, type WebhookChannelOptions } from "./webhook.js";

/** Options of {@link createBuiltInChannels}, one entry a channel. */
export interface BuiltInChannelOptions {
  webhook: WebhookChannelOptions;
  log: LogChannelOptions;
  /** Slack and Discord alike. */
  chat: ChatChannelOptions;
  /** E-mail (CH-4), only when an SMTP server is configured; else there is no e-mail channel. */
  email?: EmailChannelOptions;
}

/**
 * Creates the built-in channels, in the order webhook, log, Slack, Discord, e-mail.
 * `close` releases their connections (e-mail, Slack, Discord, then the webhook), one
 * after the other.
 * @throws what {@link createEmailChannel} throws for bad e-mail options; it is created
 *   first, so then no channel is left open.
 */
export function createBuiltInChannels(options: BuiltInChannelOptions): {
  channels: Channel[];
  close: () => Promise<void>;
} {
  const email = options.email ? createEmailChannel(options.email) : null;
  const webhook = createWebhookChannel(options.webhook);
  const slack = createSlackChannel(options.chat);
  const discord = createDiscordChannel(options.chat);
  const open = email ? [email, slack, discord, webhook] : [slack, discord, webhook];
  return {
    channels: [webhook, createLogChannel(options.log), slack, discord, ...(email ? [email] : [])],
    close: async () => {
      for (const channel of open) await channel.close();
    },
  };
}
