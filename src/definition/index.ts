/**
 * A schedule's definition in every shape it takes (API-1, DEL-9, DEL-10), pure (no I/O):
 * a request body after its shape check ({@link ScheduleBody}) and its one normalised
 * spelling, the recurrence the rule engine reads from a body, a raw body or a stored row,
 * the body a stored schedule reads back as, an imported event's body, the columns the
 * store writes, the content hash (idempotency, re-import) and the changes an edit makes.
 * The API, the application layer, the planner and the importer take these from here.
 */
export {
  RULE_FIELDS,
  bodyOfStored,
  normaliseBody,
  ruleInputOfBody,
  ruleInputOfRaw,
  ruleInputOfRow,
  type ReminderBody,
  type ScheduleBody,
  type StoredReminderColumns,
  type StoredRuleColumns,
} from "./body.js";
export { definitionChanges, type DefinitionChanges } from "./changes.js";
export {
  definitionColumns,
  reminderColumns,
  type DefinitionColumns,
  type ReminderColumns,
} from "./columns.js";
export { bodyOfEvent, type EventBodyFields } from "./event.js";
export { canonicalJson, definitionHash, normalisedDefinition } from "./hash.js";
export { reminderView, redactTarget } from "./view.js";
