/**
 * Compile-time proof that a zod schema of the API and the contract type it describes
 * agree (API-1: the HTTP schemas are defined once and checked against the contracts).
 * One home for the check, so every schema module proves its shapes the same way.
 */
import type { z } from "zod";

/** `true` when `A` and `B` are the same type (not merely assignable either way). */
export type Equals<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/** Compiles only when `T` is `true`. */
export type Assert<T extends true> = T;

/** `true` when what `Schema` parses is exactly `Contract`; use as `Assert<SchemaMatches<…>>`. */
export type SchemaMatches<Schema extends z.ZodType, Contract> = Equals<z.infer<Schema>, Contract>;
