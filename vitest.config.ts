import { defineConfig } from "vitest/config";

// Projects:
// - unit: pure code, no database.
// - integration: against a real engine; PUNCTUAL_TEST_ENGINE=pglite|postgres picks it
//   (scripts/test.mjs runs it once per engine).
// - concurrency: real worker processes racing on PostgreSQL (skipped, saying why, without it).
export default defineConfig({
  test: {
    projects: [
      {
        extends: true,
        test: { name: "unit", include: ["test/unit/**/*.test.ts"] },
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts", "test/e2e/**/*.test.ts"],
          // Builds the PGlite templates once per run (test/support/db.ts loads them).
          globalSetup: ["test/global-setup.ts"],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        extends: true,
        test: {
          name: "concurrency",
          include: ["test/concurrency/**/*.test.ts"],
          globalSetup: ["test/global-setup.ts"],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          fileParallelism: false,
        },
      },
    ],
    maxWorkers: 2,
    pool: "forks",
  },
});
