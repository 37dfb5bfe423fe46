/**
 * The one home of every write to the delivery tables (`punctual_deliveries`,
 * `punctual_attempts`; docs/architecture.md, "Store"): every statement that inserts,
 * updates or deletes their rows is defined in this folder, and `eslint.config.js` refuses
 * such a statement anywhere else. Statements of other store modules that change a
 * schedule and its rows together (pause, resume, cancel, quarantine, revive) take the
 * delivery part from here (`waiting.ts`).
 *
 * - `sql.ts`: the shared pieces — "now", the admission predicate, the fence, the give-back;
 * - `claim.ts`: claim, settle, renew, release, recover, the wake-up query (the hot path);
 * - `deferrals.ts`: circuit-breaker and quiet-hours deferrals of claimed rows;
 * - `planning.ts`: planned inserts, misfire decisions, realign on edit, admission sync;
 * - `waiting.ts`: the waiting rows following their schedule (held, cancelled, revived);
 * - `realign.ts`: realign on edit for many schedules in one statement (imports);
 * - `operator.ts`: trigger, backfill, redrive, resolve, purge;
 * - `retention.ts`: deletion of finished rows and old attempts;
 * - `counts.ts`: the one count by state behind status, metrics and the overview;
 * - `digests.ts`: digests (DEL-19) — formed, claimed, settled and recovered as one unit;
 * - `recipients.ts`: schedules for recipients — memberships, their planning watermarks,
 *   and the delivery rows they cancel, clear, skip at send or mark bypassed.
 */
export * from "./sql.js";
export * from "./claim.js";
export * from "./deferrals.js";
export * from "./planning.js";
export * from "./waiting.js";
export * from "./realign.js";
export * from "./operator.js";
export * from "./retention.js";
export * from "./counts.js";
export * from "./recipients.js";
export * from "./digests.js";
