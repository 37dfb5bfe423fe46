/**
 * What an edit changes between two definitions of a schedule (DEL-9): the fields, the
 * reminders added, removed or changed, and whether the waiting deliveries must realign.
 * Pure: compares the {@link normalisedDefinition} of both, so a default spelled out
 * equals one left out.
 */
import type { ScheduleBody } from "./body.js";
import { canonicalJson, normalisedDefinition } from "./hash.js";

/** The changes from one definition to another. */
export interface DefinitionChanges {
  /** Nothing changed: an edit writes nothing (same version, same ETag). */
  none: boolean;
  /** Top-level fields whose value differs (`reminders` is described below), sorted. */
  fields: string[];
  /** Reminders by key: new keys, keys gone, and keys whose fields differ (each sorted). */
  reminders: { added: string[]; removed: string[]; changed: string[] };
  /**
   * Whether the occurrences, due times or admission of waiting deliveries can move
   * (DEL-9): a rule field, `expiresAt`, `misfire`, `graceMs`, `catchUp`, `perpetual`,
   * or any reminder added, removed or changed. A title or payload alone does not.
   */
  realign: boolean;
}

/** Fields whose change leaves the waiting deliveries as they are. */
const CONTENT_ONLY = new Set(["title", "payload"]);

/**
 * DEL-9: the changes from `before` to `after` (both checked bodies).
 * @param defaultMaxAttempts the configured `maxAttempts` a reminder without one gets.
 */
export function definitionChanges(
  before: ScheduleBody,
  after: ScheduleBody,
  defaultMaxAttempts: number,
): DefinitionChanges {
  const a = normalisedDefinition(before, defaultMaxAttempts);
  const b = normalisedDefinition(after, defaultMaxAttempts);
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  keys.delete("reminders");
  const fields = [...keys].filter((k) => canonicalJson(a[k]) !== canonicalJson(b[k])).sort();
  type Reminder = { key: string };
  const byKey = (list: unknown) => new Map((list as Reminder[]).map((r) => [r.key, r]));
  const was = byKey(a.reminders);
  const now = byKey(b.reminders);
  const added = [...now.keys()].filter((k) => !was.has(k)).sort();
  const removed = [...was.keys()].filter((k) => !now.has(k)).sort();
  const changed = [...now.keys()]
    .filter((k) => was.has(k) && canonicalJson(was.get(k)) !== canonicalJson(now.get(k)))
    .sort();
  // The order of reminders is part of the definition (views list them so).
  const reordered = canonicalJson(a.reminders) !== canonicalJson(b.reminders);
  const remindersMoved = added.length + removed.length + changed.length > 0;
  return {
    none: fields.length === 0 && !reordered,
    fields,
    reminders: { added, removed, changed },
    realign: remindersMoved || fields.some((f) => !CONTENT_ONLY.has(f)),
  };
}
