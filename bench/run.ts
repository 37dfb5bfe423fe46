/**
 * `npm run bench`: runs every benchmark in this folder, one after another, each in its
 * own process so one cannot warm up or slow down another. Results go to stdout; record
 * them with the machine and date in docs/benchmarks.md.
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const dir = fileURLToPath(new URL(".", import.meta.url));
const only = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith(".ts") && f !== "run.ts")
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();
let failed = 0;
for (const file of files) {
  process.stdout.write(`\n== bench/${file} ==\n`);
  const result = spawnSync(process.execPath, ["--import", "tsx", `${dir}${file}`], {
    stdio: "inherit",
  });
  if (result.status !== 0) failed++;
}
process.exit(failed === 0 ? 0 : 1);
