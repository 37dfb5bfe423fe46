/** API-3/OPS-5: `start --help` and `worker --help` list every environment variable they read. */
import { describe, expect, it } from "vitest";
import { buildProgram } from "../../../src/cli/program.js";
import { ENV_VARS } from "../../../src/config/env.js";

function helpOf(name: string): string {
  const program = buildProgram({ out: () => undefined, err: () => undefined });
  const cmd = program.commands.find((c) => c.name() === name);
  if (!cmd) throw new Error(`no command ${name}`);
  let text = "";
  cmd.configureOutput({ writeOut: (s) => (text += s) });
  cmd.outputHelp();
  return text;
}

describe("--help lists the environment", () => {
  it("API-3: start --help names every scheduler, e-mail and API variable", () => {
    const help = helpOf("start");
    for (const v of ENV_VARS.filter((e) => /^(scheduler\.|email\.|api\.)/.test(e.path))) {
      expect(help, v.name).toContain(v.name);
    }
  });

  it("API-3: worker --help names every scheduler and e-mail variable", () => {
    const help = helpOf("worker");
    for (const v of ENV_VARS.filter((e) => /^(scheduler\.|email\.)/.test(e.path))) {
      expect(help, v.name).toContain(v.name);
    }
  });
});

describe("worker --help names its metrics port", () => {
  it("OPS-13: worker --help names PUNCTUAL_METRICS_PORT, PUNCTUAL_METRICS_HOST, the default port and how to turn it off", () => {
    const help = helpOf("worker");
    expect(help).toContain("PUNCTUAL_METRICS_PORT");
    expect(help).toContain("PUNCTUAL_METRICS_HOST");
    expect(help).toContain("9464");
    expect(help).toMatch(/off serves\s+none/);
  });
});

describe("--help speaks to users", () => {
  it("API-3: no command's help names a requirement id of the specification", () => {
    const program = buildProgram({ out: () => undefined, err: () => undefined });
    type Cmd = (typeof program.commands)[number];
    const texts: string[] = [];
    const walk = (cmd: Cmd) => {
      let text = "";
      cmd.configureOutput({ writeOut: (s) => (text += s) });
      cmd.outputHelp();
      texts.push(`${cmd.name()}: ${text}`);
      cmd.commands.forEach(walk);
    };
    walk(program);
    expect(texts.length).toBeGreaterThan(20);
    expect(texts.filter((t) => /\b(DEL|REC|CH|OPS|API)-\d+\b/.test(t))).toEqual([]);
  });
});
