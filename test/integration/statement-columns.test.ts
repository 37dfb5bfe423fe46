/**
 * Every statement of the store returns exactly the columns its row type declares, on the
 * engine of this run (npm test runs the file on PGlite and on PostgreSQL).
 *
 * Row types are erased at run time, so each statement `X_SQL` that returns rows declares
 * `X_COLUMNS` (src/store/statement.ts: `columnsOf<Row>()`, checked at compile time to list
 * exactly the keys of `Row`). Here each statement runs once, in a transaction that is
 * rolled back, with parameters that make it valid (NULL arrays for `unnest`-based
 * statements, a small sample for the others), and the column names the engine reports
 * are compared with the declared list. A statement without `X_COLUMNS` must return no
 * columns at all. A statement that gains, loses or renames a column fails here; so does a
 * new statement left out of the table below.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database, QueryResult } from "../../src/store/database.js";
import * as activity from "../../src/store/activity.js";
import * as apiKeys from "../../src/store/api-keys.js";
import * as deliveriesClaim from "../../src/store/deliveries/claim.js";
import * as deliveriesCounts from "../../src/store/deliveries/counts.js";
import * as deliveriesDeferrals from "../../src/store/deliveries/deferrals.js";
import * as deliveriesDigests from "../../src/store/deliveries/digests.js";
import * as deliveriesOperator from "../../src/store/deliveries/operator.js";
import * as deliveriesPlanning from "../../src/store/deliveries/planning.js";
import * as deliveriesRealign from "../../src/store/deliveries/realign.js";
import * as deliveriesRecipients from "../../src/store/deliveries/recipients.js";
import * as deliveriesRetention from "../../src/store/deliveries/retention.js";
import * as durability from "../../src/store/durability.js";
import * as imports from "../../src/store/imports.js";
import * as kinds from "../../src/store/kinds.js";
import * as observe from "../../src/store/observe.js";
import * as operations from "../../src/store/operations.js";
import * as operator from "../../src/store/operator.js";
import * as planning from "../../src/store/planning.js";
import * as pglite from "../../src/store/pglite.js";
import * as schedules from "../../src/store/schedules.js";
import * as sessions from "../../src/store/sessions.js";
import * as tasks from "../../src/store/tasks.js";
import * as rateLimits from "../../src/store/rate-limits.js";
import * as circuits from "../../src/store/circuits.js";
import * as quietRetries from "../../src/store/quiet-retries.js";
import * as missed from "../../src/store/missed.js";
import * as recipients from "../../src/store/recipients.js";
import * as explain from "../../src/store/explain.js";
import { openTestDatabase, type TestDatabase } from "../support/db.js";

const MODULES = {
  activity,
  apiKeys,
  deliveriesClaim,
  deliveriesCounts,
  deliveriesDeferrals,
  deliveriesDigests,
  deliveriesOperator,
  deliveriesPlanning,
  deliveriesRealign,
  deliveriesRecipients,
  deliveriesRetention,
  durability,
  imports,
  observe,
  kinds,
  operations,
  operator,
  planning,
  pglite,
  schedules,
  sessions,
  tasks,
  rateLimits,
  circuits,
  quietRetries,
  missed,
  recipients,
  explain,
} as const;

const ID = "00000000-0000-4000-8000-000000000000";
/** A valid schedule definition in statement order ($n … $n+13). */
const DEFINITION = [
  "2027-01-04T09:00:00",
  "UTC",
  null,
  [],
  [],
  false,
  null,
  null,
  "shift",
  "earlier",
  "skip",
  0,
  false,
  "null",
];
const nulls = (n: number) => Array.from({ length: n }, () => null);

/** Parameters that make each statement valid; `$1` "now" is NULL (the database clock). */
const PARAMS: Record<string, readonly unknown[]> = {
  // deliveries/claim.ts
  CLAIM_SQL: [null, "owner", 1_000, 1, ["log"], []],
  SETTLE_SQL: [null, "owner", ...nulls(12)],
  SETTLE_AND_CLAIM_SQL: [null, "owner", ...nulls(12), 1_000, 1, ["log"], []],
  RECOVER_SQL: [null, 1, 0],
  RELEASE_SQL: ["owner", null, null],
  NEXT_WAKE_SQL: [null, ["log"]],
  RENEW_SQL: [null, "owner", 1_000, null, null],
  RELEASE_ORPHANS_SQL: [null, "owner", []],
  // deliveries/digests.ts
  DIGEST_FORM_LOCK_SQL: [],
  FORM_DIGESTS_SQL: [null, "owner", 1_000, 1, ["log"]],
  CLAIM_DIGEST_RETRIES_SQL: [null, "owner", 1_000, 1, ["log"]],
  DIGEST_ITEMS_SQL: ["dg_none"],
  SETTLE_DIGEST_SQL: [
    null,
    "owner",
    "dg_none",
    1,
    "retry",
    null,
    null,
    "boom",
    1,
    null,
    null,
    null,
    "transient",
    0,
  ],
  DEFER_DIGEST_SQL: [null, "owner", "dg_none", 1, null, "RATE_LIMITED", null],
  SPEND_DIGEST_TOKEN_SQL: [null, "default", "key"],
  HOLD_DIGEST_SLOT_SQL: [null, "owner", "dg_none", 1],
  RENEW_DIGEST_LEASES_SQL: [null, "owner", 1_000, ["dg_none"], [1]],
  RELEASE_DIGEST_SQL: [null, "owner", "dg_none", 1],
  RECOVER_DIGESTS_SQL: [null, 1, 0],
  DIGEST_RETENTION_SQL: [null, 1_000, 1],
  // deliveries/counts.ts
  DELIVERY_COUNTS_SQL: [null, 1_000, null],
  // activity.ts
  SENT_PER_MINUTE_SQL: [null, "default", 3_600_000],
  // durability.ts
  DURABILITY_SQL: [],
  // operations.ts
  HEARTBEAT_SQL: [null, "instance", "host", 1, "0.0.0", "test"],
  PASS_SQL: [null, "instance", 1.5],
  INSTANCE_STOPPED_SQL: [null, "instance"],
  LIST_INSTANCES_SQL: [null, 0],
  START_IMPORT_SQL: [null, "default", "cal", "owner", 1_000],
  IMPORT_PROGRESS_SQL: [null, 1, "owner", 1_000, ...Array.from({ length: 11 }, () => 0), null],
  RENEW_IMPORT_LEASE_SQL: [null, 1, "owner", 1_000],
  FINISH_IMPORT_SQL: [null, 1, "owner", "succeeded", null],
  ABANDON_IMPORTS_SQL: [null],
  GET_IMPORT_SQL: ["default", 1],
  LIST_IMPORTS_SQL: ["default", null, null, null, null, 1],
  LIST_IMPORTS_DESC_SQL: ["default", "cal", null, null, null, 1],
  STATUS_INSTANCES_SQL: [null, 0, 1],
  LIST_INSTANCE_PAGE_SQL: [null, null, null, null, 1],
  LIST_INSTANCE_PAGE_DESC_SQL: ["running", "worker", null, null, 1],
  ACQUIRE_LEASE_SQL: [null, "task", "owner", 1_000],
  SCHEDULE_COUNTS_SQL: [],
  RETENTION_SQL: [null, 1_000, 1],
  ANALYZE_SQL: [],
  PING_SQL: [],
  NOTIFY_WAKE_SQL: [""],
  INIT_SETTING_SQL: ["column_test", '"value"'],
  // observe.ts
  STORE_GAUGES_SQL: [null, 1_000, null, "instance"],
  READ_STORED_GAUGES_SQL: [null],
  READ_SETTINGS_VERSION_SQL: [],
  RECORD_SETTINGS_VERSION_SQL: ["instance", 1],
  PUT_SETTING_SQL: ["column_test", '"value"'],
  READ_SETTINGS_SQL: [["column_test"]],
  READ_SETTINGS_PREFIXED_SQL: ["column_test:"],
  DELETE_SETTING_SQL: ["column_test"],
  PRUNE_INSTANCES_SQL: [null, 1_000],
  DELETE_OLD_ATTEMPTS_SQL: [null, 1_000, 1],
  // planning.ts
  LOCK_SCHEDULES_TO_PLAN_SQL: [null, 1_000, 1],
  REMINDERS_OF_SQL: [[]],
  INSERT_DELIVERIES_SQL: [null, ...nulls(11)],
  ADVANCE_WATERMARK_SQL: [null, ...nulls(4)],
  QUARANTINE_SQL: [null, ID, "reason"],
  SELECT_STALE_SQL: [null, 1],
  APPLY_MISFIRE_SQL: [null, null, null, null, null],
  LOCK_SCHEDULE_FOR_EDIT_SQL: [null, "default", ID],
  REALIGN_DELETE_MANY_SQL: [null, [ID], []],
  WAITING_NOT_IN_MANY_SQL: [[ID], []],
  SYNC_WAITING_MANY_SQL: [null, [ID]],
  LOCK_SCHEDULES_FOR_EDIT_SQL: [null, "default", [ID]],
  OLDEST_WAITING_MANY_SQL: [[ID]],
  SET_WATERMARKS_SQL: [null, null, null],
  REALIGN_MOVE_SQL: [null, ...nulls(7)],
  NEXT_PLANNING_SQL: [],
  // schedules.ts
  INSERT_SCHEDULE_SQL: [null, "default", null, "hash", ...DEFINITION, ...nulls(5)],
  INSERT_REMINDERS_SQL: [ID, ...nulls(12)],
  SCHEDULE_BY_IDEMPOTENCY_KEY_SQL: ["default", "key"],
  SCHEDULE_BY_ID_SQL: ["default", ID],
  REMINDERS_SQL: [[]],
  LIST_SCHEDULES_SQL: ["default", null, null, null, 1, null, null, 2048, 100],
  LIST_SCHEDULES_DESC_SQL: ["default", null, null, null, 1, null, null, 2048, 100],
  LIST_REMINDERS_SQL: [[], 2048],
  CANCEL_SCHEDULE_SQL: [null, "default", ID, "user"],
  SET_SCHEDULE_STATE_SQL: [null, "default", ID, "active", "paused"],
  LIST_DELIVERIES_SQL: ["default", null, null, null, 1, null, null, null, null, 500],
  COUNT_SCHEDULES_SQL: ["default", null, null, null, 1],
  ESTIMATE_SCHEDULES_SQL: ["default", "active", "src", "q"],
  COUNT_DELIVERIES_SQL: ["default", ...nulls(6), 1],
  ESTIMATE_DELIVERIES_SQL: ["default", ...nulls(6)],
  LIST_DELIVERIES_DESC_SQL: ["default", null, null, null, 1, null, null, null, null, 500],
  DELIVERY_BY_ID_SQL: ["default", 1],
  ATTEMPTS_SQL: [1],
  REDRIVE_SQL: [null, "default", 1],
  RESOLVE_SQL: [null, "default", 1, "sent"],
  UPDATE_SCHEDULE_SQL: [null, ID, ...DEFINITION, "hash", null, null],
  DELETE_REMINDERS_SQL: [ID],
  DELETE_REMINDERS_MANY_SQL: [[ID]],
  UPDATE_SCHEDULES_BULK_SQL: [null, ...nulls(18)],
  SOURCE_SCHEDULES_PAGE_SQL: ["default", "source", "", 10],
  SOURCE_SCHEDULES_UNKEYED_SQL: ["default", "source"],
  INSERT_SCHEDULES_BULK_SQL: [null, "default", ...nulls(18)],
  INSERT_REMINDERS_BULK_SQL: nulls(9),
  REVIVE_SCHEDULE_SQL: [null, ID],
  CANCEL_SCHEDULES_MANY_SQL: [null, "default", [ID], "import"],
  // api-keys.ts
  INSERT_API_KEY_SQL: [null, "default", "name", ["read"], "hash", "pk_"],
  AUTHENTICATE_API_KEY_SQL: [null, "hash"],
  LIST_API_KEYS_SQL: ["default", false, null, null, 1],
  LIST_API_KEYS_DESC_SQL: ["default", false, null, null, 1],
  REVOKE_API_KEY_SQL: [null, ID, "default"],
  INSERT_SESSION_SQL: [null, "hash", null, "operator-hash", 60_000, 5],
  RESOLVE_SESSION_SQL: [null, "hash", 60_000],
  DELETE_SESSION_SQL: ["hash"],
  DELETE_API_KEY_SESSIONS_SQL: [ID],
  DELETE_EXPIRED_SESSIONS_SQL: [null, 10],
  SCHEDULES_WITH_OPEN_DELIVERIES_SQL: [[ID]],
  // operator.ts
  INSERT_TRIGGERED_SQL: [null, "default", ID, "trigger", [], [], []],
  DELIVERIES_BY_KEYS_SQL: ["default", []],
  INSERT_BACKFILL_SQL: [null, "default", ID, [], [], [], [], []],
  MATCH_REDRIVE_SQL: ["default", ["dead"], ...nulls(6), 1],
  MATCH_RESOLVE_SQL: ["default", ["dead"], ...nulls(6), 1],
  BULK_REDRIVE_SQL: [null, "default", ["dead"], ...nulls(6), 1],
  BULK_RESOLVE_SQL: [null, "default", ["dead"], ...nulls(6), "sent", 1],
  SCHEDULE_BY_EXTERNAL_ID_SQL: ["default", "source", "id"],
  INSERT_SCHEDULE_BY_EXTERNAL_ID_SQL: [
    null,
    "default",
    null,
    "hash",
    ...DEFINITION,
    "s",
    "x",
    null,
    null,
    null,
  ],
  PURGE_SCHEDULE_SQL: ["default", ID],
  MISSED_SQL: ["default", ID, 1],
  // kinds.ts
  UPSERT_REMINDER_KIND_SQL: [null, "default", "k", "log", "PT0S", null, null, false, true],
  LIST_REMINDER_KINDS_SQL: ["default"],
  REMINDER_KINDS_BY_KEY_SQL: ["default", []],
  DELETE_REMINDER_KIND_SQL: ["default", "k"],
  // tasks.ts
  CLAIM_TASK_OCCURRENCE_SQL: [null, "task", new Date(0), "owner", 1_000],
  END_TASK_LEASE_SQL: [null, "task", new Date(0), "owner"],
  // rate-limits.ts
  UPSERT_RATE_LIMIT_SQL: [null, "default", "key", 1, 1, null, 1_000],
  LIST_RATE_LIMITS_SQL: [null, "default"],
  ALL_RATE_LIMITS_SQL: [null],
  DELETE_RATE_LIMIT_SQL: ["default", "key"],
  LOCK_BUCKET_SQL: [null, "default", "key"],
  COUNT_BUSY_SQL: [null, "default/key"],
  CLAIM_LIMITED_SQL: [null, "owner", 1_000, 1, ["log"], "default", "key", "default/key"],
  DUE_LIMITERS_SQL: [null, ["log"], ["default/key"], [], 100],
  // circuits.ts
  CIRCUIT_FAILURE_SQL: [null, "default", "host", 5, 1_000, 10_000],
  CIRCUIT_SUCCESS_SQL: [null, "default", "host"],
  CIRCUIT_PROBE_SQL: [null, "default", "host", "owner", 1_000],
  CIRCUIT_SQL: ["default", "host"],
  LIST_CIRCUITS_SQL: [null],
  DEFER_CLAIMS_SQL: ["owner", null, null, new Date(0)],
  // quiet-retries.ts
  REMINDER_QUIET_SQL: [ID, "r"],
  RECORD_QUIET_RETRY_SQL: [null, 1, 1, "owner", new Date(0)],
  // missed.ts
  OCCURRENCE_COUNTS_SQL: ["default", ID, new Date(0), new Date(0)],
  // explain.ts
  EXPLAIN_PAGE_SQL: ["default", ID, new Date(0), new Date(0), new Date(0), "k", 0, 10],
  EXPLAIN_DELIVERY_SQL: ["default", 1],
  EXPLAIN_HISTORY_SQL: [[1]],
  EXPLAIN_SERIAL_SQL: [],
  EXPLAIN_HOLDS_SQL: [null, "default", ["host"], ["default/key"]],
  RECORD_DELIVERY_ACTIONS_SQL: [null, null, "redrive", null, "operator"],
  DEBOUNCE_STATE_SQL: [ID],
  START_DEBOUNCE_BURST_SQL: [ID, new Date(0)],
  // recipients.ts
  UPSERT_RECIPIENTS_SQL: [null, "default", ["r-1"], ["UTC"], ["{}"], ["{}"], ["{}"]],
  RECIPIENTS_BY_ID_SQL: ["default", ["r-1"]],
  LIST_RECIPIENTS_SQL: ["default", null, null, 100],
  LIST_RECIPIENTS_DESC_SQL: ["default", "r", "z", 100],
  DELETE_RECIPIENT_SQL: ["default", "r-1"],
  OPT_OUT_RECIPIENT_SQL: [null, "default", "r-1", "categories", "digest"],
  // deliveries/recipients.ts
  PUT_AUDIENCE_SQL: [ID, false],
  AUDIENCE_OF_SQL: [ID],
  LIST_SCHEDULE_RECIPIENTS_SQL: [ID, null, 100],
  MISSING_RECIPIENTS_SQL: ["default", ["r-1"]],
  ADD_MEMBERS_SQL: [null, ID, "default", [], null],
  REMOVE_MEMBERS_SQL: [null, ID, ["r-1"], null],
  FORGET_RECIPIENT_SQL: [null, "default", "r-1"],
  REPLAN_MEMBERS_SQL: [null, "default", null, null, [], []],
  LOCK_RECIPIENT_MEMBERSHIPS_SQL: ["default", ["r-1"]],
  MOVABLE_MEMBER_ROWS_SQL: [null, "default", ["r-1"]],
  MOVABLE_SCHEDULE_ROWS_SQL: [ID],
  MOVE_MEMBER_DELIVERIES_SQL: [null, ...nulls(6)],
  CANCEL_REALIGNED_MEMBER_ROWS_SQL: [null, []],
  PIN_MEMBER_PLAN_SQL: [],
  LOCK_MEMBERS_TO_PLAN_SQL: [null, 1_000, 1, 1_000],
  AUDIENCE_SCHEDULES_SQL: [null, [ID]],
  SET_MEMBER_WATERMARKS_SQL: [[], [], []],
  RECIPIENT_AT_SEND_SQL: ["default", "r-1", ID, "r"],
  SKIP_CLAIMED_SQL: [null, "owner", 1, 1, "NO_TARGET"],
  RECORD_BYPASS_SQL: [null, "owner", 1, 1, "OPTED_OUT"],
  FLOATING_OF_SQL: [[ID]],
  MEMBERS_TO_PLAN_PAGE_SQL: [ID, null, 100],
  TRIGGERED_DELIVERIES_SQL: [ID, "t-1", 100],
  INSERT_RECIPIENT_DELIVERIES_SQL: [
    null,
    "default",
    ID,
    "plan",
    ["r"],
    ["retry"],
    null,
    ...nulls(7),
  ],
  // pglite.ts
  PGLITE_SESSION_SQL: [],
};

/** Statements that cannot run in a transaction block (VACUUM): run on their own. */
const OUTSIDE_TRANSACTION = new Set(["VACUUM_SQL"]);

interface Case {
  name: string;
  module: string;
  sql: string;
  /** Declared result columns, or null: the statement returns no rows. */
  columns: readonly string[] | null;
}

/** Every `X_SQL` export of the store modules, with its `X_COLUMNS` when declared. */
function statements(): Case[] {
  const cases: Case[] = [];
  for (const [module, exports] of Object.entries(MODULES)) {
    const named = exports as Record<string, unknown>;
    for (const [name, value] of Object.entries(named)) {
      if (!name.endsWith("_SQL")) continue;
      const columns = named[`${name.slice(0, -4)}_COLUMNS`];
      const sqls = Array.isArray(value) ? (value as string[]) : [value as string];
      sqls.forEach((sql, i) =>
        cases.push({
          name: sqls.length > 1 ? `${name}[${i}]` : name,
          module,
          sql,
          columns: Array.isArray(columns) ? (columns as string[]) : null,
        }),
      );
    }
  }
  return cases;
}

class Rollback extends Error {}

/** Runs `sql` with `params` and returns the engine's result, leaving the database unchanged. */
async function runRolledBack(
  db: Database,
  sql: string,
  params: readonly unknown[],
): Promise<QueryResult<unknown>> {
  let result: QueryResult<unknown> | null = null;
  try {
    await db.transaction(async (tx) => {
      result = await tx.query(sql, params);
      throw new Rollback();
    });
  } catch (err) {
    if (!(err instanceof Rollback)) throw err;
  }
  return result!;
}

/** What the engine returned beside what the row type declares, sorted for comparison. */
function compare(fields: readonly string[], declared: readonly string[] | null) {
  return { returned: [...fields].sort(), declared: [...(declared ?? [])].sort() };
}

let t: TestDatabase;
beforeAll(async () => {
  t = await openTestDatabase();
});
afterAll(async () => {
  await t?.close();
});

const cases = statements();

describe("store statements: result columns match their row types", () => {
  it("OPS-10: every store statement is in this test, and every declared column list names a statement", () => {
    const names = cases.map((c) => c.name.replace(/\[\d+\]$/, ""));
    const untested = names.filter((n) => !(n in PARAMS) && !OUTSIDE_TRANSACTION.has(n));
    expect(untested).toEqual([]);
    expect(Object.keys(PARAMS).filter((n) => !names.includes(n))).toEqual([]);
    const orphanColumns = Object.values(MODULES).flatMap((m) =>
      Object.keys(m).filter(
        (k) => k.endsWith("_COLUMNS") && !(`${k.slice(0, -8)}_SQL` in (m as object)),
      ),
    );
    expect(orphanColumns).toEqual([]);
  });

  for (const c of cases) {
    const what = c.columns ? `${c.columns.length} declared columns` : "no rows";
    it(`OPS-10: ${c.module}.${c.name} returns ${what}`, async () => {
      const base = c.name.replace(/\[\d+\]$/, "");
      const result = OUTSIDE_TRANSACTION.has(base)
        ? await t.db.query(c.sql)
        : await runRolledBack(t.db, c.sql, PARAMS[base] ?? []);
      expect(new Set(result.fields).size, "duplicate column names").toBe(result.fields.length);
      const { returned, declared } = compare(result.fields, c.columns);
      expect(returned).toEqual(declared);
    });
  }

  it("OPS-10: the comparison notices a renamed, a missing and an extra column", async () => {
    const sql = operations.LIST_INSTANCES_SQL;
    const declared = operations.LIST_INSTANCES_COLUMNS;
    const params = PARAMS.LIST_INSTANCES_SQL!;
    const same = await runRolledBack(t.db, sql, params);
    expect(compare(same.fields, declared).returned).toEqual(
      compare(same.fields, declared).declared,
    );
    const variants = [
      sql.replace("last_tick_ms,", "last_tick_ms as tick_ms,"),
      sql.replace("last_tick_ms,", ""),
      sql.replace("last_tick_ms,", "last_tick_ms, 1 as extra,"),
    ];
    for (const variant of variants) {
      expect(variant).not.toBe(sql);
      const r = await runRolledBack(t.db, variant, params);
      const { returned, declared: d } = compare(r.fields, declared);
      expect(returned).not.toEqual(d);
    }
  });
});
