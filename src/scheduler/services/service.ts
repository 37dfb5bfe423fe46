/** What every maintenance service gets (OPS-1): the store, the clock, options, telemetry. */
import type { Clock } from "../../clock/index.js";
import type { SchedulerOptions } from "../../config/index.js";
import type { Logger } from "../../observability/logger.js";
import type { Metrics } from "../../observability/metrics.js";
import type { Database } from "../../store/database.js";

export interface ServiceContext {
  db: Database;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  options: SchedulerOptions;
  /** This instance's lease owner id. */
  owner: string;
  /** Release version, recorded with the heartbeat. */
  version: string;
  /** `start`, `worker` or `library`. */
  role: string;
}
