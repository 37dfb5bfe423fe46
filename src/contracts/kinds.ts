/**
 * Reminder kinds (DEL-11): the shapes of the registry, shared by the library option
 * `reminderKinds`, `PUT /v1/reminder-kinds/{key}`, the CLI and the API responses.
 *
 * A kind names the fields a reminder would otherwise repeat: channel, default offset,
 * target, template. A reminder that names a kind (`{ "kind": "day-before" }`) gets the
 * kind's fields, its own fields winning; they are copied into the reminder when its
 * schedule is written, so a later edit of the kind changes the reminders written after
 * it, never deliveries already planned.
 */
import { z } from "zod";
import { offsetSchema, templateSchema } from "./index.js";

/** A kind key: the same alphabet as reminder keys. */
export const reminderKindKeySchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/, "must be 1–64 letters, digits, _ . : -");

/** `PUT /v1/reminder-kinds/{key}` body: a kind without its key (the path names it). */
export const reminderKindBodySchema = z
  .object({
    /** Channel name, e.g. `webhook`, `email`, `log`; must be a channel of the process. */
    channel: z.string().min(1).max(64),
    /** Default offset from each occurrence, ISO 8601 duration (`-PT15M`); default `PT0S`. */
    offset: offsetSchema.default("PT0S"),
    /** Channel target (checked by the channel); a reminder's own target replaces it. */
    target: z.record(z.string(), z.unknown()).optional(),
    /** CH-6 Liquid templates `{ subject?, text?, html? }`. */
    template: templateSchema.optional(),
    /** Only for recurring schedules: a one-off schedule naming this kind is refused. */
    seriesOnly: z.boolean().default(false),
    /** A disabled kind is kept but refused to new reminders (existing ones keep sending). */
    enabled: z.boolean().default(true),
  })
  .strict();

/** One entry of the `reminderKinds` library option (and of `examples/reminder-kinds.json`). */
export const reminderKindSchema = reminderKindBodySchema.extend({ key: reminderKindKeySchema });

/** The `reminderKinds` option: a list of kinds. */
export const reminderKindsSchema = z.array(reminderKindSchema).max(1_000);

/** A kind as the library option and the API take it. */
export type ReminderKindInput = z.input<typeof reminderKindSchema>;
/** A kind after validation, defaults filled in. */
export type ReminderKind = z.output<typeof reminderKindSchema>;

/** A kind as the API returns it (target secrets redacted). */
export interface ReminderKindView {
  key: string;
  channel: string;
  offset: string;
  target: Record<string, unknown> | null;
  template: { subject?: string; text?: string; html?: string } | null;
  seriesOnly: boolean;
  enabled: boolean;
  /** Grows by one at each change. */
  version: number;
  createdAt: string;
  updatedAt: string;
}
