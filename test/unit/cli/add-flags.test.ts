/** API-3: `schedules add` turns its flags into the create body, naming a bad flag itself. */
import { describe, expect, it } from "vitest";
import { CliError } from "../../../src/cli/errors.js";
import { createBodyFromFlags } from "../../../src/cli/remote.js";

const base = {
  dtstart: "2027-01-04T09:00:00",
  tzid: "Europe/Berlin",
  rdate: [],
  exdate: [],
  offset: ["-PT15M"],
  key: [],
  url: "http://127.0.0.1:8080",
};

describe("schedules add flags", () => {
  it("API-3: a URL channel without --target-url is refused naming the flag", () => {
    for (const channel of ["webhook", "slack", "discord"]) {
      expect(() => createBodyFromFlags({ ...base, channel })).toThrow(CliError);
      expect(() => createBodyFromFlags({ ...base, channel })).toThrow(/--target-url/);
    }
  });

  it("API-3/CH-3: --channel slack and discord take --target-url as their { url } target", () => {
    const body = createBodyFromFlags({
      ...base,
      channel: "slack",
      targetUrl: "https://hooks.slack.com/services/T/B/x",
    });
    expect(body.reminders[0]).toMatchObject({
      channel: "slack",
      target: { url: "https://hooks.slack.com/services/T/B/x" },
    });
    expect(body.reminders[0]?.target).not.toHaveProperty("secret");
  });

  it("API-3: --secret is for webhooks only; the log channel takes no target", () => {
    expect(() =>
      createBodyFromFlags({
        ...base,
        channel: "discord",
        targetUrl: "https://x.test/h",
        secret: "whsec_x",
      }),
    ).toThrow(/--secret/);
    const log = createBodyFromFlags({ ...base, channel: "log" });
    expect(log.reminders[0]).not.toHaveProperty("target");
  });

  it("DEL-15: --quiet-hours, --quiet-tz, --quiet-days and --priority set every reminder's quiet window", () => {
    const body = createBodyFromFlags({
      ...base,
      channel: "log",
      quietHours: "22:00-07:00",
      quietTz: "America/New_York",
      quietDays: "mo,fr",
      priority: "critical",
    });
    expect(body.reminders[0]).toMatchObject({
      quietHours: { tzid: "America/New_York", start: "22:00", end: "07:00", days: ["MO", "FR"] },
      priority: "critical",
    });
    // The zone defaults to the schedule's.
    expect(
      createBodyFromFlags({ ...base, channel: "log", quietHours: "22:00-07:00" }).reminders[0]
        ?.quietHours,
    ).toEqual({ tzid: "Europe/Berlin", start: "22:00", end: "07:00" });
    expect(() => createBodyFromFlags({ ...base, channel: "log", quietHours: "22-7" })).toThrow(
      /--quiet-hours must be HH:MM-HH:MM/,
    );
    expect(() => createBodyFromFlags({ ...base, channel: "log", quietTz: "UTC" })).toThrow(
      /need --quiet-hours/,
    );
  });

  it("DEL-17: --catch-up-window-ms and --catch-up-pace-ms set the schedule's catchUp", () => {
    const body = createBodyFromFlags({
      ...base,
      channel: "log",
      misfire: "all",
      catchUpWindowMs: 21_600_000,
      catchUpPaceMs: 60_000,
    });
    expect(body.catchUp).toEqual({ windowMs: 21_600_000, paceMs: 60_000 });
    expect(createBodyFromFlags({ ...base, channel: "log" })).not.toHaveProperty("catchUp");
  });
});

describe("schedules add --channel email", () => {
  const email = {
    dtstart: "2027-03-01T09:00:00Z",
    tzid: "UTC",
    rdate: [],
    exdate: [],
    offset: ["-P1D"],
    key: [],
    channel: "email",
    url: "http://127.0.0.1:8080",
  };
  it("CH-2: --to and --subject make the e-mail target; one --to is a single address", () => {
    const body = createBodyFromFlags({ ...email, to: ["ana@example.com"], subject: "Due" });
    expect(body.reminders[0]).toMatchObject({
      channel: "email",
      target: { to: "ana@example.com", subject: "Due" },
    });
    const two = createBodyFromFlags({ ...email, to: ["a@example.com", "b@example.com"] });
    expect(two.reminders[0]!.target).toEqual({ to: ["a@example.com", "b@example.com"] });
  });
  it("CH-2: --channel email without --to is refused naming --to; --to with another channel too", () => {
    expect(() => createBodyFromFlags({ ...email, to: [] })).toThrow(/--to is required/);
    expect(() => createBodyFromFlags({ ...email, channel: "log", to: ["a@example.com"] })).toThrow(
      /--to and --subject apply to --channel email only/,
    );
  });
});
