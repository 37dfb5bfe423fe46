/**
 * PGlite templates for tests. A fresh embedded database (initdb) costs 1.5–5 s and
 * ~750 MB; loading a dumped data folder costs ~0.3–0.7 s. So each run builds two
 * templates once — an empty database and a migrated one, with the test-only delivery
 * transition trigger (test/support/transitions.ts) — and every test database is loaded
 * from one of them, in memory.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate } from "../../src/store/migrator.js";
import { openPglite } from "../../src/store/pglite.js";
import { installTransitionTrigger } from "./transitions.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Set by test/global-setup.ts: the PGlite templates of this run (null on PostgreSQL). */
    pgliteTemplates: { empty: string; migrated: string } | null;
  }
}

/** Paths of the dumped templates (uncompressed tar files). */
export interface PgliteTemplates {
  /** A fresh database: no migration applied. */
  empty: string;
  /** The same database with every migration applied. */
  migrated: string;
  /** Removes the files. */
  remove(): void;
}

/** Builds both templates into a new temp folder. */
export async function buildPgliteTemplates(): Promise<PgliteTemplates> {
  const dir = mkdtempSync(join(tmpdir(), "punctual-pglite-template-"));
  const db = await openPglite({ dataDir: null });
  try {
    const empty = join(dir, "empty.tar");
    const migrated = join(dir, "migrated.tar");
    // "none": loading an uncompressed tar is about three times faster than a gzipped one.
    const emptyDump = await db.pglite.dumpDataDir("none");
    writeFileSync(empty, new Uint8Array(await emptyDump.arrayBuffer()));
    await migrate(db);
    // Every test database loaded from it checks the delivery state machine.
    await installTransitionTrigger(db);
    const migratedDump = await db.pglite.dumpDataDir("none");
    writeFileSync(migrated, new Uint8Array(await migratedDump.arrayBuffer()));
    return { empty, migrated, remove: () => rmSync(dir, { recursive: true, force: true }) };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  } finally {
    await db.close();
  }
}
