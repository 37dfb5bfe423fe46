/**
 * API-14 one-click unsubscribe (RFC 8058, RFC 2369) on a real engine (PGlite or
 * PostgreSQL, per PUNCTUAL_TEST_ENGINE) and a real SMTP server: a reminder e-mailed to a
 * recipient carries `List-Unsubscribe` and `List-Unsubscribe-Post`; the URL read from the
 * received message is POSTed without an API key, the opt-out lands in the recipient's
 * preferences (idempotently), and the next send is `skipped` with reason `OPTED_OUT`. A GET
 * of the URL changes nothing; a forged, altered or expired token is a 404 that does not say
 * which. Without `publicUrl` no header is sent and start-up says so once.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { signUnsubscribeToken } from "../../../src/app/unsubscribe.js";
import { TestClock } from "../../../src/clock/index.js";
import type { RecipientView } from "../../../src/contracts/recipients.js";
import { memoryLogger } from "../../../src/observability/logger.js";
import { openTestDatabase, type TestDatabase } from "../../support/db.js";
import { deliveries, tickAndDrain } from "../../support/punctual.js";
import { startSmtpReceiver, type SmtpReceiver } from "../../support/smtp.js";

const PUBLIC_URL = "https://reminders.example.com";
const API_KEY = "unsubscribe-test-operator-key-0123456789";
const DAY = 86_400_000;

let smtp: SmtpReceiver;
let handle: TestDatabase | null = null;
let punctual: Punctual | null = null;

beforeAll(async () => {
  smtp = await startSmtpReceiver();
});

afterAll(async () => {
  await smtp.close();
});

afterEach(async () => {
  await punctual?.close(0);
  punctual = null;
  await handle?.close();
  handle = null;
  smtp.mails.length = 0;
});

/** punctual on the test engine with the e-mail channel to the sink, and its API. */
async function start(publicUrl: string | undefined, keyed = true) {
  handle = await openTestDatabase();
  const clock = new TestClock("2027-01-04T07:00:00Z");
  const { logger, lines } = memoryLogger("info");
  punctual = await createPunctual({
    database: handle.db,
    clock,
    logger,
    email: { smtpUrl: smtp.url, from: "reminders@example.com", allowedFrom: [] },
    ...(keyed ? { api: { apiKey: API_KEY } } : {}),
    ...(publicUrl !== undefined ? { publicUrl } : {}),
  });
  const app: PunctualApi = createApi(punctual);
  return { punctual, clock, lines, app };
}

/** A daily 09:00 Berlin time (08:00Z in winter) e-mail for `recipients`. */
function dailyEmail(recipients: string[], category?: string) {
  return {
    dtstart: "2027-01-04T09:00:00",
    floating: true,
    rrule: "FREQ=DAILY;COUNT=3",
    recipients,
    reminders: [{ key: "r", channel: "email", ...(category !== undefined ? { category } : {}) }],
  };
}

/** The URL inside `List-Unsubscribe: <url>`. */
function urlOf(header: string | undefined): URL {
  const m = /^<([^>]+)>$/.exec((header ?? "").replace(/\s+/g, ""));
  expect(m, `List-Unsubscribe: ${header}`).not.toBeNull();
  return new URL(m![1]!);
}

async function recipient(p: Punctual, id: string): Promise<RecipientView> {
  return p.getRecipient(id);
}

describe("API-14 one-click unsubscribe", () => {
  it("API-14: the round trip through a real SMTP server — header read from the message, POSTed without a key, next send skipped OPTED_OUT", async () => {
    const { punctual: p, clock, app } = await start(PUBLIC_URL);
    await p.putRecipient("ann", {
      tzid: "Europe/Berlin",
      targets: { email: { to: "ann@example.com" } },
    });
    await p.createSchedule(dailyEmail(["ann"], "digest"));
    clock.set("2027-01-04T08:00:00Z");
    await tickAndDrain(p);
    expect(smtp.mails).toHaveLength(1);
    const mail = smtp.mails[0]!;
    expect(mail.to).toEqual(["ann@example.com"]);
    expect(mail.headers["list-unsubscribe-post"]).toBe("List-Unsubscribe=One-Click");
    const url = urlOf(mail.headers["list-unsubscribe"]);
    expect(url.origin).toBe(PUBLIC_URL);
    expect(url.pathname).toMatch(/^\/v1\/unsubscribe\/[A-Za-z0-9_.-]+$/);
    const before = await recipient(p, "ann");

    // A GET (a mail client's prefetch, a link scanner) shows a page and changes nothing.
    const page = await app.request(url.pathname);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/text\/html/);
    expect(page.headers.get("cache-control")).toBe("no-store");
    expect(await page.text()).toMatch(/<form method="post">/);
    expect(await recipient(p, "ann")).toEqual(before);

    // RFC 8058: the provider POSTs `List-Unsubscribe=One-Click`, with no API key.
    const post = () =>
      app.request(url.pathname, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "List-Unsubscribe=One-Click",
      });
    const res = await post();
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ unsubscribed: true, optedOut: { category: "digest" } });
    const after = await recipient(p, "ann");
    expect(after.preferences.optOut?.categories).toEqual(["digest"]);
    expect(after.version).toBe(before.version + 1);

    // Idempotent: a second POST answers alike and changes nothing.
    const again = await post();
    expect(again.status).toBe(200);
    expect(await recipient(p, "ann")).toEqual(after);

    // The next occurrence is judged at send: skipped, OPTED_OUT, and no message.
    clock.set("2027-01-05T08:00:00Z");
    await tickAndDrain(p);
    expect(smtp.mails).toHaveLength(1);
    const second = (await deliveries(p)).find(
      (d) => d.recipientId === "ann" && d.dueAt === "2027-01-05T08:00:00.000Z",
    );
    expect(second).toMatchObject({ state: "skipped", reason: "OPTED_OUT" });

    // The other routes still need the key.
    expect((await app.request("/v1/recipients/ann")).status).toBe(401);
  });

  it("API-14: a reminder without a category unsubscribes from all e-mail; the form post of the page answers a page", async () => {
    const { punctual: p, clock, app } = await start(PUBLIC_URL);
    await p.putRecipient("bob", {
      tzid: "Europe/Berlin",
      targets: { email: { to: "bob@example.com" } },
      preferences: { optOut: { categories: ["news"] } },
    });
    await p.createSchedule(dailyEmail(["bob"]));
    clock.set("2027-01-04T08:00:00Z");
    await tickAndDrain(p);
    const url = urlOf(smtp.mails[0]?.headers["list-unsubscribe"]);
    const res = await app.request(url.pathname, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        accept: "text/html,application/xhtml+xml",
        // A browser's form post from the page: same origin, or another when proxied.
        origin: "https://elsewhere.example",
        "sec-fetch-site": "cross-site",
      },
      body: "List-Unsubscribe=One-Click",
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/html/);
    expect(await res.text()).toMatch(/no longer receive/);
    const after = await recipient(p, "bob");
    expect(after.preferences.optOut).toEqual({ categories: ["news"], channels: ["email"] });
    clock.set("2027-01-05T08:00:00Z");
    await tickAndDrain(p);
    expect(smtp.mails).toHaveLength(1);
  });

  it("API-14: a forged, altered or expired token, or one for a recipient gone, is 404 without saying which", async () => {
    const { punctual: p, clock, app } = await start(PUBLIC_URL);
    await p.putRecipient("ann", { tzid: "UTC", targets: { email: { to: "ann@example.com" } } });
    const good = new URL(
      p.unsubscribeUrl({ tenant: "default", recipientId: "ann", category: null })!,
    );
    const token = good.pathname.split("/").pop()!;
    const [version, payload, signature] = token.split(".") as [string, string, string];

    // Altered: the payload names another recipient, the signature is the old one.
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as Record<
      string,
      unknown
    >;
    const otherPayload = Buffer.from(JSON.stringify({ ...claims, r: "bob" })).toString("base64url");
    const altered = `${version}.${otherPayload}.${signature}`;
    // Forged: well formed, signed with a secret the server does not have.
    const forged = signUnsubscribeToken("not-the-server-secret-0123456789", {
      tenant: "default",
      recipientId: "ann",
      category: null,
      expiresAtMs: clock.now() + DAY,
    });
    const flipped = `${version}.${payload}.${signature.slice(0, -2)}${signature.endsWith("AA") ? "BA" : "AA"}`;
    const bodies = new Set<string>();
    for (const bad of [altered, forged, flipped, "u1.x.y", "nonsense"]) {
      const res = await app.request(`/v1/unsubscribe/${bad}`, { method: "POST" });
      expect(res.status, bad).toBe(404);
      bodies.add(await res.text());
      expect((await app.request(`/v1/unsubscribe/${bad}`)).status, `GET ${bad}`).toBe(404);
    }
    // Expired: 60 days after the link was made.
    clock.advance(60 * DAY);
    const expired = await app.request(good.pathname, { method: "POST" });
    expect(expired.status).toBe(404);
    bodies.add(await expired.text());
    expect(bodies.size).toBe(1);
    expect((await recipient(p, "ann")).preferences.optOut).toBeUndefined();

    // A fresh link works; once the recipient is removed it is the same 404.
    const fresh = new URL(
      p.unsubscribeUrl({ tenant: "default", recipientId: "ann", category: null })!,
    );
    await p.removeRecipient("ann");
    const gone = await app.request(fresh.pathname, { method: "POST" });
    expect(gone.status).toBe(404);
    expect(bodies.has(await gone.text())).toBe(true);
  });

  it("API-14: without publicUrl no List-Unsubscribe header is sent, and start-up says so once", async () => {
    const { punctual: p, clock, lines } = await start(undefined);
    await p.putRecipient("ann", {
      tzid: "Europe/Berlin",
      targets: { email: { to: "ann@example.com" } },
    });
    await p.createSchedule(dailyEmail(["ann"], "digest"));
    clock.set("2027-01-04T08:00:00Z");
    await tickAndDrain(p);
    clock.set("2027-01-05T08:00:00Z");
    await tickAndDrain(p);
    expect(smtp.mails).toHaveLength(2);
    for (const mail of smtp.mails) {
      expect(mail.headers["list-unsubscribe"]).toBeUndefined();
      expect(mail.headers["list-unsubscribe-post"]).toBeUndefined();
    }
    const notes = lines.filter((l) => JSON.stringify(l).includes("PUNCTUAL_PUBLIC_URL"));
    expect(notes).toHaveLength(1);
    expect(p.unsubscribeUrl({ tenant: "default", recipientId: "ann", category: null })).toBeNull();
  });

  it("API-14: without an API key, a POST from another site still unsubscribes (the token is the credential), while other writes from it are refused", async () => {
    const { punctual: p, app } = await start(PUBLIC_URL, false);
    await p.putRecipient("ann", { tzid: "UTC", targets: { email: { to: "ann@example.com" } } });
    const url = new URL(
      p.unsubscribeUrl({ tenant: "default", recipientId: "ann", category: "digest" })!,
    );
    const crossSite = { origin: "https://mail.example.net", "sec-fetch-site": "cross-site" };
    const res = await app.request(url.pathname, { method: "POST", headers: crossSite });
    expect(res.status).toBe(200);
    expect((await recipient(p, "ann")).preferences.optOut).toEqual({ categories: ["digest"] });
    const other = await app.request("/v1/recipients/ann", { method: "DELETE", headers: crossSite });
    expect(other.status).toBe(403);
  });
});
