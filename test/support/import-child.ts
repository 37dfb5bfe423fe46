/**
 * A separate process importing one calendar into PostgreSQL, for the cross-process import
 * lock test: `node --import tsx test/support/import-child.ts <database-url> <file> <source>`.
 * It opens its own pool, prints `ready`, waits for a line on stdin (so several children
 * start their imports together), imports, prints the summary's counts as one JSON line and
 * exits.
 */
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { importCalendar } from "../../src/app/import.js";
import { createPunctual } from "../../src/app/punctual.js";
import { silentLogger } from "../../src/observability/logger.js";

const [url, file, source] = process.argv.slice(2);
if (!url || !file || !source) throw new Error("usage: import-child <database-url> <file> <source>");
const text = readFileSync(file, "utf8");
const punctual = await createPunctual({ databaseUrl: url, logger: silentLogger() });
const lines = createInterface({ input: process.stdin });
process.stdout.write("ready\n");
await new Promise<void>((resolve) => lines.once("line", () => resolve()));
lines.close();
const summary = await importCalendar(punctual, text, {
  source,
  channel: "log",
  remind: ["-PT15M"],
});
process.stdout.write(
  `${JSON.stringify({
    created: summary.created,
    updated: summary.updated,
    unchanged: summary.unchanged,
    cancelled: summary.cancelled,
    skipped: summary.skipped.length,
    firstSkip: summary.skipped[0]?.reason ?? null,
  })}\n`,
);
await punctual.close(0);
