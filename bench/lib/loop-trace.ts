/**
 * `--trace` for bench/eventloop.ts: names what holds the event loop. Every statement of
 * the embedded database and every HTTP request is recorded with its CPU time (statements:
 * the event loop thread's CPU while the statement was awaited, so work that overlapped its wait in
 * the engine's queue counts too) or span (requests), and the first-time offset computations of each zone are counted;
 * whenever a tick of the 10 ms timer finds a CPU stretch over the threshold, the
 * statements that ran inside it and the requests in flight are printed.
 */
import type { Database, Queryable } from "../../src/store/database.js";
import { Zone } from "../../src/recurrence/zone.js";
import { threadCpuMs } from "../../scripts/fuzz/thread-cpu.js";

interface Mark {
  at: number;
  cpuMs: number;
  what: string;
}

const cpuNow = threadCpuMs;

/** Recorder of statements, requests and zone computations for one process. */
export class LoopTrace {
  private marks: Mark[] = [];
  private inFlight = new Map<number, { what: string; at: number }>();
  private nextId = 0;
  private finished: Array<{ what: string; at: number }> = [];
  private zoneSegments = 0;
  private zoneCpu = 0;
  private printed = 0;

  constructor(private readonly thresholdMs: number) {}

  /** Wraps `db.query` and `db.transaction` (its `tx.query`) to time each statement. */
  wrapDatabase(db: Database): void {
    const timed =
      (q: Queryable["query"]): Queryable["query"] =>
      async (sql, params) => {
        const c0 = cpuNow();
        try {
          return await q(sql, params);
        } finally {
          this.mark(cpuNow() - c0, `sql ${sql.replace(/\s+/g, " ").trim().slice(0, 90)}`);
        }
      };
    const query = db.query.bind(db);
    const transaction = db.transaction.bind(db);
    db.query = timed(query) as Database["query"];
    db.transaction = ((fn: (tx: Queryable) => Promise<unknown>) =>
      transaction((tx) =>
        fn({ ...tx, query: timed(tx.query.bind(tx)) as Queryable["query"] }),
      )) as Database["transaction"];
  }

  /** Counts the readings of zone data (first-time offset computations). */
  wrapZones(): void {
    const proto = Zone.prototype as unknown as { read: (sec: number) => number };
    const read = proto.read;
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const trace = this;
    proto.read = function (this: Zone, sec: number) {
      const c0 = cpuNow();
      try {
        return read.call(this, sec);
      } finally {
        trace.zoneSegments++;
        trace.zoneCpu += cpuNow() - c0;
      }
    };
  }

  /** Wraps a fetch handler to record the requests in flight. */
  wrapFetch<F extends (req: Request, ...rest: never[]) => Response | Promise<Response>>(
    fetch: F,
  ): F {
    return (async (req: Request, ...rest: never[]) => {
      const id = this.nextId++;
      const u = new URL(req.url);
      this.inFlight.set(id, {
        what: `${req.method} ${u.pathname}${u.search.slice(0, 60)}`,
        at: performance.now(),
      });
      try {
        return await fetch(req, ...rest);
      } finally {
        const r = this.inFlight.get(id);
        this.inFlight.delete(id);
        if (r !== undefined) this.finished.push({ ...r, at: performance.now() - r.at });
      }
    }) as F;
  }

  private mark(cpuMs: number, what: string): void {
    this.marks.push({ at: performance.now(), cpuMs, what });
    if (this.marks.length > 5_000) this.marks.splice(0, 2_500);
  }

  /** Called by the ticker with the CPU stretch it just measured. */
  tick(stretchMs: number, sinceWall: number): void {
    const zones = { n: this.zoneSegments, cpu: this.zoneCpu };
    this.zoneSegments = 0;
    this.zoneCpu = 0;
    if (stretchMs < this.thresholdMs || this.printed >= 60) {
      this.marks.length = 0;
      this.finished.length = 0;
      return;
    }
    this.printed++;
    const inside = this.marks.filter((m) => m.at >= sinceWall).sort((a, b) => b.cpuMs - a.cpuMs);
    const sqlCpu = inside.reduce((s, m) => s + m.cpuMs, 0);
    console.log(
      `\n[trace] stretch ${stretchMs.toFixed(1)} ms cpu: ${inside.length} statements (${sqlCpu.toFixed(1)} ms), ${zones.n} zone readings (${zones.cpu.toFixed(1)} ms)`,
    );
    for (const m of inside.slice(0, 4)) console.log(`    ${m.cpuMs.toFixed(1)} ms  ${m.what}`);
    for (const r of [...this.inFlight.values()].slice(0, 6))
      console.log(`    in flight ${(performance.now() - r.at).toFixed(0)} ms: ${r.what}`);
    for (const r of this.finished.slice(-6))
      console.log(`    finished in ${r.at.toFixed(0)} ms: ${r.what}`);
    this.marks.length = 0;
    this.finished.length = 0;
  }
}
