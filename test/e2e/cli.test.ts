/**
 * The `punctual` command as a subprocess (API-3, OPS-4, OPS-6, REC-3, REC-7): the command
 * of the package built from src/ once per run (test/support/built-package.ts), as
 * `node bin/punctual.js …`. The server test starts `punctual start` on a
 * free port with a temporary data folder and waits on its startup line, never on a timer.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builtPackage, punctualBin } from "../support/built-package.js";
import { until } from "../support/processes.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
let main = "";
beforeAll(async () => {
  main = punctualBin(await builtPackage());
});

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Environment without the variables that would change the CLI's defaults. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (key.startsWith("PUNCTUAL_") || key === "DATABASE_URL") delete env[key];
  }
  return { ...env, ...extra };
}

function spawnCli(args: string[], env = cleanEnv()): ChildProcess {
  return spawn(process.execPath, [main, ...args], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** Runs the CLI to completion. */
function cli(args: string[], env = cleanEnv()): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args, env);
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("REC-7 preview and REC-3 validate (no server)", () => {
  it("REC-7: preview --json prints exactly the array [{instant, local}]", async () => {
    const r = await cli([
      "preview",
      "--dtstart",
      "2027-03-27T09:00:00",
      "--tzid",
      "Europe/Berlin",
      "--rrule",
      "FREQ=DAILY",
      "--count",
      "2",
      "--json",
    ]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual([
      { instant: "2027-03-27T08:00:00.000Z", local: "2027-03-27T09:00:00" },
      { instant: "2027-03-28T07:00:00.000Z", local: "2027-03-28T09:00:00" },
    ]);
  });

  it("REC-7: preview prints a table by default", async () => {
    const r = await cli([
      "preview",
      "--dtstart",
      "2027-01-04",
      "--rrule",
      "FREQ=WEEKLY",
      "--count",
      "3",
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n").filter(Boolean)).toHaveLength(4);
    expect(r.stdout).toContain("2027-01-18");
  });

  it("REC-3: validate exits 1 naming the part for FREQ=DAILY;BYMONTHDAY=40", async () => {
    const r = await cli(["validate", "--rrule", "FREQ=DAILY;BYMONTHDAY=40"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("BYMONTHDAY");
    expect(r.stdout).toBe("");
  });

  it("REC-3: validate prints valid and exits 0 for a good rule", async () => {
    const r = await cli(["validate", "--rrule", "FREQ=MONTHLY;BYDAY=-1FR;COUNT=6"]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe("valid");
  });
});

describe("API-3 start, schedules, deliveries, shutdown", () => {
  const dir = mkdtempSync(join(tmpdir(), "punctual-cli-"));
  let server: ChildProcess | null = null;

  afterAll(() => {
    if (server && server.exitCode === null) server.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("API-3: a non-loopback host without PUNCTUAL_API_KEY is refused with exit 2", async () => {
    const r = await cli(["start", "--host", "0.0.0.0", "--data-dir", join(dir, "refused")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("PUNCTUAL_API_KEY");
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it("API-3: a busy port is refused with exit 2 before the data folder is opened", async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
    const port = (busy.address() as AddressInfo).port;
    const dataDir = join(dir, "busy-port");
    try {
      const r = await cli(["start", "--port", String(port), "--data-dir", dataDir]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`Cannot listen on 127.0.0.1:${port} (EADDRINUSE)`);
      // Guards the probe before createPunctual: without it the embedded database is
      // created and migrated in the folder first, and the port is found busy after.
      expect(existsSync(dataDir)).toBe(false);
    } finally {
      await new Promise<void>((resolve) => busy.close(() => resolve()));
    }
  });

  describe("a running server (punctual start on port 0, PGlite data folder)", () => {
    // One server for the tests below, which run in order; each test spawns a few CLI
    // processes, so no single test carries the whole sequence.
    let url = "";
    let stderr = "";
    let exited: Promise<number | null> = Promise.resolve(null);

    beforeAll(async () => {
      server = spawnCli([
        "start",
        "--port",
        "0",
        "--data-dir",
        join(dir, "data"),
        "--log-level",
        "warn",
      ]);
      exited = new Promise<number | null>((resolve) => server?.on("exit", (code) => resolve(code)));
      url = await new Promise<string>((resolve, reject) => {
        server?.stderr?.on("data", (d: Buffer) => {
          stderr += d.toString();
          const m = /listening on (http:\/\/[^\s]+)/.exec(stderr);
          if (m?.[1]) resolve(m[1]);
        });
        void exited.then((code) => reject(new Error(`start exited ${code}: ${stderr}`)));
      });
    });

    it("API-3 OPS-4: start on port 0 reports the embedded engine and the port it bound", () => {
      expect(stderr).toMatch(/PGlite/);
      expect(url).not.toMatch(/:0$/);
    });

    it("API-3: schedules add, then edit with --if-version; a stale version is refused", async () => {
      const add = await cli([
        "schedules",
        "add",
        "--url",
        url,
        "--dtstart",
        "2030-01-01T09:00:00",
        "--tzid",
        "Europe/Lisbon",
        "--channel",
        "log",
        "--offset",
        "-PT15M",
        "--payload",
        '{"user":42}',
        "--json",
      ]);
      expect(add.code).toBe(0);
      const schedule = JSON.parse(add.stdout) as { id: string; reminders: Array<{ key: string }> };
      expect(schedule.reminders[0]?.key).toBe("r1");

      const edit = ["schedules", "edit", schedule.id, "--url", url, "--if-version", "1"];
      const edited = await cli([...edit, "--rrule", "FREQ=DAILY;COUNT=2", "--json"]);
      expect(edited.code).toBe(0);
      expect(JSON.parse(edited.stdout)).toMatchObject({ version: 2, rrule: "FREQ=DAILY;COUNT=2" });
      const stale = await cli([...edit, "--rrule", "FREQ=DAILY;COUNT=3"]);
      expect(stale.code).toBe(1);
      expect(stale.stderr).toContain("STALE_VERSION");
    });

    it("API-3: schedules edit adds, removes and replaces reminders and sets the title; list filters by source", async () => {
      const add = await cli([
        "schedules",
        "add",
        "--url",
        url,
        "--dtstart",
        "2030-01-07T09:00:00",
        "--tzid",
        "Europe/Berlin",
        "--rrule",
        "FREQ=WEEKLY;COUNT=5",
        "--channel",
        "log",
        "--offset",
        "-PT15M",
        "--title",
        "Weekly sync",
        "--json",
      ]);
      expect(add.code).toBe(0);
      const { id, title } = JSON.parse(add.stdout) as { id: string; title: string };
      expect(title).toBe("Weekly sync");
      const edit = (...flags: string[]) =>
        cli(["schedules", "edit", id, "--url", url, "--json", ...flags]);
      type Edited = { version: number; title: string | null; reminders: Array<{ key: string }> };
      const added = await edit("--add-offset", "-P1D", "--key", "day-before");
      expect(added.code).toBe(0);
      expect((JSON.parse(added.stdout) as Edited).reminders.map((r) => r.key)).toEqual([
        "day-before",
        "r1",
      ]);
      const removed = await edit("--remove-reminder", "r1", "--title", "");
      expect(JSON.parse(removed.stdout)).toMatchObject({
        title: null,
        reminders: [{ key: "day-before" }],
      });
      const replaced = JSON.parse(
        (await edit("--offset", "-PT5M", "--quiet-hours", "22:00-07:00")).stdout,
      ) as Edited & { reminders: Array<{ key: string; quietHours: { tzid: string } | null }> };
      // --offset without --key keeps the current reminder's key (DEL-9: not a new reminder).
      expect(replaced.reminders).toMatchObject([
        { key: "day-before", offset: "-PT5M", quietHours: { tzid: "Europe/Berlin" } },
      ]);
      const contradicting = await edit("--offset", "-PT5M", "--remove-reminder", "r1");
      expect(contradicting.code).toBe(2);
      expect(contradicting.stderr).toContain("--offset");

      const upsert = join(dir, "upsert.json");
      writeFileSync(
        upsert,
        JSON.stringify({
          dtstart: "2030-02-01T09:00:00Z",
          title: "From the CRM",
          reminders: [{ key: "r", channel: "log" }],
        }),
      );
      expect(
        (await cli(["schedules", "upsert", "crm-e2e", "m-1", "--file", upsert, "--url", url])).code,
      ).toBe(0);
      const listed = await cli(["schedules", "list", "--url", url, "--source", "crm-e2e"]);
      expect(listed.code).toBe(0);
      expect(listed.stdout).toMatch(/^ID\s+STATE\s+TITLE\s+SOURCE/);
      expect(listed.stdout).toContain("From the CRM");
      expect(listed.stdout).not.toContain(id);
    });

    it("API-3: schedules add with an unknown time zone exits 1 naming tzid", async () => {
      const bad = await cli([
        "schedules",
        "add",
        "--url",
        url,
        "--dtstart",
        "2030-01-01T09:00:00",
        "--tzid",
        "Nowhere/City",
        "--channel",
        "log",
      ]);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toContain("tzid");
    });

    it("DEL-18 API-3: schedules put --debounce-window-ms sets the one-off's due time to now + the window; on a recurring body it exits 1 naming debounce and the rule", async () => {
      const oneOff = join(dir, "debounced.json");
      writeFileSync(
        oneOff,
        JSON.stringify({
          dtstart: "2030-03-01T09:00:00Z",
          reminders: [{ key: "r", channel: "log" }],
        }),
      );
      const args = (file: string) => [
        "schedules",
        "put",
        "crm-e2e",
        "ticket-1",
        "--file",
        file,
        "--debounce-window-ms",
        "600000",
        "--debounce-max-delay-ms",
        "3600000",
        "--url",
        url,
        "--json",
      ];
      const before = Date.now();
      const put = await cli(args(oneOff));
      const after = Date.now();
      expect(put.code).toBe(0);
      const view = JSON.parse(put.stdout) as { id: string; dtstart: string; changed: boolean };
      // The server set the due time (its clock, within this call): the body's dtstart is ignored.
      const due = Date.parse(view.dtstart);
      expect(due).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 + 600_000);
      expect(due).toBeLessThanOrEqual(after + 600_000);

      const recurring = join(dir, "debounced-recurring.json");
      writeFileSync(
        recurring,
        JSON.stringify({
          dtstart: "2030-03-01T09:00:00Z",
          rrule: "FREQ=DAILY",
          reminders: [{ key: "r", channel: "log" }],
        }),
      );
      const refused = await cli(args(recurring));
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("debounce");
      expect(refused.stderr).toContain("FREQ=DAILY");
      // Nothing stored by the refused call: the one-off is unchanged.
      const shown = await cli(["schedules", "show", view.id, "--url", url, "--json"]);
      expect((JSON.parse(shown.stdout) as { rrule: string | null }).rrule).toBeNull();
    });

    it("API-3: a reminder due now is planned by the server and shown by deliveries list", async () => {
      // A reminder due now is planned by the server's own loop: poll the API until its
      // delivery shows (an outcome, not a timer), then list it once through the CLI.
      const now = await cli([
        "schedules",
        "add",
        "--url",
        url,
        "--dtstart",
        new Date().toISOString().slice(0, 19) + "Z",
        "--channel",
        "log",
        "--json",
      ]);
      expect(now.code).toBe(0);
      const nowId = (JSON.parse(now.stdout) as { id: string }).id;
      await until(async () => {
        const res = await fetch(`${url}/v1/deliveries?scheduleId=${nowId}`);
        const body = (await res.json()) as { items: unknown[] };
        return res.ok && body.items.length > 0;
      }, "the due schedule's delivery");
      const list = await cli([
        "deliveries",
        "list",
        "--url",
        url,
        "--schedule-id",
        nowId,
        "--json",
      ]);
      expect(list.code).toBe(0);
      const listed = (JSON.parse(list.stdout) as { items: Array<{ scheduleId: string }> }).items;
      expect(listed.find((d) => d.scheduleId === nowId)).toBeDefined();
    });

    it("OPS-4: healthcheck and status report a ready server", async () => {
      const health = await cli(["healthcheck", "--url", url]);
      expect(health.code).toBe(0);

      const status = await cli(["status", "--url", url, "--json"]);
      expect(status.code).toBe(0);
      expect(JSON.parse(status.stdout)).toMatchObject({ ready: true });
    });

    it("API-7: webhook-secret works on the server's machine through the local token; a request without it is 403", async () => {
      const plain = await fetch(`${url}/v1/webhook-secret`);
      expect(plain.status).toBe(403);
      const secret = await cli([
        "webhook-secret",
        "--url",
        url,
        "--data-dir",
        join(dir, "data"),
        "--json",
      ]);
      expect(secret.code).toBe(0);
      expect(JSON.parse(secret.stdout)).toMatchObject({
        secret: expect.stringMatching(/^whsec_/),
        source: "generated",
      });
      const elsewhere = await cli(["webhook-secret", "--url", url, "--data-dir", join(dir, "x")]);
      expect(elsewhere.code).toBe(1);
      expect(elsewhere.stderr).toContain("PUNCTUAL_API_KEY");
    });

    it("OPS-6: SIGTERM exits 0, also when it arrives twice at once (npm forwarding a group's signal), and healthcheck then fails", async () => {
      expect(server).not.toBeNull();
      server!.kill("SIGTERM");
      await until(() => stderr.includes("SIGTERM received: stopping"), "the first SIGTERM taken");
      // The same signal again at once (REPEATED_SIGNAL_MS): the same request, not "exit now".
      server!.kill("SIGTERM");
      expect(await exited).toBe(0);
      expect(stderr).not.toContain("again: exiting now");

      const down = await cli(["healthcheck", "--url", url]);
      expect(down.code).toBe(1);
    });
  });
});
