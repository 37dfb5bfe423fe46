/**
 * How the store runs its statements. Every SQL statement of punctual lives in
 * `src/store/` as a `*_SQL` constant with one typed function that runs it (a parameters
 * object with named fields, a declared row type); nothing outside the store calls
 * `.query(` (lint rule in eslint.config.js).
 *
 * TypeScript types are erased at run time, so a row type alone proves nothing about what
 * the engine returns. Each statement that returns rows therefore also declares its result
 * columns as a runtime list, {@link columnsOf}, checked at compile time to name exactly
 * the keys of its row type; test/integration/statement-columns.test.ts runs every
 * statement on both engines and compares the engine's column names with that list.
 */
import type { Queryable, QueryOptions } from "./database.js";

/** Keys of `Row` that the list `C` leaves out. */
type Missing<Row, C extends readonly PropertyKey[]> = Exclude<keyof Row, C[number]>;

/**
 * The result columns of a statement whose rows are `Row`, as a runtime list. Compile-time
 * checks: every entry is a key of `Row` (a typo or a column the type lacks fails), and
 * every key of `Row` is listed (a missing one fails with "Expected 2 arguments": the
 * second parameter's type names the missing keys).
 *
 * ```ts
 * export const LEASE_COLUMNS = columnsOf<LeaseRow>()(["name", "owner", "expires_at"]);
 * ```
 */
export function columnsOf<Row>() {
  return <const C extends readonly (keyof Row & string)[]>(
    columns: C,
    ..._everyKey: [Missing<Row, C>] extends [never] ? [] : [missing: Missing<Row, C>]
  ): readonly (keyof Row & string)[] => columns;
}

/**
 * Runs a statement and returns its rows, typed as the statement's declared row type.
 * `options` go to {@link Queryable.query} (e.g. `onSent`).
 */
export async function rows<T>(
  db: Queryable,
  sql: string,
  params: readonly unknown[] = [],
  options?: QueryOptions,
): Promise<T[]> {
  return (await db.query<T>(sql, params, options)).rows;
}

/** Runs a statement that returns at most one row; `null` when it returned none. */
export async function firstRow<T>(
  db: Queryable,
  sql: string,
  params: readonly unknown[] = [],
): Promise<T | null> {
  return (await db.query<T>(sql, params)).rows[0] ?? null;
}

/** Runs a statement that returns no rows; resolves to the number of rows it touched. */
export async function execute(
  db: Queryable,
  sql: string,
  params: readonly unknown[] = [],
): Promise<number> {
  return (await db.query(sql, params)).rowCount;
}

/**
 * The typed function of a statement that returns rows `T`: `params` lists the fields of
 * the parameters object `P` in the statement's order (`$1`, `$2`, …). The function takes
 * the runner (a database or a transaction) and the parameters object.
 */
export function rowsStatement<T, P>(
  sql: string,
  params: (p: P) => readonly unknown[],
): (db: Queryable, p: P) => Promise<T[]> {
  return (db, p) => rows<T>(db, sql, params(p));
}

/** {@link rowsStatement} of a statement that returns at most one row (`null`: none). */
export function firstRowStatement<T, P>(
  sql: string,
  params: (p: P) => readonly unknown[],
): (db: Queryable, p: P) => Promise<T | null> {
  return (db, p) => firstRow<T>(db, sql, params(p));
}

/**
 * {@link rowsStatement} of a listing written twice, oldest first (`asc`) and newest first
 * (`desc`, API-3): the parameters' `order` picks the text (default `asc`).
 */
export function orderedRowsStatement<T, P extends { order?: "asc" | "desc" | undefined }>(
  sql: { asc: string; desc: string },
  params: (p: P) => readonly unknown[],
): (db: Queryable, p: P) => Promise<T[]> {
  return (db, p) => rows<T>(db, sql[p.order ?? "asc"], params(p));
}
