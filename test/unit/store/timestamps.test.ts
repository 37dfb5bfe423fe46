/**
 * The fast `timestamptz` reader of the PostgreSQL engine gives the `pg` driver's stock
 * parser's result for every text: the server's ISO shape in any time zone by its fast
 * path, anything else (infinity, BC, years beyond four digits, another DateStyle) by the
 * stock parser it falls back to.
 */
import pg from "pg";
import { describe, expect, it } from "vitest";
import { fastTimestamptzMs, timestamptzParser } from "../../../src/store/timestamps.js";

const stock = pg.types.getTypeParser(1184, "text") as (text: string) => unknown;
const parse = timestamptzParser(stock);

/** `n` zero-padded to `width` digits. */
const pad = (n: number, width: number) => String(n).padStart(width, "0");

/**
 * What PostgreSQL prints for the instant `ms` (epoch) in a zone `offsetS` seconds east
 * of UTC with DateStyle ISO: the fraction without trailing zeros (plus `micros`, the
 * microseconds a Date cannot hold), the offset as ±HH, ±HH:MM or ±HH:MM:SS.
 */
function pgText(ms: number, offsetS: number, micros = ""): string {
  const local = new Date(ms + offsetS * 1_000).toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
  const fraction = (local.slice(20, 23) + micros).replace(/0+$/, "");
  const abs = Math.abs(offsetS);
  const hh = pad(Math.floor(abs / 3_600), 2);
  const mm = Math.floor(abs / 60) % 60;
  const ss = abs % 60;
  const zone =
    (offsetS < 0 ? "-" : "+") +
    hh +
    (mm || ss ? `:${pad(mm, 2)}` : "") +
    (ss ? `:${pad(ss, 2)}` : "");
  return `${local.slice(0, 10)} ${local.slice(11, 19)}${fraction ? `.${fraction}` : ""}${zone}`;
}

/** Offsets seen in the tz database: whole hours, half and quarter hours, LMT seconds. */
const OFFSETS = [0, 3_600, -18_000, 19_800, 20_700, -12_600, 50_400, -43_200, 561, -17_762];

describe("timestamptz text from PostgreSQL", () => {
  it("OPS-9: the server's ISO text in any zone reads as the stock parser reads it, by the fast path", () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    const instants = [
      Date.UTC(2026, 11, 7, 16, 17, 12, 123),
      Date.UTC(2024, 1, 29, 23, 59, 59, 999),
      Date.UTC(2000, 0, 1),
      Date.UTC(1000, 0, 1, 12),
      Date.UTC(9999, 11, 31, 0, 0, 0, 5),
      Date.UTC(1970, 0, 1),
      Date.UTC(1969, 11, 31, 23, 59, 59, 990),
    ];
    for (let i = 0; i < 200; i++) {
      instants.push(Math.floor(Date.UTC(1900, 0, 1) + random() * 250 * 365.25 * 86_400_000));
    }
    let checked = 0;
    for (const ms of instants) {
      for (const offset of OFFSETS) {
        for (const micros of ["", "456", "999"]) {
          const text = pgText(ms, offset, micros);
          const expected = stock(text) as Date;
          expect(expected.getTime(), text).toBe(ms);
          expect(fastTimestamptzMs(text), text).toBe(ms);
          const got = parse(text);
          expect(got, text).toBeInstanceOf(Date);
          expect((got as Date).getTime(), text).toBe(expected.getTime());
          checked++;
        }
      }
    }
    expect(checked).toBe(instants.length * OFFSETS.length * 3);
  });

  it("OPS-9: fractions of one to six digits, truncated to the millisecond as the stock parser does", () => {
    for (const fraction of ["1", "12", "123", "1234", "12345", "123456", "999999", "000001"]) {
      const text = `2026-12-07 16:17:12.${fraction}+00`;
      expect(fastTimestamptzMs(text), text).toBe((stock(text) as Date).getTime());
    }
  });

  it("OPS-9: infinity, BC years, years outside 1000–9999 and other shapes go to the stock parser", () => {
    const others = [
      "infinity",
      "-infinity",
      "2026-12-07 16:17:12+00 BC",
      "0099-01-01 00:00:00+00",
      "0999-06-30 12:00:00+00",
      "12026-12-07 16:17:12+00",
      "2026-12-07T16:17:12Z",
      "2026-12-07 16:17:12",
      "2026-12-07 16:17:12.+00",
      "2026-12-07 16:17:12+0",
      "2026-12-07 16:17:12+00:3",
      "2026-12-07 16:17:12+00 ",
      "Mon Dec 07 16:17:12 2026 UTC",
      "12/07/2026 16:17:12 UTC",
      "2026-12-07",
    ];
    for (const text of others) {
      expect(fastTimestamptzMs(text), text).toBeNull();
      expect(parse(text), text).toEqual(stock(text));
    }
    expect(parse("infinity")).toBe(Infinity);
    expect(parse("-infinity")).toBe(-Infinity);
    expect((parse("0001-01-01 00:00:00+00 BC") as Date).getUTCFullYear()).toBe(0);
  });
});
