/**
 * The `log` channel (CH-5), for development: each delivery becomes one structured log
 * line `{ msg: "reminder.due", deliveryKey, scheduleId, reminderKey, occurrenceAt, dueAt,
 * attempt, late, payload, rendered? }` at info; `rendered` is the reminder's template
 * rendered (CH-6), present only when it has one. Nothing de-duplicates log lines, so the channel is
 * not idempotent: a send interrupted by a crash becomes `in_doubt` (DEL-6).
 */
import { TransientError, ValidationError } from "../errors/index.js";
import type { Logger } from "../observability/logger.js";
import { renderTemplate, type RenderedMessage } from "./template.js";
import { reminderMessage, type Channel, type ReminderMessage } from "./types.js";

/** The line the log channel writes for one delivery. Instants are ISO 8601 UTC with `Z`. */
export interface LogChannelLine extends ReminderMessage {
  msg: "reminder.due";
  channel: "log";
  /** The reminder's template rendered (CH-6); present only when it has one. */
  rendered?: RenderedMessage;
}

/** Options of {@link createLogChannel}. */
export interface LogChannelOptions {
  /** Logger the line goes to, at info (unless `write` is given). */
  logger: Logger;
  /** Replaces the logger as the sink: receives each line as an object (tests, stdout piping). */
  write?: (line: LogChannelLine) => void;
}

/**
 * Creates the log channel. Its target is optional and ignored: `validateTarget` accepts
 * `undefined`, `null` or any object, and throws {@link ValidationError} (field `target`)
 * for anything else. `send` throws {@link TransientError} (`SEND_ABORTED`) when
 * `ctx.signal` is already aborted, otherwise resolves `{ status: null, messageId: null }`.
 */
export function createLogChannel(options: LogChannelOptions): Channel {
  const { logger, write } = options;
  return {
    name: "log",
    idempotent: false,
    digests: true,
    validateTarget(target: unknown): void {
      if (target === undefined || target === null) return;
      if (typeof target !== "object" || Array.isArray(target)) {
        throw new ValidationError({
          field: "target",
          message: "the log channel takes no target: omit it or pass {}",
          value: target,
        });
      }
    },
    // Typed by the Channel contract this object is returned as.
    async send(delivery, ctx) {
      if (ctx.signal.aborted) {
        throw new TransientError("log send aborted before it started", { code: "SEND_ABORTED" });
      }
      const line: LogChannelLine = {
        msg: "reminder.due",
        channel: "log",
        ...reminderMessage(delivery),
      };
      if (delivery.template) line.rendered = await renderTemplate(delivery.template, delivery);
      if (write) {
        write(line);
      } else {
        const { msg, ...fields } = line;
        logger.info(fields, msg);
      }
      return { status: null, messageId: null };
    },
  };
}
