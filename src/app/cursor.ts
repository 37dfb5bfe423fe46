/**
 * Opaque keyset cursors of list endpoints (API-3): `?cursor=` takes the previous page's
 * `nextCursor`. A cursor carries the sort key of the last row of its page and a checksum
 * of that key together with the listing it came from (order and filters), so a cursor
 * pasted into another order or filter set, or altered, is a 400 naming `cursor` instead
 * of a silently wrong page. A cursor grants nothing: the tenant is always the caller's.
 */
import { createHash } from "node:crypto";
import { ValidationError } from "../errors/index.js";

/** One part of a sort key: an ISO instant, a uuid, an id. */
export type CursorKeyPart = string | number;

/** The listing a cursor belongs to: its name, order and every filter, in any key order. */
export type CursorScope = Record<string, string | number | boolean | null | undefined>;

const VERSION = 1;

function scopeText(scope: CursorScope): string {
  const keys = Object.keys(scope)
    .filter((k) => scope[k] !== undefined && scope[k] !== null)
    .sort();
  return JSON.stringify(keys.map((k) => [k, scope[k]]));
}

function checksum(key: readonly CursorKeyPart[], scope: CursorScope): string {
  return createHash("sha256")
    .update(`${VERSION}\n${JSON.stringify(key)}\n${scopeText(scope)}`)
    .digest("base64url")
    .slice(0, 16);
}

/** Encodes the sort key of a page's last row as the `nextCursor` of `scope`. */
export function encodeCursor(key: readonly CursorKeyPart[], scope: CursorScope): string {
  return Buffer.from(JSON.stringify({ v: VERSION, k: key, c: checksum(key, scope) })).toString(
    "base64url",
  );
}

function badCursor(cursor: string, message: string): ValidationError {
  return new ValidationError({
    field: "cursor",
    message,
    value: cursor.length <= 200 ? cursor : `${cursor.slice(0, 200)}…`,
  });
}

/**
 * Decodes a cursor of `scope` into its sort key, whose parts each pass `shape` (one
 * checker per part).
 * @throws ValidationError (field `cursor`) when it is not a cursor, was altered, or comes
 *   from another order or filter set.
 */
export function decodeCursor(
  cursor: string,
  scope: CursorScope,
  shape: ReadonlyArray<(part: unknown) => boolean>,
): CursorKeyPart[] {
  let parsed: unknown;
  try {
    if (!/^[A-Za-z0-9_-]{1,1000}$/.test(cursor)) throw new Error("not base64url");
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw badCursor(cursor, "not a cursor from a previous page");
  }
  const p = parsed as { v?: unknown; k?: unknown; c?: unknown } | null;
  if (
    !p ||
    typeof p !== "object" ||
    p.v !== VERSION ||
    !Array.isArray(p.k) ||
    p.k.length !== shape.length ||
    !p.k.every((part, i) => shape[i]!(part)) ||
    typeof p.c !== "string"
  ) {
    throw badCursor(cursor, "not a cursor from a previous page");
  }
  const key = p.k as CursorKeyPart[];
  if (p.c !== checksum(key, scope)) {
    throw badCursor(
      cursor,
      "belongs to another order or filter set, or was altered: start again without a cursor",
    );
  }
  return key;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Cursor part checkers. */
export const cursorPart = {
  /** An ISO 8601 instant as the database prints it (microseconds kept). */
  instant: (v: unknown): boolean =>
    typeof v === "string" && v.length <= 40 && !Number.isNaN(Date.parse(v)),
  uuid: (v: unknown): boolean => typeof v === "string" && UUID.test(v),
  /** A non-negative safe integer (a bigint id). */
  id: (v: unknown): boolean => typeof v === "number" && Number.isSafeInteger(v) && v >= 0,
  /** Any short text. */
  text: (v: unknown): boolean => typeof v === "string" && v.length <= 400,
} as const;

/**
 * API-3: a keyset page of `rows`, read with `limit`: each row as `view` shows it, and
 * `nextCursor`, the cursor after the last row (its `key`, bound to `scope`) when the page
 * is full, else null.
 */
export function keysetPage<R, V>(
  rows: readonly R[],
  limit: number,
  scope: CursorScope,
  key: (last: R) => readonly CursorKeyPart[],
  view: (row: R) => V,
): { items: V[]; nextCursor: string | null } {
  const last = rows.length === limit ? rows[rows.length - 1] : undefined;
  return {
    items: rows.map((r) => view(r)),
    nextCursor: last === undefined ? null : encodeCursor(key(last), scope),
  };
}
