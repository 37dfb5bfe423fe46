/**
 * A send's child logger made only when one of its lines is written (OPS-2: structured
 * JSON lines, the same fields as pino's own child would give).
 */
import { describe, expect, it, vi } from "vitest";
import { lazyChild, memoryLogger, REDACTED } from "../../../src/observability/logger.js";

const bindings = { channel: "webhook", deliveryKey: "s1:r1:2027-01-04T08:00:00.000Z", attempt: 2 };

describe("lazyChild", () => {
  it("OPS-2: a line at a level that is off makes no child and writes nothing", () => {
    const { logger, lines } = memoryLogger("info");
    const child = vi.spyOn(logger, "child");
    const log = lazyChild(logger, bindings);
    log.debug({ status: 200 }, "webhook sent");
    expect(child).not.toHaveBeenCalled();
    expect(lines).toEqual([]);
  });

  it("OPS-2: a line at an enabled level carries the bindings and its own fields, through one child", () => {
    const { logger, lines } = memoryLogger("debug");
    const child = vi.spyOn(logger, "child");
    const log = lazyChild(logger, bindings);
    log.debug({ status: 200 }, "webhook sent");
    log.warn({ host: "10.0.0.1" }, "webhook target refused");
    expect(child).toHaveBeenCalledTimes(1);
    expect(lines).toMatchObject([
      { level: "debug", msg: "webhook sent", status: 200, ...bindings },
      { level: "warn", msg: "webhook target refused", host: "10.0.0.1", ...bindings },
    ]);
  });

  it("OPS-2: each level writes at its own level, and the process logger's redaction applies", () => {
    const { logger, lines } = memoryLogger("info");
    const log = lazyChild(logger, bindings);
    log.info({ n: 1 }, "i");
    log.warn({ n: 2 }, "w");
    log.error({ n: 3, target: { secret: "s3cr3t" } }, "e");
    expect(lines.map((l) => [l.level, l.msg, l.n])).toEqual([
      ["info", "i", 1],
      ["warn", "w", 2],
      ["error", "e", 3],
    ]);
    expect(JSON.stringify(lines)).not.toContain("s3cr3t");
    expect(lines[2]).toMatchObject({ target: { secret: REDACTED } });
  });
});
