/**
 * Vitest global setup of the database projects (integration, concurrency): on the PGlite
 * engine it builds the empty and migrated templates once per run and hands their paths to
 * the test workers (`inject("pgliteTemplates")`, and PUNCTUAL_PGLITE_TEMPLATE_* for child
 * processes). On PostgreSQL each test database is created and migrated on the server
 * instead, so there is nothing to prepare. On both, it gives the workers one folder for the
 * run's build of the package (`inject("builtPackageRoot")`, test/support/built-package.ts),
 * built there by the first end-to-end file that needs it, and removed at the end.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import type {} from "./support/built-package.js";
import { buildPgliteTemplates } from "./support/pglite-template.js";

export default async function setup(project: TestProject): Promise<() => void> {
  const buildRoot = mkdtempSync(join(tmpdir(), "punctual-built-"));
  project.provide("builtPackageRoot", buildRoot);
  const removeBuild = () => rmSync(buildRoot, { recursive: true, force: true });
  const engine = process.env.PUNCTUAL_TEST_ENGINE ?? "pglite";
  if (engine !== "pglite") {
    project.provide("pgliteTemplates", null);
    return removeBuild;
  }
  const templates = await buildPgliteTemplates();
  project.provide("pgliteTemplates", { empty: templates.empty, migrated: templates.migrated });
  process.env.PUNCTUAL_PGLITE_TEMPLATE_EMPTY = templates.empty;
  process.env.PUNCTUAL_PGLITE_TEMPLATE_MIGRATED = templates.migrated;
  return () => {
    templates.remove();
    removeBuild();
  };
}
