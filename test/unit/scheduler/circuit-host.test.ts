/**
 * The host a circuit counts a target against (CH-7), read from the target's `url`, the
 * same on every call for the same URL.
 */
import { describe, expect, it } from "vitest";
import { targetHost } from "../../../src/scheduler/circuits.js";

describe("targetHost", () => {
  it("CH-7: the host (with its port) of a target's url, the same on every call", () => {
    const target = { url: "https://hooks.example.com:8443/reminders?x=1" };
    expect(targetHost(target)).toBe("hooks.example.com:8443");
    expect(targetHost({ ...target })).toBe("hooks.example.com:8443");
    expect(targetHost({ url: "https://other.example.org/a" })).toBe("other.example.org");
  });

  it("CH-7: no host for a target without a url, with a url that is not a string, or one that does not parse", () => {
    expect(targetHost(null)).toBeNull();
    expect(targetHost({})).toBeNull();
    expect(targetHost({ url: 42 })).toBeNull();
    expect(targetHost({ url: "not a url" })).toBeNull();
    expect(targetHost({ url: "not a url" })).toBeNull();
  });

  it("CH-7: many distinct urls each keep their own host", () => {
    for (let i = 0; i < 2_500; i++) {
      expect(targetHost({ url: `https://h${i}.example.com/p` })).toBe(`h${i}.example.com`);
    }
    expect(targetHost({ url: "https://h7.example.com/q" })).toBe("h7.example.com");
  });
});
