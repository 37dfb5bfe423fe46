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
    const shown =
      (typeof value === "string" && value.length <= 200) ||
      typeof value === "number" ||
      typeof value === "boolean";
    const message = readableMessage(issue, value);
    return shown ? { field, message, value } : { field, message };
  });
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
  if (issue.code !== "invalid_type" || !issue.message.startsWith("Invalid input: expected")) {
    return issue.message;
  }
  const expected = String(issue.expected);
  const wanted = /^[aeiou]/.test(expected) ? `an ${expected}` : `a ${expected}`;
  return value === undefined ? `required: ${wanted}` : `must be ${wanted}, not ${kindOf(value)}`;
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
