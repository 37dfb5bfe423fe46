/**
 * Vitest global setup of the database projects (integration, concurrency): on the PGlite
 * engine it builds the empty and migrated templates once per run and hands their paths to
 * the test workers (`inject("pgliteTemplates")`, and PUNCTUAL_PGLITE_TEMPLATE_* for child
 * processes). On PostgreSQL each test database is created and migrated on the server
 * instead, so there is nothing to prepare.
 */
import type { TestProject } from "vitest/node";
import { buildPgliteTemplates } from "./support/pglite-template.js";

export default async function setup(project: TestProject): Promise<(() => void) | undefined> {
  const engine = process.env.PUNCTUAL_TEST_ENGINE ?? "pglite";
  if (engine !== "pglite") {
    project.provide("pgliteTemplates", null);
    return undefined;
  }
  const templates = await buildPgliteTemplates();
  project.provide("pgliteTemplates", { empty: templates.empty, migrated: templates.migrated });
  process.env.PUNCTUAL_PGLITE_TEMPLATE_EMPTY = templates.empty;
  process.env.PUNCTUAL_PGLITE_TEMPLATE_MIGRATED = templates.migrated;
  return () => templates.remove();
}
