/**
 * CPU time of the calling thread, for the fuzz and the event-loop benchmark: the
 * process's CPU time (`process.cpuUsage`) also counts the API's worker threads, which
 * run beside the event loop and do not hold it. On Linux the main thread's own time is
 * read from `/proc/self/task/<pid>/schedstat` (nanoseconds on a core); elsewhere, the
 * process's time stands in.
 */
import { readFileSync } from "node:fs";

const SCHEDSTAT = `/proc/self/task/${process.pid}/schedstat`;
const perThread = (() => {
  try {
    return Number.isFinite(Number(readFileSync(SCHEDSTAT, "utf8").split(" ")[0]));
  } catch {
    return false;
  }
})();

/** CPU time of the main thread so far, in ms (the whole process's where not readable). */
export function threadCpuMs(): number {
  if (perThread) return Number(readFileSync(SCHEDSTAT, "utf8").split(" ")[0]) / 1e6;
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** Whether {@link threadCpuMs} counts the main thread alone. */
export const THREAD_CPU_IS_PER_THREAD = perThread;
