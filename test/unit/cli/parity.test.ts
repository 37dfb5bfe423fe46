/**
 * API-3 CLI parity: every route of the HTTP API has a command, and the shell completion
 * scripts are made from the command tree (every command and flag appears; the bash script
 * completes as a shell would run it).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import * as apiKeys from "../../../src/api/api-keys.js";
import * as explainRoutes from "../../../src/api/explain-routes.js";
import * as kinds from "../../../src/api/kinds.js";
import * as operatorRoutes from "../../../src/api/operator-routes.js";
import * as rateLimitRoutes from "../../../src/api/rate-limit-routes.js";
import * as recipientRoutes from "../../../src/api/recipient-routes.js";
import * as recipientZoneRoutes from "../../../src/api/recipient-zone-routes.js";
import * as routes from "../../../src/api/routes.js";
import * as unsubscribeRoutes from "../../../src/api/unsubscribe-routes.js";
import * as webhookSecretRoutes from "../../../src/api/webhook-secret-routes.js";
import {
  allNodes,
  commandTree,
  completionScript,
  SHELLS,
  type CommandNode,
} from "../../../src/cli/completion.js";
import { buildProgram } from "../../../src/cli/program.js";

const program = (): Command => buildProgram({ out: () => undefined, err: () => undefined });

/** Every `createRoute` of the API modules, as `METHOD /path`. */
function apiRoutes(): string[] {
  const found = new Set<string>();
  for (const mod of [
    routes,
    operatorRoutes,
    kinds,
    apiKeys,
    rateLimitRoutes,
    recipientRoutes,
    recipientZoneRoutes,
    webhookSecretRoutes,
    explainRoutes,
    unsubscribeRoutes,
  ]) {
    for (const value of Object.values(mod)) {
      const r = value as { method?: unknown; path?: unknown; responses?: unknown };
      if (typeof r?.method === "string" && typeof r.path === "string" && r.responses) {
        found.add(`${r.method.toUpperCase()} ${r.path}`);
      }
    }
  }
  return [...found].sort();
}

/**
 * The command of each route. `preview` computes locally with the code the server runs
 * (REC-7); `healthcheck` reads `/readyz` (and `/healthz` is its liveness twin).
 */
const ROUTE_COMMANDS: Record<string, string> = {
  "POST /v1/schedules": "schedules add",
  "GET /v1/schedules": "schedules list",
  "GET /v1/schedules/{id}": "schedules show",
  "PATCH /v1/schedules/{id}": "schedules edit",
  "DELETE /v1/schedules/{id}": "schedules cancel|schedules purge",
  "POST /v1/schedules/{id}/pause": "schedules pause",
  "POST /v1/schedules/{id}/resume": "schedules resume",
  "POST /v1/schedules/{id}/trigger": "schedules trigger",
  "POST /v1/schedules/{id}/backfill": "schedules backfill",
  "PUT /v1/schedules/by-external-id/{source}/{externalId}": "schedules upsert",
  "PUT /v1/schedules/by-external-id/{externalId}": "schedules upsert",
  "GET /v1/deliveries": "deliveries list",
  "GET /v1/deliveries/{id}": "deliveries show",
  "GET /v1/schedules/{id}/explain": "schedules explain",
  "GET /v1/deliveries/{id}/explain": "deliveries explain",
  "POST /v1/deliveries/{id}/redrive": "deliveries redrive",
  "POST /v1/deliveries/{id}/resolve": "deliveries resolve",
  "POST /v1/deliveries/redrive": "deliveries redrive",
  "POST /v1/deliveries/resolve": "deliveries resolve",
  "POST /v1/preview": "preview",
  "POST /v1/imports": "import",
  "GET /v1/status": "status",
  "GET /v1/instances": "instances",
  "GET /v1/imports": "imports",
  "GET /v1/imports/{id}": "imports",
  "GET /healthz": "healthcheck",
  "GET /readyz": "healthcheck",
  "GET /metrics": "metrics",
  "GET /v1/webhook-secret": "webhook-secret",
  "GET /v1/tenant-webhook-secret": "tenant-secret show",
  "POST /v1/tenant-webhook-secret": "tenant-secret rotate",
  "DELETE /v1/tenant-webhook-secret": "tenant-secret remove",
  "GET /v1/reminder-kinds": "kinds list",
  "GET /v1/reminder-kinds/{key}": "kinds show",
  "PUT /v1/reminder-kinds/{key}": "kinds set|kinds apply",
  "DELETE /v1/reminder-kinds/{key}": "kinds remove",
  "PUT /v1/rate-limits/{key}": "rate-limits set",
  "GET /v1/rate-limits": "rate-limits list",
  "DELETE /v1/rate-limits/{key}": "rate-limits remove",
  "GET /v1/circuits": "circuits",
  "PUT /v1/recipients/{id}": "recipients set",
  "GET /v1/recipients/{id}": "recipients show",
  "GET /v1/recipients": "recipients list",
  "DELETE /v1/recipients/{id}": "recipients remove",
  "GET /v1/schedules/{id}/recipient-zones": "schedules zones",
  "POST /v1/recipients:bulk": "recipients import",
  "POST /v1/unsubscribe/{token}": "recipients unsubscribe",
  "GET /v1/schedules/{id}/recipients": "recipients of",
  "PUT /v1/schedules/{id}/recipients": "recipients assign",
  "POST /v1/api-keys": "api-keys create",
  "GET /v1/api-keys": "api-keys list",
  "DELETE /v1/api-keys/{id}": "api-keys revoke",
};

const commandPaths = (root: CommandNode): Set<string> =>
  new Set(
    allNodes(root)
      .filter((n) => n.path.length > 0)
      .map((n) => n.path.join(" ")),
  );

describe("API-3 every API operation has a command", () => {
  it("API-3: each route of the API maps to commands that exist", () => {
    const paths = commandPaths(commandTree(program()));
    const routeList = apiRoutes();
    expect(routeList.length).toBeGreaterThan(30);
    const missing = routeList.filter((r) => !(r in ROUTE_COMMANDS));
    expect(missing, "routes without a command: add one (and a line here)").toEqual([]);
    for (const [route, commands] of Object.entries(ROUTE_COMMANDS)) {
      expect(routeList, `${route} is no longer a route`).toContain(route);
      for (const c of commands.split("|")) expect(paths, `${route} → ${c}`).toContain(c);
    }
  });

  it("API-3: schedules edit takes the reminder, title and policy flags of schedules add", () => {
    const tree = commandTree(program());
    const node = (path: string) => allNodes(tree).find((n) => n.path.join(" ") === path)!;
    const flags = (path: string) => new Set(node(path).flags.map((f) => f.long));
    const edit = flags("schedules edit");
    for (const f of [
      "--offset",
      "--add-offset",
      "--remove-reminder",
      "--key",
      "--title",
      "--channel",
      "--target-url",
    ]) {
      expect(edit, f).toContain(f);
    }
    for (const f of flags("schedules add")) {
      if (/^--(quiet|priority|catch-up)/.test(f)) expect(edit, f).toContain(f);
    }
    expect(flags("schedules list")).toContain("--source");
    expect(flags("schedules add")).toContain("--title");
  });
});

describe("API-3 shell completion", () => {
  const tree = commandTree(program());

  it.each(SHELLS)("API-3: the %s script names every command and every flag", (shell) => {
    const script = completionScript(tree, shell);
    for (const n of allNodes(tree)) {
      if (n.path.length > 0) expect(script, n.path.join(" ")).toContain(n.name);
      for (const f of n.flags) {
        // fish writes flags without their dashes (`-l dtstart`).
        expect(script, `${n.path.join(" ")} ${f.long}`).toContain(
          shell === "fish" ? `-l ${f.long.slice(2)}` : f.long,
        );
      }
    }
  });

  it("API-3: a command added to the program appears in the script (made from the tree, not a list)", () => {
    const p = program();
    p.command("brand-new-command").option("--brand-new-flag <x>", "a flag");
    const script = completionScript(commandTree(p), "bash");
    expect(script).toContain("brand-new-command");
    expect(script).toContain("--brand-new-flag");
  });

  const shellRuns = (
    shell: string,
    script: string,
    body: string,
  ): { status: number | null; stdout: string; stderr: string } => {
    const dir = mkdtempSync(join(tmpdir(), "punctual-completion-"));
    try {
      const file = join(dir, `punctual.${shell}`);
      writeFileSync(file, script);
      const r = spawnSync(shell, ["-c", body.replace("SCRIPT", file)], { encoding: "utf8" });
      return { status: r.status, stdout: r.stdout, stderr: r.stderr };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  it("API-3: the bash script completes commands, subcommands, flags and flag choices", () => {
    const script = completionScript(tree, "bash");
    const complete = (...words: string[]) => {
      const r = shellRuns(
        "bash",
        script,
        `source SCRIPT; COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _punctual; printf '%s\\n' "\${COMPREPLY[@]}"`,
      );
      expect(r.stderr).toBe("");
      return r.stdout.split("\n").filter(Boolean);
    };
    expect(complete("punctual", "")).toEqual(tree.commands.map((c) => c.name));
    expect(complete("punctual", "sch")).toEqual(["schedules"]);
    expect(complete("punctual", "schedules", "")).toContain("edit");
    expect(complete("punctual", "schedules", "edit", "x", "--add-")).toEqual(["--add-offset"]);
    expect(complete("punctual", "schedules", "add", "--tzid", "UTC", "--channel", "")).toEqual([
      "webhook",
      "log",
      "slack",
      "discord",
      "email",
    ]);
    expect(complete("punctual", "completion", "")).toEqual(["bash", "zsh", "fish"]);
  });

  const has = (shell: string) => spawnSync("sh", ["-c", `command -v ${shell}`]).status === 0;

  it.skipIf(!has("zsh"))(
    "API-3: the zsh script parses and completes commands and flag choices (skipped when zsh is not installed)",
    () => {
      const script = completionScript(tree, "zsh");
      expect(shellRuns("zsh", script, "zsh -n SCRIPT").status).toBe(0);
      // The completion system's functions replaced by ones that print their candidates.
      const complete = (...words: string[]) => {
        const r = shellRuns(
          "zsh",
          script,
          [
            "compdef() { :; }",
            "source SCRIPT",
            '_describe() { print -l -- "${(@P)4%%:*}"; }',
            'compadd() { print -l -- "${(@P)2}"; }',
            "_files() { print FILES; }",
            `words=(${words.map((w) => `'${w}'`).join(" ")}); CURRENT=${words.length}`,
            "_punctual",
          ].join("\n"),
        );
        expect(r.stderr).toBe("");
        return r.stdout.split("\n").filter(Boolean);
      };
      expect(complete("punctual", "")).toEqual(tree.commands.map((c) => c.name));
      expect(complete("punctual", "schedules", "")).toContain("upsert");
      expect(complete("punctual", "schedules", "edit", "x", "--")).toContain("--remove-reminder");
      expect(complete("punctual", "deliveries", "list", "--state", "")).toContain("in_doubt");
      expect(complete("punctual", "completion", "")).toEqual(["bash", "zsh", "fish"]);
    },
  );

  it.skipIf(!has("fish"))(
    "API-3: the fish script loads and completes subcommands (skipped when fish is not installed)",
    () => {
      const r = shellRuns(
        "fish",
        completionScript(tree, "fish"),
        "source SCRIPT; complete -C 'punctual schedules '",
      );
      expect(r.stderr).toBe("");
      expect(r.stdout).toMatch(/^edit\t/m);
      expect(r.stdout).toMatch(/^upsert\t/m);
      const files = shellRuns(
        "fish",
        completionScript(tree, "fish"),
        `cd ${JSON.stringify(fileURLToPath(new URL("../../fixtures/ics/", import.meta.url)))}; source SCRIPT; complete -C 'punctual import team'`,
      );
      expect(files.stdout).toContain("team-v1.ics");
    },
  );
});
