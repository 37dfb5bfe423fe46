/**
 * Builds a punctual on the test engine (PGlite template or a fresh PostgreSQL database,
 * see ./db.ts) with a TestClock, a scripted channel and an in-memory log.
 */
import { createPunctual, type Punctual } from "../../src/app/punctual.js";
import type { Channel } from "../../src/channels/types.js";
import { TestClock } from "../../src/clock/index.js";
import type { ConfigInput } from "../../src/config/index.js";
import { memoryLogger } from "../../src/observability/logger.js";
import type { Database, QueryOptions, QueryResult } from "../../src/store/database.js";
import { openTestDatabase } from "./db.js";
import { ScriptedChannel } from "./channels.js";

export interface TestPunctual {
  punctual: Punctual;
  clock: TestClock;
  channel: ScriptedChannel;
  logs: ReturnType<typeof memoryLogger>["lines"];
  close(): Promise<void>;
}

/** Opens a punctual for one test. Close it in afterEach. */
export async function testPunctual(
  options: {
    start?: string;
    scheduler?: NonNullable<ConfigInput["scheduler"]>;
    channels?: Channel[];
    idempotent?: boolean;
    /** Wraps the test database (e.g. with {@link faultyDatabase}) before punctual sees it. */
    wrapDb?: (db: Database) => Database;
  } = {},
): Promise<TestPunctual> {
  const clock = new TestClock(options.start ?? "2027-01-04T08:00:00Z");
  const channel = new ScriptedChannel("test", options.idempotent ?? true);
  const { logger, lines } = memoryLogger("debug");
  const handle = await openTestDatabase();
  const punctual = await createPunctual({
    database: options.wrapDb ? options.wrapDb(handle.db) : handle.db,
    clock,
    logger,
    channels: [channel, ...(options.channels ?? [])],
    allowPrivateTargets: true,
    webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
    scheduler: options.scheduler,
  });
  return {
    punctual,
    clock,
    channel,
    logs: lines,
    async close() {
      await punctual.close(0);
      await handle.close();
    },
  };
}

/** Runs one tick and waits for its sends to settle. */
export async function tickAndDrain(p: Punctual): Promise<void> {
  const report = await p.scheduler.tick();
  if (report.failedSweep) throw new Error(`sweep ${report.failedSweep} failed`);
  await p.scheduler.drain();
}

/** Rows of the deliveries table, oldest first. */
export async function deliveries(p: Punctual) {
  return (await p.listDeliveries({ limit: 1000 })).items;
}

/**
 * A second scheduler process on the same database, with its own clock and channel: the
 * way to model "another worker" (or the survivor of a crash) inside one test. Freeze the
 * first one's clock and stop ticking it to model a worker that died mid-send.
 */
export async function peer(
  t: TestPunctual,
  options: {
    start: string;
    idempotent?: boolean;
    scheduler?: NonNullable<ConfigInput["scheduler"]>;
  },
): Promise<{
  punctual: Punctual;
  clock: TestClock;
  channel: ScriptedChannel;
  close(): Promise<void>;
}> {
  const clock = new TestClock(options.start);
  const channel = new ScriptedChannel("test", options.idempotent ?? true);
  const punctual = await createPunctual({
    database: t.punctual.db,
    clock,
    logger: memoryLogger("silent").logger,
    channels: [channel],
    allowPrivateTargets: true,
    webhookSecret: "whsec_dGVzdC1zZWNyZXQtZm9yLXB1bmN0dWFs",
    scheduler: options.scheduler,
  });
  return { punctual, clock, channel, close: () => punctual.close(0) };
}

/**
 * A database whose statements fail or stall on demand ({@link FaultHooks}): while
 * `failWhen(sql)` is true the statement rejects with a connection-style error before
 * reaching the engine (a database away for some statements only, e.g. lease renewals);
 * `hold` is awaited before it (other statements go first), `beforeSend` and `afterReply` run around it (e.g. advancing the test clock: a wait for a
 * connection, or a worker stalled between statement and reply), without real time passing.
 * It has no `pinned` runner: the claim path runs through `query`.
 */
export function faultyDatabase(db: Database): Database & FaultHooks {
  const wrapped = {
    failWhen: null as ((sql: string) => boolean) | null,
    beforeSend: null as ((sql: string) => void) | null,
    afterReply: null as ((sql: string, rows: number) => void) | null,
    hold: null as ((sql: string) => Promise<void> | void) | null,
    get engine() {
      return db.engine;
    },
    get description() {
      return db.description;
    },
    async query<T>(
      sql: string,
      params?: readonly unknown[],
      options?: QueryOptions,
    ): Promise<QueryResult<T>> {
      if (wrapped.failWhen?.(sql)) {
        throw Object.assign(new Error("connection terminated unexpectedly"), { code: "57P01" });
      }
      await wrapped.hold?.(sql);
      wrapped.beforeSend?.(sql);
      const result = await db.query<T>(sql, params, options);
      wrapped.afterReply?.(sql, result.rows.length);
      return result;
    },
    transaction: db.transaction.bind(db),
    listen: db.listen.bind(db),
    close: db.close.bind(db),
  };
  return wrapped as Database & FaultHooks;
}

/** The faults {@link faultyDatabase} injects; each is read per statement, null: none. */
export interface FaultHooks {
  /** Fails the statement as a lost connection would (SQLSTATE 57P01) when it returns true. */
  failWhen: ((sql: string) => boolean) | null;
  /** Runs before the statement is handed on, e.g. to let the clock run while "waiting for a connection". */
  beforeSend: ((sql: string) => void) | null;
  /**
   * Runs after the statement ran and before its reply (of `rows` rows) is handed back: a
   * stall in between.
   */
  afterReply: ((sql: string, rows: number) => void) | null;
  /**
   * Awaited before the statement is handed on: holds it back while other statements (on
   * other connections) go first, e.g. to let a race resolve the unlucky way every time.
   */
  hold: ((sql: string) => Promise<void> | void) | null;
}
