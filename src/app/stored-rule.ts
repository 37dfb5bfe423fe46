/**
 * The stored rule of a schedule read back as a recurrence (REC-1, REC-3): the lenient
 * reader, as planning reads it, over the fields a schedule view or a stored row carries.
 */
import type { ScheduleView } from "../contracts/index.js";
import { ruleInputOfBody, ruleInputOfRow, type StoredRuleColumns } from "../definition/index.js";
import { parseRule } from "../recurrence/index.js";

/** The rule fields of a schedule (DTSTART, zone, RRULE, RDATE, EXDATE, end, DST policy). */
export type StoredRule = Pick<
  ScheduleView,
  "dtstart" | "tzid" | "rrule" | "rdate" | "exdate" | "endsAt" | "dst"
>;

/**
 * Parses a schedule's stored rule leniently (RFC 5545 §3.3.10 as planning reads it).
 * Never throws: the result says whether it parsed. A floating schedule (API-11: `tzid`
 * null) is read in UTC here; its recipients' occurrences are read in their own zones by
 * the callers that plan for them.
 */
export function parseStoredRule(schedule: StoredRule): ReturnType<typeof parseRule> {
  return parseRule(ruleInputOfBody({ ...schedule, tzid: schedule.tzid ?? "UTC" }));
}

/**
 * {@link parseStoredRule} over the rule columns of a stored schedule row
 * (`punctual_schedules`), read as {@link ruleInputOfRow} reads them. Never throws.
 */
export function parseStoredRow(row: StoredRuleColumns): ReturnType<typeof parseRule> {
  return parseRule(ruleInputOfRow(row));
}
