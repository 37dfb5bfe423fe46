import { describe, expect, it } from "vitest";
import { slicedJson } from "../../../src/api/sliced-json.js";

async function chunks(stream: ReadableStream<Uint8Array>): Promise<string[]> {
  const decoder = new TextDecoder();
  const out: string[] = [];
  for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) {
    out.push(decoder.decode(chunk));
  }
  return out;
}

describe("slicedJson", () => {
  const summary = (n: number) => ({
    source: "cal",
    created: n,
    skipped: [{ uid: 'a\u0000"é', line: null, reason: "x" }],
    calendarTzid: null,
    schedules: Array.from({ length: n }, (_, i) => ({
      uid: `event-${i}@x`,
      scheduleId: i % 3 === 0 ? null : `id-${i}`,
      action: "created",
    })),
  });

  for (const n of [0, 1, 1_999, 2_000, 4_001]) {
    it(`OPS-12: a summary of ${n} schedules is written as exactly JSON.stringify's bytes`, async () => {
      const value = summary(n);
      expect((await chunks(slicedJson(value, "schedules"))).join("")).toBe(JSON.stringify(value));
    });
  }

  it("OPS-12: a summary of 50,000 schedules crosses in chunks of 2,000 items, not in one piece", async () => {
    const parts = await chunks(slicedJson(summary(50_000), "schedules"));
    // The head, 25 slices, the closing.
    expect(parts).toHaveLength(27);
    expect(Math.max(...parts.map((p) => p.length))).toBeLessThan(200_000);
  });

  it("OPS-12: refuses a field that is not the last property or not an array", () => {
    expect(() => slicedJson({ schedules: [], source: "x" }, "schedules")).toThrow(/last property/);
    expect(() => slicedJson({ source: "x", schedules: 3 }, "schedules")).toThrow(/an array/);
  });
});
