/**
 * Request bodies that would be stored other than as sent (API-7): a JSON body must be
 * well-formed UTF-8 (RFC 8259 §8.1), and every number in it must be one JavaScript can
 * hold. Without this guard, `TextDecoder` turns each invalid byte sequence into U+FFFD
 * and `JSON.parse` turns `1e999999` into `Infinity`, which is stored as `null`: both
 * silently change what the client sent.
 */
import { isUtf8 } from "node:buffer";
import type { MiddlewareHandler } from "hono";
import { ValidationError } from "../errors/index.js";
import { errorBody } from "./errors.js";

/** Content types whose bodies are text in UTF-8: JSON, `+json` and NDJSON. */
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?(?:json|x-ndjson)\s*(?:;|$)/i;

/**
 * The offset of the first byte of `bytes` that is not part of a well-formed UTF-8
 * sequence (RFC 3629 §4: no overlong forms, no surrogates, nothing past U+10FFFF), or
 * -1 when all of it is well-formed.
 */
export function invalidUtf8Offset(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i] as number;
    if (b < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let min: number;
    let max = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) {
      need = 1;
      min = 0x80;
    } else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      min = b === 0xe0 ? 0xa0 : 0x80;
      if (b === 0xed) max = 0x9f; // no UTF-16 surrogates
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      min = b === 0xf0 ? 0x90 : 0x80;
      if (b === 0xf4) max = 0x8f; // nothing past U+10FFFF
    } else {
      return i;
    }
    for (let k = 1; k <= need; k++) {
      const c = bytes[i + k];
      const lo = k === 1 ? min : 0x80;
      const hi = k === 1 ? max : 0xbf;
      if (c === undefined || c < lo || c > hi) return i;
    }
    i += need + 1;
  }
  return -1;
}

/**
 * The dotted path of the first number in `value` that is not finite, or null. Walks with
 * an explicit stack (no recursion, no path copies), so a body nested thousands deep is
 * walked in linear time and cannot overflow the call stack; its depth is the route's to
 * refuse (API-1).
 */
export function nonFiniteNumberPath(value: unknown): string | null {
  // Each entry: the value, and the index of its parent entry with the key that led to it.
  const nodes: Array<{ value: unknown; parent: number; key: string }> = [
    { value, parent: -1, key: "" },
  ];
  const pending: number[] = [0];
  while (pending.length > 0) {
    const at = pending.pop() as number;
    const node = nodes[at] as { value: unknown; parent: number; key: string };
    const v = node.value;
    if (typeof v === "number") {
      if (Number.isFinite(v)) continue;
      const keys: string[] = [];
      for (let i = at; i > 0; i = (nodes[i] as { parent: number }).parent) {
        keys.push((nodes[i] as { key: string }).key);
      }
      return keys.reverse().join(".") || "body";
    }
    if (v === null || typeof v !== "object") continue;
    // Children pushed in reverse, so the first number in document order is found first.
    const entries: Array<[string, unknown]> = Array.isArray(v)
      ? v.map((item, i): [string, unknown] => [String(i), item])
      : Object.entries(v as Record<string, unknown>);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, child] = entries[i] as [string, unknown];
      if (typeof child === "number" || (child !== null && typeof child === "object")) {
        nodes.push({ value: child, parent: at, key });
        pending.push(nodes.length - 1);
      }
    }
  }
  return null;
}

/**
 * API-7: a request body sent with a content coding (RFC 9110 §8.4: `Content-Encoding:
 * gzip`, `br`, `deflate`…) is refused with 415 `UNSUPPORTED_MEDIA_TYPE` naming the coding,
 * and the reply carries `Accept-Encoding: identity` (RFC 9110 §12.5.3: what the server
 * accepts). The API reads bodies as sent; without this guard a compressed JSON body would
 * be read as bytes and refused as invalid UTF-8 or JSON, which hides the real cause.
 * `identity` (or no header) passes, and so does any GET or HEAD (no body to read).
 */
export const contentEncodingGuard: MiddlewareHandler = async (c, next) => {
  const coding = c.req.header("content-encoding");
  if (coding === undefined || c.req.method === "GET" || c.req.method === "HEAD") return next();
  const codings = coding
    .split(",")
    .map((part) => part.trim().toLowerCase())
    .filter((part) => part !== "" && part !== "identity");
  if (codings.length === 0) return next();
  c.header("Accept-Encoding", "identity");
  return c.json(
    errorBody(
      "UNSUPPORTED_MEDIA_TYPE",
      `Content-Encoding ${codings.join(", ")} is not supported; send the body uncompressed (Content-Encoding: identity or none).`,
    ),
    415,
  );
};

/**
 * API-7: refuses with 400 a JSON (or NDJSON) body that is not well-formed UTF-8
 * (`body: is not valid UTF-8 at byte N`), and a JSON body holding a number too large to
 * represent (`payload: … overflows`), naming the field; nothing is read further. A body
 * that does not parse is left to the route (its own 400). The parsed body is handed on,
 * so the route does not parse it again.
 * @throws ValidationError as above.
 */
export const jsonBodyGuard: MiddlewareHandler = async (c, next) => {
  const type = c.req.header("content-type");
  if (c.req.method === "GET" || c.req.method === "HEAD" || !type || !JSON_TYPE.test(type)) {
    return next();
  }
  const bytes = new Uint8Array(await c.req.arrayBuffer());
  if (!isUtf8(bytes)) {
    throw new ValidationError({
      field: "body",
      message: `is not valid UTF-8 at byte ${invalidUtf8Offset(bytes)}`,
    });
  }
  if (/x-ndjson/i.test(type)) return next();
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return next();
  }
  const field = nonFiniteNumberPath(parsed);
  if (field !== null) {
    throw new ValidationError({
      field,
      message: "is a number too large to represent (it overflows to Infinity)",
    });
  }
  // Hono's request reads its body once and serves later reads from this cache.
  (c.req.bodyCache as { json?: Promise<unknown> }).json = Promise.resolve(parsed);
  await next();
};
