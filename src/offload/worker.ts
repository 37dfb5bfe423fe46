/**
 * Entry of an offload worker thread (OPS-12): answers `{ id, kind, input }` messages
 * from the pool, one task at a time. Large arrays of an answer (a calendar's events, its
 * rule work, a dry run's deliveries) cross first as pieces of {@link PIECE}, each sent
 * after the pool acknowledged the one before from a later turn of its event loop, so
 * that no single message takes the receiving thread long to read; then the rest of the
 * answer as `{ id, ok: true, output }`, or `{ id, ok: false, error }`. Errors cross as
 * data: a ValidationError as its issues (rebuilt identically on the other side),
 * anything else as its name and message.
 */
import { parentPort } from "node:worker_threads";
import { ValidationError } from "../errors/index.js";
import { runTask, SPLIT_PATHS, type OffloadKind } from "./tasks.js";

/** An error as it crosses from the worker thread to the pool. */
export type CrossedError =
  | { type: "validation"; issues: ValidationError["issues"] }
  | { type: "other"; name: string; message: string };

/** Items per piece of a split answer. */
const PIECE = 250;

const port = parentPort;
let acked: (() => void) | null = null;
const queue: Array<{ id: number; kind: OffloadKind; input: unknown }> = [];
let running = false;

async function answer(m: { id: number; kind: OffloadKind; input: unknown }): Promise<void> {
  if (port === null) return;
  let output: unknown;
  try {
    output = runTask(m.kind, m.input as never);
  } catch (err) {
    const error: CrossedError =
      err instanceof ValidationError
        ? { type: "validation", issues: err.issues }
        : {
            type: "other",
            name: err instanceof Error ? err.name : "Error",
            message: err instanceof Error ? err.message : String(err),
          };
    port.postMessage({ id: m.id, ok: false, error });
    return;
  }
  for (const path of SPLIT_PATHS[m.kind] ?? []) {
    const [outer, inner] = path;
    const holder = (output as Record<string, Record<string, unknown[]>>)[outer] as Record<
      string,
      unknown[]
    >;
    const items = holder[inner] as unknown[];
    holder[inner] = [];
    for (let i = 0; i < items.length; i += PIECE) {
      const wait = new Promise<void>((resolve) => (acked = resolve));
      port.postMessage({ id: m.id, piece: { path, items: items.slice(i, i + PIECE) } });
      await wait;
    }
  }
  port.postMessage({ id: m.id, ok: true, output });
}

async function drain(): Promise<void> {
  if (running) return;
  running = true;
  while (queue.length > 0) await answer(queue.shift() as (typeof queue)[number]);
  running = false;
}

if (port !== null) {
  port.on("message", (m: { id: number; kind: OffloadKind; input: unknown } | { ack: true }) => {
    if ("ack" in m) {
      const resolve = acked;
      acked = null;
      resolve?.();
      return;
    }
    queue.push(m);
    void drain();
  });
  port.postMessage({ ready: true });
}
