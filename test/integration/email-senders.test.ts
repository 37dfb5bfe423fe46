/**
 * CH-2 / API-2: e-mail senders allowed per tenant (`PUNCTUAL_SMTP_ALLOWED_FROM` entries
 * `tenant:pattern`), checked when a schedule is created or edited through punctual.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createEmailChannel } from "../../src/channels/email.js";
import { ValidationError } from "../../src/errors/index.js";
import { testPunctual, type TestPunctual } from "../support/punctual.js";

let t: TestPunctual | null = null;
afterEach(async () => {
  await t?.close();
  t = null;
});

const schedule = (from: string) => ({
  dtstart: "2027-02-01T09:00:00Z",
  tzid: "UTC",
  reminders: [
    { key: "m", offset: "PT0S", channel: "email", target: { to: "ada@example.com", from } },
  ],
});

async function refusal(p: Promise<unknown>): Promise<ValidationError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error("expected a ValidationError");
}

describe("allowed e-mail senders per tenant (CH-2, API-2)", () => {
  it("CH-2: a tenant may use its own allowed sender and not another tenant's, at create and at edit (400 naming target.from)", async () => {
    t = await testPunctual({
      channels: [
        createEmailChannel({
          url: "smtp://127.0.0.1:2525",
          from: "Reminders <reminders@punctual.example>",
          allowedFrom: ["acme:*@acme.example", "globex:noreply@globex.example"],
        }),
      ],
    });
    const mine = await t.punctual.createSchedule(schedule("billing@acme.example"), {
      tenant: "acme",
    });
    expect(mine.schedule.reminders[0]?.target).toMatchObject({ from: "billing@acme.example" });
    const stolen = await refusal(
      t.punctual.createSchedule(schedule("billing@acme.example"), { tenant: "globex" }),
    );
    expect(stolen.issues).toEqual([
      expect.objectContaining({ field: "reminders.0.target.from", value: "billing@acme.example" }),
    ]);
    // The default tenant (no tenant entry) has the default sender only.
    await refusal(t.punctual.createSchedule(schedule("noreply@globex.example")));
    await t.punctual.createSchedule(schedule("reminders@punctual.example"));
    // An edit of globex's schedule to acme's sender is refused the same way.
    const theirs = await t.punctual.createSchedule(schedule("noreply@globex.example"), {
      tenant: "globex",
    });
    const edit = await refusal(
      t.punctual.updateSchedule(theirs.schedule.id, schedule("ops@acme.example"), {
        tenant: "globex",
      }),
    );
    expect(edit.issues.map((i) => i.field)).toEqual(["reminders.0.target.from"]);
  });
});
