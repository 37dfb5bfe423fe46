import { defineConfig } from "vitest/config";

// Projects:
// - unit: pure code, no database.
// - integration: against a real engine; PUNCTUAL_TEST_ENGINE=pglite|postgres picks it
//   (scripts/test.mjs runs it once per engine).
// - package: the packed tarball installed into an empty project (test/e2e/package.test.ts);
//   engine-independent, run once, in the PGlite stage.
// - concurrency: real worker processes racing on PostgreSQL (skipped, saying why, without it).
//
// Timeouts are set here once per project and nowhere in the test files. They are
// generous on purpose: the suite must stay green on a loaded 2-core machine running a
// second suite beside it, so a timeout only turns a hang into a failure. No test asserts
// how long anything took (that is what bench/ measures); waits poll an outcome.
/**
 * End-to-end files that run the product on its embedded engine whatever the stage's engine
 * (each clears DATABASE_URL for the processes it starts, or talks to a stubbed server):
 * they prove nothing more on the PostgreSQL stage, so they run once, in the PGlite stage.
 */
const EMBEDDED_ONLY_E2E = [
  "test/e2e/cli.test.ts",
  "test/e2e/cli-json.test.ts",
  "test/e2e/dashboard.test.ts",
  "test/e2e/docs.test.ts",
  "test/e2e/import.test.ts",
  "test/e2e/otel.test.ts",
  "test/e2e/shutdown-pipe.test.ts",
];
const postgresStage = process.env.PUNCTUAL_TEST_ENGINE === "postgres";

export default defineConfig({
  test: {
    // expect.poll waits for an outcome of work running beside the test (a send, a lease
    // renewal); its default budget of one second is too short on a loaded machine.
    expect: { poll: { timeout: 60_000 } },
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          // Property tests and the large real calendars take seconds when the machine is
          // idle; a loaded one may stretch that many times.
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts", "test/e2e/**/*.test.ts"],
          exclude: ["test/e2e/package.test.ts", ...(postgresStage ? EMBEDDED_ONLY_E2E : [])],
          // Builds the PGlite templates once per run (test/support/db.ts loads them).
          globalSetup: ["test/global-setup.ts"],
          // The end-to-end tests spawn a dozen CLI processes each, and wait in a hook on the
          // run's one build of the package (test/support/built-package.ts), which the first
          // of them makes; the documentation test also starts a server in its hook.
          testTimeout: 240_000,
          hookTimeout: 240_000,
        },
      },
      {
        extends: true,
        test: {
          name: "package",
          include: ["test/e2e/package.test.ts"],
          // `npm pack` (a full build) and `npm install` of the tarball into an empty project:
          // a minute on an idle machine, several on a loaded one. Each hook and test gets
          // this long; the timeout only turns a hang into a failure.
          testTimeout: 600_000,
          hookTimeout: 600_000,
        },
      },
      {
        extends: true,
        test: {
          name: "concurrency",
          include: ["test/concurrency/**/*.test.ts"],
          globalSetup: ["test/global-setup.ts"],
          // Above OUTCOME_WAIT_MS (test/support/processes.ts), whose message names the wait.
          testTimeout: 300_000,
          hookTimeout: 300_000,
          fileParallelism: false,
        },
      },
    ],
    maxWorkers: 2,
    pool: "forks",
  },
});
