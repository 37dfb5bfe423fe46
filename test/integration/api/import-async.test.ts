/**
 * An asynchronous calendar import and its progress (API-5, OPS-12), on the engine of this
 * run: `POST /v1/imports?async=true` (or `Prefer: respond-async`) answers 202 with the
 * import's record and `Location`; `GET /v1/imports/{id}` follows it chunk by chunk to
 * `succeeded`, or `failed` with the error; a record whose process died does not stay
 * `running` once its lease expired.
 */
import { setTimeout as wait } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createApi, type PunctualApi } from "../../../src/api/server.js";
import type { ErrorBody, ImportView } from "../../../src/contracts/index.js";
import {
  ABANDONED_IMPORT_ERROR,
  IMPORT_LEASE_MS,
  startImportRecord,
} from "../../../src/store/imports.js";
import { testPunctual, type TestPunctual } from "../../support/punctual.js";

let t: TestPunctual;
let api: PunctualApi;

beforeEach(async () => {
  t = await testPunctual();
  api = createApi(t.punctual);
});

afterEach(async () => {
  await t?.close();
});

/** A calendar of `n` weekly events, UIDs `e0@async` … */
function calendar(n: number): string {
  const lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//async//EN"];
  for (let i = 0; i < n; i++) {
    lines.push(
      "BEGIN:VEVENT",
      `UID:e${i}@async`,
      "DTSTAMP:20270101T000000Z",
      `DTSTART:202702${String((i % 27) + 1).padStart(2, "0")}T090000Z`,
      "RRULE:FREQ=WEEKLY;COUNT=4",
      `SUMMARY:Event ${i}`,
      "END:VEVENT",
    );
  }
  lines.push("END:VCALENDAR", "");
  return lines.join("\r\n");
}

function post(body: string, query: string, headers: Record<string, string> = {}) {
  return api.request(`/v1/imports?source=cal&remind=-PT15M&channel=log${query}`, {
    method: "POST",
    headers: { "content-type": "text/calendar", ...headers },
    body,
  });
}

async function view(id: number): Promise<ImportView> {
  const res = await api.request(`/v1/imports/${id}`);
  expect(res.status).toBe(200);
  return (await res.json()) as ImportView;
}

/** Follows `GET /v1/imports/{id}` until the import is no longer running. */
async function settled(id: number): Promise<ImportView> {
  for (let i = 0; i < 2_000; i++) {
    const v = await view(id);
    if (v.status !== "running") return v;
    await wait(5);
  }
  throw new Error(`import ${id} still running`);
}

describe("API-5 an asynchronous import", () => {
  it("API-5: async=true answers 202 with the running record and Location; GET /v1/imports/{id} follows it to succeeded", async () => {
    const res = await post(calendar(30), "&async=true");
    expect(res.status).toBe(202);
    const started = (await res.json()) as ImportView;
    expect(started).toMatchObject({ source: "cal", status: "running", error: null });
    expect(res.headers.get("location")).toBe(`/v1/imports/${started.id}`);
    const done = await settled(started.id);
    expect(done).toMatchObject({
      status: "succeeded",
      events: 30,
      created: 30,
      updated: 0,
      cancelled: 0,
      error: null,
      progress: { changesDone: 30, changesTotal: 30 },
    });
    expect(done.progress.chunksDone).toBe(done.progress.chunksTotal);
    expect(done.progress.chunksTotal).toBeGreaterThan(0);
    expect(done.details).toMatchObject({ skipped: [], warnings: [], floatingTzid: "UTC" });
    expect((await t.punctual.listSchedules({ source: "cal", limit: 100 })).items).toHaveLength(30);
    // The list shows it too, with its status.
    const list = (await (await api.request("/v1/imports?source=cal")).json()) as {
      items: ImportView[];
    };
    expect(list.items.map((i) => [i.id, i.status])).toEqual([[started.id, "succeeded"]]);
  });

  it("API-5: Prefer: respond-async asks for the same; async=false wins over it", async () => {
    const res = await post(calendar(2), "", { prefer: "respond-async, wait=5" });
    expect(res.status).toBe(202);
    expect(res.headers.get("preference-applied")).toBe("respond-async");
    await settled(((await res.json()) as ImportView).id);
    const sync = await post(calendar(2), "&async=false", { prefer: "respond-async" });
    expect(sync.status).toBe(200);
    expect(await sync.json()).toMatchObject({ unchanged: 2 });
  });

  it("API-5: the record shows each chunk as it commits: chunks and changes done of their totals, the counts so far", async () => {
    let id = 0;
    let gate: () => void = () => undefined;
    const opened = new Promise<void>((resolve) => (gate = resolve));
    const seen: ImportView[] = [];
    const started = await t.punctual.startImport(calendar(7), {
      source: "chunks",
      remind: ["-PT15M"],
      channel: "log",
      chunkSize: 2,
      onChunk: async () => {
        await opened;
        seen.push(await t.punctual.getImport(id));
      },
    });
    id = started.id;
    gate();
    const done = await settled(id);
    expect(seen.map((v) => [v.status, v.progress, v.created])).toEqual([
      ["running", { chunksDone: 1, chunksTotal: 4, changesDone: 2, changesTotal: 7 }, 2],
      ["running", { chunksDone: 2, chunksTotal: 4, changesDone: 4, changesTotal: 7 }, 4],
      ["running", { chunksDone: 3, chunksTotal: 4, changesDone: 6, changesTotal: 7 }, 6],
      ["running", { chunksDone: 4, chunksTotal: 4, changesDone: 7, changesTotal: 7 }, 7],
    ]);
    expect(seen.every((v) => v.events === 7)).toBe(true);
    expect(done).toMatchObject({ status: "succeeded", created: 7 });
  });

  it("API-5: a body that is not iCalendar ends the import failed with the error naming the file", async () => {
    const res = await post("hello, not a calendar\r\n", "&async=true");
    expect(res.status).toBe(202);
    const done = await settled(((await res.json()) as ImportView).id);
    expect(done.status).toBe("failed");
    expect(done.error).toMatch(/^file: /);
    expect(done.details).toBeNull();
  });

  it("API-5: async is refused with dryRun (400 naming async); an unknown id is 404", async () => {
    const res = await post(calendar(1), "&async=true&dryRun=true");
    expect(res.status).toBe(400);
    expect(((await res.json()) as ErrorBody).error.issues?.map((i) => i.field)).toEqual(["async"]);
    expect((await api.request("/v1/imports/999999")).status).toBe(404);
    expect((await api.request("/v1/imports/abc")).status).toBe(404);
  });

  it("API-5: a synchronous import is recorded with its status and totals too", async () => {
    const res = await post(calendar(3), "");
    expect(res.status).toBe(200);
    const list = (await (await api.request("/v1/imports?source=cal")).json()) as {
      items: ImportView[];
    };
    expect(list.items).toHaveLength(1);
    expect(list.items[0]).toMatchObject({
      status: "succeeded",
      events: 3,
      created: 3,
      progress: { changesDone: 3, changesTotal: 3 },
    });
    expect(list.items[0]!.startedAt).toEqual(expect.any(String));
  });
});

describe("API-5 an import whose process died", () => {
  it("API-5: a running record whose lease expired reads as failed (abandoned), never running forever", async () => {
    const id = await startImportRecord(t.punctual.db, {
      now: t.clock.sqlNow(),
      tenant: "default",
      source: "gone",
      owner: "a-process-that-died",
    });
    expect((await view(id)).status).toBe("running");
    t.clock.advance(IMPORT_LEASE_MS - 1);
    expect((await view(id)).status).toBe("running");
    t.clock.advance(2);
    expect(await view(id)).toMatchObject({ status: "failed", error: ABANDONED_IMPORT_ERROR });
  });

  it("API-5: the next start marks such a record failed", async () => {
    const id = await startImportRecord(t.punctual.db, {
      now: t.clock.sqlNow(),
      tenant: "default",
      source: "gone",
      owner: "a-process-that-died",
    });
    t.clock.advance(IMPORT_LEASE_MS + 1);
    await t.punctual.start();
    const [row] = (
      await t.punctual.db.query<{ status: string }>(
        "select status from punctual_imports where id = $1",
        [id],
      )
    ).rows;
    expect(row?.status).toBe("failed");
  });
});
