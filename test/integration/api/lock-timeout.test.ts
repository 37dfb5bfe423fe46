/**
 * A transaction that stalls while holding row locks (a worker stopped by SIGSTOP inside
 * one) must not take the API down (OPS-8, API-1). The request path's statements wait at
 * most `lockTimeoutMs` for a lock (PostgreSQL `lock_timeout`, set local): an edit of the
 * locked schedule answers 503 `RESOURCE_BUSY` with `Retry-After`, its pooled connection is
 * free again, and requests that need no such lock keep being served. The import lock waits
 * as designed. On PGlite (one connection) the same `SET LOCAL` is harmless.
 *
 * The stalled holder is a second pool of the test, holding `FOR UPDATE` on the schedule's
 * row in an open transaction until the test lets it go.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import { createPunctual, type Punctual } from "../../../src/app/punctual.js";
import { TestClock } from "../../../src/clock/index.js";
import type { ErrorBody, ScheduleView } from "../../../src/contracts/index.js";
import { ResourceBusyError } from "../../../src/errors/index.js";
import { memoryLogger } from "../../../src/observability/logger.js";
import type { Database } from "../../../src/store/database.js";
import { withImportLock } from "../../../src/store/import-lock.js";
import { withLockTimeout } from "../../../src/store/lock-timeout.js";
import { openPostgres } from "../../../src/store/postgres.js";
import { itIfPostgres, openTestDatabase, type TestDatabase } from "../../support/db.js";

const body = {
  dtstart: "2027-01-04T09:00:00",
  tzid: "Europe/Berlin",
  rrule: "FREQ=DAILY;COUNT=3",
  payload: { user: 42 },
  reminders: [{ key: "r1", offset: "-PT15M", channel: "log" }],
};

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A punctual and its API on the test engine (or on `database`), closed after the test. */
async function open(
  lockTimeoutMs: number,
  database?: (handle: TestDatabase) => Database,
): Promise<{
  handle: TestDatabase;
  punctual: Punctual;
  api: PunctualApi;
  logs: ReturnType<typeof memoryLogger>["lines"];
}> {
  const handle = await openTestDatabase();
  closers.push(() => handle.close());
  const db = database ? database(handle) : handle.db;
  if (database) closers.push(() => db.close());
  const { logger, lines } = memoryLogger("debug");
  const punctual = await createPunctual({
    database: db,
    clock: new TestClock("2027-01-04T08:00:00Z"),
    logger,
    lockTimeoutMs,
  });
  closers.push(() => punctual.close(0));
  return { handle, punctual, api: createApi(punctual), logs: lines };
}

function send(api: PunctualApi, method: string, path: string, payload?: unknown) {
  return api.request(path, {
    method,
    headers: { "content-type": "application/json" },
    ...(payload === undefined ? {} : { body: JSON.stringify(payload) }),
  });
}

/**
 * An open transaction on its own connection holding `FOR UPDATE` on one schedule's row,
 * as a stalled worker would; `release()` rolls it back.
 */
async function holdScheduleRow(url: string, id: string): Promise<{ release(): Promise<void> }> {
  const holder = openPostgres({ url, maxConnections: 1 });
  let letGo!: () => void;
  const released = new Promise<void>((resolve) => (letGo = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const held = holder.transaction(async (tx) => {
    const { rowCount } = await tx.query(
      "select id from punctual_schedules where id = $1 for update",
      [id],
    );
    if (rowCount !== 1) throw new Error(`no schedule ${id} to lock`);
    locked();
    await released;
    throw new Error("rolled back on purpose");
  });
  // Fails the test at once if the lock could not be taken.
  await Promise.race([isLocked, held]);
  const done = held.catch(() => undefined);
  return {
    async release() {
      letGo();
      await done;
      await holder.close();
    },
  };
}

/** Polls the server (50 ms apart, server-side) until `n` lock requests wait; false after `tries`. */
async function waiting(db: Database, n: number, tries = 400): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    const { rows } = await db.query<{ n: number }>(
      `select count(*)::int as n from pg_locks l join pg_stat_activity a on a.pid = l.pid
        where not l.granted and a.datname = current_database()`,
    );
    if ((rows[0]?.n ?? 0) >= n) return true;
    await db.query("select pg_sleep(0.05)");
  }
  return false;
}

describe("a stalled transaction holding a schedule's row lock (OPS-8, API-1)", () => {
  itIfPostgres(
    "OPS-8 API-1: edits of a schedule another transaction holds FOR UPDATE answer 503 RESOURCE_BUSY with Retry-After, and meanwhile another schedule's create, GET /healthz and the list succeed",
    async () => {
      // A pool of 3 and 4 edits of the locked schedule: without the lock timeout the edits
      // hold every connection until the holder lets go, and everything else fails.
      const { handle, punctual, api, logs } = await open(1_500, (h) =>
        openPostgres({ url: h.url!, maxConnections: 3 }),
      );
      const created = await send(api, "POST", "/v1/schedules", body);
      expect(created.status).toBe(201);
      const a = (await created.json()) as ScheduleView;
      const holder = await holdScheduleRow(handle.url!, a.id);
      try {
        const edits = [
          send(api, "PATCH", `/v1/schedules/${a.id}`, { payload: { user: 1 } }),
          send(api, "PATCH", `/v1/schedules/${a.id}`, { payload: { user: 2 } }),
          send(api, "POST", `/v1/schedules/${a.id}/pause`),
          send(api, "DELETE", `/v1/schedules/${a.id}`),
        ];
        // The edits are waiting on the row lock (the fourth on a connection)...
        expect(await waiting(handle.db, 1)).toBe(true);
        // ...while requests that need no lock of that row are served.
        const [other, healthz, list] = await Promise.all([
          send(api, "POST", "/v1/schedules", { ...body, payload: { user: 43 } }),
          send(api, "GET", "/healthz"),
          send(api, "GET", "/v1/schedules?limit=10"),
        ]);
        expect(other.status).toBe(201);
        expect(healthz.status).toBe(200);
        expect(list.status).toBe(200);
        const listed = (await list.json()) as { items: ScheduleView[] };
        expect(listed.items.map((s) => s.id)).toContain(a.id);

        const paths = [
          `PATCH /v1/schedules/${a.id}`,
          `PATCH /v1/schedules/${a.id}`,
          `POST /v1/schedules/${a.id}/pause`,
          `DELETE /v1/schedules/${a.id}`,
        ];
        for (const [i, res] of (await Promise.all(edits)).entries()) {
          expect(res.status, paths[i]).toBe(503);
          expect(res.headers.get("retry-after")).toBe("2");
          const err = (await res.json()) as ErrorBody;
          expect(err.error.code).toBe("RESOURCE_BUSY");
          expect(err.error.resource).toBe(paths[i]!.split(" ")[1]);
          expect(err.error.message).toContain(`${paths[i]}: `);
        }
        // Logged and counted, once per refused operation.
        expect(
          logs.filter(
            (l) => l.msg === "an operation gave up waiting for a lock another transaction holds",
          ),
        ).toHaveLength(4);
        const counted = await punctual.metrics.lockTimeouts.get();
        expect(counted.values.reduce((n, v) => n + v.value, 0)).toBe(4);
        // The server names the table when the wait was on a row (not queued behind another waiter).
        expect(counted.values.map((v) => v.labels.relation)).toContain("punctual_schedules");
      } finally {
        await holder.release();
      }
      // Nothing of the refused edits was written; once the lock is free an edit goes through.
      const after = (await (
        await send(api, "GET", `/v1/schedules/${a.id}`)
      ).json()) as ScheduleView;
      expect(after.version).toBe(1);
      const edit = await send(api, "PATCH", `/v1/schedules/${a.id}`, { payload: { user: 5 } });
      expect(edit.status).toBe(200);
      expect(((await edit.json()) as ScheduleView).version).toBe(2);
    },
    120_000,
  );

  itIfPostgres(
    "OPS-8: a write outside a transaction gives up too, naming the locked table, and the view's plain reads are served meanwhile",
    async () => {
      const { handle, api } = await open(300);
      const created = await send(api, "POST", "/v1/schedules", body);
      const a = (await created.json()) as ScheduleView;
      const busy: ResourceBusyError[] = [];
      const requestDb = withLockTimeout(handle.db, {
        lockTimeoutMs: 300,
        onTimeout: (e) => busy.push(e),
      });
      const holder = await holdScheduleRow(handle.url!, a.id);
      try {
        const read = await requestDb.query<{ id: string }>(
          "select id from punctual_schedules where id = $1",
          [a.id],
        );
        expect(read.rows).toEqual([{ id: a.id }]);
        const failed = await requestDb
          .query("update punctual_schedules set title = title where id = $1", [a.id])
          .catch((err: unknown) => err);
        expect(failed).toBeInstanceOf(ResourceBusyError);
        expect((failed as ResourceBusyError).relation).toBe("punctual_schedules");
        expect(busy).toEqual([failed]);
      } finally {
        await holder.release();
      }
    },
    60_000,
  );

  itIfPostgres(
    "API-5: the import lock waits past the lock timeout for the other import of its source, as designed",
    async () => {
      const handle = await openTestDatabase();
      closers.push(() => handle.close());
      const db = openPostgres({ url: handle.url! });
      closers.push(() => db.close());
      const other = openPostgres({ url: handle.url!, maxConnections: 1 });
      closers.push(() => other.close());
      const requestDb = withLockTimeout(db, { lockTimeoutMs: 200 });
      let letGo!: () => void;
      const released = new Promise<void>((resolve) => (letGo = resolve));
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      // "Another process" importing the same source holds the lock.
      const first = other.transaction(async (tx) => {
        await tx.query(
          "select pg_advisory_xact_lock(hashtext('punctual.import'), hashtext($1::text))",
          ["default\nsame-source"],
        );
        locked();
        await released;
      });
      await isLocked;
      const second = withImportLock(requestDb, "default", "same-source", async () => "imported");
      expect(await waiting(handle.db, 1)).toBe(true);
      // Longer than the lock timeout: a statement under it would have given up by now.
      await handle.db.query("select pg_sleep(0.4)");
      letGo();
      await first;
      expect(await second).toBe("imported");
    },
    60_000,
  );
});

describe("the lock timeout on either engine (API-1)", () => {
  it("API-1: with a lock timeout set, create, edit, pause, resume, cancel and list work as ever (SET LOCAL is harmless on PGlite)", async () => {
    const { api } = await open(50);
    const created = await send(api, "POST", "/v1/schedules", body);
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as ScheduleView;
    const edit = await send(api, "PATCH", `/v1/schedules/${id}`, { payload: { user: 7 } });
    expect(edit.status).toBe(200);
    expect((await send(api, "POST", `/v1/schedules/${id}/pause`)).status).toBe(200);
    expect((await send(api, "POST", `/v1/schedules/${id}/resume`)).status).toBe(200);
    expect((await send(api, "DELETE", `/v1/schedules/${id}`)).status).toBe(200);
    const list = await send(api, "GET", "/v1/schedules?limit=10");
    expect(list.status).toBe(200);
    const shown = (await (await send(api, "GET", `/v1/schedules/${id}`)).json()) as ScheduleView;
    expect(shown).toMatchObject({ state: "cancelled", payload: { user: 7 } });
  });

  it("OPS-8: a transaction of the request path carries the lock timeout; the database's own do not", async () => {
    const handle = await openTestDatabase();
    closers.push(() => handle.close());
    const requestDb = withLockTimeout(handle.db, { lockTimeoutMs: 1234 });
    const setting = (db: Database) =>
      db.transaction(async (tx) => {
        const { rows } = await tx.query<{ v: string }>(
          "select current_setting('lock_timeout') as v",
        );
        return rows[0]?.v;
      });
    expect(await setting(requestDb)).toBe("1234ms");
    expect(await setting(handle.db)).toBe("0");
  });

  it("OPS-8: a lock timeout turned off (0) leaves the database as it is", async () => {
    const handle = await openTestDatabase();
    closers.push(() => handle.close());
    expect(withLockTimeout(handle.db, { lockTimeoutMs: 0 })).toBe(handle.db);
    expect(new ResourceBusyError("punctual_schedules", 1_500).retryAfterMs).toBe(2_000);
  });
});
