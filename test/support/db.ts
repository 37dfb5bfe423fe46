/**
 * Test databases on either engine. `PUNCTUAL_TEST_ENGINE` picks it (`pglite`, the default,
 * or `postgres` with `DATABASE_URL`); scripts/test.mjs runs the integration suite once per
 * engine, so a test written against {@link openTestDatabase} covers both.
 *
 * - PGlite: an in-memory database loaded from a template dumped once per run by
 *   test/global-setup.ts (~0.3–0.7 s instead of 1.5–5 s for a fresh initdb).
 * - PostgreSQL: a new database `punctual_t_<random>` on the server of `DATABASE_URL`,
 *   migrated, and dropped (with force) on close.
 *
 * A migrated database of either engine carries the test-only trigger of
 * test/support/transitions.ts: a change of a delivery's state that `DELIVERY_TRANSITIONS`
 * does not list raises.
 *
 * Usage:
 * ```ts
 * const t = await openTestDatabase();        // migrated
 * try { await t.db.query("select 1"); } finally { await t.close(); }
 * // or per file:
 * const getDb = useTestDatabase();           // beforeAll/afterAll
 * it("DEL-1: …", async () => { await getDb().db.query(…); });
 * ```
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import pg from "pg";
import { afterAll, beforeAll, describe, inject, it } from "vitest";
import type { TestFunction } from "vitest";
import type { Database } from "../../src/store/database.js";
import { migrate } from "../../src/store/migrator.js";
import { openPglite } from "../../src/store/pglite.js";
import { openPostgres } from "../../src/store/postgres.js";
import { buildPgliteTemplates } from "./pglite-template.js";
import { installTransitionTrigger } from "./transitions.js";

export type TestEngine = "pglite" | "postgres";

export interface TestDatabase {
  db: Database;
  engine: TestEngine;
  /** PostgreSQL only: the URL of this test's own database (for extra pools or processes). */
  url?: string;
  /** Closes the database; on PostgreSQL also drops it. Idempotent. */
  close(): Promise<void>;
}

export interface TestDatabaseOptions {
  /** Apply every migration first (default true). `false` gives an empty database. */
  migrated?: boolean;
}

/** The engine this run tests: `PUNCTUAL_TEST_ENGINE`, default `pglite`. */
export function engineName(): TestEngine {
  const value = process.env.PUNCTUAL_TEST_ENGINE ?? "pglite";
  if (value !== "pglite" && value !== "postgres") {
    throw new Error(`PUNCTUAL_TEST_ENGINE must be "pglite" or "postgres", not "${value}"`);
  }
  return value;
}

/** Whether tests that need a real PostgreSQL server run: engine `postgres` and a URL. */
export function hasPostgres(): boolean {
  return engineName() === "postgres" && Boolean(process.env.DATABASE_URL);
}

/** Why PostgreSQL-only tests are skipped in this run, or null when they run. */
export function postgresSkipReason(): string | null {
  if (hasPostgres()) return null;
  if (engineName() === "postgres") return "needs DATABASE_URL";
  return "needs DATABASE_URL and PUNCTUAL_TEST_ENGINE=postgres";
}

/** `title`, plus `(skipped: <reason>)` when PostgreSQL-only tests do not run. */
export function postgresTitle(title: string): string {
  const reason = postgresSkipReason();
  return reason ? `${title} (skipped: ${reason})` : title;
}

/** A test that needs a real PostgreSQL server; skipped, saying why, without one. */
export function itIfPostgres(title: string, fn: TestFunction, timeout?: number): void {
  it.skipIf(!hasPostgres())(postgresTitle(title), fn, timeout);
}

/** A suite that needs a real PostgreSQL server; skipped, saying why, without one. */
export function describeIfPostgres(title: string, fn: () => void): void {
  describe.skipIf(!hasPostgres())(postgresTitle(title), fn);
}

// ---------------------------------------------------------------------------------------
// PGlite

let ownTemplates: Promise<{ empty: string; migrated: string }> | null = null;
const templateBlobs = new Map<string, Blob>();

/** Template paths: from the global setup, else the environment, else built here once. */
async function templatePaths(): Promise<{ empty: string; migrated: string }> {
  let provided: { empty: string; migrated: string } | null = null;
  try {
    provided = inject("pgliteTemplates");
  } catch {
    // not inside a vitest worker
  }
  if (provided) return provided;
  const { PUNCTUAL_PGLITE_TEMPLATE_EMPTY: empty, PUNCTUAL_PGLITE_TEMPLATE_MIGRATED: migrated } =
    process.env;
  if (empty && migrated) return { empty, migrated };
  // No global setup (e.g. a project without it): build once for this process.
  ownTemplates ??= buildPgliteTemplates().then((templates) => {
    process.once("exit", () => templates.remove());
    return { empty: templates.empty, migrated: templates.migrated };
  });
  return ownTemplates;
}

/**
 * The PGlite template of this run as a Blob for `openPglite({ loadDataDir })`: a test that
 * needs a real data folder loads it there (~1 s) instead of running initdb (1.5–5 s).
 */
export async function pgliteTemplate(migrated = true): Promise<Blob> {
  const paths = await templatePaths();
  const path = migrated ? paths.migrated : paths.empty;
  // Blobs are immutable: one per template serves every load of this process.
  let blob = templateBlobs.get(path);
  if (!blob) {
    blob = new Blob([new Uint8Array(readFileSync(path))]);
    templateBlobs.set(path, blob);
  }
  return blob;
}

async function openPgliteTest(migrated: boolean): Promise<TestDatabase> {
  const db = await openPglite({ dataDir: null, loadDataDir: await pgliteTemplate(migrated) });
  return { db, engine: "pglite", close: () => db.close() };
}

// ---------------------------------------------------------------------------------------
// PostgreSQL

/** Runs one statement on a short-lived connection to the database of `url`. */
async function adminQuery(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, application_name: "punctual-tests" });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** `url` pointing at database `name` instead. */
export function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function openPostgresTest(migrated: boolean): Promise<TestDatabase> {
  const adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    throw new Error(
      "PUNCTUAL_TEST_ENGINE=postgres needs DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5433/postgres); " +
        "`npm test` starts a throwaway cluster itself when PostgreSQL binaries are installed",
    );
  }
  const name = `punctual_t_${randomBytes(6).toString("hex")}`;
  await adminQuery(adminUrl, `create database ${name}`);
  const url = withDatabase(adminUrl, name);
  const db = openPostgres({ url });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    try {
      await db.close();
    } finally {
      await adminQuery(adminUrl, `drop database if exists ${name} with (force)`);
    }
  };
  try {
    if (migrated) {
      await migrate(db);
      // The delivery state machine, checked in every test (test/support/transitions.ts).
      await installTransitionTrigger(db);
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { db, engine: "postgres", url, close };
}

// ---------------------------------------------------------------------------------------

/**
 * A database of its own for a test or a file, on the engine of this run
 * ({@link engineName}), migrated unless `{ migrated: false }`. Call `close()` when done.
 */
export function openTestDatabase(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const migrated = options.migrated ?? true;
  return engineName() === "postgres" ? openPostgresTest(migrated) : openPgliteTest(migrated);
}

/**
 * One test database for the enclosing file or `describe`: opened in `beforeAll`, closed
 * in `afterAll`. Returns a getter to call inside tests.
 */
export function useTestDatabase(options: TestDatabaseOptions = {}): () => TestDatabase {
  let current: TestDatabase | null = null;
  beforeAll(async () => {
    current = await openTestDatabase(options);
  });
  afterAll(async () => {
    await current?.close();
    current = null;
  });
  return () => {
    if (!current) throw new Error("useTestDatabase(): the database is only open inside tests");
    return current;
  };
}
