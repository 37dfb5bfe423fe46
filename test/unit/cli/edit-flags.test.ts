/**
 * API-3 / DEL-9: `schedules edit` flags and the PATCH body they make: reminders replaced
 * (`--offset`), added (`--add-offset`) and removed (`--remove-reminder`), quiet hours and
 * catch-up with the flags of `schedules add`, the title; contradicting flags exit 2.
 * `fetch` is replaced by a recorder: only what the CLI sends is checked here.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ScheduleView } from "../../../src/contracts/index.js";
import { buildEditPatch, type EditPatchFlags } from "../../../src/cli/edit-patch.js";
import { CliError } from "../../../src/cli/errors.js";
import { buildProgram } from "../../../src/cli/program.js";

const ID = "0b9f6a43-5d0e-4a57-9d5a-8f1c2b3d4e5f";

const current = {
  id: ID,
  version: 4,
  tzid: "Europe/Berlin",
  catchUp: { windowMs: 60_000 },
  reminders: [
    {
      key: "r1",
      offset: "-PT15M",
      channel: "webhook",
      target: { url: "https://example.com/hook" },
      delivery: null,
      maxAttempts: 5,
      template: null,
      rateLimitKey: null,
      quietHours: null,
      priority: "normal",
    },
    {
      key: "r2",
      offset: "-P1D",
      channel: "log",
      target: {},
      delivery: "at-least-once",
      maxAttempts: 3,
      template: null,
      rateLimitKey: null,
      quietHours: { tzid: "Europe/Berlin", start: "22:00", end: "07:00" },
      priority: "critical",
    },
  ],
} as unknown as ScheduleView;

const flags = (f: Partial<EditPatchFlags>): EditPatchFlags => ({
  rdate: [],
  exdate: [],
  offset: [],
  addOffset: [],
  key: [],
  removeReminder: [],
  ...f,
});

function usageError(fn: () => unknown): CliError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).exitCode).toBe(2);
    return err as CliError;
  }
  throw new Error("expected a usage error");
}

describe("schedules edit: reminders", () => {
  it("API-3: --add-offset keeps every reminder as read and adds one with the first's channel and target", () => {
    const patch = buildEditPatch(flags({ addOffset: ["-PT5M"] }), current);
    expect(patch.reminders).toEqual([
      {
        key: "r1",
        offset: "-PT15M",
        channel: "webhook",
        target: { url: "https://example.com/hook" },
        maxAttempts: 5,
      },
      {
        key: "r2",
        offset: "-P1D",
        channel: "log",
        target: {},
        delivery: "at-least-once",
        maxAttempts: 3,
        quietHours: { tzid: "Europe/Berlin", start: "22:00", end: "07:00" },
        priority: "critical",
      },
      {
        key: "r3",
        offset: "-PT5M",
        channel: "webhook",
        target: { url: "https://example.com/hook" },
      },
    ]);
  });

  it("DEL-9 API-3: --offset without --key keeps the reminders' keys in order (a sent reminder is not sent again under a new key) and what each had", () => {
    const named = {
      ...current,
      reminders: current.reminders.map((r, i) => ({ ...r, key: ["k", "j"][i] as string })),
    } as ScheduleView;
    const patch = buildEditPatch(flags({ offset: ["-PT30M"] }), named);
    expect(patch.reminders).toEqual([
      {
        key: "k",
        offset: "-PT30M",
        channel: "webhook",
        target: { url: "https://example.com/hook" },
        maxAttempts: 5,
      },
    ]);
    // More offsets than reminders: the extra ones get the next free rN keys.
    const more = buildEditPatch(flags({ offset: ["-PT30M", "-PT20M", "-PT10M"] }), named);
    expect((more.reminders as Array<{ key: string }>).map((r) => r.key)).toEqual(["k", "j", "r1"]);
  });

  it("API-3: --remove-reminder drops one; --offset replaces the list as schedules add makes it", () => {
    const removed = buildEditPatch(flags({ removeReminder: ["r1"] }), current);
    expect((removed.reminders as Array<{ key: string }>).map((r) => r.key)).toEqual(["r2"]);
    const replaced = buildEditPatch(
      flags({ offset: ["-PT30M", "-PT10M"], key: ["a"], channel: "log" }),
      current,
    );
    expect(replaced.reminders).toEqual([
      { key: "a", offset: "-PT30M", channel: "log" },
      // The second place without --key keeps the current second reminder's key and fields.
      {
        key: "r2",
        offset: "-PT10M",
        channel: "log",
        target: {},
        delivery: "at-least-once",
        maxAttempts: 3,
        quietHours: { tzid: "Europe/Berlin", start: "22:00", end: "07:00" },
        priority: "critical",
      },
    ]);
    // Remove and add the same key in one edit: that reminder changes.
    const swapped = buildEditPatch(
      flags({ removeReminder: ["r2"], addOffset: ["-PT1H"], key: ["r2"], channel: "log" }),
      current,
    );
    expect((swapped.reminders as Array<{ key: string; offset: string }>).at(-1)).toEqual({
      key: "r2",
      offset: "-PT1H",
      channel: "log",
    });
  });

  it("API-3: contradicting or impossible reminder flags are usage errors (exit 2) naming the flag", () => {
    expect(
      usageError(() =>
        buildEditPatch(flags({ offset: ["-PT5M"], removeReminder: ["r1"] }), current),
      ).message,
    ).toMatch(/--offset replaces every reminder/);
    expect(
      usageError(() => buildEditPatch(flags({ removeReminder: ["nope"] }), current)).message,
    ).toMatch(/--remove-reminder nope.*r1, r2/);
    expect(
      usageError(() => buildEditPatch(flags({ addOffset: ["-PT5M"], key: ["r1"] }), current))
        .message,
    ).toMatch(/--key r1: the schedule already has/);
    expect(
      usageError(() => buildEditPatch(flags({ removeReminder: ["r1", "r2"] }), current)).message,
    ).toMatch(/cannot remove every reminder/);
    expect(usageError(() => buildEditPatch(flags({ key: ["x"] }), null)).message).toMatch(
      /give them with --offset or --add-offset/,
    );
    expect(usageError(() => buildEditPatch(flags({}), null)).message).toMatch(/Nothing to change/);
    const redacted = {
      ...current,
      reminders: [{ ...current.reminders[0]!, target: { url: "https://x", secret: "[redacted]" } }],
    } as ScheduleView;
    expect(
      usageError(() => buildEditPatch(flags({ addOffset: ["-PT5M"] }), redacted)).message,
    ).toMatch(/give --target-url/);
  });
});

describe("schedules edit: policy, catch-up and title", () => {
  it("API-3 DEL-15: --quiet-hours sets the window on every reminder (zone: the schedule's); off removes it", () => {
    const set = buildEditPatch(flags({ quietHours: "21:00-08:00", quietDays: "MO,TU" }), current);
    for (const r of set.reminders as Array<Record<string, unknown>>) {
      expect(r.quietHours).toEqual({
        tzid: "Europe/Berlin",
        start: "21:00",
        end: "08:00",
        days: ["MO", "TU"],
      });
    }
    const off = buildEditPatch(flags({ quietHours: "off", priority: "normal" }), current);
    for (const r of off.reminders as Array<Record<string, unknown>>) {
      expect(r).not.toHaveProperty("quietHours");
      expect(r).not.toHaveProperty("priority");
    }
    usageError(() => buildEditPatch(flags({ quietHours: "22-07" }), current));
  });

  it("API-3 DEL-17: catch-up flags change the given bound and keep the other", () => {
    expect(buildEditPatch(flags({ catchUpPaceMs: 1000 }), current)).toEqual({
      catchUp: { windowMs: 60_000, paceMs: 1000 },
    });
  });

  it('API-3: --title sets the title and --title "" removes it, without reading the schedule', () => {
    expect(buildEditPatch(flags({ title: "Sync" }), null)).toEqual({ title: "Sync" });
    expect(buildEditPatch(flags({ title: "" }), null)).toEqual({ title: null });
  });
});

describe("schedules edit over HTTP", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("API-3 DEL-9: reminder flags read the schedule and PATCH with If-Match of the version read", async () => {
    const sent: Array<{ method: string; url: string; headers: Record<string, string> }> = [];
    vi.stubGlobal("fetch", (url: URL, init: RequestInit) => {
      sent.push({
        method: init.method ?? "GET",
        url: String(url),
        headers: init.headers as Record<string, string>,
      });
      const body =
        init.method === "PATCH"
          ? { ...current, version: 5, realigned: { deleted: 0, moved: 0, created: 1 } }
          : current;
      return Promise.resolve(
        new Response(JSON.stringify(body), {
          status: 200,
          headers: { "content-type": "application/json" },
        }),
      );
    });
    let out = "";
    const program = buildProgram({ out: (s) => (out += s), err: () => undefined });
    await program.parseAsync([
      "node",
      "punctual",
      "schedules",
      "edit",
      ID,
      "--remove-reminder",
      "r2",
      "--url",
      "http://127.0.0.1:9",
    ]);
    expect(sent.map((s) => s.method)).toEqual(["GET", "PATCH"]);
    expect(sent[1]!.headers["If-Match"]).toBe('"4"');
    expect(out).toMatch(/version 5/);
  });
});
