/** Delivery channels: the port and its adapters (CH-1 … CH-6). */
export type { Channel, ChannelDelivery, SendContext, SendResult } from "./types.js";
export {
  createWebhookChannel,
  WEBHOOK_EVENT_TYPE,
  signWebhook,
  verifyWebhook,
  webhookSecretKey,
  WEBHOOK_SECRET_PREFIX,
  DEFAULT_TOLERANCE_SECONDS,
} from "./webhook.js";
export type {
  WebhookBody,
  WebhookChannel,
  WebhookChannelOptions,
  WebhookHeaders,
  WebhookTarget,
  ResolveHost,
} from "./webhook.js";
export { createLogChannel } from "./log.js";
export { createBuiltInChannels, type BuiltInChannelOptions } from "./built-in.js";
export { createSlackChannel, createDiscordChannel, slackBody, discordBody } from "./chat.js";
export type {
  ChatChannel,
  ChatChannelOptions,
  ChatTarget,
  DiscordBody,
  SlackBody,
} from "./chat.js";
export {
  createEmailChannel,
  emailMessageId,
  parseSmtpUrl,
  senderAllowed,
  smtpSecretRedactor,
} from "./email.js";
export type { EmailChannel, EmailChannelOptions, EmailTarget, SmtpServer } from "./email.js";
export { handlerChannel } from "./handler.js";
export type { HandlerChannelOptions, HandlerContext, HandlerFunction } from "./handler.js";
export { renderTemplate, validateTemplate, templateContext } from "./template.js";
export type { ReminderTemplate, RenderedMessage, TextEscape } from "./template.js";
export type { LogChannelLine, LogChannelOptions } from "./log.js";
export { ChannelRegistry } from "./registry.js";
export { isForbiddenAddress, TargetAllowlist } from "./address.js";
