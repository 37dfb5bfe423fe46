/**
 * The migrated database every test scheduler starts from (API-8). Creating an embedded
 * database and migrating it costs seconds; loading a dumped copy costs a fraction of that.
 * So a process migrates once, keeps the dump (an uncompressed tar, in memory), and each
 * test scheduler loads it into a fresh in-memory database.
 */
import { migrate } from "../store/migrator.js";
import { openPglite } from "../store/pglite.js";
import type { Database } from "../store/database.js";
import type { PGlite } from "@electric-sql/pglite";

let template: Promise<Blob> | null = null;

async function buildTemplate(): Promise<Blob> {
  const db = await openPglite({ dataDir: null });
  try {
    await migrate(db);
    // "none": loading an uncompressed tar is several times faster than a gzipped one.
    return await db.pglite.dumpDataDir("none");
  } finally {
    await db.close();
  }
}

/** The dump of a migrated database, built on the first call of this process. */
export function migratedTemplate(): Promise<Blob> {
  template ??= buildTemplate().catch((err: unknown) => {
    template = null; // a failed build is tried again by the next caller
    throw err;
  });
  return template;
}

/** A new in-memory database loaded from {@link migratedTemplate}. */
export async function openTemplateDatabase(): Promise<Database & { pglite: PGlite }> {
  return openPglite({ dataDir: null, loadDataDir: await migratedTemplate() });
}
