/**
 * Runs every real exported calendar of the shared data folder through the import and the
 * dry run, when that folder is present next to the repository (it is never copied here).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { dryRunDeliveries, parseCalendar } from "../../../src/ical/index.js";
import { validateRule } from "../../../src/recurrence/index.js";

const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));
const folder = `${repoRoot}../shared/data/ics/`;
const exists = existsSync(folder);
const files = exists
  ? readdirSync(folder)
      .filter((f) => f.endsWith(".ics"))
      .sort()
  : [];
const ONE_YEAR = {
  fromMs: Date.parse("2020-01-01T00:00:00Z"),
  toMs: Date.parse("2021-01-01T00:00:00Z"),
};

const why = exists ? "" : " (skipped: ../shared/data/ics not present)";

describe("API-5: real exported calendars", () => {
  it.skipIf(!exists)(
    `API-5: every real calendar imports and dry-runs without throwing${why}`,
    () => {
      expect(files.length).toBeGreaterThan(0);
      for (const file of files) {
        const text = readFileSync(folder + file, "utf8");
        const result = parseCalendar(text, {
          source: file,
          useAlarms: true,
          remind: ["-PT15M"],
          defaultTzid: "Europe/Berlin",
        });
        const rows = dryRunDeliveries(result, ONE_YEAR);
        expect(Array.isArray(rows), file).toBe(true);
        expect(result.events.length + result.skipped.length, file).toBeGreaterThan(0);
        // Each malformed file is reported: an event skipped, or a part of one (an alarm) dropped.
        if (file.startsWith("malformed_"))
          expect(result.skipped.length + result.warnings.length, file).toBeGreaterThan(0);
        for (const s of result.skipped) expect(s.reason.length, file).toBeGreaterThan(0);
      }
    },
  );

  it.skipIf(!exists)(
    `API-5: the 4,778-event Google export parses and maps with progress reports${why}`,
    () => {
      const text = readFileSync(`${folder}google_large_4778_events.ics`, "utf8");
      const progress: number[] = [];
      const result = parseCalendar(text, {
        source: "google",
        useAlarms: true,
        remind: ["-PT15M"],
        onProgress: (done) => progress.push(done),
      });
      expect(result.events.length).toBeGreaterThan(4_000);
      expect(progress.length).toBeGreaterThan(10);
      expect(progress.at(-1)).toBe(4778);
    },
  );
});

describe("API-5: the Google export with a garbled RRULE loses no occurrence", () => {
  // RRULE:RRULE:AnythingRandom;FREQ=WEEKLY;BYDAY=FR,MO,TH,TU,WE — skipped whole before the
  // repair, a third of the file's occurrences.
  const window = {
    fromMs: Date.parse("2020-09-01T00:00:00Z"),
    toMs: Date.parse("2027-01-01T00:00:00Z"),
  };
  const expected = (dtstart: string, tzid: string, exdate: string[]): number =>
    validateRule({ dtstart, tzid, rrule: "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", exdate }).between(
      window.fromMs,
      window.toMs,
      100_000,
    ).length;

  it.skipIf(!exists)(
    `API-5: every series imports, the repaired one with each weekday occurrence of its rule as meant${why}`,
    () => {
      const text = readFileSync(`${folder}google_denver_malformed_rrule_exdates.ics`, "utf8");
      const result = parseCalendar(text, { source: "denver", remind: ["PT0S"] });
      expect(result.skipped).toEqual([]);
      expect(result.warnings).toEqual([
        expect.stringMatching(
          /"11le1ep09hvog7dbotn6foj38e@google\.com" \(line 47\): RRULE repaired: a doubled "RRULE:" prefix removed; unknown part\(s\) "AnythingRandom" left out/,
        ),
      ]);
      const counts = new Map<string, number>();
      for (const d of dryRunDeliveries(result, window))
        counts.set(d.uid, (counts.get(d.uid) ?? 0) + 1);
      const want = new Map([
        [
          "078tk5i2t4all3kk0jcoi3mdmd@google.com",
          expected("2020-09-03T09:40:00", "America/Denver", ["2020-10-15T09:40:00"]),
        ],
        [
          "11le1ep09hvog7dbotn6foj38e@google.com",
          expected("2020-09-03T09:50:00", "America/Denver", ["2020-10-15T09:50:00"]),
        ],
        [
          "*Masked away*",
          expected(
            "2020-11-02T07:20:00",
            "Europe/Budapest",
            [21, 22, 23, 24, 25, 28, 29, 30, 31]
              .map((d) => `2020-12-${d}T07:20:00`)
              .concat("2021-01-01T07:20:00"),
          ),
        ],
      ]);
      expect(counts).toEqual(want);
      // The repaired series has as many occurrences as its clean twin of the same rule.
      expect(counts.get("11le1ep09hvog7dbotn6foj38e@google.com")).toBeGreaterThan(1_600);
    },
  );

  it.skipIf(!exists)(`API-5: no event of the 4,778-event Google export is skipped${why}`, () => {
    const text = readFileSync(`${folder}google_large_4778_events.ics`, "utf8");
    const result = parseCalendar(text, {
      source: "google",
      useAlarms: true,
      remind: ["-PT15M"],
    });
    expect(result.skipped).toEqual([]);
  });
});
