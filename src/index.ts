/**
 * punctual — public API. Explicit named exports only.
 *
 * ```ts
 * import { createScheduler } from "punctual";
 * const punctual = await createScheduler({ dataDir: "./punctual-data" });
 * await punctual.start();
 * await punctual.createSchedule({
 *   dtstart: "2027-01-04T09:00:00", tzid: "Europe/Berlin", rrule: "FREQ=WEEKLY;BYDAY=MO",
 *   perpetual: true,
 *   reminders: [{ key: "standup", offset: "-PT15M", channel: "webhook", target: { url: "https://example.com/hook" } }],
 * });
 * ```
 */
export {
  createPunctual,
  createScheduler,
  Punctual,
  VERSION,
  type CallContext,
  type CreateResult,
  type Health,
  type PunctualOptions,
} from "./app/punctual.js";
export {
  ScheduleHandle,
  ScheduleHandles,
  type BackfillResult,
  type BulkResult,
  type PurgeResult,
  type ScheduleDescription,
  type TriggerResult,
  type UpsertResult,
} from "./app/punctual.js";
export type {
  BackfillInput,
  BulkRedriveInput,
  BulkResolveInput,
  TriggerInput,
  UpsertScheduleInput,
} from "./contracts/operator.js";
export {
  resolveConfig,
  type ConfigInput,
  type PunctualConfig,
  type SchedulerOptions,
} from "./config/index.js";
export { configFromEnv, ENV_VARS } from "./config/env.js";
export { SystemClock, TestClock, type Clock } from "./clock/index.js";
export type { Channel, ChannelDelivery, SendContext, SendResult } from "./channels/types.js";
export {
  ChannelRegistry,
  createDiscordChannel,
  createEmailChannel,
  createLogChannel,
  createSlackChannel,
  createWebhookChannel,
  handlerChannel,
  renderTemplate,
  signWebhook,
  verifyWebhook,
  type ChatChannelOptions,
  type EmailChannelOptions,
  type EmailTarget,
  type HandlerChannelOptions,
  type HandlerContext,
  type HandlerFunction,
  type ReminderTemplate,
  type RenderedMessage,
} from "./channels/index.js";
export {
  ConfigError,
  ConflictError,
  DataDirLockedError,
  NotFoundError,
  PermanentError,
  PunctualError,
  RateLimitedError,
  ResourceBusyError,
  SchemaMismatchError,
  TransientError,
  ValidationError,
  type FieldIssue,
} from "./errors/index.js";
export {
  applyMisfire,
  applyOffset,
  parseOffset,
  parseRule,
  preview,
  quietHoursEnd,
  validateRule,
  type CatchUp,
  type DstPolicy,
  type Occurrence,
  type ParseResult,
  type PreviewInput,
  type PreviewItem,
  type QuietHours,
  type Recurrence,
  type RecurrenceInput,
  type WeekdayName,
} from "./recurrence/index.js";
export type {
  AttemptView,
  CreateScheduleInput,
  DeliveryView,
  ReminderView,
  ScheduleView,
} from "./contracts/index.js";
export {
  DELIVERY_STATES,
  SCHEDULE_STATES,
  deliveryKey,
  type DeliveryState,
  type ScheduleState,
} from "./domain/index.js";
export type { Database, Engine } from "./store/database.js";
export {
  calendarImportTask,
  readCalendarSource,
  type CalendarImportTaskOptions,
} from "./app/calendar-task.js";
export type { PunctualTaskContext, PunctualTaskDefinition } from "./app/punctual.js";
export {
  parseEvery,
  TASK_LEASE_MARGIN_MS,
  TASK_OUTCOMES,
  type TaskContext,
  type TaskDefinition,
  type TaskOutcome,
} from "./scheduler/tasks.js";
export {
  reminderKindSchema,
  reminderKindsSchema,
  type ReminderKind,
  type ReminderKindInput,
  type ReminderKindView,
} from "./contracts/kinds.js";
