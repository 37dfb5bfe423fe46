/**
 * Array parameters written as PostgreSQL array literals (`{1,2,NULL}`), for statements
 * that take many parallel arrays per call (the settle of the hot path).
 *
 * Handed a JavaScript array, the `pg` driver encodes it element by element through its
 * generic `prepareValue` (a `Date` through a local-time formatter) and quotes and escapes
 * every element; under a burst that was about 7 % of the worker's CPU (docs/benchmarks.md,
 * "Worker CPU per delivery"). These encoders know each array's element type, so numbers go
 * unquoted and only text is quoted (instants go as epoch ms: formatting each as text cost
 * as much again). The server reads the literal with the
 * statement's cast (`$3::bigint[]`), exactly as it read the driver's. PGlite takes the same
 * literal text for an array parameter.
 *
 * Syntax: PostgreSQL manual §8.15.6 "Array Input and Output Syntax".
 */

/**
 * An array of numbers or nulls as a literal, for `int[]`, `bigint[]` and
 * `double precision[]` parameters (epoch ms of instants among them). A non-finite number
 * (NaN from an invalid Date, Infinity) is refused with a RangeError.
 */
export function numberArray(values: readonly (number | null)[]): string {
  return arrayLiteral(values, (v) => {
    if (!Number.isFinite(v)) throw new RangeError(`not a finite number for an array: ${v}`);
    return String(v);
  });
}

/**
 * An array of strings or nulls as a literal: each string double-quoted, its `"` and `\`
 * escaped with a backslash, so any text (commas, braces, spaces, the word NULL) stays one
 * element.
 */
export function textArray(values: readonly (string | null)[]): string {
  return arrayLiteral(values, (v) => `"${/["\\]/.test(v) ? v.replace(/["\\]/g, "\\$&") : v}"`);
}

/** `{a,b,NULL}`: each non-null value written by `element`, nulls as `NULL`. */
function arrayLiteral<T>(values: readonly (T | null)[], element: (value: T) => string): string {
  let out = "{";
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (i > 0) out += ",";
    out += v === null || v === undefined ? "NULL" : element(v);
  }
  return out + "}";
}
