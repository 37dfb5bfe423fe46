/**
 * API-10: the recipient contract's shapes and limits, without a server: the id charset
 * and length, the attributes' size, the opt-out lists, unknown preference keys, defaults.
 */
import { describe, expect, it } from "vitest";
import {
  MAX_OPT_OUT_ENTRIES,
  MAX_RECIPIENT_ATTRIBUTES_BYTES,
  recipientBodySchema,
  recipientIdSchema,
  recipientRowSchema,
} from "../../../src/contracts/recipients.js";

const paths = (input: unknown): string[] => {
  const r = recipientBodySchema.safeParse(input);
  return r.success ? [] : r.error.issues.map((i) => i.path.join("."));
};

describe("API-10 recipient contract", () => {
  it("API-10: ids are 1–200 characters of letters, digits and _ . : @ + -, starting with a letter or digit", () => {
    for (const ok of ["a", "alice@example.com", "user:42", "A.b_c-d+e", "x".repeat(200)]) {
      expect(recipientIdSchema.safeParse(ok).success, ok).toBe(true);
    }
    for (const bad of ["", "-a", ".a", "a b", "a/b", "a%40", "é", "x".repeat(201)]) {
      expect(recipientIdSchema.safeParse(bad).success, bad).toBe(false);
    }
  });

  it("API-10: defaults fill targets, attributes and preferences; tzid is required", () => {
    expect(recipientBodySchema.parse({ tzid: "UTC" })).toEqual({
      tzid: "UTC",
      targets: {},
      attributes: {},
      preferences: {},
    });
    expect(paths({})).toEqual(["tzid"]);
    expect(paths({ tzid: "UTC", extra: 1 })).toEqual([""]);
    expect(recipientRowSchema.safeParse({ tzid: "UTC" }).success).toBe(false);
  });

  it("API-10: attributes at most 16 KiB as JSON, storable text only", () => {
    const at = (n: number) => ({ tzid: "UTC", attributes: { s: "x".repeat(n) } });
    // {"s":"…"} is 8 bytes around the string.
    expect(paths(at(MAX_RECIPIENT_ATTRIBUTES_BYTES - 8))).toEqual([]);
    expect(paths(at(MAX_RECIPIENT_ATTRIBUTES_BYTES - 7))).toEqual(["attributes"]);
    expect(paths({ tzid: "UTC", attributes: { s: "a\u0000b" } })).toEqual(["attributes"]);
    expect(paths({ tzid: "UTC", attributes: ["not", "an", "object"] })).toEqual(["attributes"]);
  });

  it("API-10: opt-out lists hold at most 10 distinct names; unknown preference keys are refused", () => {
    const names = (n: number) => Array.from({ length: n }, (_, i) => `n${i}`);
    const opt = (optOut: unknown) => ({ tzid: "UTC", preferences: { optOut } });
    expect(paths(opt({ channels: names(MAX_OPT_OUT_ENTRIES) }))).toEqual([]);
    expect(paths(opt({ categories: names(MAX_OPT_OUT_ENTRIES + 1) }))).toEqual([
      "preferences.optOut.categories",
    ]);
    expect(paths(opt({ categories: ["digest", "digest"] }))).toEqual([
      "preferences.optOut.categories",
    ]);
    expect(paths(opt({ topics: ["x"] }))).toEqual(["preferences.optOut"]);
    expect(paths({ tzid: "UTC", preferences: { unsubscribe: true } })).toEqual(["preferences"]);
    expect(
      paths({ tzid: "UTC", preferences: { quietHours: { start: "22:00", end: "07:00" } } }),
    ).toEqual([]);
    expect(
      paths({ tzid: "UTC", preferences: { quietHours: { start: "25:00", end: "07:00" } } }),
    ).toEqual(["preferences.quietHours.start"]);
  });

  it("API-10: targets are objects keyed by channel name, at most 16", () => {
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`c${i}`, {}]));
    expect(paths({ tzid: "UTC", targets: many })).toEqual(["targets"]);
    expect(paths({ tzid: "UTC", targets: { email: "a@example.com" } })).toEqual(["targets.email"]);
  });
});
