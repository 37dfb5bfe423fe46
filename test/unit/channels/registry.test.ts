import { describe, expect, it } from "vitest";
import { ValidationError } from "../../../src/errors/index.js";
import { memoryLogger } from "../../../src/observability/logger.js";
import {
  ChannelRegistry,
  createLogChannel,
  createWebhookChannel,
} from "../../../src/channels/index.js";

describe("channel registry", () => {
  const log = createLogChannel({ logger: memoryLogger().logger });
  const webhook = createWebhookChannel({ secret: "whsec_AAAA" });

  it("CH-5: finds channels by name and lists the names", () => {
    const registry = new ChannelRegistry([webhook, log]);
    expect(registry.get("log")).toBe(log);
    expect(registry.get("webhook")).toBe(webhook);
    expect(registry.has("email")).toBe(false);
    expect(registry.names()).toEqual(["webhook", "log"]);
  });

  it("CH-5: an unknown name is a validation error on `channel` listing the known ones", () => {
    const registry = new ChannelRegistry([webhook, log]);
    let caught: unknown;
    try {
      registry.get("pager");
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ValidationError);
    expect((caught as ValidationError).issues[0]?.field).toBe("channel");
    expect((caught as Error).message).toContain("webhook, log");
  });

  it("CH-5: two channels with one name are refused", () => {
    expect(
      () => new ChannelRegistry([log, createLogChannel({ logger: memoryLogger().logger })]),
    ).toThrow(ValidationError);
  });
});
