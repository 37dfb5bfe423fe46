/** API-1: a bad request names each field with a message written for people. */
import { z } from "zod";
import { describe, expect, it } from "vitest";
import { issuesFromZod } from "../../../src/app/input.js";

const schema = z.object({
  dtstart: z.string(),
  reminders: z.array(z.object({ offset: z.string() })),
  title: z.string().max(5, "at most 5 characters"),
});

function issuesOf(input: unknown) {
  const result = schema.safeParse(input);
  if (result.success) throw new Error("expected a failure");
  return issuesFromZod(result.error, "", input);
}

describe("field issues from zod", () => {
  it("API-1: a missing field is 'required', naming what it must be", () => {
    expect(issuesOf({ dtstart: "2027-01-01", title: "x" })).toEqual([
      { field: "reminders", message: "required: an array" },
    ]);
  });

  it("API-1: a field of the wrong type says what it must be and what it was, with the value", () => {
    expect(issuesOf({ dtstart: 5, reminders: "r", title: "x" })).toEqual([
      { field: "dtstart", message: "must be a string, not a number", value: 5 },
      { field: "reminders", message: "must be an array, not a string", value: "r" },
    ]);
  });

  it("API-1: a schema's own message is kept", () => {
    expect(issuesOf({ dtstart: "d", reminders: [], title: "too long" })).toEqual([
      { field: "title", message: "at most 5 characters", value: "too long" },
    ]);
  });
});
