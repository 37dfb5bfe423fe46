/**
 * `punctual import` follows an asynchronous import per chunk (API-5, OPS-12): a bar redrawn
 * in place on a terminal, one plain line per chunk otherwise, nothing before a chunk is
 * known; the following stops at the first state that is not running.
 */
import { describe, expect, it } from "vitest";
import { chunkProgress, followImport, progressLine } from "../../../src/cli/calendar.js";
import type { ImportView } from "../../../src/contracts/index.js";

function view(chunksDone: number, chunksTotal: number, status: ImportView["status"] = "running") {
  const v: ImportView = {
    id: 7,
    source: "team",
    status,
    startedAt: "2027-01-04T08:00:00.000Z",
    importedAt: "2027-01-04T08:00:00.000Z",
    events: 1_000,
    created: chunksDone * 250,
    updated: 0,
    unchanged: 0,
    cancelled: 0,
    skipped: 0,
    warnings: 0,
    progress: {
      chunksDone,
      chunksTotal,
      changesDone: Math.min(1_000, chunksDone * 250),
      changesTotal: chunksTotal === 0 ? 0 : 1_000,
    },
    error: null,
    details: null,
  };
  return v;
}

function recorder() {
  let err = "";
  return { io: { out: () => undefined, err: (s: string) => (err += s) }, text: () => err };
}

describe("API-5 import progress per chunk", () => {
  it("API-5: not a terminal: one plain line per chunk seen, none before the comparison, none repeated", () => {
    const r = recorder();
    const p = chunkProgress(r.io, "importing team.ics", false);
    for (const v of [view(0, 0), view(1, 4), view(1, 4), view(3, 4), view(4, 4, "succeeded")])
      p.show(v);
    p.finish();
    expect(r.text()).toBe(
      [
        "chunk 1/4: 250/1000 changes written (250 created, 0 updated, 0 cancelled)",
        "chunk 3/4: 750/1000 changes written (750 created, 0 updated, 0 cancelled)",
        "chunk 4/4: 1000/1000 changes written (1000 created, 0 updated, 0 cancelled)",
        "",
      ].join("\n"),
    );
  });

  it("API-5: on a terminal: a bar redrawn in place, ended by one newline", () => {
    const r = recorder();
    const p = chunkProgress(r.io, "importing team.ics", true);
    p.show(view(1, 4));
    p.show(view(4, 4));
    p.finish();
    expect(r.text()).toBe(
      `\r\x1b[Kimporting team.ics [${"#".repeat(6)}${"-".repeat(18)}] ${progressLine(view(1, 4))}` +
        `\r\x1b[Kimporting team.ics [${"#".repeat(24)}] ${progressLine(view(4, 4))}\n`,
    );
  });

  it("API-5: following reads until the import is no longer running and answers that state", async () => {
    const states = [view(2, 4), view(4, 4), view(4, 4, "succeeded")];
    const shown: number[] = [];
    const last = await followImport(
      async () => states.shift()!,
      view(0, 0),
      { show: (v) => shown.push(v.progress.chunksDone), finish: () => shown.push(-1) },
      0,
    );
    expect(last.status).toBe("succeeded");
    expect(shown).toEqual([0, 2, 4, 4, -1]);
    expect(states).toEqual([]);
  });
});
