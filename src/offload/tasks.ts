/**
 * The pure, CPU-heavy work the API hands to its worker threads (OPS-12), by kind. Shared
 * by the worker thread (which runs it) and the pool (which types its calls); every input
 * and answer is structured-clone safe.
 */
import {
  dryRunDeliveries,
  parseCalendar,
  type CalendarImport,
  type DryRunDelivery,
  type IcalImportOptions,
} from "../ical/index.js";
import { preview, type PreviewInput, type PreviewItem } from "../recurrence/preview.js";
import { recordRuleWork, validateRule, type RuleWork } from "../recurrence/recurrence.js";
import type { RecurrenceInput } from "../recurrence/types.js";

/** Import options that cross to a worker thread: {@link IcalImportOptions} without callbacks. */
export type OffloadImportOptions = Omit<IcalImportOptions, "onProgress">;

/** What each kind of task takes and answers. */
export interface OffloadTasks {
  /** `preview` of a rule (REC-7): the same items, or the same ValidationError. */
  preview: { input: PreviewInput; output: PreviewItem[] };
  /**
   * Validation of rules done ahead of the event loop's own: the COUNT walks and feasibility
   * searches it needed, for the caller to lend to its own `validateRule` (never throws).
   */
  ruleWork: { input: RecurrenceInput[]; output: RuleWork };
  /** `parseCalendar`, and the rule work its validation of every event did. */
  parseCalendar: {
    input: { text: string; options: OffloadImportOptions };
    output: { parsed: CalendarImport; work: RuleWork };
  };
  /** A whole import dry run: `parseCalendar` then `dryRunDeliveries`. */
  dryRun: {
    input: { text: string; options: OffloadImportOptions; fromMs: number; toMs: number };
    output: { result: DryRunResult };
  };
}

/** What an import dry run answers (the calendar's events only counted). */
export interface DryRunResult {
  deliveries: DryRunDelivery[];
  skipped: CalendarImport["skipped"];
  warnings: string[];
  events: number;
  floatingTzid: string;
}

/** A kind of task: `preview`, `ruleWork`, `parseCalendar` or `dryRun`. */
export type OffloadKind = keyof OffloadTasks;

/**
 * Arrays of an answer that cross in pieces (`[field, field]` paths into the output), so
 * that reading one message never holds the receiving thread's loop for long.
 */
export const SPLIT_PATHS: Partial<Record<OffloadKind, ReadonlyArray<readonly [string, string]>>> = {
  parseCalendar: [
    ["parsed", "events"],
    ["work", "walks"],
    ["work", "searches"],
    ["work", "rules"],
  ],
  dryRun: [["result", "deliveries"]],
};

/** Runs one task in this thread. Throws what the underlying function throws. */
export function runTask<K extends OffloadKind>(
  kind: K,
  input: OffloadTasks[K]["input"],
): OffloadTasks[K]["output"] {
  return TASKS[kind](input as never) as OffloadTasks[K]["output"];
}

const TASKS: {
  [K in OffloadKind]: (input: OffloadTasks[K]["input"]) => OffloadTasks[K]["output"];
} = {
  preview: (input) => preview(input),
  ruleWork: (inputs) => {
    const { work } = recordRuleWork(() => {
      for (const input of inputs) {
        try {
          validateRule(input);
        } catch {
          // The caller validates again itself and reports the error.
        }
      }
    });
    return work;
  },
  parseCalendar: ({ text, options }) => {
    const { value, error, work } = recordRuleWork(() => parseCalendar(text, options));
    if (value === undefined) throw error;
    return { parsed: value, work };
  },
  dryRun: ({ text, options, fromMs, toMs }) => {
    const parsed = parseCalendar(text, options);
    return {
      result: {
        deliveries: dryRunDeliveries(parsed, { fromMs, toMs }),
        skipped: parsed.skipped,
        warnings: parsed.warnings,
        events: parsed.events.length,
        floatingTzid: parsed.floatingTzid,
      },
    };
  },
};
