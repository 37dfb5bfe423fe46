import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../../src/errors/index.js";
import {
  dryRunDeliveries,
  parseCalendar,
  type CalendarImport,
  type IcalImportOptions,
} from "../../../src/ical/index.js";
import { createScheduleSchema } from "../../../src/contracts/index.js";

const fixtures = fileURLToPath(new URL("../../fixtures/ics/", import.meta.url));
const read = (name: string): string => readFileSync(fixtures + name, "utf8");
const YEAR_2027 = {
  fromMs: Date.parse("2027-01-01T00:00:00Z"),
  toMs: Date.parse("2028-01-01T00:00:00Z"),
};

function load(name: string, options: Partial<IcalImportOptions> = {}): CalendarImport {
  return parseCalendar(read(name), { source: "test-calendar", ...options });
}

function event(result: CalendarImport, externalId: string) {
  const found = result.events.find((e) => e.schedule.externalId === externalId);
  if (found === undefined) throw new Error(`no event ${externalId}`);
  return found;
}

describe("iCalendar import: Google-like export", () => {
  const result = load("google-like.ics", { useAlarms: true, remind: ["-PT15M"] });

  it("API-5: every VEVENT UID becomes one schedule with source and externalId", () => {
    expect(result.events.map((e) => e.schedule.externalId).sort()).toEqual([
      "floating-lunch@example.test",
      "weekly-berlin@example.test",
      "weekly-utc-anchored@example.test",
    ]);
    for (const e of result.events) {
      expect(e.schedule.source).toBe("test-calendar");
      expect(createScheduleSchema.safeParse(e.schedule).success).toBe(true);
    }
    expect(result.calendarTzid).toBe("Europe/Berlin");
    expect(result.skipped).toEqual([]);
  });

  it("REC-2: a weekly series written in UTC keeps its wall-clock time in X-WR-TIMEZONE across DST", () => {
    const e = event(result, "weekly-utc-anchored@example.test");
    expect(e.schedule.tzid).toBe("Europe/Berlin");
    const due = dryRunDeliveries({ ...result, events: [e] }, YEAR_2027).filter(
      (d) => d.reminderKey === "alarm--PT10M",
    );
    // 09:00 Berlin: 08:00Z in winter, 07:00Z after 2027-03-28.
    expect(due.map((d) => d.occurrenceAt)).toEqual([
      "2027-03-04T08:00:00Z",
      "2027-03-11T08:00:00Z",
      "2027-03-18T08:00:00Z",
      "2027-03-25T08:00:00Z",
      "2027-04-01T07:00:00Z",
      "2027-04-08T07:00:00Z",
    ]);
    expect(due[0]?.dueAt).toBe("2027-03-04T07:50:00Z");
    expect(result.warnings.some((w) => /UTC expanded in Europe\/Berlin/.test(w))).toBe(true);
  });

  it("API-5: a moved instance is an EXDATE of the original plus an RDATE of the new start", () => {
    const e = event(result, "weekly-berlin@example.test");
    expect(e.schedule.exdate).toContain("2027-03-15T14:00:00");
    expect(e.schedule.rdate).toEqual(["2027-03-17T16:00:00"]);
    expect(e.recurrenceIds).toEqual({ "2027-03-17T15:00:00Z": "20270315T140000" });
    const rows = dryRunDeliveries(result, YEAR_2027).filter(
      (d) => d.uid === "weekly-berlin@example.test",
    );
    expect(rows.map((d) => d.occurrenceAt)).toEqual([
      "2027-03-01T13:00:00Z",
      "2027-03-08T13:00:00Z",
      "2027-03-17T15:00:00Z",
      "2027-03-22T13:00:00Z",
      "2027-03-29T12:00:00Z",
      "2027-04-05T12:00:00Z",
    ]);
    expect(rows[2]?.recurrenceId).toBe("20270315T140000");
    expect(rows[0]?.recurrenceId).toBeNull();
    expect(e.schedule.payload).toMatchObject({
      summary: "Review",
      location: "Room 4",
      description: "Weekly review, bring notes",
      allDay: false,
      duration: "PT1H",
    });
  });

  it("API-5: floating times are read in X-WR-TIMEZONE, and the output says so", () => {
    const e = event(result, "floating-lunch@example.test");
    expect(e.schedule).toMatchObject({ dtstart: "2027-03-10T12:00:00", tzid: "Europe/Berlin" });
    expect(result.floatingTzid).toBe("Europe/Berlin");
    expect(result.warnings.some((w) => /floating times read in Europe\/Berlin/.test(w))).toBe(true);
  });
});

describe("iCalendar import: Exchange-like export", () => {
  const result = load("exchange-like.ics", { remind: ["-PT15M"] });

  it("API-5: Windows zone names are mapped through CLDR (windows-iana)", () => {
    expect(event(result, "exchange-weekly-0001").schedule.tzid).toBe("Europe/Berlin");
    expect(event(result, "exchange-gmt").schedule.tzid).toBe("Europe/London");
    expect(event(result, "exchange-nz").schedule.tzid).toBe("Pacific/Auckland");
    expect(event(result, "exchange-aus").schedule.tzid).toBe("Australia/Sydney");
  });

  it("API-5: a custom VTIMEZONE is matched to an IANA zone by its rules, with a warning", () => {
    expect(event(result, "exchange-custom-zone").schedule.tzid).toBe("America/New_York");
    expect(result.warnings.some((w) => /Customized Time Zone.*America\/New_York/.test(w))).toBe(
      true,
    );
  });

  it("API-5: Outlook display names and prefixed TZIDs resolve to IANA zones", () => {
    expect(event(result, "owa-display-name").schedule.tzid).toBe("America/New_York");
    expect(event(result, "prefixed-zone").schedule.tzid).toBe("Europe/Berlin");
  });

  it("API-5: a moved Exchange instance and a UTC EXDATE apply to the right occurrences", () => {
    const rows = dryRunDeliveries(result, YEAR_2027).filter(
      (d) => d.uid === "exchange-weekly-0001",
    );
    const at = rows.map((d) => d.occurrenceAt);
    expect(at).not.toContain("2027-03-11T08:00:00Z");
    expect(at).toContain("2027-03-12T10:30:00Z");
    expect(at).not.toContain("2027-04-06T07:00:00Z");
    expect(at).toContain("2027-04-08T07:00:00Z");
    expect(rows.find((d) => d.occurrenceAt === "2027-03-12T10:30:00Z")?.recurrenceId).toBe(
      "20270311T090000",
    );
  });
});

describe("iCalendar import: Apple-like export with VALARMs", () => {
  const result = load("apple-like.ics", { useAlarms: true });

  it("API-5: VALARM triggers become reminders: relative, RELATED=END, REPEAT with DURATION", () => {
    const e = event(result, "apple-monthly");
    expect(e.schedule.reminders.map((r) => [r.key, r.offset])).toEqual([
      ["alarm--PT15M", "-PT15M"],
      ["alarm-PT1H5M", "PT1H5M"],
      ["alarm--P1D", "-P1D"],
      ["alarm--PT23H", "-PT23H"],
      ["alarm--PT22H", "-PT22H"],
    ]);
    expect(e.schedule.reminders.every((r) => r.channel === "webhook")).toBe(true);
  });

  it("API-5: EXDATE lists and a cancelled override remove their instances", () => {
    const rows = dryRunDeliveries(result, YEAR_2027).filter(
      (d) => d.uid === "apple-monthly" && d.reminderKey === "alarm--PT15M",
    );
    expect(rows.map((d) => d.occurrenceAt)).toEqual([
      "2027-01-05T14:00:00Z",
      "2027-05-05T13:00:00Z",
      "2027-06-05T13:00:00Z",
    ]);
  });

  it("API-5: an absolute trigger is an offset from the start of a one-off event", () => {
    const e = event(result, "apple-one-off");
    expect(e.schedule.reminders).toEqual([
      { key: "alarm--PT2H", offset: "-PT2H", channel: "webhook" },
    ]);
    const [row] = dryRunDeliveries(result, YEAR_2027).filter((d) => d.uid === "apple-one-off");
    expect(row?.dueAt).toBe("2027-06-10T20:00:00Z");
  });

  it("API-5: an absolute trigger on a recurring event is ignored with a warning", () => {
    const e = event(result, "apple-recurring-absolute");
    expect(e.schedule.reminders.map((r) => r.key)).toEqual(["alarm--PT5M"]);
    expect(result.warnings.some((w) => /absolute VALARM TRIGGER/.test(w))).toBe(true);
  });

  it("API-5: a STATUS:CANCELLED event is not reminded and is reported", () => {
    expect(result.events.some((e) => e.uid === "apple-cancelled")).toBe(false);
    expect(result.skipped).toEqual([
      { uid: "apple-cancelled", line: 46, reason: "STATUS:CANCELLED (not reminded)" },
    ]);
  });

  it("API-5: without useAlarms and remind offsets, events have no reminder and are skipped with a reason", () => {
    const bare = load("apple-like.ics");
    expect(bare.events).toEqual([]);
    expect(bare.skipped.filter((s) => /no reminder/.test(s.reason)).length).toBe(3);
  });
});

describe("iCalendar import: all-day events", () => {
  const result = load("allday-dst.ics", { useAlarms: true });

  it("REC-2: a -P1D alarm on an all-day event lands at local midnight the day before, across DST", () => {
    const rows = dryRunDeliveries(result, YEAR_2027);
    const dstDay = rows.find((d) => d.uid === "allday-dst-day");
    expect(dstDay).toEqual({
      uid: "allday-dst-day",
      recurrenceId: null,
      occurrenceAt: "2027-03-28",
      dueAt: "2027-03-26T23:00:00Z", // 2027-03-27 00:00 CET
      reminderKey: "alarm--P1D",
    });
    const after = rows.filter((d) => d.uid === "allday-after-dst");
    // -P1D follows the wall clock: 2027-03-28 00:00 CET; -PT12H is exact from 00:00 CEST.
    expect(after.map((d) => [d.reminderKey, d.dueAt])).toEqual([
      ["alarm--P1D", "2027-03-27T23:00:00Z"],
      ["alarm--PT12H", "2027-03-28T10:00:00Z"],
    ]);
  });

  it("API-5: all-day series are date-only schedules; a UTC UNTIL becomes a date", () => {
    const e = event(result, "allday-weekly");
    expect(e.schedule).toMatchObject({ dtstart: "2027-03-22", tzid: "Europe/Berlin" });
    expect(e.schedule.rrule).toBe("FREQ=WEEKLY;UNTIL=20270405");
    expect(e.schedule.payload).toMatchObject({ allDay: true, end: "2027-03-23", duration: "P1D" });
    const rows = dryRunDeliveries(result, YEAR_2027).filter((d) => d.uid === "allday-weekly");
    expect(rows.map((d) => d.occurrenceAt)).toEqual(["2027-03-22", "2027-03-29", "2027-04-05"]);
  });
});

describe("iCalendar import: floating times without a calendar zone", () => {
  it("API-5: floating times are read in defaultTzid and the warnings say so", () => {
    const result = load("floating.ics", { remind: ["-PT15M"], defaultTzid: "America/Chicago" });
    expect(result.calendarTzid).toBeNull();
    expect(result.floatingTzid).toBe("America/Chicago");
    expect(event(result, "floating-one").schedule).toMatchObject({
      dtstart: "2027-01-15T09:00:00",
      tzid: "America/Chicago",
    });
    expect(event(result, "utc-one").schedule).toMatchObject({
      dtstart: "2027-01-15T09:00:00Z",
      tzid: "UTC",
    });
    expect(result.warnings).toContain(
      "1 event(s) with floating times read in America/Chicago (the default zone; the file names none)",
    );
    const rows = dryRunDeliveries(result, YEAR_2027);
    expect(rows.find((d) => d.uid === "floating-one")?.occurrenceAt).toBe("2027-01-15T15:00:00Z");
  });
});

describe("iCalendar import: RANGE=THISANDFUTURE", () => {
  const result = load("thisandfuture.ics", { remind: ["PT0S"] });

  it("API-5: the series ends before the change and a second schedule carries the rest", () => {
    const first = event(result, "course-42");
    const rest = event(result, "course-42#20270201T100000");
    expect(first.schedule.rrule).toBe("FREQ=WEEKLY;COUNT=4;BYDAY=MO");
    expect(rest.schedule).toMatchObject({
      dtstart: "2027-02-02T14:00:00",
      rrule: "FREQ=WEEKLY;COUNT=4;BYDAY=TU",
    });
    expect(rest.schedule.payload.recurrenceId).toBe("20270201T100000");
    const rows = dryRunDeliveries(result, YEAR_2027).filter((d) => d.uid === "course-42");
    expect(rows.map((d) => d.occurrenceAt)).toEqual([
      "2027-01-04T09:00:00Z",
      "2027-01-11T09:00:00Z",
      "2027-01-18T09:00:00Z",
      "2027-01-25T09:00:00Z",
      "2027-02-02T13:00:00Z",
      "2027-02-09T13:00:00Z",
      "2027-02-17T08:00:00Z", // single override inside the moved part
      "2027-02-23T13:00:00Z",
    ]);
    expect(rows[4]?.recurrenceId).toBe("20270201T100000");
    expect(rows[6]?.recurrenceId).toBe("20270215T100000");
  });

  it("API-5: a cancelled THISANDFUTURE override ends the series there", () => {
    const e = event(result, "course-43");
    expect(e.schedule.rrule).toBe("FREQ=DAILY;UNTIL=20270110T065959Z");
    expect(e.schedule.perpetual).toBe(false);
    expect(result.skipped.map((s) => s.uid)).toEqual(["course-43"]);
    expect(dryRunDeliveries(result, YEAR_2027).filter((d) => d.uid === "course-43")).toHaveLength(
      6,
    );
  });
});

describe("iCalendar import: overrides are matched by UID", () => {
  it("API-5: overrides of two series at the same times never cross", () => {
    const result = load("two-uids.ics", { remind: ["-PT15M"] });
    const a = event(result, "series-a");
    const b = event(result, "series-b");
    expect(a.schedule.rdate).toEqual(["2027-01-05T15:00:00"]);
    expect(a.schedule.exdate).toEqual(["2027-01-05T09:00:00"]);
    expect(b.schedule.rdate).toEqual([]);
    expect(b.schedule.exdate).toEqual(["2027-01-06T09:00:00"]);
    const rows = dryRunDeliveries(result, YEAR_2027);
    const of = (uid: string) => rows.filter((d) => d.uid === uid).map((d) => d.occurrenceAt);
    expect(of("series-a")).toEqual([
      "2027-01-04T08:00:00Z",
      "2027-01-05T14:00:00Z",
      "2027-01-06T08:00:00Z",
      "2027-01-07T08:00:00Z",
      "2027-01-08T08:00:00Z",
    ]);
    expect(of("series-b")).toEqual([
      "2027-01-04T08:00:00Z",
      "2027-01-05T08:00:00Z",
      "2027-01-07T08:00:00Z",
      "2027-01-08T08:00:00Z",
    ]);
  });
});

describe("iCalendar import: malformed input", () => {
  const result = load("malformed.ics", { remind: ["-PT15M"], useAlarms: true });
  const reason = (uid: string) => result.skipped.find((s) => s.uid === uid);

  it("API-5: one bad event is skipped with its UID, line and reason; the rest imports", () => {
    // An invalid VALARM costs only that alarm: the event keeps its `remind` reminder.
    expect(result.events.map((e) => e.uid).sort()).toEqual([
      "good-one",
      "invalid-trigger",
      "lowercase-and-unclosed",
    ]);
    expect(reason("bad-rrule")).toMatchObject({ line: 12, reason: expect.stringMatching(/UNTL/) });
    expect(reason("end-before-start")).toMatchObject({
      line: 18,
      reason: expect.stringMatching(/DTEND .* is before DTSTART/),
    });
    expect(reason("unknown-zone")?.reason).toMatch(/unknown time zone "Mars\/Olympus_Mons"/);
    expect(reason("negative-duration")?.reason).toMatch(/DURATION -PT1H is negative/);
    expect(reason("invalid-trigger")).toBeUndefined();
    expect(result.warnings.some((w) => /"invalid-trigger".*invalid trigger: "PT-2H"/.test(w))).toBe(
      true,
    );
    expect(reason("no-dtstart")?.reason).toBe("no DTSTART");
  });

  it("API-5: an event with two different DTSTARTs is skipped naming both; the same one twice imports", () => {
    const calendar = (uid: string, starts: string[]) =>
      [
        "BEGIN:VEVENT",
        `UID:${uid}`,
        ...starts.map((start) => `DTSTART;TZID=Europe/Berlin:${start}`),
        "SUMMARY:Stand-up",
        "END:VEVENT",
      ].join("\r\n");
    const text = [
      "BEGIN:VCALENDAR",
      "VERSION:2.0",
      "PRODID:-//test//EN",
      calendar("two-starts", ["20270105T090000", "20270105T100000"]),
      calendar("same-start-twice", ["20270105T090000", "20270105T090000"]),
      "END:VCALENDAR",
    ].join("\r\n");
    const parsed = parseCalendar(text, { source: "test-calendar", remind: ["-PT15M"] });
    expect(parsed.events.map((e) => e.uid)).toEqual(["same-start-twice"]);
    expect(event(parsed, "same-start-twice").schedule.dtstart).toBe("2027-01-05T09:00:00");
    expect(parsed.skipped.find((s) => s.uid === "two-starts")?.reason).toBe(
      "more than one DTSTART (TZID=Europe/Berlin:20270105T090000, TZID=Europe/Berlin:20270105T100000; RFC 5545 §3.6.1 allows one): event not imported",
    );
  });

  it("API-5: broken folding, lower-case names and missing END lines are repaired", () => {
    expect(event(result, "good-one").schedule.payload.description).toBe(
      "A description whose line was broken\nwithout folding by the exporter",
    );
    expect(event(result, "lowercase-and-unclosed").schedule.dtstart).toBe("2027-01-05T09:00:00");
    expect(result.warnings.some((w) => /without END line closed/.test(w))).toBe(true);
  });

  it("API-5: a file that is not iCalendar is refused with a ValidationError on field file", () => {
    let caught: unknown;
    try {
      parseCalendar(read("not-a-calendar.txt"), { source: "x" });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ValidationError);
    expect((caught as ValidationError).issues[0]?.field).toBe("file");
  });

  it("API-5: size and event-count limits are enforced and named", () => {
    expect(() => parseCalendar(read("google-like.ics"), { source: "x", maxBytes: 100 })).toThrow(
      /maxBytes=100/,
    );
    expect(() => parseCalendar(read("google-like.ics"), { source: "x", maxEvents: 2 })).toThrow(
      /has 4 events, more than the limit maxEvents=2/,
    );
  });

  it("API-5: bad options are refused: unknown default zone, bad remind offset", () => {
    expect(() =>
      parseCalendar(read("floating.ics"), { source: "x", defaultTzid: "Nowhere/City" }),
    ).toThrow(ValidationError);
    expect(() =>
      parseCalendar(read("floating.ics"), { source: "x", remind: ["15 minutes"] }),
    ).toThrow(/remind\.0/);
  });
});

describe("iCalendar import: progress, re-import and dry-run contract", () => {
  it("API-5: onProgress reports the events processed out of the total", () => {
    const calls: Array<[number, number]> = [];
    load("exchange-like.ics", { remind: ["-PT15M"], onProgress: (d, t) => calls.push([d, t]) });
    expect(calls.at(-1)).toEqual([8, 8]);
  });

  it("DEL-9: importing the same file twice yields identical schedules (stable keys and ids)", () => {
    const a = load("apple-like.ics", { useAlarms: true, remind: ["-PT15M"] });
    const b = load("apple-like.ics", { useAlarms: true, remind: ["-PT15M"] });
    expect(JSON.parse(JSON.stringify(b))).toEqual(JSON.parse(JSON.stringify(a)));
  });

  it("API-5: dry-run rows are sorted by dueAt then uid and only cover occurrences in [from, to)", () => {
    const result = load("two-uids.ics", { remind: ["-PT15M", "-P1D"] });
    const rows = dryRunDeliveries(result, {
      fromMs: Date.parse("2027-01-05T08:00:00Z"),
      toMs: Date.parse("2027-01-07T08:00:00Z"),
    });
    const sorted = [...rows].sort((x, y) =>
      x.dueAt === y.dueAt ? (x.uid < y.uid ? -1 : 1) : x.dueAt < y.dueAt ? -1 : 1,
    );
    expect(rows).toEqual(sorted);
    expect(
      rows.every(
        (d) => d.occurrenceAt >= "2027-01-05T08:00:00Z" && d.occurrenceAt < "2027-01-07T08:00:00Z",
      ),
    ).toBe(true);
    expect(rows.find((d) => d.reminderKey === "remind--P1D")?.dueAt).toBe("2027-01-04T08:00:00Z");
    expect(() => dryRunDeliveries(result, { fromMs: 10, toMs: 10 })).toThrow(ValidationError);
  });

  it("API-5: a dry run over a result that went through JSON gives the same rows", () => {
    const result = load("thisandfuture.ics", { remind: ["-PT15M"] });
    const again = JSON.parse(JSON.stringify(result)) as CalendarImport;
    expect(dryRunDeliveries(again, YEAR_2027)).toEqual(dryRunDeliveries(result, YEAR_2027));
  });
});

describe("all-day events of a file that names its zone only in VTIMEZONE", () => {
  it("REC-2: an all-day date is local midnight in the file's own zone, unless the caller chose one", () => {
    const text = readFileSync(
      new URL("../../fixtures/ics/outlook-allday.ics", import.meta.url),
      "utf8",
    );
    const own = parseCalendar(text, { source: "o", remind: ["-PT15M"], channel: "log" });
    expect(own.events[0]!.schedule).toMatchObject({ dtstart: "2027-06-15", tzid: "Europe/Berlin" });
    const [d] = dryRunDeliveries(own, {
      fromMs: Date.parse("2027-06-01T00:00:00Z"),
      toMs: Date.parse("2027-07-01T00:00:00Z"),
    });
    expect(d).toMatchObject({ occurrenceAt: "2027-06-15", dueAt: "2027-06-14T21:45:00Z" });
    const chosen = parseCalendar(text, {
      source: "o",
      remind: ["-PT15M"],
      channel: "log",
      defaultTzid: "America/New_York",
    });
    expect(chosen.events[0]!.schedule.tzid).toBe("America/New_York");
  });
});

describe("texts that cannot be stored", () => {
  it("API-5: a NUL in SUMMARY, LOCATION or DESCRIPTION is dropped, so the event imports as its dry run shows it", () => {
    const ics = [
      "BEGIN:VCALENDAR",
      "VERSION:2.0",
      "PRODID:-//punctual tests//nul//EN",
      "BEGIN:VEVENT",
      "UID:nul@punctual.test",
      "DTSTAMP:20261220T120000Z",
      "DTSTART:20270301T090000Z",
      "SUMMARY:Pay\u0000 rent",
      "LOCATION:Room\u00004",
      "DESCRIPTION:line one\u0000",
      "END:VEVENT",
      "END:VCALENDAR",
      "",
    ].join("\r\n");
    const parsed = parseCalendar(ics, { source: "nul", remind: ["PT0S"], channel: "log" });
    expect(parsed.skipped).toEqual([]);
    expect(parsed.warnings.filter((w) => w.includes("NUL characters"))).toHaveLength(3);
    const payload = parsed.events[0]!.schedule.payload;
    expect(payload).toMatchObject({
      summary: "Pay rent",
      location: "Room4",
      description: "line one",
    });
    expect(JSON.stringify(payload)).not.toContain("\\u0000");
    // What the import then validates: the schedule as the API would store it.
    expect(createScheduleSchema.safeParse(parsed.events[0]!.schedule).success).toBe(true);
  });
});

describe("iCalendar import: components that are not events", () => {
  it("API-5: VTODO and VJOURNAL components are counted and named in a warning, not silently dropped", () => {
    const text = [
      "BEGIN:VCALENDAR",
      "VERSION:2.0",
      "PRODID:-//test//ignored//EN",
      "BEGIN:VEVENT",
      "UID:meeting@example.test",
      "DTSTART:20270105T090000Z",
      "DURATION:PT1H",
      "SUMMARY:Meeting",
      "END:VEVENT",
      "BEGIN:VTODO",
      "UID:todo-1@example.test",
      "SUMMARY:Buy milk",
      "BEGIN:VALARM",
      "ACTION:DISPLAY",
      "TRIGGER:-PT15M",
      "END:VALARM",
      "END:VTODO",
      "BEGIN:VTODO",
      "UID:todo-2@example.test",
      "SUMMARY:Call back",
      "END:VTODO",
      "BEGIN:VJOURNAL",
      "UID:journal@example.test",
      "SUMMARY:Notes",
      "END:VJOURNAL",
      "END:VCALENDAR",
      "",
    ].join("\r\n");
    const result = parseCalendar(text, { source: "mixed", remind: ["-PT15M"] });
    expect(result.events.map((e) => e.schedule.externalId)).toEqual(["meeting@example.test"]);
    expect(result.warnings).toContain(
      "2 VTODO components ignored: only VEVENT components become schedules",
    );
    expect(result.warnings).toContain(
      "1 VJOURNAL component ignored: only VEVENT components become schedules",
    );
  });
});
