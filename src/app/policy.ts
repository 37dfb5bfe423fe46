/**
 * Validation of the delivery-policy fields of a schedule that the zod shapes cannot check
 * alone: a reminder's quiet window (DEL-15) and the schedule's catch-up bounds (DEL-17).
 * Each issue names the field and the value.
 */
import type { CreateSchedule, ReminderInput } from "../contracts/index.js";
import type { FieldIssue } from "../errors/index.js";
import { isOffsetZone, isValidTimeZone } from "../recurrence/index.js";

/**
 * DEL-15: problems with a reminder's `quietHours` (`field` is its dotted path): an
 * unknown or fixed-offset zone, a start equal to its end (an empty window), a day listed
 * twice. Empty when it is absent or valid.
 */
export function quietHoursIssues(
  quiet: ReminderInput["quietHours"] | undefined,
  field: string,
): FieldIssue[] {
  if (!quiet) return [];
  const issues: FieldIssue[] = [];
  if (!isValidTimeZone(quiet.tzid) || isOffsetZone(quiet.tzid)) {
    issues.push({
      field: `${field}.tzid`,
      message: "must be an IANA time zone such as Europe/Berlin (the recipient's zone)",
      value: quiet.tzid,
    });
  }
  if (quiet.start === quiet.end) {
    issues.push({
      field: `${field}.end`,
      message: "must differ from start (a window from a time to itself is empty)",
      value: quiet.end,
    });
  }
  if (quiet.days && new Set(quiet.days).size !== quiet.days.length) {
    issues.push({ field: `${field}.days`, message: "lists a day twice", value: quiet.days });
  }
  return issues;
}

/**
 * DEL-17: problems with a schedule's `catchUp`: it bounds the replay of misfire `all`
 * only, so with any other policy it is refused rather than silently ignored.
 */
export function catchUpIssues(value: Pick<CreateSchedule, "catchUp" | "misfire">): FieldIssue[] {
  if (!value.catchUp || value.misfire === "all") return [];
  return [
    {
      field: "catchUp",
      message: `applies only with misfire "all" (this schedule's misfire is "${value.misfire}")`,
      value: value.catchUp,
    },
  ];
}
