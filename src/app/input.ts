/**
 * Request input: parsing with zod into field issues (`reminders.0.offset`) that name
 * every bad field, as a ValidationError (API-1).
 */
import type { z } from "zod";
import { ValidationError, type FieldIssue } from "../errors/index.js";

/** zod issues as field issues (`reminders.0.offset`), naming short scalar values from `input`. */
export function issuesFromZod(error: z.ZodError, prefix = "", input?: unknown): FieldIssue[] {
  return error.issues.map((issue) => {
    const field = [prefix, ...issue.path.map(String)].filter(Boolean).join(".") || "(body)";
    if (issue.code === "unrecognized_keys") {
      return { field, message: `unknown field(s): ${issue.keys.join(", ")}` };
    }
    // Name the offending value when it is a short scalar.
    let value: unknown = input;
    for (const key of issue.path) {
      value =
        value && typeof value === "object"
          ? (value as Record<PropertyKey, unknown>)[key]
          : undefined;
    }
    const message = readableMessage(issue, value);
    // A list of too many or too few items is named by its count (10,001 ids, not the ids).
    if ((issue.code === "too_big" || issue.code === "too_small") && Array.isArray(value)) {
      return { field, message, value: value.length };
    }
    const shown =
      (typeof value === "string" && value.length <= 200) ||
      typeof value === "number" ||
      typeof value === "boolean";
    return shown ? { field, message, value } : { field, message };
  });
}

/**
 * API-3: refuses a time window whose end comes before its start (ISO 8601 instants; either
 * bound may be absent).
 * @throws ValidationError naming the end field (`fields[1]`) and its value.
 */
export function checkWindow(
  from: string | undefined,
  to: string | undefined,
  fields: readonly [from: string, to: string],
): void {
  if (from && to && Date.parse(from) > Date.parse(to)) {
    throw new ValidationError({
      field: fields[1],
      message: `must not be before ${fields[0]}`,
      value: to,
    });
  }
}

/** What a JSON value is, in words ("a string", "null", "an array"), for messages. */
function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  return `a ${typeof value}`;
}

/**
 * zod's own wording of a wrong type ("Invalid input: expected array, received undefined")
 * as people read it: "required: an array" for a missing field, "must be an array, not a
 * string" otherwise. Any other message (the schemas' own) is kept.
 */
function readableMessage(issue: z.core.$ZodIssue, value: unknown): string {
  if (issue.code === "too_small" && issue.message.startsWith("Too small:")) {
    return boundMessage(issue.origin, "at least", "more than", issue.minimum, issue.inclusive);
  }
  if (issue.code === "too_big" && issue.message.startsWith("Too big:")) {
    return boundMessage(issue.origin, "at most", "less than", issue.maximum, issue.inclusive);
  }
  if (issue.code === "invalid_value" && issue.message.startsWith("Invalid option:")) {
    return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
  }
  if (issue.code !== "invalid_type" || !issue.message.startsWith("Invalid input: expected")) {
    return issue.message;
  }
  const expected = String(issue.expected);
  const wanted = /^[aeiou]/.test(expected) ? `an ${expected}` : `a ${expected}`;
  return value === undefined ? `required: ${wanted}` : `must be ${wanted}, not ${kindOf(value)}`;
}

/**
 * zod's own wording of a size or range ("Too small: expected array to have >=1 items") as
 * people read it: "must have at least 1 item", "must not be empty", "must be at most 100".
 */
function boundMessage(
  origin: string,
  inclusiveWord: string,
  exclusiveWord: string,
  bound: number | bigint,
  inclusive: boolean | undefined,
): string {
  const word = inclusive === false ? exclusiveWord : inclusiveWord;
  const n = Number(bound);
  if (origin === "array" || origin === "set") {
    return `must have ${word} ${n} item${n === 1 ? "" : "s"}`;
  }
  if (origin === "string") {
    if (n === 1 && word === "at least") return "must not be empty";
    return `must be ${word} ${n} character${n === 1 ? "" : "s"} long`;
  }
  return `must be ${word} ${n}`;
}

/** Parses with a zod schema, or throws ValidationError naming every bad field. */
export function parseInput<T extends z.ZodType>(
  schema: T,
  input: unknown,
  prefix = "",
): z.output<T> {
  const result = schema.safeParse(input);
  if (!result.success) throw new ValidationError(issuesFromZod(result.error, prefix, input));
  return result.data;
}

/** Issues of a validation error under `prefix`, or one issue naming any other error. */
export function prefixIssues(err: unknown, prefix: string): FieldIssue[] {
  if (err instanceof ValidationError) {
    return err.issues.map((i) => ({ ...i, field: `${prefix}.${i.field}` }));
  }
  return [{ field: prefix, message: err instanceof Error ? err.message : String(err) }];
}

/**
 * The message of an unknown channel name (DEL-11): the channels this process has, and for
 * `email` the setting that turns it on (it exists only with an SMTP server).
 * @param known the registered channel names.
 * @param channel the name the request gave.
 */
export function unknownChannelMessage(known: readonly string[], channel: string): string {
  return (
    `unknown channel; known: ${known.join(", ") || "(none)"}` +
    (channel === "email"
      ? " (the email channel needs an SMTP server: set PUNCTUAL_SMTP_URL, e.g. smtp://user:pass@host:587)"
      : "")
  );
}
