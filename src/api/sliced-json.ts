/**
 * A large JSON answer written in slices (OPS-12): `JSON.stringify` of a 50,000-event
 * import's summary (7 MB) is one synchronous call of about 30 ms, on top of the last
 * batch's work in the same turn of the event loop. Here the object is written as the
 * same bytes, the items of its last array field a few thousand at a time, one slice per
 * pull of the response stream (each pull is a later turn of the loop).
 */

/** Items of the sliced array per chunk. */
const ITEMS_PER_CHUNK = 2_000;

/**
 * The bytes of `JSON.stringify(value)` as a stream of chunks, with `value[field]` (an
 * array, which must be the last own property of `value`) written `ITEMS_PER_CHUNK` items
 * per chunk.
 * @throws Error when `field` is not the last property of `value` or not an array.
 */
export function slicedJson<T extends object>(
  value: T,
  field: keyof T & string,
): ReadableStream<Uint8Array> {
  const keys = Object.keys(value);
  const items = (value as Record<string, unknown>)[field];
  if (keys.at(-1) !== field || !Array.isArray(items)) {
    throw new Error(`slicedJson: ${field} must be the last property and an array`);
  }
  // `{…,"field":[]}` without its last two characters: the head, up to the array's `[`.
  const empty = JSON.stringify({ ...value, [field]: [] });
  const head = empty.slice(0, -2);
  const encoder = new TextEncoder();
  let next = -1;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (next < 0) {
        controller.enqueue(encoder.encode(head));
        next = 0;
        return;
      }
      if (next >= items.length) {
        controller.enqueue(encoder.encode("]}"));
        controller.close();
        return;
      }
      const slice = items.slice(next, next + ITEMS_PER_CHUNK);
      const text = JSON.stringify(slice).slice(1, -1);
      controller.enqueue(encoder.encode(next === 0 ? text : `,${text}`));
      next += ITEMS_PER_CHUNK;
    },
  });
}
