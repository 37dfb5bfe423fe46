/**
 * The browser dashboard (API-6, DEL-12) at `/ui`: one HTML page, one script and one
 * style sheet, served from this package's files (`assets/`, copied to `dist/` by
 * `npm run build`). The page talks to the `/v1` JSON API only, with the session cookie
 * the API's `/ui/login` sets (or no key at all on a server without one); nothing here
 * reads the database. The page loads nothing from elsewhere: its Content-Security-Policy
 * allows this origin only, and it may not be framed.
 */
import { readFileSync } from "node:fs";
import type { Context } from "hono";
import { DELIVERY_STATES, SCHEDULE_STATES } from "../domain/index.js";

/** Path the dashboard is served at. */
export const DASHBOARD_PATH = "/ui";

/** The files of the dashboard and their media types. */
const ASSETS: Readonly<Record<string, string>> = {
  "app.js": "text/javascript; charset=utf-8",
  "app.css": "text/css; charset=utf-8",
};

/** What a page of the dashboard may load: this origin only, no frames, no inline script. */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join("; ");

/**
 * API-6: the states the API accepts, written into the page for its state filters (the
 * script keeps no list of its own), as a `<meta name="punctual-states">` whose content is
 * the JSON `{ "delivery": […], "schedule": […] }`.
 */
export const STATES_META = `<meta name="punctual-states" content="${JSON.stringify({
  delivery: DELIVERY_STATES,
  schedule: SCHEDULE_STATES,
}).replaceAll('"', "&quot;")}" />`;

const read = (name: string): string | null => {
  try {
    return readFileSync(new URL(`./assets/${name}`, import.meta.url), "utf8");
  } catch {
    return null;
  }
};

/** The routes the dashboard needs: anything with `get(path, handler)` (a Hono app). */
export interface DashboardHost {
  get(path: string, handler: (c: Context) => Response | Promise<Response>): unknown;
}

function securityHeaders(c: Context): void {
  c.header("Content-Security-Policy", DASHBOARD_CSP);
  c.header("X-Content-Type-Options", "nosniff");
  c.header("Referrer-Policy", "no-referrer");
  c.header("X-Frame-Options", "DENY");
}

/**
 * Serves the dashboard on `app` at `/ui` (the page) and `/ui/assets/<file>`. The files
 * are read once, here. Mount it on the app of `createApi`, whose Host check and
 * authentication then apply; the page itself holds no data, so it needs no key.
 * Returns false when the files are missing (compiled without `npm run build`, which
 * copies them): then `/ui` answers `503 DASHBOARD_NOT_BUILT` and the API runs as usual.
 */
export function registerDashboard(app: DashboardHost): boolean {
  const html = read("index.html")?.replace("</head>", `  ${STATES_META}\n  </head>`) ?? null;
  const files = new Map<string, { type: string; body: string }>();
  for (const [name, type] of Object.entries(ASSETS)) {
    const body = read(name);
    if (body !== null) files.set(name, { type, body });
  }
  const available = html !== null && files.size === Object.keys(ASSETS).length;
  const page = (c: Context) => {
    if (!available) {
      return c.json(
        {
          error: {
            code: "DASHBOARD_NOT_BUILT",
            message:
              "The dashboard's files are missing from this build (dashboard/assets beside the compiled code): build with `npm run build`.",
          },
        },
        503,
      );
    }
    securityHeaders(c);
    c.header("Cache-Control", "no-store");
    return c.html(html ?? "");
  };
  app.get(DASHBOARD_PATH, (c) => c.redirect(`${DASHBOARD_PATH}/`, 308));
  app.get(`${DASHBOARD_PATH}/`, page);
  app.get(`${DASHBOARD_PATH}/assets/:file`, (c) => {
    const file = files.get(c.req.param("file") ?? "");
    if (!file) return c.json({ error: { code: "NOT_FOUND", message: "No such file" } }, 404);
    securityHeaders(c);
    c.header("Content-Type", file.type);
    c.header("Cache-Control", "no-cache");
    return c.body(file.body);
  });
  return available;
}
