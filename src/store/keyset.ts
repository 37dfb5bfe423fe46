/**
 * Keyset paging by a `bigint` id (API-3): the bound that keeps a page's rows past the last
 * id seen, in the listing's order.
 */

/**
 * API-3: `column` past the id in parameter `param` (the last id seen; NULL from the
 * start) in `dir` order. The bound has a finite default (0 ascending, the largest
 * `bigint` descending), so even a generic plan is a range scan of an index on the id,
 * forward or backward. `column` and `param` are SQL text of the caller (`d.id`, `$4`),
 * never values.
 */
export function idPastSql(column: string, param: string, dir: "asc" | "desc"): string {
  return dir === "asc"
    ? `${column} > coalesce(${param}::bigint, 0)`
    : `${column} < coalesce(${param}::bigint, 9223372036854775807)`;
}

/**
 * API-3: the keyset cursor column of a timestamp `column`: its full (microsecond)
 * precision as ISO 8601 UTC text, named `<column>_cursor`. A JS Date would round to ms,
 * and a bulk write gives many rows the same timestamp.
 */
export function instantCursorSql(column: string): string {
  return `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as ${column}_cursor`;
}

/**
 * API-3: keyset paging by (timestamp column `at`, `id`) in `dir` order: the bound past the
 * last row seen (`after`: the SQL text of the parameters holding its `at` and its id, like
 * `["$3", "$4"]`; NULL from the start) and the matching `order by`. The bound is a row
 * comparison with an infinite default (for a `uuid` id also the smallest or largest uuid;
 * a `text` id starts from ''), so even a generic plan is a range scan of an index on
 * (…, at, id), forward or backward.
 */
export function instantIdKeysetSql(
  at: string,
  idType: "uuid" | "text",
  after: readonly [at: string, id: string],
  dir: "asc" | "desc",
): { bound: string; orderBy: string } {
  const asc = dir === "asc";
  const edgeId =
    idType === "text"
      ? ""
      : asc
        ? "00000000-0000-0000-0000-000000000000"
        : "ffffffff-ffff-ffff-ffff-ffffffffffff";
  const edgeAt = asc ? "-infinity" : "infinity";
  return {
    bound:
      `(${at}, id) ${asc ? ">" : "<"} (coalesce(${after[0]}::timestamptz, '${edgeAt}'::timestamptz), ` +
      `coalesce(${after[1]}::${idType}, '${edgeId}'::${idType}))`,
    orderBy: `order by ${at} ${dir}, id ${dir}`,
  };
}

/** A row of a keyset page by (timestamp `At`, id): the row and its cursor (`<At>_cursor`). */
export type WithInstantCursor<Row, At extends string> = Row & {
  /** {@link instantCursorSql}: the timestamp at full (microsecond) precision, ISO 8601 UTC. */
  [K in `${At}_cursor`]: string;
};

/** Parameters of one keyset page (API-3): past the id of the last row seen, in `order`. */
export interface KeysetPageParams<Id> {
  /** The id of the last row seen; null from the start. */
  afterId: Id | null;
  limit: number;
  order: "asc" | "desc";
}
