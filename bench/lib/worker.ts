/**
 * One benchmark worker process (spawned by bench/delivery.ts over IPC; not run by hand).
 *
 *   argv[2]: JSON { variant, url, concurrency, mode: "noop" | "hang", leaseMs? }
 *
 * Messages to the parent: { type: "ready" } once built, { type: "go" } answered by
 * { type: "started" }; in "hang" mode { type: "start", key } as each handler starts (the
 * handler then never returns, so the process holds its jobs until it is killed); on
 * { type: "stop" } it stops its worker and answers { type: "report", starts } where
 * `starts` lists [key, handler start − due time in ms] for every handler start;
 * { type: "cpu" } is answered by { type: "cpu", us } with this process's CPU time (user +
 * system, µs) since "go".
 *
 * BENCH_CPU_PROF=<folder> runs each worker under `node --cpu-prof` writing its profile
 * there (the parent sets the flag; see bench/README.md).
 */
import { createWorker, VARIANTS, type Worker } from "./systems.js";

interface Args {
  variant: string;
  url: string;
  concurrency: number;
  mode: "noop" | "hang";
  leaseMs?: number;
}

const args = JSON.parse(process.argv[2] ?? "{}") as Args;
const variant = VARIANTS[args.variant];
if (!variant || !process.send) {
  console.error("bench worker: unknown variant or no IPC channel");
  process.exit(2);
}
const send = (message: unknown): void => {
  process.send?.(message);
};

const starts: Array<[string, number]> = [];
const handler = async (key: string, dueMs: number): Promise<void> => {
  starts.push([key, Date.now() - dueMs]);
  if (args.mode === "hang") {
    send({ type: "start", key });
    await new Promise<never>(() => {});
  }
};

let worker: Worker | null = null;
let cpuAtGo: NodeJS.CpuUsage | null = null;
process.on("message", (message: { type: string }) => {
  if (message.type === "cpu") {
    const used = process.cpuUsage(cpuAtGo ?? undefined);
    send({ type: "cpu", us: used.user + used.system });
  } else if (message.type === "go") {
    cpuAtGo = process.cpuUsage();
    void worker!.start().then(
      () => send({ type: "started" }),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  } else if (message.type === "stop") {
    const report = (): void => {
      process.send!({ type: "report", starts }, () => process.exit(0));
    };
    const bail = setTimeout(report, 15_000);
    void worker!
      .stop()
      .catch(() => {})
      .finally(() => {
        clearTimeout(bail);
        report();
      });
  }
});
// The parent going away ends this process too.
process.on("disconnect", () => process.exit(0));

worker = await createWorker(variant, args.url, args.concurrency, handler, args.leaseMs);
send({ type: "ready" });
