/**
 * Recurrence engine (REC-1 … REC-7): pure, host-time-zone independent.
 */
// Every type of the engine's surface (types.ts holds nothing else).
export type * from "./types.js";
export {
  DEFAULT_BETWEEN_LIMIT,
  DEFAULT_DST_POLICY,
  MAX_COUNT_STEPS,
  MAX_DATE_LIST,
  MAX_MS_PER_CALL,
  MAX_STEPS_PER_CALL,
  NO_OCCURRENCE_SEARCH_STEPS,
  dtstartInZone,
  parseRule,
  validateRule,
} from "./recurrence.js";
export { MAX_RRULE_LENGTH } from "./rule.js";
export {
  formatRuleParts,
  repairRuleText,
  ruleParts,
  shiftRuleParts,
  tidyRuleText,
  type RuleParts,
  type RuleRepair,
} from "./rule-text.js";
export { applyOffset, isValidOffset, parseOffset, type Offset } from "./offset.js";
export {
  applyMisfire,
  type CatchUp,
  DEFAULT_GRACE_MS,
  DEFAULT_MAX_CATCH_UP,
  LATE_THRESHOLD_MS,
  type MisfireDecision,
  type MisfireInput,
  type MisfireItem,
  type MisfirePolicy,
} from "./misfire.js";
export { MAX_PREVIEW_COUNT, preview, type PreviewInput, type PreviewItem } from "./preview.js";
export { DEFAULT_HORIZON_MS, planningWindow, type PlanningWindowInput } from "./horizon.js";
export { canonicalTimeZone, isValidTimeZone, toInstant } from "./local.js";
export { dtstartOffsetConflict, formatUtcOffset, getZone, isOffsetZone } from "./zone.js";
export {
  QUIET_TIME_PATTERN,
  WEEKDAY_NAMES,
  quietHoursEnd,
  quietTimeSeconds,
  type QuietHours,
  type WeekdayName,
} from "./quiet-hours.js";
