/**
 * Lenient RRULE repairs of the importer (API-5): a doubled `RRULE:` prefix and parts that
 * are not RFC 5545 rule parts are taken out and named in a warning, so the event imports
 * instead of being skipped. A misspelt part (a bound the author meant) and a rule left
 * with nothing to repeat are still refused.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { dryRunDeliveries, parseCalendar } from "../../../src/ical/index.js";
import { repairRuleText } from "../../../src/recurrence/index.js";

const file = fileURLToPath(new URL("../../fixtures/ics/rule-repairs.ics", import.meta.url));
const result = parseCalendar(readFileSync(file, "utf8"), {
  source: "repairs",
  remind: ["PT0S"],
});
const rule = (uid: string) => result.events.find((e) => e.schedule.externalId === uid)?.schedule;
const warningFor = (uid: string) => result.warnings.filter((w) => w.includes(`"${uid}"`));

describe("iCalendar import: lenient RRULE repairs", () => {
  it("API-5: a doubled RRULE: prefix is removed, the event imports and a warning names it", () => {
    expect(rule("doubled-prefix@punctual.test")?.rrule).toBe("FREQ=WEEKLY;BYDAY=MO;COUNT=4");
    expect(warningFor("doubled-prefix@punctual.test")).toEqual([
      expect.stringMatching(/line 4\): RRULE repaired: a doubled "RRULE:" prefix removed$/),
    ]);
  });

  it("API-5: unknown and X- rule parts are left out and each is named in the warning", () => {
    expect(rule("unknown-parts@punctual.test")?.rrule).toBe("FREQ=WEEKLY;BYDAY=TU;COUNT=3");
    const [warning, ...rest] = warningFor("unknown-parts@punctual.test");
    expect(rest).toEqual([]);
    expect(warning).toMatch(
      /RRULE repaired: unknown part\(s\) "Whatever", "X-NAME=Fancy", "SHADE=blue" left out/,
    );
    expect(warning).not.toMatch(/prefix/);
  });

  it("API-5: both repairs on one rule are named in one warning", () => {
    expect(rule("both@punctual.test")?.rrule).toBe("FREQ=DAILY;COUNT=2");
    expect(warningFor("both@punctual.test")).toEqual([
      expect.stringMatching(/a doubled "RRULE:" prefix removed; unknown part\(s\) "Junk" left out/),
    ]);
  });

  it("API-5: a repaired series has the occurrences of the rule as meant", () => {
    const dates = dryRunDeliveries(result, {
      fromMs: Date.parse("2027-01-01T00:00:00Z"),
      toMs: Date.parse("2027-03-01T00:00:00Z"),
    })
      .filter((d) => d.uid !== "clean@punctual.test")
      .map((d) => `${d.uid.split("@")[0]} ${d.occurrenceAt}`);
    expect(dates).toEqual([
      "doubled-prefix 2027-01-04T09:00:00Z",
      "unknown-parts 2027-01-05T09:00:00Z",
      "both 2027-01-06T09:00:00Z",
      "both 2027-01-07T09:00:00Z",
      "doubled-prefix 2027-01-11T09:00:00Z",
      "unknown-parts 2027-01-12T09:00:00Z",
      "doubled-prefix 2027-01-18T09:00:00Z",
      "unknown-parts 2027-01-19T09:00:00Z",
      "doubled-prefix 2027-01-25T09:00:00Z",
    ]);
  });

  it("API-5: a misspelt part is not dropped (it would lengthen the series): the event is skipped naming it", () => {
    expect(rule("typo@punctual.test")).toBeUndefined();
    expect(result.skipped).toContainEqual(
      expect.objectContaining({ uid: "typo@punctual.test", reason: expect.stringMatching(/UNTL/) }),
    );
    expect(warningFor("typo@punctual.test")).toEqual([]);
  });

  it("API-5: a rule left without FREQ is not repaired: the event is skipped as before", () => {
    expect(rule("no-freq@punctual.test")).toBeUndefined();
    expect(result.skipped.map((s) => s.uid)).toContain("no-freq@punctual.test");
  });

  it("API-5: a clean rule gives no repair warning", () => {
    expect(rule("clean@punctual.test")?.rrule).toBe("FREQ=DAILY;COUNT=2");
    expect(warningFor("clean@punctual.test")).toEqual([]);
  });
});

describe("repairRuleText", () => {
  it("REC-3: strips every leading RRULE: prefix and counts them", () => {
    expect(repairRuleText(" rrule:RRULE: FREQ=DAILY")).toEqual({
      text: "FREQ=DAILY",
      prefixes: 2,
      dropped: [],
      misspelt: [],
    });
  });

  it("REC-3: keeps known parts as written, drops the rest, reports near misses of known names", () => {
    expect(repairRuleText("freq=daily;;NOPE;X-A=1;FOO=2;COUNTT=3;BYDAY=MO")).toEqual({
      text: "freq=daily;BYDAY=MO",
      prefixes: 0,
      dropped: ["NOPE", "X-A=1", "FOO=2"],
      misspelt: ["COUNTT=3"],
    });
  });
});
