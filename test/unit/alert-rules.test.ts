/**
 * OPS-13: the shipped alert rules (examples/prometheus/alerts.yml) are valid Prometheus
 * rules and behave as their unit tests say (examples/prometheus/alerts.test.yml: gauges
 * alert with `> 0 for`, counters with `increase`, one alert per cluster gauge however many
 * processes serve it). Runs `promtool` when it is installed (Debian package `prometheus`;
 * .ci/run installs it), and says so in the title when it is not. The rule file must also
 * name every alert that docs/operations.md lists, and only those.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const dir = fileURLToPath(new URL("../../examples/prometheus/", import.meta.url));
const docs = fileURLToPath(new URL("../../docs/operations.md", import.meta.url));

function hasPromtool(): boolean {
  return spawnSync("promtool", ["--version"], { stdio: "ignore" }).status === 0;
}
const promtool = hasPromtool();
const why = promtool ? "" : " (skipped: promtool is not installed; apt-get install prometheus)";

function run(args: string[]): string {
  return execFileSync("promtool", args, { cwd: dir, encoding: "utf8", stdio: "pipe" });
}

describe("OPS-13 alert rules", () => {
  it.skipIf(!promtool)(`OPS-13: promtool check rules accepts alerts.yml${why}`, () => {
    expect(run(["check", "rules", "alerts.yml"])).toMatch(/SUCCESS/);
  });

  it.skipIf(!promtool)(`OPS-13: promtool test rules passes alerts.test.yml${why}`, () => {
    expect(run(["test", "rules", "alerts.test.yml"])).toMatch(/SUCCESS/);
  });

  it("OPS-13: docs/operations.md names exactly the alerts of alerts.yml", () => {
    const rules = [...readFileSync(`${dir}/alerts.yml`, "utf8").matchAll(/- alert: (\w+)/g)]
      .map((m) => m[1])
      .sort();
    const documented = [...readFileSync(docs, "utf8").matchAll(/`(Punctual\w+)`/g)]
      .map((m) => m[1])
      .filter((v, i, a) => a.indexOf(v) === i)
      .sort();
    expect(documented).toEqual(rules);
  });
});
