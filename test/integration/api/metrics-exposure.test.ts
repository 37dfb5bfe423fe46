/**
 * OPS-13: what `/metrics` shows and to whom. Without an API key it answers only a peer on
 * this machine, judged by the socket's address (a `Host: localhost` header proves
 * nothing), `worker` refuses to serve it off loopback, and by default no tenant name or
 * target host appears in a label (`PUNCTUAL_METRICS_NAMED_LABELS` puts them back).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProbeApi } from "../../../src/api/probes.js";
import { isLoopbackAddress } from "../../../src/api/security.js";
import { createApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { CliError, EXIT_STARTUP } from "../../../src/cli/errors.js";
import { listensOnLoopbackOnly, runStart, runWorker } from "../../../src/cli/run.js";
import { configFromEnv } from "../../../src/config/env.js";
import type { ErrorBody } from "../../../src/contracts/index.js";
import { createMetrics, opaqueLabel } from "../../../src/observability/metrics.js";
import { silentLogger } from "../../../src/observability/logger.js";

let punctual: Punctual;
const dirs: string[] = [];

beforeAll(async () => {
  punctual = await createPunctual({ dataDir: null, logger: silentLogger() });
});
afterAll(async () => {
  await punctual?.close(0);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The `env` `@hono/node-server` gives a request that arrived from `remoteAddress`. */
const from = (remoteAddress: string) => ({
  incoming: { socket: { remoteAddress } },
});

const io = { out: () => undefined, err: () => undefined };

describe("OPS-13 /metrics exposure", () => {
  it("OPS-13: without a key, /metrics answers a loopback peer only, whatever the Host header says", async () => {
    const probes = createProbeApi(punctual, { host: "127.0.0.1" });
    const api = createApi(punctual);
    for (const app of [probes, api]) {
      const remote = await app.request(
        "/metrics",
        { headers: { host: "localhost" } },
        from("192.0.2.7"),
      );
      expect(remote.status).toBe(403);
      expect(((await remote.json()) as ErrorBody).error.code).toBe("METRICS_NEEDS_KEY");
      const mapped = await app.request("/metrics", {}, from("::ffff:192.0.2.7"));
      expect(mapped.status).toBe(403);
      expect((await app.request("/metrics", {}, from("127.0.0.1"))).status).toBe(200);
      expect((await app.request("/metrics", {}, from("::1"))).status).toBe(200);
      expect((await app.request("/metrics", {}, from("::ffff:127.0.0.1"))).status).toBe(200);
      // Probes stay open to anyone.
      expect((await app.request("/healthz", {}, from("192.0.2.7"))).status).toBe(200);
    }
    // With a key, the key decides, not the peer.
    const keyed = createProbeApi(punctual, { host: "0.0.0.0", apiKey: "k".repeat(20) });
    const withKey = await keyed.request(
      "/metrics",
      { headers: { authorization: `Bearer ${"k".repeat(20)}` } },
      from("192.0.2.7"),
    );
    expect(withKey.status).toBe(200);
  });

  it("OPS-13: loopback is decided by address: names resolve, wildcards and other addresses are not", async () => {
    expect(await listensOnLoopbackOnly("127.0.0.1")).toBe(true);
    expect(await listensOnLoopbackOnly("127.3.4.5")).toBe(true);
    expect(await listensOnLoopbackOnly("::1")).toBe(true);
    expect(await listensOnLoopbackOnly("[::1]")).toBe(true);
    expect(await listensOnLoopbackOnly("0.0.0.0")).toBe(false);
    expect(await listensOnLoopbackOnly("::")).toBe(false);
    expect(await listensOnLoopbackOnly("192.0.2.7")).toBe(false);
    expect(await listensOnLoopbackOnly("no-such-host.invalid")).toBe(false);
    expect(isLoopbackAddress("::ffff:127.0.0.1")).toBe(true);
    expect(isLoopbackAddress("::ffff:10.0.0.1")).toBe(false);
    expect(isLoopbackAddress("localhost")).toBe(false);
  });

  it("OPS-13: worker --metrics-host 0.0.0.0 without PUNCTUAL_API_KEY refuses to start, before opening the database", async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), "punctual-metrics-")), "data");
    dirs.push(join(dataDir, ".."));
    const err = await runWorker({ dataDir, metricsHost: "0.0.0.0", metricsPort: 0 }, io, {}).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).exitCode).toBe(EXIT_STARTUP);
    expect((err as Error).message).toContain("0.0.0.0");
    expect((err as Error).message).toContain("PUNCTUAL_API_KEY");
    expect(existsSync(dataDir)).toBe(false);
    const start = await runStart({ dataDir, host: "0.0.0.0", port: 0 }, io, {}).catch(
      (e: unknown) => e,
    );
    expect(start).toBeInstanceOf(CliError);
    expect(existsSync(dataDir)).toBe(false);
  });

  it("OPS-13: no tenant name or target host in labels by default; PUNCTUAL_METRICS_NAMED_LABELS shows them", async () => {
    const hidden = createMetrics();
    hidden.circuitState.set({ host: "hooks.acme.example" }, 2);
    hidden.circuitDeferred.inc({ host: "hooks.acme.example" });
    hidden.rateLimitTokens.set({ key: "acme/newsletter" }, 3);
    hidden.rateLimitThrottled.inc({ key: "acme/newsletter" });
    const text = await hidden.registry.metrics();
    expect(text).not.toContain("acme");
    expect(text).toContain(`host="${opaqueLabel("hooks.acme.example")}"`);
    expect(text).toContain(`key="${opaqueLabel("acme/newsletter")}"`);
    expect(opaqueLabel("acme/newsletter")).toMatch(/^h_[0-9a-f]{12}$/);

    expect(configFromEnv({ PUNCTUAL_METRICS_NAMED_LABELS: "true" }).metricsNamedLabels).toBe(true);
    const named = await createPunctual({
      database: punctual.db,
      logger: silentLogger(),
      metricsNamedLabels: true,
    });
    try {
      named.metrics.circuitState.set({ host: "hooks.acme.example" }, 2);
      named.metrics.rateLimitThrottled.inc({ key: "acme/newsletter" });
      const shown = (await named.metricsText()).body;
      expect(shown).toContain('host="hooks.acme.example"');
      expect(shown).toContain('key="acme/newsletter"');
    } finally {
      await named.close(0);
    }
    punctual.metrics.circuitState.set({ host: "hooks.acme.example" }, 2);
    expect((await punctual.metricsText()).body).not.toContain("acme");
  });
});
