/**
 * Work off the event loop (OPS-12): a bounded pool of worker threads ({@link OffloadPool})
 * and the helpers the API uses with it.
 */
import { lendRuleWork } from "../recurrence/recurrence.js";
import type { DstPolicy, RecurrenceInput } from "../recurrence/types.js";
import { offloadPool } from "./pool.js";

export {
  DEFAULT_MAX_QUEUE,
  DEFAULT_TASK_TIMEOUT_MS,
  OffloadPool,
  OffloadUnavailableError,
  offloadPool,
  type OffloadPoolOptions,
} from "./pool.js";
export type { DryRunResult, OffloadImportOptions, OffloadKind, OffloadTasks } from "./tasks.js";

/**
 * The recurrence fields of a schedule body as it was sent (`dtstart`, `tzid`, `rrule`,
 * `rdate`, `exdate`, `endsAt`, `dst`), or null when it has no `dtstart` text. Only reads:
 * the body is validated later by the usual code.
 */
export function recurrenceInputOf(raw: unknown): RecurrenceInput | null {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return null;
  const body = raw as Record<string, unknown>;
  if (typeof body.dtstart !== "string") return null;
  const texts = (v: unknown): string[] =>
    Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
  return {
    dtstart: body.dtstart,
    tzid: typeof body.tzid === "string" ? body.tzid : "UTC",
    rrule: typeof body.rrule === "string" ? body.rrule : null,
    rdate: texts(body.rdate),
    exdate: texts(body.exdate),
    endsAt: typeof body.endsAt === "string" ? body.endsAt : null,
    ...(body.dst && typeof body.dst === "object" && !Array.isArray(body.dst)
      ? { dst: { ...(body.dst as Partial<DstPolicy>) } }
      : {}),
  };
}

/**
 * Validates `inputs` on a worker thread first and lends the COUNT walks and feasibility
 * searches it did to this thread's own validation, so that validating the same rules
 * here costs no walk. Best effort: when the pool cannot take the task (busy, crashed),
 * nothing is lent and the caller's validation simply does the work itself.
 * @returns a function that ends the loan (call it once the caller validated).
 */
export async function borrowRuleWork(inputs: RecurrenceInput[]): Promise<() => void> {
  if (inputs.length === 0) return () => {};
  try {
    return lendRuleWork(await offloadPool().run("ruleWork", inputs));
  } catch {
    return () => {};
  }
}
