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

describe("sizes, ranges and options in words", () => {
  const bounded = z.object({
    reminders: z.array(z.string()).min(1).max(2),
    title: z.string().min(1),
    code: z.string().min(3),
    attempts: z.number().int().min(1).max(100),
    misfire: z.enum(["skip", "latest", "all"]),
  });
  const issues = (input: unknown) => {
    const result = bounded.safeParse(input);
    if (result.success) throw new Error("expected a failure");
    return issuesFromZod(result.error, "", input).map((i) => `${i.field}: ${i.message}`);
  };

  it("API-1: too few or too many items, an empty or short text, a number out of range and an unknown option are said in words", () => {
    expect(
      issues({ reminders: [], title: "", code: "ab", attempts: 0, misfire: "sometimes" }),
    ).toEqual([
      "reminders: must have at least 1 item",
      "title: must not be empty",
      "code: must be at least 3 characters long",
      "attempts: must be at least 1",
      'misfire: must be one of "skip", "latest", "all"',
    ]);
    expect(
      issues({
        reminders: ["a", "b", "c"],
        title: "t",
        code: "abc",
        attempts: 101,
        misfire: "all",
      }),
    ).toEqual(["reminders: must have at most 2 items", "attempts: must be at most 100"]);
  });

  it("API-1: a list of too many or too few items is named by its count as the value", () => {
    const result = bounded.safeParse({
      reminders: ["a", "b", "c"],
      title: "t",
      code: "abc",
      attempts: 1,
      misfire: "all",
    });
    if (result.success) throw new Error("expected a failure");
    expect(issuesFromZod(result.error, "", { reminders: ["a", "b", "c"] })).toEqual([
      { field: "reminders", message: "must have at most 2 items", value: 3 },
    ]);
  });
});
