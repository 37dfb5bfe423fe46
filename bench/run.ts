/**
 * `npm run bench`: runs every benchmark in this folder, one after another, each in its
 * own process so one cannot warm up or slow down another. Results go to stdout; record
 * them with the machine and date in docs/benchmarks.md. See bench/README.md.
 *
 *   npm run bench                      every benchmark, full sizes
 *   npm run bench -- --quick           every benchmark, small sizes (a smoke run)
 *   npm run bench -- delivery --quick  only files whose name contains "delivery"
 *
 * Words without a leading `--` pick files; flags (and the value after a flag that takes
 * one) go to every file, which ignores the flags it does not know.
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const dir = fileURLToPath(new URL(".", import.meta.url));
const BOOLEAN_FLAGS = new Set(["--quick"]);
const only: string[] = [];
const flags: string[] = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const arg = argv[i]!;
  if (!arg.startsWith("--")) {
    only.push(arg);
    continue;
  }
  flags.push(arg);
  const next = argv[i + 1];
  if (!BOOLEAN_FLAGS.has(arg) && !arg.includes("=") && next !== undefined && !next.startsWith("--"))
    flags.push(argv[++i]!);
}
const files = readdirSync(dir)
  .filter((f) => f.endsWith(".ts") && f !== "run.ts")
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();
let failed = 0;
for (const file of files) {
  process.stdout.write(`\n== bench/${file} ==\n`);
  const result = spawnSync(process.execPath, ["--import", "tsx", `${dir}${file}`, ...flags], {
    stdio: "inherit",
  });
  if (result.status !== 0) failed++;
}
process.exit(failed === 0 ? 0 : 1);
