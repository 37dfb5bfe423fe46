/**
 * Dashboard sessions across real processes (API-6): two `punctual start` processes on one
 * PostgreSQL database, as behind a load balancer. A login on one is a session on the
 * other (reads and a CSRF-checked write), and a logout on the other ends it on the first.
 * The in-process variant (two instances, two pools) is in
 * test/integration/api/dashboard-session-store.test.ts.
 */
import { afterEach, describe, expect, it } from "vitest";
import { hasPostgres } from "../support/db.js";
import { raceSetup, startServer } from "../support/processes.js";

const needs = hasPostgres()
  ? ""
  : " (skipped: needs PostgreSQL — DATABASE_URL or PostgreSQL binaries)";
const KEY = "operator-key-for-two-processes-0123456789";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A request with the session cookie; writes carry the CSRF token and the server's origin. */
function call(
  base: string,
  path: string,
  cookie: string,
  write?: { csrf: string; body?: unknown },
) {
  return fetch(`${base}${path}`, {
    method: write ? "POST" : "GET",
    headers: {
      cookie,
      ...(write
        ? {
            "x-csrf-token": write.csrf,
            origin: new URL(base).origin,
            "content-type": "application/json",
          }
        : {}),
    },
    ...(write?.body !== undefined ? { body: JSON.stringify(write.body) } : {}),
  });
}

describe("dashboard sessions across processes on PostgreSQL", () => {
  it.skipIf(!hasPostgres())(
    `API-6: a login on one punctual start process is served by a second process; a logout on the second ends it on the first${needs}`,
    async () => {
      const { url, workers } = await raceSetup(cleanups);
      const env = { PUNCTUAL_API_KEY: KEY };
      const [a, b] = await Promise.all([
        startServer(url, workers, env),
        startServer(url, workers, env),
      ]);
      expect(a).not.toBe(b);

      const login = await fetch(`${a}/ui/login`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: new URL(a).origin },
        body: JSON.stringify({ key: KEY }),
      });
      expect(login.status).toBe(200);
      const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0]!;
      const { csrf } = (await login.json()) as { csrf: string };
      expect(cookie).toMatch(/=.+/);

      // The other process knows the session: it is in the database, not in A's memory.
      const session = await call(b, "/ui/session", cookie);
      expect(await session.json()).toMatchObject({ authenticated: true, csrf });
      expect((await call(b, "/v1/schedules", cookie)).status).toBe(200);
      const write = await call(b, "/v1/schedules", cookie, {
        csrf,
        body: {
          dtstart: "2030-01-01T09:00:00Z",
          reminders: [{ key: "r", channel: "log" }],
        },
      });
      expect(write.status).toBe(201);

      expect((await call(b, "/ui/logout", cookie, { csrf })).status).toBe(200);
      expect((await call(a, "/v1/schedules", cookie)).status).toBe(401);
      expect(await (await call(a, "/ui/session", cookie)).json()).toMatchObject({
        authenticated: false,
      });
    },
  );
});
