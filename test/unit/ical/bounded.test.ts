/**
 * OPS-12 for calendars: never-matching rules are skipped at import with the parts named,
 * the dry run refuses an oversized window before expanding anything (counted in steps),
 * and a large import gives the event loop a turn between slices, its lexing included.
 */
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../../src/errors/index.js";
import {
  dryRunDeliveries,
  dryRunDeliveriesAsync,
  dryRunUpperBound,
  MAX_DRY_RUN_DELIVERIES,
  parseCalendar,
  parseCalendarAsync,
} from "../../../src/ical/index.js";
import { readComponents } from "../../../src/ical/lexer.js";
import { measureWork } from "../../../src/recurrence/expand.js";

function calendar(events: Array<{ uid: string; rrule?: string; start?: string }>): string {
  const lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//punctual tests//bounded//EN"];
  for (const e of events) {
    lines.push(
      "BEGIN:VEVENT",
      `UID:${e.uid}`,
      "DTSTAMP:20270101T000000Z",
      `DTSTART;TZID=Europe/Berlin:${e.start ?? "20270104T090000"}`,
      "DURATION:PT30M",
      `SUMMARY:${e.uid}`,
    );
    if (e.rrule !== undefined) lines.push(`RRULE:${e.rrule}`);
    lines.push("END:VEVENT");
  }
  lines.push("END:VCALENDAR", "");
  return lines.join("\r\n");
}

const options = { source: "bounded", remind: ["-PT15M"] };

describe("OPS-12: calendars with rules that never match", () => {
  it("OPS-12: an event whose rule never matches is skipped with the parts named; the rest imports", () => {
    const text = calendar([
      { uid: "never-weekno", rrule: "FREQ=YEARLY;BYWEEKNO=1;BYMONTH=6" },
      { uid: "never-setpos", rrule: "FREQ=MONTHLY;BYDAY=MO;BYSETPOS=6" },
      { uid: "never-feb31", rrule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=31" },
      { uid: "weekly", rrule: "FREQ=WEEKLY;BYDAY=MO" },
    ]);
    const work = measureWork(() => parseCalendar(text, options));
    const parsed = work.result;
    expect(parsed.events.map((e) => e.uid)).toEqual(["weekly"]);
    const reasons = new Map(parsed.skipped.map((s) => [s.uid, s.reason]));
    expect(reasons.get("never-weekno")).toContain("BYWEEKNO=1;BYMONTH=6");
    expect(reasons.get("never-setpos")).toContain("BYDAY=MO;BYSETPOS=6");
    expect(reasons.get("never-feb31")).toContain("BYMONTH=2");
    // Each refused rule cost at most its feasibility search, not a walk to year 9999.
    expect(work.maxStepsPerBudget).toBeLessThanOrEqual(25_000 + 1 + 366 + 86_400);
  });
});

describe("OPS-12: the dry run refuses an oversized window before computing", () => {
  it("OPS-12: a window whose upper bound of deliveries is too large is refused with zero expansion steps", () => {
    // 40 events every minute: a year holds about 21 million deliveries.
    const text = calendar(
      Array.from({ length: 40 }, (_, i) => ({ uid: `minutely-${i}`, rrule: "FREQ=MINUTELY" })),
    );
    const parsed = parseCalendar(text, options);
    const window = {
      fromMs: Date.parse("2027-01-01T00:00:00Z"),
      toMs: Date.parse("2028-01-01T00:00:00Z"),
    };
    expect(dryRunUpperBound(parsed, window)).toBeGreaterThan(MAX_DRY_RUN_DELIVERIES);
    const work = measureWork(() => {
      try {
        dryRunDeliveries(parsed, window);
      } catch (err) {
        return err;
      }
      return null;
    });
    expect(work.result).toBeInstanceOf(ValidationError);
    expect((work.result as ValidationError).issues[0]?.field).toBe("window");
    expect((work.result as ValidationError).message).toContain("before computing");
    expect(work.steps).toBe(0);
    expect(work.budgets).toBe(0);
  });

  it("OPS-12: a window within the bound is computed, and the bound holds", () => {
    const text = calendar([
      { uid: "daily", rrule: "FREQ=DAILY" },
      { uid: "workdays", rrule: "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR" },
      { uid: "rare", rrule: "FREQ=MONTHLY;BYMONTHDAY=13;BYDAY=FR" },
      { uid: "once" },
    ]);
    const parsed = parseCalendar(text, options);
    const window = {
      fromMs: Date.parse("2027-01-01T00:00:00Z"),
      toMs: Date.parse("2028-01-01T00:00:00Z"),
    };
    const rows = dryRunDeliveries(parsed, window);
    expect(rows.length).toBeGreaterThan(365);
    expect(dryRunUpperBound(parsed, window)).toBeGreaterThanOrEqual(rows.length);
  });

  it("OPS-12: a dry run of a SECONDLY;BYSECOND series started 24 years before its window lists each of its seconds and ends", async () => {
    const text = calendar([
      { uid: "ticks", rrule: "FREQ=SECONDLY;BYSECOND=31,41", start: "20021102T013248" },
    ]);
    const parsed = parseCalendar(text, options);
    const fromMs = Date.parse("2027-01-04T08:00:00Z");
    // Each turn is one slice of work: far more than an hour of two seconds a minute needs.
    let turns = 0;
    const yieldNow = async (): Promise<void> => {
      if (++turns > 1_000) throw new Error("the dry run makes no progress");
      await new Promise<void>((resolve) => setImmediate(resolve));
    };
    const rows = await dryRunDeliveriesAsync(
      parsed,
      { fromMs, toMs: fromMs + 3_600_000 },
      yieldNow,
    );
    // Two seconds of each of 60 minutes, one reminder each.
    expect(rows).toHaveLength(120 * parsed.events[0]!.schedule.reminders.length);
    expect(rows[0]!.occurrenceAt).toBe("2027-01-04T08:00:31Z");
  });
});

describe("OPS-12: a large import gives the event loop a turn between slices", () => {
  it("OPS-12: a timer callback runs while the calendar is read, between UID groups", async () => {
    const text = calendar(
      Array.from({ length: 600 }, (_, i) => ({ uid: `event-${i}`, rrule: "FREQ=WEEKLY" })),
    );
    let progressed = 0;
    let turns = 0;
    let timerSaw: number | null = null;
    const parsed = await parseCalendarAsync(text, {
      ...options,
      sliceMs: 0,
      onProgress: (done) => {
        progressed = done;
        // Set at the first progress report (250 events read): runs at the next turn.
        if (done === 250) setTimeout(() => (timerSaw = progressed), 0);
      },
      yieldNow: async () => {
        turns++;
        await new Promise<void>((resolve) => setTimeout(resolve, 0));
      },
    });
    expect(parsed.events).toHaveLength(600);
    // The timer ran in the middle of the import, not after it.
    expect(timerSaw).not.toBeNull();
    expect(timerSaw!).toBeLessThan(600);
    // A turn after the file checks, after lexing, and after each UID group.
    expect(turns).toBeGreaterThanOrEqual(600);
    // Same result as the synchronous reader.
    const sync = parseCalendar(text, options);
    expect(parsed.events.map((e) => e.schedule)).toEqual(sync.events.map((e) => e.schedule));
  });
});

describe("OPS-12: a large file is lexed in steps", () => {
  it("OPS-12: the lexing of one event of 3,000 lines gives the event loop turns, with the same result", async () => {
    const lines = Array.from({ length: 3_000 }, (_, i) => `X-NOTE-${i}:line ${i}`);
    const text = calendar([{ uid: "long" }]).replace(
      "END:VEVENT",
      `${lines.join("\r\n")}\r\nEND:VEVENT`,
    );
    let turns = 0;
    const parsed = await parseCalendarAsync(text, {
      ...options,
      sliceMs: 0,
      yieldNow: async () => {
        turns++;
        await new Promise<void>((resolve) => setTimeout(resolve, 0));
      },
    });
    expect(parsed.events).toHaveLength(1);
    // One turn after the file checks, one per 500 lines lexed, one after lexing, one per UID.
    expect(turns).toBeGreaterThanOrEqual(3_000 / 500 + 3);
    expect(parsed.events.map((e) => e.schedule)).toEqual(
      parseCalendar(text, options).events.map((e) => e.schedule),
    );
  });

  it("API-5: line numbers and folding are kept across CRLF, LF and CR line ends and empty lines", () => {
    const text = [
      "BEGIN:VCALENDAR\r\nVERSION:2.0\n",
      "BEGIN:VEVENT\r",
      "UID:mixed\r\n\r\n",
      "DTSTART;TZID=Europe/Berlin:20270104T090000\n",
      "SUMMARY:first\r\n  half\r\n",
      "DURATION:PT30M\rRRULE:FREQ=DAILY;COUNT=2\n",
      "LOCATION:a room\nthat broke\r\n",
      "END:VEVENT\r\nEND:VCALENDAR",
    ].join("");
    const lex = readComponents(text);
    const event = lex.roots[0]!.components[0]!;
    expect(event.line).toBe(3);
    expect(event.properties.map((p) => [p.name, p.value, p.line])).toEqual([
      ["UID", "mixed", 4],
      ["DTSTART", "20270104T090000", 6],
      ["SUMMARY", "first half", 7],
      ["DURATION", "PT30M", 9],
      ["RRULE", "FREQ=DAILY;COUNT=2", 10],
      ["LOCATION", "a room\nthat broke", 11],
    ]);
    expect(lex.repairs).toEqual([
      "1 line(s) that were not content lines joined to the line before",
    ]);
    expect(lex.truncated).toBe(false);
  });
});
