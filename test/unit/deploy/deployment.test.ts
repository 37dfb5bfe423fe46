/**
 * OPS-14: the deployment files hold what a container deployment needs: an ordered start
 * (database healthy, then migrations done, then the processes), a healthcheck per
 * process that reads that process (a worker serves no HTTP: its own heartbeat), a
 * non-root image with production dependencies only. The files are parsed and checked here;
 * the image itself is built and run by scripts/container-check.mjs (in CI, as root).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const read = (path: string) => readFileSync(join(root, path), "utf8");

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  restart?: string;
  hostname?: string;
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test?: string[]; disable?: boolean };
}
const compose = parse(read("compose.yml"), { merge: true }) as {
  services: Record<string, Service>;
};
const services = compose.services;
const punctualServices = Object.entries(services).filter(([, s]) =>
  s.image?.startsWith("punctual:"),
);
const role = (s: Service) => s.command?.[0];
const workers = punctualServices.filter(([, s]) => role(s) === "worker");

describe("compose.yml", () => {
  it("OPS-14: PostgreSQL has a pg_isready healthcheck", () => {
    const db = services.db!;
    expect(db.image).toMatch(/^postgres:15/);
    expect(db.healthcheck?.test?.join(" ")).toMatch(/pg_isready/);
  });

  it("OPS-14: a one-shot migrate service runs `punctual migrate` once the database is healthy", () => {
    const migrate = services.migrate!;
    expect(migrate.command).toEqual(["migrate"]);
    expect(migrate.restart).toBe("no");
    expect(migrate.depends_on).toEqual({ db: { condition: "service_healthy" } });
  });

  it("OPS-14: the api and two workers start only after the database is healthy and the migration completed", () => {
    expect(punctualServices.map(([name, s]) => [name, role(s)])).toEqual(
      expect.arrayContaining([
        ["api", "start"],
        ["worker-1", "worker"],
        ["worker-2", "worker"],
      ]),
    );
    expect(workers).toHaveLength(2);
    for (const [name, s] of punctualServices.filter(([n]) => n !== "migrate")) {
      expect(s.depends_on, name).toEqual({
        db: { condition: "service_healthy" },
        migrate: { condition: "service_completed_successfully" },
      });
      expect(s.environment?.DATABASE_URL, name).toMatch(/@db:5432\//);
    }
  });

  it("OPS-14: each long-running process has its own healthcheck: the api its /readyz, each worker its own heartbeat (no HTTP it does not serve)", () => {
    const api = services.api!;
    expect(api.healthcheck?.test).toEqual([
      "CMD",
      "punctual",
      "healthcheck",
      "--url",
      "http://127.0.0.1:8080",
    ]);
    for (const [name, s] of workers) {
      const test = s.healthcheck?.test ?? [];
      expect(test.slice(0, 3), name).toEqual(["CMD", "punctual", "healthcheck"]);
      expect(test, name).toContain("--this-host");
      expect(test, name).not.toContain("--url");
      expect(s.healthcheck?.disable, name).toBeUndefined();
    }
    // Two workers on two host names, so each check reads its own heartbeat.
    expect(new Set(workers.map(([, s]) => s.hostname)).size).toBe(2);
  });
});

describe("Dockerfile", () => {
  const dockerfile = read("Dockerfile");
  const stages = dockerfile.split(/^FROM /m).slice(1);
  const runtime = stages[stages.length - 1] ?? "";

  it("OPS-14: multi-stage on node:20, production dependencies only in the runtime, non-root", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    // Every stage on NODE_IMAGE, node:20-slim unless a mirror of it is passed.
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:20-slim$/m);
    for (const s of stages) expect(s).toMatch(/^\$\{NODE_IMAGE\} AS /);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    // The runtime stage copies node_modules from the production-only stage.
    const depsStage = stages.find((s) => /npm ci --omit=dev/.test(s)) ?? "";
    const depsName = /^\S+ AS (\S+)/.exec(depsStage)?.[1];
    expect(runtime).toContain(`COPY --from=${depsName} /app/node_modules`);
    expect(runtime).toMatch(/^USER (?!root\b|0\b)\S+/m);
  });

  it("OPS-14: HEALTHCHECK runs `punctual healthcheck`", () => {
    expect(runtime).toMatch(/HEALTHCHECK[\s\S]*CMD \["punctual", "healthcheck"/);
  });

  it("OPS-14: .dockerignore keeps the build context to the sources", () => {
    const ignored = read(".dockerignore")
      .split("\n")
      .map((l) => l.trim());
    expect(ignored).toEqual(
      expect.arrayContaining([".git", "node_modules", "dist", "punctual-data"]),
    );
  });
});

/**
 * .dockerignore as the builder reads it: each line a pattern on the path from the context
 * root (`*` within one segment, `**` across), a leading `!` re-includes; the last line that
 * matches a path or one of its parent folders decides.
 */
function dockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"))
    .map((l) => {
      const negate = l.startsWith("!");
      const pattern = (negate ? l.slice(1) : l).replace(/^\/+|\/+$/g, "");
      const source = pattern
        .split("/")
        .map((seg) =>
          seg === "**"
            ? ".*"
            : seg
                .replace(/[.+^${}()|[\]\\]/g, "\\$&")
                .replace(/\*/g, "[^/]*")
                .replace(/\?/g, "[^/]"),
        )
        .join("/");
      return { negate, re: new RegExp(`^${source}$`) };
    });
  return (path) => {
    const parts = path.split("/");
    let excluded = false;
    for (const { negate, re } of rules) {
      for (let i = 1; i <= parts.length; i++) {
        if (re.test(parts.slice(0, i).join("/"))) {
          excluded = !negate;
          break;
        }
      }
    }
    return excluded;
  };
}

describe("Dockerfile build context (.dockerignore replayed)", () => {
  const dockerfile = read("Dockerfile");
  const excluded = dockerignore(read(".dockerignore"));

  it("OPS-14: every COPY source from the context is in the context", () => {
    const sources = [...dockerfile.matchAll(/^COPY (?!--from=)(.+)$/gm)].flatMap((m) => {
      const words = m[1]!.trim().split(/\s+/);
      return words.slice(0, -1);
    });
    expect(sources).toEqual(expect.arrayContaining(["package.json", "src", "bin", "migrations"]));
    for (const source of sources) expect(excluded(source), source).toBe(false);
  });

  it("OPS-14: the build stage's `npm run build` finds every script it runs (scripts/copy-assets.mjs)", () => {
    const build = (JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts
      .build!;
    const scripts = [...build.matchAll(/node (scripts\/\S+)/g)].map((m) => m[1]!);
    expect(scripts).toContain("scripts/copy-assets.mjs");
    const buildStage = dockerfile.split(/^FROM /m).find((s) => /RUN npm run build/.test(s)) ?? "";
    for (const script of scripts) {
      expect(excluded(script), script).toBe(false);
      expect(buildStage, script).toContain(`COPY ${script} `);
    }
    // The rest of scripts/ stays out of the image.
    expect(excluded("scripts/chaos.mjs")).toBe(true);
    expect(excluded("test/unit/deploy/deployment.test.ts")).toBe(true);
  });
});

describe("systemd units", () => {
  const dir = "examples/systemd";
  const units = readdirSync(join(root, dir)).filter((f) => f.endsWith(".service"));

  it("OPS-14: migrate, api and worker units; the processes start after the migration and node gets SIGTERM", () => {
    expect(units.sort()).toEqual([
      "punctual-api.service",
      "punctual-migrate.service",
      "punctual-worker@.service",
    ]);
    const text = (f: string) => read(`${dir}/${f}`);
    expect(text("punctual-migrate.service")).toMatch(/^Type=oneshot$/m);
    for (const f of ["punctual-api.service", "punctual-worker@.service"]) {
      expect(text(f), f).toMatch(/^Requires=punctual-migrate\.service$/m);
      expect(text(f), f).toMatch(/^After=.*punctual-migrate\.service/m);
      expect(text(f), f).toMatch(
        /^ExecStart=\/usr\/bin\/node \S+\/bin\/punctual\.js (start|worker)/m,
      );
      expect(text(f), f).toMatch(/^User=(?!root)\S+$/m);
    }
  });
});
