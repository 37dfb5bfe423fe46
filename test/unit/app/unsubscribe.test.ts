/**
 * API-14: the one-click unsubscribe token — signed claims that verify only unaltered,
 * under the same secret and before they expire; anything else reads as no token at all.
 */
import { describe, expect, it } from "vitest";
import {
  signUnsubscribeToken,
  UNSUBSCRIBE_TOKEN_TTL_MS,
  unsubscribeUrl,
  verifyUnsubscribeToken,
} from "../../../src/app/unsubscribe.js";

const SECRET = "a-test-secret-of-enough-length-0123";
const NOW = Date.parse("2027-01-04T08:00:00Z");
const claims = {
  tenant: "acme",
  recipientId: "u-1",
  category: "digest",
  expiresAtMs: NOW + 1_000,
};

describe("API-14 unsubscribe tokens", () => {
  it("API-14: a token verifies under its secret until it expires, to the second", () => {
    const token = signUnsubscribeToken(SECRET, claims);
    expect(token).toMatch(/^u1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(verifyUnsubscribeToken(SECRET, token, NOW)).toEqual(claims);
    expect(verifyUnsubscribeToken(SECRET, token, NOW + 999)).toEqual(claims);
    expect(verifyUnsubscribeToken(SECRET, token, NOW + 1_000)).toBeNull();
    expect(verifyUnsubscribeToken(`${SECRET}x`, token, NOW)).toBeNull();
  });

  it("API-14: a token altered anywhere, or of another version, does not verify", () => {
    const token = signUnsubscribeToken(SECRET, { ...claims, category: null });
    expect(verifyUnsubscribeToken(SECRET, token, NOW)?.category).toBeNull();
    for (let i = 0; i < token.length; i++) {
      const c = token[i]!;
      const altered = `${token.slice(0, i)}${c === "A" ? "B" : "A"}${token.slice(i + 1)}`;
      expect(verifyUnsubscribeToken(SECRET, altered, NOW), `at ${i}`).toBeNull();
    }
    const [, payload, signature] = token.split(".");
    expect(verifyUnsubscribeToken(SECRET, `u2.${payload}.${signature}`, NOW)).toBeNull();
    expect(verifyUnsubscribeToken(SECRET, `${token}.x`, NOW)).toBeNull();
    expect(verifyUnsubscribeToken(SECRET, "", NOW)).toBeNull();
  });

  it("API-14: the URL is the public base URL's /v1/unsubscribe/{token}, valid for 60 days", () => {
    const url = unsubscribeUrl("https://r.example.com/base/", SECRET, claims, NOW);
    const prefix = "https://r.example.com/base/v1/unsubscribe/";
    expect(url.startsWith(prefix)).toBe(true);
    const read = verifyUnsubscribeToken(SECRET, url.slice(prefix.length), NOW);
    expect(read?.expiresAtMs).toBe(NOW + UNSUBSCRIBE_TOKEN_TTL_MS);
    expect(UNSUBSCRIBE_TOKEN_TTL_MS).toBe(60 * 86_400_000);
  });
});
