import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { afterAll } from "vitest";
import {
  renderTemplate,
  templateContext,
  validateTemplate,
  type ChannelDelivery,
} from "../../../src/channels/index.js";
import { PermanentError, ValidationError } from "../../../src/errors/index.js";
import {
  needsRenderThread,
  renderOnThisThread,
  sampleIdentity,
  sampleRender,
  validateTemplate as validateWithBudget,
  MAX_RENDERED_CHARS,
  TrialBudget,
  TRIAL_BUDGET_CHARS,
} from "../../../src/channels/template.js";
import { templateRenderPool } from "../../../src/channels/template-pool.js";

afterAll(() => templateRenderPool().close());

/** Turns of this thread's event loop while `work` runs (a loop held by `work` turns ~never). */
async function turnsDuring<T>(work: Promise<T>): Promise<{ turns: number; outcome: unknown }> {
  let done = false;
  let turns = 0;
  const outcome = work.then(
    (v) => v,
    (e: unknown) => e,
  );
  void outcome.then(() => (done = true));
  while (!done) {
    await new Promise((r) => setImmediate(r));
    turns++;
  }
  return { turns, outcome: await outcome };
}

/**
 * CPU time this thread has run so far, ms, from Linux's per-thread accounting (the tests
 * run in forked processes, so this is the thread of the event loop); null elsewhere.
 * `process.cpuUsage()` would count the render threads too.
 */
function threadCpuMs(): number | null {
  try {
    const ns = Number(
      readFileSync(`/proc/self/task/${process.pid}/schedstat`, "utf8").split(" ")[0],
    );
    return Number.isFinite(ns) ? ns / 1e6 : null;
  } catch {
    return null;
  }
}

/** One output of 20 shuffles and natural sorts: seconds of work inside one template part. */
const SORTS = `{{ payload.list${" | sample: 100000 | sort_natural".repeat(20)} | size }}`;

/** A payload whose natural sorts take seconds. */
const heavy: ChannelDelivery = {
  deliveryKey: "dk_0123456789abcdef0123456789abcdef",
  scheduleId: "s1",
  reminderKey: "pay",
  occurrenceAt: new Date("2027-03-28T09:00:00.000Z"),
  dueAt: new Date("2027-03-27T09:00:00.000Z"),
  attempt: 1,
  late: false,
  // 100,000 short strings: under 1 MiB as JSON, a payload the API accepts.
  payload: { list: Array.from({ length: 100_000 }, (_, i) => `i${(i * 7919) % 100_000}`) },
  target: {},
  tzid: "UTC",
  channel: "log",
};

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
  it("CH-6: html outputs are HTML-escaped by default; raw opts out; text is left as written", async () => {
    const out = await renderTemplate(
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

  it("CH-6: the context holds payload, occurrenceAt, dueAt, schedule and reminder", async () => {
    expect(templateContext(sample)).toMatchObject({
      occurrenceAt: "2027-03-28T09:00:00.000Z",
      dueAt: "2027-03-27T09:00:00.000Z",
      schedule: { id: "s1", tzid: "America/New_York" },
      reminder: { key: "pay", channel: "email" },
    });
    const out = await renderTemplate(
      { text: "{{ reminder.key }} {{ schedule.id }} {{ payload.amount }} {{ occurrenceAt }}" },
      sample,
    );
    expect(out.text).toBe("pay s1 12 & 13 2027-03-28T09:00:00.000Z");
  });

  it("CH-6: instants format in a zone and locale (default: the schedule's zone, English)", async () => {
    // 09:00 UTC is 05:00 in New York on 28 March 2027 (EDT) and 11:00 in Paris (CEST).
    const out = await renderTemplate(
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

  it("CH-6: a render failure at send time is permanent (no retry fixes it)", async () => {
    let caught: unknown = null;
    try {
      await renderTemplate({ text: "x\n{{ payload.when | format_date }}" }, sample);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(PermanentError);
    expect(caught).toMatchObject({ code: "TEMPLATE_FAILED" });
    expect((caught as Error).message).toMatch(/^template text: line 2, column 1: .*not an instant/);
  });

  it("CH-6: a template stuck in one filter call is stopped on its render thread (TEMPLATE_TIMEOUT) while this thread's loop keeps turning", async () => {
    const template = { text: SORTS };
    expect(needsRenderThread(template, "none")).toBe(true);
    const before = templateRenderPool().killed;
    const { turns, outcome } = await turnsDuring(renderTemplate(template, heavy));
    expect(outcome).toBeInstanceOf(PermanentError);
    expect(outcome).toMatchObject({ code: "TEMPLATE_TIMEOUT" });
    expect((outcome as Error).message).toMatch(/ran longer than 1000 ms and was stopped/);
    expect(templateRenderPool().killed).toBe(before + 1);
    // The render ran about a second elsewhere: this loop turned all along (a render
    // on this thread would hold it for the whole sort: a handful of turns at most).
    expect(turns).toBeGreaterThan(100);
    // The thread was replaced: the next render works.
    const next = await renderTemplate({ text: "{% for i in (1..3) %}{{ i }}{% endfor %}" }, sample);
    expect(next.text).toBe("123");
  });

  it.skipIf(threadCpuMs() === null)(
    "CH-6: a template that would run for seconds costs this thread almost no CPU time: the render and its deadline are elsewhere",
    async () => {
      const processBefore = process.cpuUsage();
      const before = threadCpuMs()!;
      const outcome = await renderTemplate({ text: SORTS }, heavy).catch((e: unknown) => e);
      const spent = threadCpuMs()! - before;
      const processSpent = process.cpuUsage(processBefore);
      expect(outcome).toMatchObject({ code: "TEMPLATE_TIMEOUT" });
      // Rendered here, the sorts would hold this thread for seconds of CPU (the render
      // limit cannot stop one filter call); posting the job and reading the verdict is a
      // few ms. The bound leaves room for a loaded machine's scheduling noise.
      expect(spent).toBeLessThan(250);
      // The work was done, on the render thread: the process ran well beyond this thread.
      expect((processSpent.user + processSpent.system) / 1000 - spent).toBeGreaterThan(spent);
    },
  );

  it("CH-6: a template that is not light renders on a thread exactly as it would here; a light one stays here", async () => {
    const template = {
      subject: "{% assign n = payload.name | size %}{{ n }} chars",
      text: "{% for w in (1..3) %}{{ w }}-{% endfor %}{{ payload.amount | upcase }}",
      html: "{% if late %}late{% else %}<b>{{ payload.name }}</b>{% endif %}",
    };
    expect(needsRenderThread(template, "slack")).toBe(true);
    const there = await renderTemplate(template, sample, { textEscape: "slack" });
    const here = renderOnThisThread(template, templateContext(sample), "slack");
    expect(there).toEqual(here);
    expect(there.html).toBe("<b>&lt;script&gt;alert(1)&lt;/script&gt;</b>");
    expect(there.text).toBe("1-2-3-12 &amp; 13");
    const light = {
      text: "Hi {{ payload.name | default: reminder.key | upcase }} {{ dueAt | format_date }}",
    };
    expect(needsRenderThread(light, "none")).toBe(false);
    expect(needsRenderThread({ text: "{{ (1..9) | join }}" }, "none")).toBe(true);
  });

  it("CH-6: a loop over a huge range is refused by the allocation bound before it iterates", async () => {
    const outcome = await renderTemplate(
      { text: "{% for i in (1..100000000) %}{% endfor %}done" },
      sample,
    ).catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(PermanentError);
    expect(outcome).toMatchObject({ code: "TEMPLATE_FAILED" });
    expect((outcome as Error).message).toMatch(/memory alloc limit exceeded/);
  });

  it("CH-6: a rendered field longer than the bound fails as TEMPLATE_TOO_LARGE", async () => {
    const big = { ...sample, payload: { s: "x".repeat(MAX_RENDERED_CHARS / 2 + 1) } };
    await expect(
      renderTemplate({ text: "{{ payload.s }}{{ payload.s }}" }, big),
    ).rejects.toMatchObject({
      code: "TEMPLATE_TOO_LARGE",
    });
    await expect(
      renderTemplate({ text: "{% for i in (1..3) %}{{ payload.s }}{% endfor %}" }, big),
    ).rejects.toMatchObject({ code: "TEMPLATE_TOO_LARGE" });
  });

  it("CH-6: the create-time try uses a fresh delivery key of the real form, and a template that overruns there is refused", async () => {
    const a = sampleIdentity();
    const b = sampleIdentity();
    expect(a.deliveryKey).toMatch(/^dk_[0-9a-f]{32}$/);
    expect(a.scheduleId).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.deliveryKey).not.toBe(b.deliveryKey);
    const issues = await sampleRender({ text: SORTS }, "reminders.0.template", heavy).then(
      () => [],
      (err: unknown) => (err as ValidationError).issues,
    );
    expect(issues).toEqual([
      {
        field: "reminders.0.template",
        message: "the render ran longer than 1000 ms and was stopped",
      },
    ]);
  });

  /** 22 `json` in a row: each doubles the backslashes, so ten quotes grow to gigabytes. */
  const BOMB = `{{ payload.s${" | json".repeat(22)} }}`;
  const quotes = { ...sample, payload: { s: '""""""""""' } };

  it("CH-6: a chain of growth filters (json, escape, url_encode …) is not light; one such filter is", () => {
    expect(needsRenderThread({ text: BOMB }, "none")).toBe(true);
    expect(needsRenderThread({ text: "{{ payload.s | json | json }}" }, "none")).toBe(true);
    expect(needsRenderThread({ text: "{{ payload.s | escape | url_encode }}" }, "none")).toBe(true);
    expect(
      needsRenderThread({ text: "{{ payload.s | json }} {{ payload.s | escape }}" }, "none"),
    ).toBe(false);
  });

  it.skipIf(threadCpuMs() === null)(
    "CH-6: the create-time tries of 50 reminders of a json chain cost this thread almost no CPU time; the chain is refused on a render thread",
    async () => {
      const budget = new TrialBudget();
      const template = { text: BOMB, subject: BOMB, html: BOMB };
      const before = threadCpuMs()!;
      for (let i = 0; i < 50; i++) {
        validateWithBudget({ ...template }, `reminders.${i}.template`, quotes, budget);
      }
      const spent = threadCpuMs()! - before;
      // Rendered here, each try holds this thread ~0.1 s (15 s for the 50); not rendered
      // here, the 50 parses of a cached template are a few ms.
      expect(spent).toBeLessThan(250);
      const issues = await sampleRender(template, "reminders.0.template", quotes, budget).then(
        () => [],
        (err: unknown) => (err as ValidationError).issues,
      );
      expect(issues).toHaveLength(1);
      expect(issues[0]!.field).toMatch(/^reminders\.0\.template/);
    },
  );

  it("CH-6: past the request's budget, light templates are tried on a render thread, not on the event loop", async () => {
    // Each try's proven size (both escapes, Slack's ×5) is a fifth of the budget or so:
    // a few fit, the rest wait.
    const chars = Math.floor(TRIAL_BUDGET_CHARS / 100);
    const big = { ...sample, payload: { s: "x".repeat(chars) } };
    const budget = new TrialBudget();
    const templates = Array.from({ length: 10 }, () => ({ text: "{{ payload.s | truncate: 5 }}" }));
    for (const [i, t] of templates.entries()) validateWithBudget(t, `r.${i}`, big, budget);
    const here = templates.filter((t) => budget.tried.has(t)).length;
    expect(here).toBeGreaterThan(0);
    expect(here).toBeLessThan(10);
    expect(budget.remaining).toBeGreaterThanOrEqual(0);
    // A template past the budget that fails is still refused, by its render-thread try.
    const failing = { text: "{{ payload.s | truncate: 5 }}{{ payload.when | format_date }}" };
    const after = { ...big, payload: { s: "x".repeat(chars), when: "not a date" } };
    validateWithBudget(failing, "r.x", after, budget);
    expect(budget.tried.has(failing)).toBe(false);
    const issues = await sampleRender(failing, "r.x", after, budget).then(
      () => [],
      (err: unknown) => (err as ValidationError).issues,
    );
    expect(issues).toEqual([
      { field: "r.x.text", message: expect.stringMatching(/not an instant/) },
    ]);
  });

  it("CH-6: a template certain to render past the bound is refused at create, and fails at send as TEMPLATE_TOO_LARGE", async () => {
    const big = { ...sample, payload: { s: "y".repeat(MAX_RENDERED_CHARS - 2) } };
    const template = { text: "{{ payload.s }}{{ payload.s }}{{ payload.s }}" };
    const budget = new TrialBudget();
    validateWithBudget(template, "reminders.0.template", big, budget);
    const issues = await sampleRender(template, "reminders.0.template", big, budget).then(
      () => [],
      (err: unknown) => (err as ValidationError).issues,
    );
    expect(issues).toEqual([
      {
        field: "reminders.0.template.text",
        message: `TEMPLATE_TOO_LARGE: the rendered text has ${3 * (MAX_RENDERED_CHARS - 2)} characters, more than ${MAX_RENDERED_CHARS}`,
      },
    ]);
    // Without a request budget (a kind's template), the same try is made.
    await expect(sampleRender(template, "template", big)).rejects.toBeInstanceOf(ValidationError);
    const outcome = await renderTemplate(template, big).catch((e: unknown) => e);
    expect(outcome).toMatchObject({ code: "TEMPLATE_TOO_LARGE" });
    expect((outcome as Error).message).toMatch(/^template text: TEMPLATE_TOO_LARGE: /);
  });
});
