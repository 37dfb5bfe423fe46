/**
 * The delivery state machine as a database trigger, for the test suite only: generated
 * from `DELIVERY_STORED_TRANSITIONS` (the ledger's moves, derived from `DELIVERY_TRANSITIONS`) and `DELIVERY_INITIAL_STATES` (src/domain), it refuses
 * (raises) any change of `punctual_deliveries.state` the table does not list and any row
 * inserted in another state than an initial one. Installed on every migrated test
 * database (test/support/db.ts on PostgreSQL, the PGlite template of
 * test/support/pglite-template.ts), so every integration test checks that the code
 * obeys the table. Never part of the migrations: production pays nothing for it.
 *
 * A test that must forge a row's history (a finished row inserted directly, a state set
 * by hand to reach a case) says so with {@link forgingStates}: the check is off for that
 * one transaction.
 */
import {
  DELIVERY_INITIAL_STATES,
  DELIVERY_STATES,
  DELIVERY_STORED_TRANSITIONS,
} from "../../src/domain/index.js";
import type { Database, Queryable } from "../../src/store/database.js";

/** SQLSTATE of a refused transition (class P0, PL/pgSQL `raise_exception`). */
export const ILLEGAL_TRANSITION_CODE = "P0001";

/** The setting that turns the check off for a transaction (see {@link forgingStates}). */
const FORGE_SETTING = "punctual.test_forge_states";

const quote = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** Every legal `from>to` pair of the table, as SQL text literals. */
export function legalPairs(): string[] {
  return DELIVERY_STATES.flatMap((from) =>
    DELIVERY_STORED_TRANSITIONS[from].map((to) => `${from}>${to}`),
  );
}

/** The statements that install the trigger (idempotent), in order. */
export function transitionTriggerSql(): string[] {
  const pairs = legalPairs().map(quote).join(", ");
  const initial = DELIVERY_INITIAL_STATES.map(quote).join(", ");
  return [
    `create or replace function punctual_test_delivery_transition() returns trigger
language plpgsql as $fn$
begin
  if coalesce(current_setting('${FORGE_SETTING}', true), '') = 'on' then
    return null;
  end if;
  if tg_op = 'INSERT' then
    if not (new.state = any (array[${initial}]::text[])) then
      raise exception 'delivery % (%) inserted in state %, not an initial state (DELIVERY_INITIAL_STATES, src/domain)',
        new.id, new.delivery_key, new.state using errcode = '${ILLEGAL_TRANSITION_CODE}';
    end if;
  elsif not ((old.state || '>' || new.state) = any (array[${pairs}]::text[])) then
    raise exception 'illegal delivery transition % -> % of delivery % (%): not in DELIVERY_STORED_TRANSITIONS (src/domain)',
      old.state, new.state, new.id, new.delivery_key using errcode = '${ILLEGAL_TRANSITION_CODE}';
  end if;
  return null;
end
$fn$`,
    `drop trigger if exists punctual_test_delivery_insert on punctual_deliveries`,
    `create trigger punctual_test_delivery_insert after insert on punctual_deliveries
  for each row execute function punctual_test_delivery_transition()`,
    `drop trigger if exists punctual_test_delivery_transition on punctual_deliveries`,
    `create trigger punctual_test_delivery_transition after update on punctual_deliveries
  for each row when (old.state is distinct from new.state)
  execute function punctual_test_delivery_transition()`,
  ];
}

/** Installs the transition trigger on a migrated database. */
export async function installTransitionTrigger(db: Queryable): Promise<void> {
  for (const sql of transitionTriggerSql()) await db.query(sql);
}

/**
 * Runs `fn` in one transaction with the transition check off: for a test that forges a
 * row's history (inserts a finished row, sets a state by hand) to reach the case it
 * tests. Everything the code under test does outside it stays checked.
 */
export async function forgingStates<T>(
  db: Database,
  fn: (tx: Queryable) => Promise<T>,
): Promise<T> {
  return db.transaction(async (tx) => {
    await tx.query(`select set_config('${FORGE_SETTING}', 'on', true)`);
    return fn(tx);
  });
}
