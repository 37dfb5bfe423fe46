/**
 * `--trace` for bench/eventloop.ts: names what holds the event loop. Every statement of
 * the embedded database (the pinned claim path's too) and every HTTP request is recorded with its CPU time (statements:
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
  /** Time inside the embedded engine, per statement (its own execution, never its wait). */
  private engine: Mark[] = [];
  private engineSql = "";

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
    // The claim path (claim, settle, wake-up query) runs through `pinned`: timed too.
    const pinned = db.pinned;
    if (pinned !== undefined) {
      (db as { pinned?: Queryable }).pinned = {
        query: timed(pinned.query.bind(pinned)) as Queryable["query"],
      };
    }
    db.transaction = ((fn: (tx: Queryable) => Promise<unknown>) =>
      transaction((tx) =>
        fn({ ...tx, query: timed(tx.query.bind(tx)) as Queryable["query"] }),
      )) as Database["transaction"];
    const pglite = (db as { pglite?: EngineProtocol }).pglite;
    if (pglite !== undefined) this.wrapEngine(pglite);
  }

  /**
   * Times each exchange with the embedded engine (`execProtocolRawSync`, run once the
   * engine's queue reached the statement): the statement's own execution, which the timing of
   * `query` above cannot tell from its wait in the queue. Named by the last statement
   * text the engine was sent (a Parse or Query message).
   */
  private wrapEngine(pglite: EngineProtocol): void {
    const decoder = new TextDecoder();
    const sqlOf = (message: Uint8Array): string | null => {
      const type = message[0];
      if (type === 0x51) return decoder.decode(message.subarray(5, message.indexOf(0, 5)));
      if (type !== 0x50) return null;
      const nameEnd = message.indexOf(0, 5);
      return decoder.decode(message.subarray(nameEnd + 1, message.indexOf(0, nameEnd + 1)));
    };
    const exec = pglite.execProtocolRawSync.bind(pglite);
    pglite.execProtocolRawSync = (message) => {
      const sql = sqlOf(message);
      if (sql !== null) this.engineSql = sql.replace(/\s+/g, " ").trim().slice(0, 90);
      const t0 = performance.now();
      try {
        return exec(message);
      } finally {
        const t1 = performance.now();
        this.engine.push({ at: t1, cpuMs: t1 - t0, what: this.engineSql });
        if (this.engine.length > 20_000) this.engine.splice(0, 10_000);
      }
    };
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
      this.engine.length = 0;
      return;
    }
    this.printed++;
    const inside = this.marks.filter((m) => m.at >= sinceWall).sort((a, b) => b.cpuMs - a.cpuMs);
    const sqlCpu = inside.reduce((s, m) => s + m.cpuMs, 0);
    console.log(
      `\n[trace] stretch ${stretchMs.toFixed(1)} ms cpu: ${inside.length} statements (${sqlCpu.toFixed(1)} ms), ${zones.n} zone readings (${zones.cpu.toFixed(1)} ms)`,
    );
    for (const m of inside.slice(0, 4)) console.log(`    ${m.cpuMs.toFixed(1)} ms  ${m.what}`);
    if (this.engine.length > 0) {
      // The engine's own time per statement in this stretch (wall time inside it).
      const own = new Map<string, number>();
      for (const e of this.engine.filter((e) => e.at >= sinceWall))
        own.set(e.what, (own.get(e.what) ?? 0) + e.cpuMs);
      const total = [...own.values()].reduce((a, b) => a + b, 0);
      console.log(
        `    inside the engine: ${total.toFixed(1)} ms; outside it: ${(stretchMs - total).toFixed(1)} ms`,
      );
      for (const [what, ms] of [...own].sort((a, b) => b[1] - a[1]).slice(0, 4))
        console.log(`      engine ${ms.toFixed(1)} ms  ${what}`);
    }
    for (const r of [...this.inFlight.values()].slice(0, 6))
      console.log(`    in flight ${(performance.now() - r.at).toFixed(0)} ms: ${r.what}`);
    for (const r of this.finished.slice(-6))
      console.log(`    finished in ${r.at.toFixed(0)} ms: ${r.what}`);
    this.marks.length = 0;
    this.finished.length = 0;
    this.engine.length = 0;
  }
}

/** The part of a PGlite instance {@link LoopTrace} times. */
interface EngineProtocol {
  /** The synchronous exchange every statement of PGlite 0.5 goes through. */
  execProtocolRawSync(message: Uint8Array): Uint8Array;
}
