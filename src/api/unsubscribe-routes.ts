/**
 * One-click unsubscribe (API-14; RFC 8058, RFC 2369): the URL of an e-mail's
 * `List-Unsubscribe` header, `/v1/unsubscribe/{token}`. It needs no API key: the signed
 * token is the credential (`src/app/unsubscribe.ts`), and it is open to other sites (a mail
 * provider POSTs it from its own servers; a page of another site gains nothing by posting
 * a token it would have to hold already).
 *
 * - `POST` records the opt-out and answers 200 (JSON, or a short HTML page to a browser);
 *   repeating it changes nothing more. A forged, altered or expired token, or a recipient
 *   no longer in the registry, is 404 with one message for all.
 * - `GET` never unsubscribes (mail clients and link scanners fetch links on their own): it
 *   shows a page with a button that POSTs the same URL.
 */
import { createRoute, type OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { z } from "zod";
import type { Punctual } from "../app/punctual.js";
import { error } from "./routes.js";

/** Paths of the unsubscribe routes: open without an API key and to other sites. */
export const UNSUBSCRIBE_PATH = /^\/v1\/unsubscribe\/[^/]+$/;

const tokenParamSchema = z.object({
  token: z
    .string()
    .min(1)
    .max(4_000)
    .describe("The signed token of a List-Unsubscribe URL, as the e-mail carries it"),
});

const unsubscribedSchema = z
  .object({
    unsubscribed: z.literal(true),
    optedOut: z
      .union([z.object({ channel: z.literal("email") }), z.object({ category: z.string() })])
      .describe("What the recipient no longer receives: the reminder's category, or all e-mail"),
  })
  .meta({ id: "Unsubscribed" });

export const unsubscribeRoute = createRoute({
  method: "post",
  path: "/v1/unsubscribe/{token}",
  tags: ["recipients"],
  summary: "One-click unsubscribe (API-14, RFC 8058)",
  description:
    "The URL of an e-mail's List-Unsubscribe header. Needs no API key: the signed token names the tenant, the recipient and the reminder's category (or all e-mail). Records the opt-out in the recipient's preferences; idempotent. Any body is accepted (RFC 8058 sends `List-Unsubscribe=One-Click`). A forged, altered or expired token is 404, without saying which. `GET` of the same URL shows a page that POSTs it and changes nothing itself.",
  security: [],
  request: { params: tokenParamSchema },
  responses: {
    200: {
      description:
        "Unsubscribed (or already so); a short HTML page when the request accepts text/html",
      content: {
        "application/json": { schema: unsubscribedSchema },
        "text/html": { schema: z.string() },
      },
    },
    404: error("No such unsubscribe link (forged, altered, expired, or the recipient is gone)"),
    500: error("Internal error"),
  },
});

/** Headers of the HTML pages: never cached, indexed, or leaking the URL as a referrer. */
function pageHeaders(c: Context): void {
  c.header("Cache-Control", "no-store");
  c.header("Referrer-Policy", "no-referrer");
  c.header("X-Robots-Tag", "noindex");
  c.header("Content-Security-Policy", "default-src 'none'; form-action 'self'");
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title}</title></head><body><main><h1>${title}</h1>${body}</main></body></html>`;
}

/** Whether the request asks for a web page (a browser's form post) rather than JSON. */
function wantsHtml(c: Context): boolean {
  return /\btext\/html\b/i.test(c.req.header("accept") ?? "");
}

/** Binds the unsubscribe routes to `app` (no authentication: see the module comment). */
export function registerUnsubscribeRoutes(app: OpenAPIHono, punctual: Punctual): void {
  app.openapi(unsubscribeRoute, async (c) => {
    const result = await punctual.unsubscribe(c.req.valid("param").token);
    if (wantsHtml(c)) {
      pageHeaders(c);
      return c.html(page("Unsubscribed", "<p>You will no longer receive these e-mails.</p>"), 200);
    }
    return c.json({ unsubscribed: true as const, optedOut: result.optedOut }, 200);
  });

  app.get("/v1/unsubscribe/:token", (c) => {
    pageHeaders(c);
    if (!punctual.unsubscribeTokenValid(c.req.param("token"))) {
      return c.html(page("Link not valid", "<p>This unsubscribe link is not valid.</p>"), 404);
    }
    // An empty action posts to this very URL; the body is RFC 8058's.
    return c.html(
      page(
        "Unsubscribe",
        '<p>Stop receiving these e-mails?</p><form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>',
      ),
      200,
    );
  });
}
