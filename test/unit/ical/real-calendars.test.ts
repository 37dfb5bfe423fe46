/**
 * Runs every real exported calendar of the shared data folder through the import and the
 * dry run, when that folder is present next to the repository (it is never copied here).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { dryRunDeliveries, parseCalendar } from "../../../src/ical/index.js";

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
