/**
 * OPS-9/OPS-8 durability: a PostgreSQL whose settings let an acknowledged commit be lost
 * in a crash (`synchronous_commit = off`, `fsync = off`) is named at start with a warning,
 * because a forgotten claim or settle would be sent again.
 */
import { afterEach, expect, it } from "vitest";
import { createPunctual } from "../../src/app/punctual.js";
import { memoryLogger } from "../../src/observability/logger.js";
import { nonDurableSettings } from "../../src/store/durability.js";
import { openPostgres } from "../../src/store/postgres.js";
import { describeIfPostgres, openTestDatabase, type TestDatabase } from "../support/db.js";

describeIfPostgres("durable commits", () => {
  let handle: TestDatabase | null = null;
  afterEach(async () => {
    await handle?.close();
    handle = null;
  });

  /** A fresh pool on the test database after `alter database … set synchronous_commit`. */
  async function withSynchronousCommit(value: "on" | "off") {
    handle = await openTestDatabase();
    const url = handle.url;
    if (!url) throw new Error("the PostgreSQL test database has no URL");
    const name = new URL(url).pathname.slice(1);
    await handle.db.query(`alter database ${name} set synchronous_commit = ${value}`);
    return openPostgres({ url });
  }

  it("OPS-8: synchronous_commit = off on the database is reported; on is not", async () => {
    const off = await withSynchronousCommit("off");
    try {
      expect(await nonDurableSettings(off)).toContain("synchronous_commit=off");
    } finally {
      await off.close();
    }
    await handle?.close();
    const on = await withSynchronousCommit("on");
    try {
      expect(await nonDurableSettings(on)).not.toContain("synchronous_commit=off");
    } finally {
      await on.close();
    }
  });

  it("OPS-8: start warns, naming the setting, when commits are not durable", async () => {
    const db = await withSynchronousCommit("off");
    const { logger, lines } = memoryLogger("debug");
    const punctual = await createPunctual({
      database: db,
      logger,
      webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
    });
    try {
      const warning = lines.find((l) => String(l.msg).startsWith("commits are not durable"));
      expect(warning?.level).toBe("warn");
      expect(warning?.settings).toContain("synchronous_commit=off");
    } finally {
      await punctual.close(0);
      await db.close();
    }
  });
});
