/**
 * API-5: shapes met in real exported calendars (written here by hand, same structure): an
 * invalid VALARM beside good reminders, all-day overrides whose RECURRENCE-ID is a
 * date-time, and a zoned RRULE whose UNTIL is a local time.
 */
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../../src/errors/index.js";
import {
  dryRunDeliveries,
  parseCalendar,
  type CalendarImport,
  type IcalImportOptions,
} from "../../../src/ical/index.js";

const calendar = (...lines: string[]): string =>
  ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//punctual tests//EN", ...lines, "END:VCALENDAR"]
    .join("\r\n")
    .concat("\r\n");

const read = (text: string, options: Partial<IcalImportOptions> = {}): CalendarImport =>
  parseCalendar(text, { source: "test", ...options });

const WEST_EUROPE = [
  "BEGIN:VTIMEZONE",
  "TZID:W. Europe Standard Time",
  "BEGIN:STANDARD",
  "DTSTART:16010101T030000",
  "TZOFFSETFROM:+0200",
  "TZOFFSETTO:+0100",
  "RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=-1SU;BYMONTH=10",
  "END:STANDARD",
  "BEGIN:DAYLIGHT",
  "DTSTART:16010101T020000",
  "TZOFFSETFROM:+0100",
  "TZOFFSETTO:+0200",
  "RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=-1SU;BYMONTH=3",
  "END:DAYLIGHT",
  "END:VTIMEZONE",
];

describe("API-5: an invalid VALARM is skipped alone", () => {
  const text = calendar(
    "BEGIN:VEVENT",
    "UID:train-ticket",
    "DTSTART;TZID=Europe/Amsterdam:20270304T081500",
    "DTEND;TZID=Europe/Amsterdam:20270304T093000",
    "SUMMARY:Train",
    "BEGIN:VALARM",
    "ACTION:DISPLAY",
    "TRIGGER:PT-2H",
    "END:VALARM",
    "BEGIN:VALARM",
    "ACTION:DISPLAY",
    "DESCRIPTION:no trigger at all",
    "END:VALARM",
    "BEGIN:VALARM",
    "ACTION:DISPLAY",
    "TRIGGER:-PT30M",
    "END:VALARM",
    "END:VEVENT",
    "BEGIN:VEVENT",
    "UID:only-bad-alarm",
    "DTSTART:20270305T100000Z",
    "SUMMARY:Nothing usable",
    "BEGIN:VALARM",
    "ACTION:DISPLAY",
    "TRIGGER:PT-2H",
    "END:VALARM",
    "END:VEVENT",
  );

  it("API-5: the event keeps its --remind reminder and its valid VALARMs; each bad one is a warning naming UID and line", () => {
    const result = read(text, { useAlarms: true, remind: ["-PT15M"] });
    const train = result.events.find((e) => e.uid === "train-ticket");
    expect(train?.schedule.reminders.map((r) => r.key)).toEqual(["remind--PT15M", "alarm--PT30M"]);
    expect(result.skipped.find((s) => s.uid === "train-ticket")).toBeUndefined();
    const warnings = result.warnings.filter((w) => w.includes('"train-ticket"'));
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/line 4\b.*VALARM 1 \(line 9\).*"PT-2H" is not a duration/);
    expect(warnings[1]).toMatch(/VALARM 2 \(line 13\).*no TRIGGER/);
    // The other event keeps its remind offset too.
    expect(result.events.find((e) => e.uid === "only-bad-alarm")).toBeDefined();
    const rows = dryRunDeliveries(result, {
      fromMs: Date.parse("2027-03-01T00:00:00Z"),
      toMs: Date.parse("2027-03-10T00:00:00Z"),
    });
    expect(rows.filter((r) => r.uid === "train-ticket").map((r) => r.dueAt)).toEqual([
      "2027-03-04T06:45:00Z",
      "2027-03-04T07:00:00Z",
    ]);
  });

  it("API-5: an event whose only reminder source is a bad VALARM is skipped, saying so", () => {
    const result = read(text, { useAlarms: true });
    expect(result.skipped.find((s) => s.uid === "only-bad-alarm")?.reason).toMatch(
      /no usable VALARM/,
    );
    expect(result.events.find((e) => e.uid === "train-ticket")?.schedule.reminders).toHaveLength(1);
  });
});

describe("API-5: an all-day override whose RECURRENCE-ID is a date-time", () => {
  // An all-day series on Tuesdays and Thursdays; the Thursday 2026-02-26 moved to Friday.
  const series = (ridLine: string, ...header: string[]): string =>
    calendar(
      ...header,
      "BEGIN:VEVENT",
      "UID:allday-moved",
      "RRULE:FREQ=WEEKLY;UNTIL=20260817T220000Z;INTERVAL=1;BYDAY=TU,TH;WKST=MO",
      "DTSTART;VALUE=DATE:20260219",
      "DTEND;VALUE=DATE:20260220",
      "SUMMARY:All-day series",
      "END:VEVENT",
      "BEGIN:VEVENT",
      "UID:allday-moved",
      ridLine,
      "DTSTART;VALUE=DATE:20260227",
      "DTEND;VALUE=DATE:20260228",
      "SUMMARY:All-day series",
      "END:VEVENT",
    );
  const FEB = {
    fromMs: Date.parse("2026-02-15T00:00:00Z"),
    toMs: Date.parse("2026-03-02T00:00:00Z"),
  };
  const days = (result: CalendarImport): string[] =>
    dryRunDeliveries(result, FEB).map((r) => r.occurrenceAt);
  const expected = ["2026-02-19", "2026-02-24", "2026-02-27"];

  it("API-5: a local-midnight RECURRENCE-ID in a Windows zone (as Exchange 2010 writes it) replaces its day once", () => {
    const result = read(
      series("RECURRENCE-ID;TZID=W. Europe Standard Time:20260226T000000", ...WEST_EUROPE),
      { remind: ["-PT15M"] },
    );
    expect(days(result)).toEqual(expected);
    expect(result.events[0]?.schedule.exdate).toEqual(["2026-02-26"]);
  });

  it.each([
    ["a UTC RECURRENCE-ID, the file naming no zone", "RECURRENCE-ID:20260225T230000Z", []],
    [
      "a UTC RECURRENCE-ID in a file whose calendar zone is another",
      "RECURRENCE-ID:20260225T230000Z",
      ["X-WR-TIMEZONE:America/New_York", ...WEST_EUROPE],
    ],
    [
      "a UTC RECURRENCE-ID with the caller's zone west of UTC",
      "RECURRENCE-ID:20260225T230000Z",
      [],
      "America/Los_Angeles",
    ],
  ] as [string, string, string[], string?][])(
    "API-5: %s matches the DATE instance of that day, not a second one",
    (_what, ridLine, header, defaultTzid) => {
      const result = read(series(ridLine, ...header), {
        remind: ["-PT15M"],
        ...(defaultTzid === undefined ? {} : { defaultTzid }),
      });
      expect(days(result)).toEqual(expected);
      expect(result.warnings.filter((w) => /names no instance/.test(w))).toEqual([]);
    },
  );

  it("API-5: a RECURRENCE-ID that names no instance at all is added with a warning", () => {
    const result = read(series("RECURRENCE-ID;VALUE=DATE:20260225"), { remind: ["-PT15M"] });
    expect(days(result)).toEqual(["2026-02-19", "2026-02-24", "2026-02-26", "2026-02-27"]);
    expect(result.warnings.some((w) => /"allday-moved".*20260225 names no instance/.test(w))).toBe(
      true,
    );
  });
});

describe("API-5: the lenient reader keeps a local UNTIL of a zoned series", () => {
  it("REC-3: a local UNTIL is read in the event's zone and written as UTC, with a warning", () => {
    const result = read(
      calendar(
        "BEGIN:VEVENT",
        "UID:local-until",
        "DTSTART;TZID=Europe/Berlin:20270104T090000",
        "RRULE:FREQ=DAILY;UNTIL=20270108T090000",
        "END:VEVENT",
      ),
      { remind: ["PT0S"] },
    );
    expect(result.events[0]?.schedule.rrule).toBe("FREQ=DAILY;UNTIL=20270108T080000Z");
    expect(
      result.warnings.some((w) => /UNTIL is a local time while DTSTART has a zone/.test(w)),
    ).toBe(true);
    const rows = dryRunDeliveries(result, {
      fromMs: Date.parse("2027-01-01T00:00:00Z"),
      toMs: Date.parse("2027-02-01T00:00:00Z"),
    });
    expect(rows).toHaveLength(5);
  });

  it("REC-3: a UTC offset as the default zone is refused, saying to use an IANA name", () => {
    expect(() => read(calendar(), { defaultTzid: "+05:00" })).toThrow(ValidationError);
    try {
      read(calendar(), { defaultTzid: "+05:00" });
    } catch (err) {
      expect((err as ValidationError).issues[0]).toMatchObject({
        field: "tzid",
        message: expect.stringMatching(/IANA name/),
      });
    }
  });
});
