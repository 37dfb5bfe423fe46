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
