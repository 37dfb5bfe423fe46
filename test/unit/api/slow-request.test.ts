import { connect } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { serveApi, type ServedApi } from "../../../src/api/server.js";
import { resolveConfig } from "../../../src/config/index.js";
import { configFromEnv } from "../../../src/config/env.js";

/**
 * Node enforces `requestTimeout` on real timers only (its own check of expired requests
 * runs on an interval in the HTTP server), so no test clock can stand in: this file waits
 * for a configured timeout of 300 ms, once per case, and no longer.
 */
const served: ServedApi[] = [];
afterAll(async () => {
  await Promise.all(served.map((s) => s.close(0)));
});

/** What the server writes to a socket that sent `head` and then stalled, until it closes. */
function stall(port: number, head: string): Promise<{ answer: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (answer += chunk));
    socket.on("error", reject);
    socket.on("close", () => resolve({ answer, closed: true }));
    socket.write(head);
  });
}

describe("slow requests (API-7)", () => {
  it("API-7: a request whose body stalls is answered 408 and its connection closed", async () => {
    const api = await serveApi(
      { fetch: async (req) => new Response(`read ${(await req.text()).length}`) },
      { host: "127.0.0.1", port: 0, requestTimeoutMs: 300, headersTimeoutMs: 200 },
    );
    served.push(api);
    const [stalled, headersOnly] = await Promise.all([
      stall(
        api.port,
        'POST /v1/schedules HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n{"a"',
      ),
      stall(api.port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"),
    ]);
    expect(stalled.closed).toBe(true);
    expect(stalled.answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(headersOnly.closed).toBe(true);
    expect(headersOnly.answer).toMatch(/^HTTP\/1\.1 408 /);
    // A whole request within the limits is served as before (limits on, but long enough
    // that a loaded machine's scheduling delays cannot reach them).
    const roomy = await serveApi(
      { fetch: async (req) => new Response(`read ${(await req.text()).length}`) },
      { host: "127.0.0.1", port: 0, requestTimeoutMs: 20_000, headersTimeoutMs: 10_000 },
    );
    served.push(roomy);
    const res = await fetch(`http://127.0.0.1:${roomy.port}/`, { method: "POST", body: "abc" });
    expect(await res.text()).toBe("read 3");
  });

  it("API-7: the limits default to 30 s for a request and 10 s for its headers, and are configurable", () => {
    const defaults = resolveConfig(configFromEnv({})).api;
    expect(defaults.requestTimeoutMs).toBe(30_000);
    expect(defaults.headersTimeoutMs).toBe(10_000);
    const set = resolveConfig(
      configFromEnv({ PUNCTUAL_REQUEST_TIMEOUT_MS: "5000", PUNCTUAL_HEADERS_TIMEOUT_MS: "2000" }),
    ).api;
    expect(set.requestTimeoutMs).toBe(5_000);
    expect(set.headersTimeoutMs).toBe(2_000);
  });
});
