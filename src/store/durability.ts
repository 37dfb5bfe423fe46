/**
 * The server settings that decide whether an acknowledged commit survives a crash of
 * PostgreSQL (see docs/operations.md, "Durable commits"). A claim or a settle that the
 * server acknowledged and then forgot on restart comes back as claimable and is sent again
 * under the same attempt, so punctual reads these settings at start and warns when they
 * make commits non-durable.
 */
import type { Queryable } from "./database.js";
import { columnsOf, firstRow } from "./statement.js";

/** The session's view of the durability settings (PostgreSQL `SHOW` values). */
export const DURABILITY_SQL = `
select current_setting('fsync') as fsync,
       current_setting('synchronous_commit') as synchronous_commit`;

/** A row of {@link DURABILITY_SQL}: the settings as PostgreSQL spells them (`on`, `off`, …). */
export interface DurabilityRow {
  fsync: string;
  synchronous_commit: string;
}

/** Result columns of {@link DURABILITY_SQL}. */
export const DURABILITY_COLUMNS = columnsOf<DurabilityRow>()(["fsync", "synchronous_commit"]);

/**
 * Reads the durability settings a new connection gets (server, database and role
 * defaults included). Returns the settings that make an acknowledged commit non-durable,
 * e.g. `["fsync=off"]`; empty when commits are durable.
 */
export async function nonDurableSettings(db: Queryable): Promise<string[]> {
  const row = await firstRow<DurabilityRow>(db, DURABILITY_SQL);
  if (!row) return [];
  const found: string[] = [];
  if (row.fsync === "off") found.push("fsync=off");
  if (row.synchronous_commit === "off") found.push("synchronous_commit=off");
  return found;
}
