/**
 * The dashboard at /ui (API-6, DEL-12, API-2, API-7) in real Chromium: the API and the
 * dashboard served on a loopback port, the scheduler driven by the test clock (a
 * delivery fires when the test ticks, never on real time), the page driven by
 * playwright-core. Every wait polls for a state on the page, bounded by the locator
 * timeout. Screenshots of each page go to .test-artifacts/dashboard/ (git-ignored).
 *
 * The UI does not depend on the engine, so the file runs once, in the PGlite stage.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BrowserContext, Page } from "playwright-core";
import { createApi, serveApi, type ServedApi } from "../../src/api/server.js";
import { createPunctual, type Punctual } from "../../src/app/punctual.js";
import { TestClock } from "../../src/clock/index.js";
import { registerDashboard } from "../../src/dashboard/index.js";
import { memoryLogger } from "../../src/observability/logger.js";
import { HAS_CHROMIUM, launchChromium, SCREENSHOT_DIR } from "../support/browser.js";
import { ScriptedChannel } from "../support/channels.js";
import { engineName, openTestDatabase } from "../support/db.js";
import { forgingStates } from "../support/transitions.js";

const T0 = "2027-01-04T08:00:00Z";
const OPERATOR_KEY = "operator-key-for-the-dashboard-test";
/** Bound of every wait on the page, ms (a hang becomes a failure, nothing is timed). */
const WAIT_MS = 15_000;

const skipReason = !HAS_CHROMIUM
  ? "skipped: no Chromium at /usr/bin/chromium (apt-get install chromium; .ci/run installs it)"
  : engineName() !== "pglite"
    ? "skipped: the browser tests run once, in the PGlite stage (the UI does not depend on the engine)"
    : null;
const title = (text: string) => (skipReason ? `${text} (${skipReason})` : text);

interface Served {
  punctual: Punctual;
  clock: TestClock;
  channel: ScriptedChannel;
  served: ServedApi;
  close(): Promise<void>;
}

async function serve(apiKey?: string): Promise<Served> {
  const clock = new TestClock(T0);
  const channel = new ScriptedChannel("test", true);
  const handle = await openTestDatabase();
  const punctual = await createPunctual({
    database: handle.db,
    clock,
    logger: memoryLogger("warn").logger,
    channels: [channel],
    allowPrivateTargets: true,
    webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
    ...(apiKey ? { api: { apiKey } } : {}),
  });
  const app = createApi(punctual);
  registerDashboard(app);
  const served = await serveApi(app, { host: "127.0.0.1", port: 0 });
  return {
    punctual,
    clock,
    channel,
    served,
    async close() {
      await served.close(0);
      await punctual.close(0);
      await handle.close();
    },
  };
}

/** Runs one tick and waits for its sends to settle. */
async function tick(p: Punctual): Promise<void> {
  await p.scheduler.tick();
  await p.scheduler.drain();
}

/** A webhook receiver on loopback whose answer the test sets. */
async function receiver(): Promise<{
  url: string;
  status: { code: number };
  close(): Promise<void>;
}> {
  const status = { code: 410 };
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(status.code, { "content-type": "text/plain" });
      res.end(status.code === 410 ? "gone" : "ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    status,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const shot = (page: Page, name: string) =>
  page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });

describe.skipIf(skipReason !== null)("dashboard in Chromium", () => {
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let context: BrowserContext;
  const foreign: string[] = [];

  beforeAll(async () => {
    browser = await launchChromium();
    context = browser.context;
    // No request may leave the servers the test started (no CDN, no web fonts).
    context.on("request", (request) => {
      const url = new URL(request.url());
      if (url.protocol !== "data:" && url.hostname !== "127.0.0.1") foreign.push(request.url());
    });
  });

  afterAll(async () => {
    await browser?.close();
  });

  it(
    title("API-6: a schedule created in the browser fires on the test clock and shows as sent"),
    async () => {
      const s = await serve();
      try {
        const page = await context.newPage();
        await page.goto(`${s.served.url}/ui/`);
        await page.getByRole("heading", { name: "Overview" }).waitFor({ timeout: WAIT_MS });
        await shot(page, "overview");

        await page.getByRole("link", { name: "Schedules", exact: true }).click();
        await page.getByRole("link", { name: "New schedule" }).click();
        await page.getByLabel("Start (DTSTART").fill("2027-01-04T08:01:00Z");
        await page.getByLabel("Time zone").fill("Europe/Paris");
        await page.getByLabel("Channel").fill("test");
        await page.getByLabel("Target (JSON)").fill("{}");
        await page.getByRole("button", { name: "Create schedule" }).click();
        await page.getByRole("heading", { name: /^Schedule / }).waitFor({ timeout: WAIT_MS });
        // The planned delivery is shown in the schedule's zone and the viewer's.
        await page.getByText("4 Jan 2027, 09:01:00 CET").first().waitFor({ timeout: WAIT_MS });
        await shot(page, "schedule");

        // Due in a minute on the test clock: move it there and tick.
        s.clock.advance(60_000);
        await tick(s.punctual);
        expect(s.channel.sends).toHaveLength(1);

        await page.getByRole("link", { name: "Deliveries", exact: true }).click();
        await page.locator("tbody .state-sent").first().waitFor({ timeout: WAIT_MS });
        await shot(page, "deliveries");
        await page.locator("tbody a").first().click();
        await page.getByRole("heading", { name: "Attempt history" }).waitFor({ timeout: WAIT_MS });
        await expect(page.locator("tbody .state-sent").count()).resolves.toBeGreaterThan(0);
        await shot(page, "delivery");

        await page.getByRole("link", { name: "Overview" }).click();
        await page.getByText("Sent in the last hour").waitFor({ timeout: WAIT_MS });
        await page.getByRole("link", { name: "Rate limits & circuits" }).click();
        await page
          .getByRole("heading", { name: "Circuits", exact: true })
          .waitFor({ timeout: WAIT_MS });
        await shot(page, "limits");

        // A phone-width screen: the page does not scroll sideways (wide tables scroll inside).
        await page.setViewportSize({ width: 390, height: 844 });
        for (const hash of [
          "#/overview",
          "#/schedules",
          "#/deliveries",
          "#/dead",
          "#/recipients",
          "#/import",
        ]) {
          await page.goto(`${s.served.url}/ui/${hash}`);
          await page.locator("main h1").waitFor({ timeout: WAIT_MS });
          const overflow = await page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth",
          );
          expect(overflow, hash).toBeLessThanOrEqual(0);
          // Every form control has a label (its own, or aria-label).
          const unlabelled = await page.evaluate(
            `[...document.querySelectorAll("input, select, textarea")]
              .filter((el) => !el.labels?.length && !el.getAttribute("aria-label")).length`,
          );
          expect(unlabelled, hash).toBe(0);
        }
        await shot(page, "phone-import");
        await page.close();
      } finally {
        await s.close();
      }
    },
  );

  it(
    title(
      "API-6: the New-schedule form starts empty (placeholders, no target, no due time), and a first send to a host this tenant never targeted waits on a confirm step naming it",
    ),
    async () => {
      const s = await serve();
      const count = async () =>
        ((await (await fetch(`${s.served.url}/v1/schedules`)).json()) as { items: unknown[] }).items
          .length;
      try {
        const page = await context.newPage();
        await page.goto(`${s.served.url}/ui/#/schedules/new`);
        await page.getByRole("heading", { name: "New schedule" }).waitFor({ timeout: WAIT_MS });
        const fields = (await page.evaluate(
          `[...document.querySelectorAll("main form input, main form textarea")]
            .map((el) => ({ name: el.name, value: el.value, placeholder: el.placeholder }))`,
        )) as Array<{ name: string; value: string; placeholder: string }>;
        expect(fields.map((f) => f.name)).toEqual(
          expect.arrayContaining(["dtstart", "tzid", "key", "offset", "channel", "target"]),
        );
        for (const f of fields) {
          expect(f.value, f.name).toBe("");
          expect(f.placeholder, f.name).not.toBe("");
        }
        await shot(page, "new-schedule-empty");

        // Nothing typed: Create sends nothing (the due time and the target are required).
        await page.getByRole("button", { name: "Create schedule" }).click();
        expect(await count()).toBe(0);

        const fillForm = async (due: string, url: string) => {
          await page.getByLabel("Start (DTSTART").fill(due);
          await page.getByLabel("Time zone").fill("Europe/Paris");
          await page.getByLabel("Target (JSON)").fill(JSON.stringify({ url }));
        };
        await fillForm("2027-01-04T09:05:00", "http://127.0.0.1:9/first");
        await page.getByRole("button", { name: "Create schedule" }).click();
        const confirmStep = page.getByRole("alert").filter({ hasText: "First send to" });
        await confirmStep.waitFor({ timeout: WAIT_MS });
        await expect(confirmStep.textContent()).resolves.toContain(
          "127.0.0.1:9 yet. Its first reminder is due 2027-01-04T09:05:00 in Europe/Paris",
        );
        await shot(page, "new-schedule-confirm");
        expect(await count()).toBe(0);

        // Back: the confirm step is gone, and Create asks again.
        await page.getByRole("button", { name: "Back" }).click();
        await confirmStep.waitFor({ state: "hidden", timeout: WAIT_MS });
        await page.getByRole("button", { name: "Create schedule" }).click();
        await confirmStep.waitFor({ timeout: WAIT_MS });
        await page.getByRole("button", { name: "Create and send to 127.0.0.1:9" }).click();
        await page.getByRole("heading", { name: /^Schedule / }).waitFor({ timeout: WAIT_MS });
        expect(await count()).toBe(1);

        // The same host again: used before, no confirm step.
        await page.goto(`${s.served.url}/ui/#/schedules/new`);
        await page.getByRole("heading", { name: "New schedule" }).waitFor({ timeout: WAIT_MS });
        await fillForm("2027-01-05T09:05:00", "http://127.0.0.1:9/second");
        await page.getByRole("button", { name: "Create schedule" }).click();
        await page.getByRole("heading", { name: /^Schedule / }).waitFor({ timeout: WAIT_MS });
        expect(await count()).toBe(2);

        // Another host (another port is another host): asked first.
        await page.goto(`${s.served.url}/ui/#/schedules/new`);
        await page.getByRole("heading", { name: "New schedule" }).waitFor({ timeout: WAIT_MS });
        await fillForm("2027-01-06T09:05:00", "http://127.0.0.1:10/hook");
        await page.getByRole("button", { name: "Create schedule" }).click();
        await page
          .getByRole("alert")
          .filter({ hasText: "First send to 127.0.0.1:10" })
          .waitFor({ timeout: WAIT_MS });
        expect(await count()).toBe(2);
        await page.close();
      } finally {
        await s.close();
      }
    },
  );

  it(
    title(
      "API-6 API-3: the schedule list pages on the server and says N of M truthfully: exact when counted, an estimate labelled as one",
    ),
    async () => {
      const s = await serve();
      try {
        // More rows than a page (100) and than the exact count (10,000); 130 match "needle".
        await s.punctual.db.query(
          `insert into punctual_schedules (tenant, dtstart, recurring, title, plan_complete, created_at)
           select 'default', '2027-01-04T09:00:00', false,
                  case when g % 80 = 0 then 'Needle ' || g else 'Hay ' || g end, true,
                  '2027-01-01T00:00:00Z'::timestamptz + g * interval '1 second'
           from generate_series(1, 10400) g`,
        );
        await s.punctual.db.query(`analyze punctual_schedules`);
        const page = await context.newPage();
        await page.goto(`${s.served.url}/ui/#/schedules`);
        const count = page.locator("#list-count");
        await count
          .getByText(/^1–100 of about [0-9,]+ \(estimated\)$/)
          .waitFor({ timeout: WAIT_MS });
        await expect(page.locator("main tbody tr").count()).resolves.toBe(100);

        await page.getByLabel("Search").fill("needle");
        await page.getByRole("button", { name: "Apply" }).click();
        await count.getByText("1–100 of 130", { exact: true }).waitFor({ timeout: WAIT_MS });
        await shot(page, "schedules-paged");
        await page.getByRole("link", { name: "Next", exact: true }).click();
        await count.getByText("101–130 of 130", { exact: true }).waitFor({ timeout: WAIT_MS });
        // The second page holds the rows past the first, found on the server.
        await page.getByText("Needle 10400", { exact: true }).waitFor({ timeout: WAIT_MS });
        await expect(page.locator("main tbody tr").count()).resolves.toBe(30);
        await expect(page.getByRole("link", { name: "Next", exact: true }).count()).resolves.toBe(
          0,
        );
        await page.getByRole("link", { name: "Previous", exact: true }).click();
        await count.getByText("1–100 of 130", { exact: true }).waitFor({ timeout: WAIT_MS });
        await page.getByText("Needle 80", { exact: true }).waitFor({ timeout: WAIT_MS });
        await page.close();
      } finally {
        await s.close();
      }
    },
  );

  it(
    title(
      "API-6 API-3: the dead letters and in-doubt lists page on the server, each with its own cursor, and say N of M",
    ),
    async () => {
      const s = await serve();
      try {
        // 130 dead letters (more than a page of 100) and 3 in doubt, one schedule; rows
        // forged in their final states (the transition check would refuse them).
        await forgingStates(s.punctual.db, (tx) =>
          tx.query(
            `with s as (
             insert into punctual_schedules (tenant, dtstart, recurring, title, plan_complete)
             values ('default', '2027-01-04T09:00:00', true, 'Many dead', true) returning id)
           insert into punctual_deliveries (delivery_key, schedule_id, reminder_key, occurrence_at,
                                            due_at, run_at, state, channel, on_lost_lease, attempt,
                                            finished_at, reason)
           select s.id::text || ':r:' || g, s.id, 'r', o, o, o,
                  case when g <= 130 then 'dead' else 'in_doubt' end, 'log', 'retry', 1, o,
                  case when g <= 130 then 'SEND_FAILED' else 'LEASE_LOST' end
           from s, generate_series(1, 133) g,
                lateral (select '2027-01-01T00:00:00Z'::timestamptz + g * interval '1 minute' as o) x`,
          ),
        );
        const { rows } = await s.punctual.db.query<{ id: string }>(
          `select id from punctual_deliveries where state = 'dead' order by id`,
        );
        const [oldest, newest] = [rows[0]!.id, rows[rows.length - 1]!.id];
        const page = await context.newPage();
        await page.goto(`${s.served.url}/ui/#/dead`);
        const dead = page.locator("#dead");
        const deadCount = page.locator("#dead-count");
        await deadCount.getByText("1–100 of 130", { exact: true }).waitFor({ timeout: WAIT_MS });
        await page.locator("#doubt-count").getByText("1–3 of 3", { exact: true }).waitFor();
        await expect(dead.locator("tbody tr").count()).resolves.toBe(100);
        // Newest first: the first page starts at the newest dead letter.
        await dead.getByRole("link", { name: `#${newest}`, exact: true }).waitFor();
        await shot(page, "dead-letters-paged");
        await dead.getByRole("link", { name: "Next", exact: true }).click();
        await deadCount.getByText("101–130 of 130", { exact: true }).waitFor({ timeout: WAIT_MS });
        await dead.getByRole("link", { name: `#${oldest}`, exact: true }).waitFor();
        await expect(dead.locator("tbody tr").count()).resolves.toBe(30);
        // The other list keeps its own first page.
        await expect(page.locator("#doubt tbody tr").count()).resolves.toBe(3);
        await expect(dead.getByRole("link", { name: "Next", exact: true }).count()).resolves.toBe(
          0,
        );
        await dead.getByRole("link", { name: "Previous", exact: true }).click();
        await deadCount.getByText("1–100 of 130", { exact: true }).waitFor({ timeout: WAIT_MS });
        // DEL-12: an in-doubt row picked and resolved as dead from its own list.
        const doubt = page.locator("#doubt");
        await doubt.locator('input[name="pick"]').first().check();
        await doubt.getByRole("button", { name: "Resolve selected as dead" }).click();
        await page.getByText("Resolved as dead: 1 of 1.").waitFor({ timeout: WAIT_MS });
        const inDoubt = await s.punctual.listDeliveries({ state: "in_doubt", limit: 10 });
        expect(inDoubt.items).toHaveLength(2);
        await page.close();
      } finally {
        await s.close();
      }
    },
  );

  it(
    title(
      "DEL-12: a delivery the receiver answers 410 goes dead, is redriven from the dashboard, and is sent",
    ),
    async () => {
      const s = await serve();
      const hook = await receiver();
      try {
        const { schedule } = await s.punctual.createSchedule({
          dtstart: T0,
          tzid: "UTC",
          reminders: [{ key: "r", offset: "PT0S", channel: "webhook", target: { url: hook.url } }],
        });
        await tick(s.punctual);
        const [dead] = (await s.punctual.listDeliveries({ scheduleId: schedule.id })).items;
        expect(dead?.state).toBe("dead");

        const page = await context.newPage();
        await page.goto(`${s.served.url}/ui/#/dead`);
        const row = page.locator("#dead tbody tr").first();
        await row.waitFor({ timeout: WAIT_MS });
        await shot(page, "dead-letters");
        await page.getByLabel(`Select delivery ${dead!.id}`).check();
        hook.status.code = 200;
        await page.locator("#dead").getByRole("button", { name: "Redrive selected" }).click();
        await page.getByText("Redriven: 1 of 1.").waitFor({ timeout: WAIT_MS });

        await tick(s.punctual);
        await page.goto(`${s.served.url}/ui/#/deliveries/${dead!.id}`);
        await page.locator("dd .state-sent").waitFor({ timeout: WAIT_MS });
        // The attempt history keeps the failed attempt and its classified error.
        await expect(page.locator("#attempts tbody tr").count()).resolves.toBe(2);
        await page.close();
      } finally {
        await hook.close();
        await s.close();
      }
    },
  );

  it(
    title(
      "API-5: a calendar uploaded in the browser is previewed (dry run), then imported with its progress per chunk",
    ),
    async () => {
      const s = await serve();
      try {
        const page = await context.newPage();
        await page.goto(`${s.served.url}/ui/#/import`);
        const ics = [
          "BEGIN:VCALENDAR",
          "VERSION:2.0",
          "PRODID:-//punctual//test//EN",
          "BEGIN:VEVENT",
          "UID:standup@example.com",
          "DTSTAMP:20270101T000000Z",
          "DTSTART:20270105T090000Z",
          "RRULE:FREQ=DAILY;COUNT=3",
          "SUMMARY:Stand-up",
          "END:VEVENT",
          "END:VCALENDAR",
          "",
        ].join("\r\n");
        await page.getByLabel("Calendar file (.ics)").setInputFiles({
          name: "team.ics",
          mimeType: "text/calendar",
          buffer: Buffer.from(ics),
        });
        await page.getByLabel("Source name").fill("team");
        await page.getByLabel("Webhook URL").fill("http://127.0.0.1:9/hook");
        await page.getByRole("button", { name: "Preview (dry run)" }).click();
        await page
          .locator("#import-preview")
          .getByText("1 events, 3 deliveries")
          .waitFor({ timeout: WAIT_MS });
        expect((await s.punctual.listSchedules({})).items).toHaveLength(0);
        expect(await page.locator("main").innerText()).not.toMatch(/\bnull|undefined\b/);
        await shot(page, "import-preview");
        await page.getByRole("button", { name: "Confirm import" }).click();
        await page.locator("#import-summary").getByText("1 created").waitFor({ timeout: WAIT_MS });
        // API-5: the import ran after the request, followed per chunk.
        expect(await page.locator("#import-progress-text").innerText()).toContain(
          "Chunk 1 of 1: 1 of 1 changes written (1 created",
        );
        const schedules = (await s.punctual.listSchedules({})).items;
        expect(schedules.map((x) => x.source)).toEqual(["team"]);
        await page.getByRole("link", { name: "See its schedules" }).click();
        await page.locator("tbody tr").first().waitFor({ timeout: WAIT_MS });
        await shot(page, "schedules");
        await page.close();
      } finally {
        await s.close();
      }
    },
  );

  it(
    title(
      "API-2/API-7: with a key the dashboard logs in to an HttpOnly SameSite=Strict cookie; a cross-site POST carrying it is refused",
    ),
    async () => {
      const s = await serve(OPERATOR_KEY);
      // A page of another origin on the same machine (same site: the cookie goes along).
      const evil = createServer((_req, res) => {
        res.writeHead(200, { "content-type": "text/html" });
        res.end("<!doctype html><title>elsewhere</title><p>elsewhere</p>");
      });
      await new Promise<void>((resolve) => evil.listen(0, "127.0.0.1", resolve));
      const evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`;
      try {
        const { schedule } = await s.punctual.createSchedule({
          dtstart: "2027-02-01T08:00:00Z",
          tzid: "UTC",
          reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
        });
        const page = await context.newPage();
        await page.goto(`${s.served.url}/ui/`);
        await page.getByRole("heading", { name: "Log in" }).waitFor({ timeout: WAIT_MS });
        await shot(page, "login");
        await page.getByLabel("API key").fill("wrong-key-wrong-key");
        await page.getByRole("button", { name: "Log in" }).click();
        await page.getByText("Wrong API key").waitFor({ timeout: WAIT_MS });
        // Keyboard only: the field has the focus, Enter submits.
        await page.getByLabel("API key").fill(OPERATOR_KEY);
        await page.keyboard.press("Enter");
        await page.getByRole("heading", { name: "Overview" }).waitFor({ timeout: WAIT_MS });

        const cookies = await context.cookies(s.served.url);
        const session = cookies.find((c) => c.name === "punctual_session");
        expect(session).toMatchObject({
          httpOnly: true,
          sameSite: "Strict",
          path: "/",
          secure: false,
        });
        expect(session?.value).not.toContain(OPERATOR_KEY);
        // The page's own script cannot read it.
        await expect(page.evaluate("document.cookie")).resolves.not.toContain("punctual_session");

        // Same origin, cookie, but no CSRF token: refused.
        const noToken = await page.evaluate(async (id) => {
          const res = await fetch(`/v1/schedules/${id}/pause`, { method: "POST" });
          return { status: res.status, body: await res.json() };
        }, schedule.id);
        expect(noToken).toMatchObject({
          status: 403,
          body: { error: { code: "CSRF_TOKEN_INVALID" } },
        });

        // Another origin posts a form to the API: the browser attaches the cookie, the API refuses.
        const other = await context.newPage();
        await other.goto(evilUrl);
        const action = `${s.served.url}/v1/schedules/${schedule.id}/pause`;
        await other.evaluate(`{
        const form = document.createElement("form");
        form.method = "POST";
        form.action = ${JSON.stringify(action)};
        form.enctype = "text/plain";
        document.body.append(form);
        form.submit();
      }`);
        await other.getByText("CROSS_SITE_REQUEST").waitFor({ timeout: WAIT_MS });
        expect((await s.punctual.getSchedule(schedule.id)).state).toBe("active");

        // The dashboard itself pauses it (with the token).
        await page.goto(`${s.served.url}/ui/#/schedules/${schedule.id}`);
        await page.getByRole("button", { name: "Pause" }).click();
        await page.getByRole("button", { name: "Resume" }).waitFor({ timeout: WAIT_MS });
        expect((await s.punctual.getSchedule(schedule.id)).state).toBe("paused");

        await page.getByRole("button", { name: "Log out" }).click();
        await page.getByRole("heading", { name: "Log in" }).waitFor({ timeout: WAIT_MS });
        await other.close();
        await page.close();
      } finally {
        evil.closeAllConnections();
        await new Promise<void>((resolve) => evil.close(() => resolve()));
        await s.close();
      }
    },
  );

  it(
    title(
      "OPS-16: the schedule page explains each entry of a window the user picks (default: the server's last and next 7 days), a row opens its timeline, and the delivery page explains its delivery",
    ),
    async () => {
      const s = await serve();
      try {
        // Daily at 08:00 UTC from T0 (the test clock's now), five times; the first is sent.
        const { schedule } = await s.punctual.createSchedule({
          dtstart: T0,
          tzid: "UTC",
          rrule: "FREQ=DAILY;COUNT=5",
          reminders: [{ key: "r", offset: "PT0S", channel: "test" }],
        });
        await tick(s.punctual);
        expect(s.channel.sends).toHaveLength(1);
        const [sent] = (await s.punctual.listDeliveries({ scheduleId: schedule.id, state: "sent" }))
          .items;

        const page = await context.newPage();
        await page.goto(`${s.served.url}/ui/#/schedules/${schedule.id}`);
        const explained = page.locator("#explain");
        // The default window is the server's now (the test clock) ± 7 days: all five.
        await explained.locator("tbody tr.entry").nth(4).waitFor({ timeout: WAIT_MS });
        await expect(explained.locator("tbody tr.entry").count()).resolves.toBe(5);
        await expect(page.locator("#explain-count").innerText()).resolves.toBe("5 entries, due ");
        await expect(page.getByLabel("Due from (your time)").inputValue()).resolves.toMatch(
          /^2026-12-28T/,
        );
        const first = explained.locator("tbody tr.entry").first();
        await expect(first.locator(".state").innerText()).resolves.toBe("sent");
        await first.getByRole("link", { name: `#${sent!.id}` }).waitFor();
        // The row opens its timeline: planned, the attempt (by whom, its outcome), sent.
        const timeline = explained.locator("tr.events").first();
        await expect(timeline.isHidden()).resolves.toBe(true);
        await first.getByRole("button", { name: /^Events of r at / }).click();
        await timeline.waitFor({ state: "visible", timeout: WAIT_MS });
        await expect(timeline.locator("tbody tr td:first-child").allInnerTexts()).resolves.toEqual([
          "planned",
          "attempt",
          "sent",
        ]);
        await timeline.getByText(/attempt 1, outcome sent/).waitFor();
        await expect(first.getByRole("button").getAttribute("aria-expanded")).resolves.toBe("true");
        await shot(page, "schedule-explain");
        // A window of the user's: only the second and third occurrences.
        const timeZone = await page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone");
        const local = (iso: string) =>
          new Date(iso)
            .toLocaleString("sv-SE", { timeZone: String(timeZone) })
            .replace(" ", "T")
            .slice(0, 16);
        await page.getByLabel("Due from (your time)").fill(local("2027-01-05T07:00:00Z"));
        await page.getByLabel("Due before (your time)").fill(local("2027-01-06T09:00:00Z"));
        await page.getByRole("button", { name: "Explain", exact: true }).click();
        await page
          .locator("#explain-count")
          .getByText("2 entries", { exact: false })
          .waitFor({ timeout: WAIT_MS });
        await expect(explained.locator("tbody tr.entry").count()).resolves.toBe(2);
        await expect(explained.locator("tbody tr.entry .state").allInnerTexts()).resolves.toEqual(
          expect.arrayContaining([expect.stringMatching(/^(pending|not planned)$/)]),
        );
        expect(await explained.innerText()).not.toMatch(/\bnull|undefined\b/);
        // A window after the series' end: nothing expected, and the page says so.
        await page.getByLabel("Due from (your time)").fill(local("2027-02-01T00:00:00Z"));
        await page.getByLabel("Due before (your time)").fill(local("2027-02-02T00:00:00Z"));
        await page.getByRole("button", { name: "Explain", exact: true }).click();
        await explained
          .getByText("Nothing was due or expected in this window.")
          .waitFor({ timeout: WAIT_MS });
        await expect(explained.locator("tbody tr").count()).resolves.toBe(0);

        // The delivery page explains its delivery.
        await page.goto(`${s.served.url}/ui/#/deliveries/${sent!.id}`);
        await page.locator("#explain-verdict .state-sent").waitFor({ timeout: WAIT_MS });
        await page.getByText("planned", { exact: true }).waitFor();
        await shot(page, "delivery-explain");
        await page.close();
      } finally {
        await s.close();
      }
    },
  );

  it(
    title(
      "API-10 API-11: the Recipients page searches and pages on the server and shows zone, targets (secrets redacted), opt-outs; a schedule for recipients shows its next occurrence per recipient zone",
    ),
    async () => {
      const s = await serve();
      try {
        // 103 plain recipients (more than a page of 100), half in Tokyo, half in Berlin.
        const rows = Array.from({ length: 103 }, (_, i) => ({
          id: `user-${String(i + 1).padStart(3, "0")}`,
          tzid: i % 2 === 0 ? "Asia/Tokyo" : "Europe/Berlin",
        }));
        const bulk = await s.punctual.bulkUpsertRecipients(rows);
        expect(bulk.errors).toBe(0);
        await s.punctual.putRecipient("ann", {
          tzid: "America/New_York",
          targets: {
            webhook: {
              url: "http://127.0.0.1:9/ann-hook",
              secret: "whsec_YW5uLXZlcnktc2VjcmV0LWtleS0xMjM0",
            },
          },
          preferences: {
            optOut: { channels: ["slack"], categories: ["digest"] },
            quietHours: { start: "22:00", end: "07:00" },
          },
        });

        const page = await context.newPage();
        await page.goto(`${s.served.url}/ui/`);
        await page.getByRole("link", { name: "Recipients", exact: true }).click();
        const count = page.locator("#list-count");
        await count.getByText("1–100", { exact: true }).waitFor({ timeout: WAIT_MS });
        await expect(page.locator("main tbody tr").count()).resolves.toBe(100);
        // By id in byte order: "ann" first, "user-099" last of the first page.
        await expect(
          page.locator("main tbody tr td:first-child code").first().innerText(),
        ).resolves.toBe("ann");
        await page.getByRole("link", { name: "Next", exact: true }).click();
        await count.getByText("101–104", { exact: true }).waitFor({ timeout: WAIT_MS });
        await page.getByText("user-103", { exact: true }).waitFor();
        await page.getByRole("link", { name: "Previous", exact: true }).click();
        await count.getByText("1–100", { exact: true }).waitFor({ timeout: WAIT_MS });

        // The search runs on the server (any case).
        await page.getByLabel("Search").fill("ANN");
        await page.getByRole("button", { name: "Apply" }).click();
        await count.getByText("1–1", { exact: true }).waitFor({ timeout: WAIT_MS });
        const ann = page.locator("main tbody tr").first();
        await ann.getByText("America/New_York", { exact: true }).waitFor();
        await ann.getByText("http://127.0.0.1:9/ann-hook").waitFor();
        await ann.getByText('{"secret":"[redacted]"}').waitFor();
        await ann.getByText("Opted out of channels: slack").waitFor();
        await ann.getByText("Opted out of categories: digest").waitFor();
        await ann.getByText("Quiet 22:00–07:00").waitFor();
        expect(await page.locator("main").innerText()).not.toContain("YW5uLXZlcnktc2VjcmV0");
        await shot(page, "recipients");
        await page.getByLabel("Search").fill("nobody");
        await page.getByRole("button", { name: "Apply" }).click();
        await page.getByText("No recipient id contains").waitFor({ timeout: WAIT_MS });

        // A floating schedule: 09:00 in each recipient's own zone.
        const { schedule } = await s.punctual.createSchedule({
          dtstart: "2030-01-07T09:00:00",
          floating: true,
          rrule: "FREQ=DAILY",
          recipients: ["ann", "user-001", "user-002", "user-003"],
          reminders: [{ key: "r", channel: "test" }],
        });
        await page.goto(`${s.served.url}/ui/#/schedules/${schedule.id}`);
        const zones = page.locator("#recipient-zones");
        await zones.locator("tbody tr").nth(2).waitFor({ timeout: WAIT_MS });
        await zones.getByText("4 recipients in 3 zones.", { exact: false }).waitFor();
        // Most recipients first: Tokyo (user-001, user-003), then by name.
        await expect(zones.locator("tbody tr td:first-child").allInnerTexts()).resolves.toEqual([
          "Asia/Tokyo",
          "America/New_York",
          "Europe/Berlin",
        ]);
        await expect(zones.locator("tbody tr td:nth-child(2)").allInnerTexts()).resolves.toEqual([
          "2",
          "1",
          "1",
        ]);
        // Each zone's own 09:00: three different instants.
        const instants = await zones
          .locator("tbody tr td:nth-child(3) time")
          .evaluateAll((els) => els.map((el) => el.getAttribute("datetime")));
        expect(instants).toEqual([
          "2030-01-07T00:00:00.000Z",
          "2030-01-07T14:00:00.000Z",
          "2030-01-07T08:00:00.000Z",
        ]);
        for (const text of await zones.locator("tbody tr td:nth-child(3)").allInnerTexts()) {
          expect(text).toMatch(/^07 Jan 2030, 09:00:00 /);
        }
        // API-11: a floating schedule has no zone of its own (tzid null): the page says so,
        // and its next occurrences are the per-zone ones above.
        await page.getByText("in each recipient's own zone (floating)").waitFor();
        await page
          .getByText("Floating: see the next occurrence per recipient zone below.")
          .waitFor();
        expect(await page.locator("main").innerText()).not.toMatch(/T09:00:00 (null|UTC)/);
        await shot(page, "schedule-recipient-zones");

        // A schedule without recipients has no such section.
        const { schedule: plain } = await s.punctual.createSchedule({
          dtstart: "2030-01-07T09:00:00Z",
          reminders: [{ key: "r", channel: "test" }],
        });
        await page.goto(`${s.served.url}/ui/#/schedules/${plain.id}`);
        // The same page changes only its hash: wait for the previous schedule's view to go.
        await page.locator("#recipient-zones").waitFor({ state: "detached", timeout: WAIT_MS });
        await page.getByRole("heading", { name: "Next occurrences" }).waitFor({ timeout: WAIT_MS });
        await expect(page.locator("#recipient-zones").count()).resolves.toBe(0);
        await page.close();
      } finally {
        await s.close();
      }
    },
  );

  it(title("API-6: the pages made no request outside the servers of the test"), () => {
    expect(foreign).toEqual([]);
  });
});
