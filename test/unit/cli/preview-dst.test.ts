/**
 * REC-2: `punctual preview` takes the schedule's DST policy (`--dst-gap`, `--dst-overlap`),
 * as `POST /v1/preview` takes `dst`: the occurrences it prints across a change follow it.
 */
import { describe, expect, it } from "vitest";
import { buildProgram } from "../../../src/cli/program.js";

async function preview(...args: string[]): Promise<Array<{ instant: string; local: string }>> {
  let out = "";
  const program = buildProgram({ out: (s) => (out += s), err: () => undefined });
  await program.parseAsync(["node", "punctual", "preview", ...args, "--json"]);
  return JSON.parse(out) as Array<{ instant: string; local: string }>;
}

describe("punctual preview and the DST policy (REC-2)", () => {
  it("REC-2: --dst-gap skip drops the 02:30 the spring-forward change skips; the default shifts it", async () => {
    const rule = ["--dtstart", "2027-03-27T02:30:00", "--tzid", "Europe/Berlin"];
    const daily = [...rule, "--rrule", "FREQ=DAILY", "--count", "3"];
    expect((await preview(...daily)).map((o) => o.instant)).toEqual([
      "2027-03-27T01:30:00.000Z",
      "2027-03-28T01:30:00.000Z", // 02:30 does not exist: shifted by the gap to 03:30 CEST
      "2027-03-29T00:30:00.000Z",
    ]);
    expect((await preview(...daily, "--dst-gap", "skip")).map((o) => o.instant)).toEqual([
      "2027-03-27T01:30:00.000Z",
      "2027-03-29T00:30:00.000Z",
      "2027-03-30T00:30:00.000Z",
    ]);
  });

  it("REC-2: --dst-overlap later takes the second 01:30 of New York's fall-back night; the default the first", async () => {
    const once = ["--dtstart", "2027-11-07T01:30:00", "--tzid", "America/New_York", "--count", "1"];
    expect((await preview(...once))[0]?.instant).toBe("2027-11-07T05:30:00.000Z");
    expect((await preview(...once, "--dst-overlap", "later"))[0]?.instant).toBe(
      "2027-11-07T06:30:00.000Z",
    );
  });

  it("REC-2: an unknown policy is refused naming the choices", async () => {
    let err = "";
    const program = buildProgram({ out: () => undefined, err: (s) => (err += s) });
    program.exitOverride().configureOutput({ writeErr: (s) => (err += s) });
    await expect(
      program.parseAsync([
        "node",
        "punctual",
        "preview",
        "--dtstart",
        "2027-03-27T02:30:00",
        "--dst-gap",
        "drop",
      ]),
    ).rejects.toThrow();
    expect(err).toMatch(/--dst-gap.*drop.*shift, skip/s);
  });
});
