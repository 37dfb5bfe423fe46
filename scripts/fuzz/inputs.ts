/**
 * Seeded random inputs for `npm run fuzz` and the event-loop benchmark: RRULEs with every
 * part (valid and invalid values, duplicates, noise), recurrence inputs around them, and
 * calendars mutated from a few hand-written shapes of real exports.
 */

/** A seeded pseudo-random source in [0, 1) (mulberry32). */
export type Rand = () => number;

/** mulberry32: small, fast and good enough to spread fuzz cases; same seed, same cases. */
export function prng(seed: number): Rand {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const int = (r: Rand, lo: number, hi: number): number => lo + Math.floor(r() * (hi - lo + 1));
const pick = <T>(r: Rand, list: readonly T[]): T => list[Math.floor(r() * list.length)] as T;
const chance = (r: Rand, p: number): boolean => r() < p;
const pad = (n: number, w = 2): string => String(n).padStart(w, "0");

const FREQS = ["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY"];
const DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"];
export const ZONES = [
  "UTC",
  "Europe/Berlin",
  "America/New_York",
  "Australia/Lord_Howe",
  "Pacific/Apia",
  "Asia/Kolkata",
  "America/Sao_Paulo",
  "Africa/Casablanca",
];

/** A list part: `n` values drawn from [lo, hi], sometimes signed, sometimes out of range. */
function list(r: Rand, lo: number, hi: number, signed: boolean, max = 4): string {
  const n = chance(r, 0.05) ? int(r, 5, 40) : int(r, 1, max);
  const values: string[] = [];
  for (let i = 0; i < n; i++) {
    let v = int(r, lo, hi);
    if (signed && chance(r, 0.3)) v = -v;
    if (chance(r, 0.02)) v = pick(r, [0, hi + 1, -hi - 1, 1_000_000]);
    values.push(String(v));
  }
  return values.join(",");
}

function untilValue(r: Rand): string {
  const y = int(r, 1990, 2100);
  const date = `${y}${pad(int(r, 1, 12))}${pad(int(r, 1, 28))}`;
  if (chance(r, 0.02)) return pick(r, ["2027-01-01", "tomorrow", "20271301", "20270230T250000Z"]);
  if (chance(r, 0.3)) return date;
  return `${date}T${pad(int(r, 0, 23))}${pad(int(r, 0, 59))}${pad(int(r, 0, 59))}${chance(r, 0.7) ? "Z" : ""}`;
}

/** A random RRULE value: every part of RFC 5545 §3.3.10, valid values mostly, some invalid. */
export function randomRule(r: Rand): string {
  const parts: string[] = [];
  const freq = chance(r, 0.01) ? pick(r, ["FORTNIGHTLY", "daily", ""]) : pick(r, FREQS);
  if (!chance(r, 0.01)) parts.push(`FREQ=${freq}`);
  if (chance(r, 0.3))
    parts.push(
      `INTERVAL=${chance(r, 0.05) ? pick(r, [0, -1, 1_000_000, 999_999_999]) : int(r, 1, chance(r, 0.2) ? 1000 : 12)}`,
    );
  const bound = r();
  if (bound < 0.25)
    parts.push(
      `COUNT=${chance(r, 0.05) ? pick(r, [0, 1_000_000, 1_000_000_000]) : int(r, 1, chance(r, 0.2) ? 100_000 : 50)}`,
    );
  else if (bound < 0.45) parts.push(`UNTIL=${untilValue(r)}`);
  else if (bound < 0.47) parts.push(`COUNT=${int(r, 1, 20)}`, `UNTIL=${untilValue(r)}`);
  if (chance(r, 0.15)) parts.push(`BYSECOND=${list(r, 0, 60, false)}`);
  if (chance(r, 0.2)) parts.push(`BYMINUTE=${list(r, 0, 59, false)}`);
  if (chance(r, 0.25)) parts.push(`BYHOUR=${list(r, 0, 23, false)}`);
  if (chance(r, 0.35)) {
    const n = int(r, 1, 4);
    const days: string[] = [];
    for (let i = 0; i < n; i++) {
      const ord = chance(r, 0.3) ? String(int(r, -5, 5) || 1) : chance(r, 0.03) ? "60" : "";
      days.push(`${ord}${chance(r, 0.01) ? "XX" : pick(r, DAYS)}`);
    }
    parts.push(`BYDAY=${days.join(",")}`);
  }
  if (chance(r, 0.3)) parts.push(`BYMONTHDAY=${list(r, 1, 31, true)}`);
  if (chance(r, 0.1)) parts.push(`BYYEARDAY=${list(r, 1, 366, true)}`);
  if (chance(r, 0.1)) parts.push(`BYWEEKNO=${list(r, 1, 53, true)}`);
  if (chance(r, 0.3)) parts.push(`BYMONTH=${list(r, 1, 12, false)}`);
  if (chance(r, 0.15)) parts.push(`BYSETPOS=${list(r, 1, 366, true, 3)}`);
  if (chance(r, 0.1)) parts.push(`WKST=${pick(r, DAYS)}`);
  // Noise: an extension part, a duplicate, an empty part, a case change, a stray byte.
  if (chance(r, 0.03)) parts.push("X-NAME=1");
  if (chance(r, 0.03) && parts.length > 0) parts.push(pick(r, parts));
  if (chance(r, 0.02)) parts.push("");
  for (let i = parts.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [parts[i], parts[j]] = [parts[j] as string, parts[i] as string];
  }
  let text = parts.join(";");
  if (chance(r, 0.05)) text = text.toLowerCase();
  if (chance(r, 0.02)) {
    const at = int(r, 0, text.length);
    text = text.slice(0, at) + pick(r, [";", "=", ",", "\u0000", "é", "-", "9"]) + text.slice(at);
  }
  return text;
}

/** A random DTSTART: a date, a local date-time, or an instant; sometimes malformed. */
export function randomDtstart(r: Rand): string {
  const y = chance(r, 0.05) ? int(r, 1, 9999) : int(r, 1995, 2035);
  const date = `${pad(y, 4)}-${pad(int(r, 1, 12))}-${pad(int(r, 1, 28))}`;
  const time = `${pad(int(r, 0, 23))}:${pad(int(r, 0, 59))}:${pad(chance(r, 0.8) ? 0 : int(r, 0, 59))}`;
  const k = r();
  if (k < 0.01) return pick(r, ["", "2027-02-30T09:00:00", "yesterday", "2027-01-04T24:00:00"]);
  if (k < 0.2) return date;
  if (k < 0.7) return `${date}T${time}`;
  return `${date}T${time}${pick(r, ["Z", "+02:00", "-05:30", ".250Z"])}`;
}

/** A recurrence input as the API receives one (`dtstart`, `tzid`, `rrule`, lists). */
export interface FuzzRecurrence {
  dtstart: string;
  tzid: string;
  rrule: string;
  rdate?: string[];
  exdate?: string[];
}

/** A random recurrence input around {@link randomRule}. */
export function randomRecurrence(r: Rand): FuzzRecurrence {
  const input: FuzzRecurrence = {
    dtstart: randomDtstart(r),
    tzid: chance(r, 0.02) ? pick(r, ["Mars/Olympus", "+05:00", ""]) : pick(r, ZONES),
    rrule: randomRule(r),
  };
  if (chance(r, 0.05)) input.rdate = Array.from({ length: int(r, 1, 5) }, () => randomDtstart(r));
  if (chance(r, 0.05)) input.exdate = Array.from({ length: int(r, 1, 5) }, () => randomDtstart(r));
  return input;
}

// --- calendars ----------------------------------------------------------------------

/**
 * Seed shapes, written for this fuzz after the structure of common exports: a web
 * calendar with VTIMEZONE and alarms, a desktop client's all-day series with a Windows
 * zone name, a server export with an override and a cancelled instance, a floating
 * calendar with X-WR-TIMEZONE, and a THISANDFUTURE split.
 */
export const SEED_CALENDARS: readonly string[] = [
  [
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "PRODID:-//fuzz//web-like//EN",
    "X-WR-CALNAME:Team",
    "BEGIN:VTIMEZONE",
    "TZID:Europe/Berlin",
    "BEGIN:DAYLIGHT",
    "TZOFFSETFROM:+0100",
    "TZOFFSETTO:+0200",
    "DTSTART:19700329T020000",
    "RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU",
    "END:DAYLIGHT",
    "BEGIN:STANDARD",
    "TZOFFSETFROM:+0200",
    "TZOFFSETTO:+0100",
    "DTSTART:19701025T030000",
    "RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU",
    "END:STANDARD",
    "END:VTIMEZONE",
    "BEGIN:VEVENT",
    "UID:standup@fuzz.test",
    "DTSTAMP:20270101T000000Z",
    "DTSTART;TZID=Europe/Berlin:20270104T093000",
    "DTEND;TZID=Europe/Berlin:20270104T094500",
    "RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR",
    "EXDATE;TZID=Europe/Berlin:20270106T093000",
    "SUMMARY:Stand-up",
    "BEGIN:VALARM",
    "ACTION:DISPLAY",
    "TRIGGER:-PT10M",
    "DESCRIPTION:Stand-up",
    "END:VALARM",
    "END:VEVENT",
    "BEGIN:VEVENT",
    "UID:review@fuzz.test",
    "DTSTAMP:20270101T000000Z",
    "DTSTART:20270115T130000Z",
    "DURATION:PT1H",
    "RRULE:FREQ=MONTHLY;BYDAY=3FR;COUNT=12",
    "SUMMARY:Monthly review",
    "END:VEVENT",
    "END:VCALENDAR",
  ].join("\r\n"),
  [
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "PRODID:-//fuzz//desktop-like//EN",
    "BEGIN:VTIMEZONE",
    "TZID:W. Europe Standard Time",
    "BEGIN:STANDARD",
    "DTSTART:16010101T030000",
    "TZOFFSETFROM:+0200",
    "TZOFFSETTO:+0100",
    "RRULE:FREQ=YEARLY;BYDAY=-1SU;BYMONTH=10",
    "END:STANDARD",
    "BEGIN:DAYLIGHT",
    "DTSTART:16010101T020000",
    "TZOFFSETFROM:+0100",
    "TZOFFSETTO:+0200",
    "RRULE:FREQ=YEARLY;BYDAY=-1SU;BYMONTH=3",
    "END:DAYLIGHT",
    "END:VTIMEZONE",
    "BEGIN:VEVENT",
    "UID:rubbish-day",
    "DTSTAMP:20270101T000000Z",
    "DTSTART;VALUE=DATE:20270105",
    "DTEND;VALUE=DATE:20270106",
    "RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU",
    "SUMMARY:Bins out",
    "X-MICROSOFT-CDO-ALLDAYEVENT:TRUE",
    "END:VEVENT",
    "BEGIN:VEVENT",
    "UID:dentist",
    "DTSTAMP:20270101T000000Z",
    "DTSTART;TZID=W. Europe Standard Time:20270311T150000",
    "DTEND;TZID=W. Europe Standard Time:20270311T153000",
    "SUMMARY:Dentist",
    "END:VEVENT",
    "END:VCALENDAR",
  ].join("\r\n"),
  [
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "PRODID:-//fuzz//server-like//EN",
    "BEGIN:VEVENT",
    "UID:planning",
    "DTSTAMP:20270101T000000Z",
    "DTSTART;TZID=America/New_York:20270201T100000",
    "DTEND;TZID=America/New_York:20270201T110000",
    "RRULE:FREQ=WEEKLY;BYDAY=MO;UNTIL=20270601T140000Z",
    "SUMMARY:Planning",
    "END:VEVENT",
    "BEGIN:VEVENT",
    "UID:planning",
    "DTSTAMP:20270101T000000Z",
    "RECURRENCE-ID;TZID=America/New_York:20270215T100000",
    "DTSTART;TZID=America/New_York:20270216T100000",
    "DTEND;TZID=America/New_York:20270216T110000",
    "SUMMARY:Planning (moved)",
    "END:VEVENT",
    "BEGIN:VEVENT",
    "UID:planning",
    "DTSTAMP:20270101T000000Z",
    "RECURRENCE-ID;TZID=America/New_York:20270301T100000",
    "STATUS:CANCELLED",
    "DTSTART;TZID=America/New_York:20270301T100000",
    "SUMMARY:Planning",
    "END:VEVENT",
    "END:VCALENDAR",
  ].join("\r\n"),
  [
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "PRODID:-//fuzz//floating//EN",
    "X-WR-TIMEZONE:Australia/Sydney",
    "BEGIN:VEVENT",
    "UID:gym",
    "DTSTAMP:20270101T000000Z",
    "DTSTART:20270102T070000",
    "DURATION:PT1H",
    "RRULE:FREQ=DAILY;BYDAY=SA,SU;COUNT=30",
    "SUMMARY:Gym",
    "DESCRIPTION:Long text\\, folded and escaped\\nsecond line",
    "END:VEVENT",
    "BEGIN:VEVENT",
    "UID:payday",
    "DTSTAMP:20270101T000000Z",
    "DTSTART;VALUE=DATE:20270131",
    "RRULE:FREQ=MONTHLY;BYMONTHDAY=-1",
    "SUMMARY:Payday",
    "END:VEVENT",
    "END:VCALENDAR",
  ].join("\r\n"),
  [
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "PRODID:-//fuzz//split//EN",
    "BEGIN:VEVENT",
    "UID:class",
    "DTSTAMP:20270101T000000Z",
    "DTSTART:20270104T160000Z",
    "DURATION:PT45M",
    "RRULE:FREQ=WEEKLY;BYDAY=MO,WE;COUNT=20",
    "SUMMARY:Class",
    "END:VEVENT",
    "BEGIN:VEVENT",
    "UID:class",
    "DTSTAMP:20270101T000000Z",
    "RECURRENCE-ID;RANGE=THISANDFUTURE:20270201T160000Z",
    "DTSTART:20270201T170000Z",
    "DURATION:PT45M",
    "SUMMARY:Class (later)",
    "END:VEVENT",
    "END:VCALENDAR",
  ].join("\r\n"),
];

/** A calendar of `n` events drawn from the seed shapes (UIDs made unique), for load. */
export function largeCalendar(r: Rand, n: number): string {
  const out = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//fuzz//large//EN"];
  for (let i = 0; i < n; i++) {
    const start = `2027${pad(int(r, 1, 12))}${pad(int(r, 1, 28))}T${pad(int(r, 6, 20))}0000`;
    out.push(
      "BEGIN:VEVENT",
      `UID:event-${i}@fuzz.test`,
      "DTSTAMP:20270101T000000Z",
      `DTSTART;TZID=${pick(r, ZONES)}:${start}`,
      "DURATION:PT30M",
      `SUMMARY:Event ${i}`,
    );
    const k = r();
    if (k < 0.6)
      out.push(
        `RRULE:${pick(r, ["FREQ=WEEKLY", "FREQ=DAILY;COUNT=10", "FREQ=MONTHLY;BYDAY=2TU", "FREQ=YEARLY", "FREQ=WEEKLY;BYDAY=MO,WE,FR;UNTIL=20280101T000000Z"])}`,
      );
    else if (k < 0.62) out.push(`RRULE:${randomRule(r)}`);
    out.push("END:VEVENT");
  }
  out.push("END:VCALENDAR", "");
  return out.join("\r\n");
}

/** One calendar mutated from a seed shape: a few random edits of its lines. */
export function mutateCalendar(r: Rand): string {
  let lines = pick(r, SEED_CALENDARS).split("\r\n");
  const edits = int(r, 1, 6);
  for (let e = 0; e < edits; e++) {
    const i = int(r, 0, Math.max(0, lines.length - 1));
    const line = lines[i] ?? "";
    switch (int(r, 0, 13)) {
      case 0: // delete a line
        lines.splice(i, 1);
        break;
      case 1: // duplicate a line
        lines.splice(i, 0, line);
        break;
      case 2: {
        // swap two lines
        const j = int(r, 0, lines.length - 1);
        [lines[i], lines[j]] = [lines[j] as string, line];
        break;
      }
      case 3: // a random rule in place of a line, or replacing an RRULE
      case 4: {
        const at = lines.findIndex((l) => l.startsWith("RRULE:"));
        const rule = `RRULE:${randomRule(r)}`;
        if (at >= 0 && chance(r, 0.7)) lines[at] = rule;
        else lines.splice(i, 0, rule);
        break;
      }
      case 5: {
        // another start
        const at = lines.findIndex((l) => l.startsWith("DTSTART"));
        if (at >= 0) {
          const v = randomDtstart(r).replace(/[-:]/g, "");
          lines[at] = pick(r, [
            `DTSTART:${v}`,
            `DTSTART;TZID=${pick(r, [...ZONES, "Nowhere/Else", "+05:00"])}:${v.replace(/Z$/, "")}`,
            `DTSTART;VALUE=DATE:${v.slice(0, 8)}`,
          ]);
        }
        break;
      }
      case 6: {
        // a stray character
        const at = int(r, 0, line.length);
        lines[i] =
          line.slice(0, at) +
          pick(r, ["\u0000", "\ud800", ";", ":", "=", "\\", "é", "\t", '"']) +
          line.slice(at);
        break;
      }
      case 7: // fold a line at a random point (RFC 5545 §3.1)
        if (line.length > 2) {
          const at = int(r, 1, line.length - 1);
          lines.splice(i, 1, line.slice(0, at), ` ${line.slice(at)}`);
        }
        break;
      case 8: {
        // repeat an event with new UIDs
        const begin = lines.indexOf("BEGIN:VEVENT");
        const end = lines.indexOf("END:VEVENT");
        if (begin >= 0 && end > begin) {
          const block = lines.slice(begin, end + 1);
          const copies: string[] = [];
          for (let k = 0, n = int(r, 1, 30); k < n; k++)
            copies.push(...block.map((l) => (l.startsWith("UID:") ? `${l}-${k}` : l)));
          lines.splice(end + 1, 0, ...copies);
        }
        break;
      }
      case 9: // cut the file off
        lines = lines.slice(0, int(r, 1, lines.length));
        break;
      case 10: // an alarm with odd triggers
        lines.splice(
          i,
          0,
          "BEGIN:VALARM",
          `TRIGGER${pick(r, ["", ";RELATED=END", ";VALUE=DATE-TIME"])}:${pick(r, ["-PT15M", "PT-2H", "-P1D", "20270101T000000Z", "soon"])}`,
          "ACTION:DISPLAY",
          "END:VALARM",
        );
        break;
      case 11: // EXDATE/RDATE lists
        lines.splice(
          i,
          0,
          `${pick(r, ["EXDATE", "RDATE"])}:${Array.from({ length: int(r, 1, 5) }, () => randomDtstart(r).replace(/[-:]/g, "")).join(",")}`,
        );
        break;
      case 12: // RECURRENCE-ID of another form
        lines.splice(
          i,
          0,
          pick(r, [
            "RECURRENCE-ID;VALUE=DATE:20270215",
            "RECURRENCE-ID;TZID=W. Europe Standard Time:20270226T000000",
            "RECURRENCE-ID;RANGE=THISANDFUTURE:20270301T100000Z",
          ]),
        );
        break;
      default: // nest a component oddly
        lines.splice(i, 0, pick(r, ["BEGIN:VEVENT", "END:VEVENT", "BEGIN:VTODO", "END:VCALENDAR"]));
    }
  }
  return lines.join(chance(r, 0.1) ? "\n" : "\r\n");
}

const TEMPLATE_PARTS = [
  "{{ payload.s }}",
  "{{ payload.s | upcase | truncate: 20 }}",
  "{% for x in payload.list %}{{ x }}{% endfor %}",
  "{% if deliveryKey != 'x' %}{{ payload.list | sort_natural | join: ',' }}{% endif %}",
  "{{ payload.list | sample: 1000 | size }}",
  "{% assign a = payload.s | append: payload.s %}{{ a | size }}",
  "{{ 'x' | times: 99999999 }}",
  "{% raw %}{{ not a tag }}{% endraw %}",
  "{{ payload. }}",
  "{% for",
  "{% endif %}",
  "{{ payload.s | date: '%Y' }}",
];

/** A Liquid template: light, heavy or broken parts strung together (CH-6). */
export function randomTemplate(r: Rand): string {
  const n = int(r, 1, 6);
  return Array.from({ length: n }, () => pick(r, TEMPLATE_PARTS)).join(pick(r, [" ", "\n", ""]));
}

const ODD = ["\u0000", "\ud800", "\udc00", "\u001b[31m", "\u2028", "é", "𝄞", "\r\n", "<&>", '"\\'];

/** A text field: empty, odd characters, or around and over the size limits (API-1). */
export function oddText(r: Rand): string {
  const size = pick(r, [0, 1, 499, 500, 501, 2_000, 2_001, 65_535, 65_536, 65_537, 300_000]);
  const unit = chance(r, 0.5) ? "x" : pick(r, ODD);
  return unit.repeat(Math.max(0, Math.ceil(size / unit.length)));
}
