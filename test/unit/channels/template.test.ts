import { describe, expect, it } from "vitest";
import {
  renderTemplate,
  templateContext,
  validateTemplate,
  type ChannelDelivery,
} from "../../../src/channels/index.js";
import { PermanentError, ValidationError } from "../../../src/errors/index.js";

const sample: ChannelDelivery = {
  deliveryKey: "dk_t",
  scheduleId: "s1",
  reminderKey: "pay",
  occurrenceAt: new Date("2027-03-28T09:00:00.000Z"),
  dueAt: new Date("2027-03-27T09:00:00.000Z"),
  attempt: 1,
  late: false,
  payload: { name: "<script>alert(1)</script>", amount: "12 & 13", when: "not a date" },
  target: {},
  tzid: "America/New_York",
  channel: "email",
};

function issuesOf(fn: () => void): ValidationError["issues"] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ValidationError) return err.issues;
    throw err;
  }
  throw new Error("no ValidationError");
}

describe("templates (CH-6)", () => {
  it("CH-6: html outputs are HTML-escaped by default; raw opts out; text is left as written", () => {
    const out = renderTemplate(
      {
        subject: "Pay {{ payload.amount }}\nnow",
        text: "Hi {{ payload.name }}",
        html: "<p>Hi {{ payload.name }} ({{ payload.amount }})</p>{{ '<hr>' | raw }}",
      },
      sample,
    );
    expect(out.html).toBe("<p>Hi &lt;script&gt;alert(1)&lt;/script&gt; (12 &amp; 13)</p><hr>");
    expect(out.text).toBe("Hi <script>alert(1)</script>");
    expect(out.subject).toBe("Pay 12 & 13 now");
  });

  it("CH-6: the context holds payload, occurrenceAt, dueAt, schedule and reminder", () => {
    expect(templateContext(sample)).toMatchObject({
      occurrenceAt: "2027-03-28T09:00:00.000Z",
      dueAt: "2027-03-27T09:00:00.000Z",
      schedule: { id: "s1", tzid: "America/New_York" },
      reminder: { key: "pay", channel: "email" },
    });
    const out = renderTemplate(
      { text: "{{ reminder.key }} {{ schedule.id }} {{ payload.amount }} {{ occurrenceAt }}" },
      sample,
    );
    expect(out.text).toBe("pay s1 12 & 13 2027-03-28T09:00:00.000Z");
  });

  it("CH-6: instants format in a zone and locale (default: the schedule's zone, English)", () => {
    // 09:00 UTC is 05:00 in New York on 28 March 2027 (EDT) and 11:00 in Paris (CEST).
    const out = renderTemplate(
      {
        text: [
          "{{ occurrenceAt | format_time }}",
          "{{ occurrenceAt | format_time: 'Europe/Paris', 'fr-FR' }}",
          "{{ occurrenceAt | format_date: 'Asia/Tokyo', 'ja-JP', 'long' }}",
          "{{ occurrenceAt | format_instant: 'Europe/Berlin', 'de-DE', 'short' }}",
        ].join("|"),
      },
      sample,
    );
    expect(out.text!.replace(/\s/g, " ")).toBe("5:00 AM|11:00|2027年3月28日|28.03.27, 11:00");
  });

  it("CH-6: a bad template is refused naming the field, the line and the column", () => {
    const issues = issuesOf(() =>
      validateTemplate(
        { text: "fine {{ payload.name }}", html: "<p>\n  ok\n  {{ payload.name | shout }}</p>" },
        "reminders.0.template",
        sample,
      ),
    );
    expect(issues).toEqual([
      {
        field: "reminders.0.template.html",
        message: "line 3, column 3: undefined filter: shout",
      },
    ]);
    const unclosed = issuesOf(() =>
      validateTemplate({ subject: "a\n{% if payload.name %}b" }, "reminders.1.template", sample),
    );
    expect(unclosed[0]!.field).toBe("reminders.1.template.subject");
    expect(unclosed[0]!.message).toMatch(/^line 2, column 1: tag .* not closed/);
  });

  it("CH-6: unknown fields, file tags and a bad filter argument are refused at create", () => {
    const issues = issuesOf(() =>
      validateTemplate(
        {
          body: "x",
          text: "{% include 'package.json' %}",
          html: "{{ dueAt | format_instant: 'Mars/Olympus' }}",
        },
        "reminders.0.template",
        sample,
      ),
    );
    expect(issues.map((i) => i.field)).toEqual([
      "reminders.0.template.body",
      "reminders.0.template.text",
      "reminders.0.template.html",
    ]);
    expect(issues[1]!.message).toMatch(/line 1, column 1: .*include tag is not available/);
    expect(issues[2]!.message).toMatch(/line 1, column 1: .*time zone/i);
  });

  it("CH-6: a render failure at send time is permanent (no retry fixes it)", () => {
    let caught: unknown = null;
    try {
      renderTemplate({ text: "x\n{{ payload.when | format_date }}" }, sample);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(PermanentError);
    expect(caught).toMatchObject({ code: "TEMPLATE_FAILED" });
    expect((caught as Error).message).toMatch(/^template text: line 2, column 1: .*not an instant/);
  });
});
