/**
 * Work off the event loop (OPS-12): a bounded pool of worker threads ({@link OffloadPool})
 * and the helpers the API uses with it.
 */
import { lendRuleWork } from "../recurrence/recurrence.js";
import type { RecurrenceInput } from "../recurrence/types.js";
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
