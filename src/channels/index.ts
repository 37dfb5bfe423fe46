/** Delivery channels: the port and its adapters (CH-1, CH-5). */
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
export type { LogChannelLine, LogChannelOptions } from "./log.js";
export { ChannelRegistry } from "./registry.js";
export { isForbiddenAddress, TargetAllowlist } from "./address.js";
