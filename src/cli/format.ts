/**
 * Readable output of the CLI: aligned tables and key–value blocks. `--json` bypasses
 * all of this and prints the API's JSON.
 */

/** One column: header and how to read a cell from a row. */
export interface Column<T> {
  header: string;
  cell: (row: T) => unknown;
}

/** Text of a cell: `-` for null/undefined/empty, JSON for objects. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined || value === "") return "-";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** Renders rows as an aligned table with a header line; "(none)" when empty. */
export function table<T>(rows: readonly T[], columns: readonly Column<T>[], indent = ""): string {
  if (rows.length === 0) return `${indent}(none)\n`;
  const cells = rows.map((row) => columns.map((c) => cellText(c.cell(row)).replace(/\s+/g, " ")));
  const widths = columns.map((c, i) =>
    Math.max(c.header.length, ...cells.map((r) => (r[i] ?? "").length)),
  );
  const line = (parts: readonly string[]) =>
    parts
      .map((p, i) => (i === parts.length - 1 ? p : p.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return (
    [line(columns.map((c) => c.header)), ...cells.map(line)].map((l) => indent + l).join("\n") +
    "\n"
  );
}

/** Renders `[label, value]` pairs as aligned `label  value` lines. */
export function keyValues(pairs: ReadonlyArray<readonly [string, unknown]>): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${`${k}:`.padEnd(width + 2)}${cellText(v)}`).join("\n") + "\n";
}

/** Prints JSON the way scripts expect it: two-space indent, trailing newline. */
export function jsonText(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}
